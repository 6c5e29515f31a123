"""Tests for sknet/layers/_attention.py: MultiHeadAttention against NumPy and PyTorch."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import Layer, MultiHeadAttention
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import (
    attention_grads_from_torch,
    attention_oracle,
    build,
    copy_attention_weights,
    numpy_params,
    perturb,
    zero_padded,
)

N, T, F = 3, 6, 8
BIASES = ("bq", "bk", "bv", "bo")


def padding_mask():
    mask = np.ones((N, T), bool)
    mask[1, 4:] = False  # padded at the end
    mask[2, :2] = False  # padded at the start
    return mask


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"causal": True},
        {"key_dim": 3},
        {"query_steps": 2},
    ],
    ids=["self", "causal", "key_dim", "cross"],
)
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_forward_matches_the_numpy_oracle(backend, kw, masked):
    rng = np.random.RandomState(0)
    layer = build(MultiHeadAttention(2, **kw), (T, F), backend)
    perturb(layer, rng, BIASES)
    X = rng.standard_normal((N, T, F))
    mask = padding_mask() if masked else None
    Y = layer.forward(
        backend.asarray(X), training=False, mask=None if mask is None else backend.asarray(mask)
    )
    expected = attention_oracle(  # padded steps enter as zeros
        numpy_params(layer),
        zero_padded(X, mask),
        2,
        mask,
        kw.get("causal", False),
        kw.get("query_steps"),
    )
    assert_allclose(backend.to_numpy(Y), expected, atol=1e-12)
    assert Y.shape == (N, kw.get("query_steps", T), F)


class Masked(MultiHeadAttention):
    """The layer with a fixed padding mask, for the finite-difference check."""

    def forward(self, X, *, training, mask=None):
        return super().forward(X, training=training, mask=padding_mask()[: X.shape[0]])

    def backward(self, dY):
        return super().backward(dY)


@pytest.mark.parametrize(
    "layer",
    [
        MultiHeadAttention(2),
        MultiHeadAttention(4, key_dim=3, causal=True),
        MultiHeadAttention(2, query_steps=4),
        MultiHeadAttention(2, dropout=0.4),
        Masked(2, causal=True),
        Masked(2, query_steps=3),
    ],
    ids=["self", "causal", "cross", "dropout", "masked-causal", "masked-cross"],
)
def test_gradients(layer):
    errors = check_layer_gradients(layer, (T, F), n_samples=N)
    assert set(errors) == {"X", "Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo"}
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize(
    "causal, query_steps",
    [(False, None), (True, None), (False, 2)],
    ids=["self", "causal", "cross"],
)
def test_equal_to_torch_multihead_attention(causal, query_steps):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    layer = build(
        MultiHeadAttention(2, causal=causal, query_steps=query_steps), (T, F), get_backend("cpu")
    )
    perturb(layer, rng, BIASES)
    X, mask = rng.standard_normal((N, T, F)), padding_mask()
    Y = layer.forward(X, training=True, mask=mask)
    R = rng.standard_normal(Y.shape)
    dX = layer.backward(R.copy())

    module = torch.nn.MultiheadAttention(F, 2, batch_first=True, dtype=torch.float64)
    copy_attention_weights(module, numpy_params(layer))
    Xt = torch.tensor(X, requires_grad=True)
    Xz = torch.where(torch.tensor(mask)[:, :, None], Xt, 0.0)  # padded steps enter as zeros
    q = T if query_steps is None else query_steps
    query, context = (Xz, Xz) if query_steps is None else (Xz[:, :q], Xz[:, q:])
    Tk = context.shape[1]
    attn_mask = torch.triu(torch.ones(q, Tk, dtype=torch.bool), 1) if causal else None
    Yt, _ = module(
        query,
        context,
        context,
        key_padding_mask=torch.tensor(~mask[:, T - Tk :]),
        attn_mask=attn_mask,
        need_weights=False,
    )
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)
    for name, grad in attention_grads_from_torch(module).items():
        assert_allclose(layer.grads[name], grad, atol=1e-12, err_msg=name)


def test_padded_steps_change_nothing_and_a_query_without_keys_gets_the_output_bias(backend):
    rng = np.random.RandomState(2)
    layer = build(MultiHeadAttention(2), (T, F), backend)
    perturb(layer, rng, BIASES)
    X, mask = rng.standard_normal((N, T, F)), padding_mask()
    Y = backend.to_numpy(
        layer.forward(backend.asarray(X), training=False, mask=backend.asarray(mask))
    )
    X[~mask] = 1e3
    again = layer.forward(backend.asarray(X), training=False, mask=backend.asarray(mask))
    assert_allclose(backend.to_numpy(again)[mask], Y[mask], atol=1e-12)
    mask[0] = False  # a sequence of padding only: no key to attend to
    Y = backend.to_numpy(
        layer.forward(backend.asarray(X), training=False, mask=backend.asarray(mask))
    )
    assert np.isfinite(Y).all()
    assert_allclose(Y[0], np.broadcast_to(numpy_params(layer)["bo"], (T, F)), atol=1e-12)


def test_dropout_drops_weights_while_training_only():
    layer = build(MultiHeadAttention(2, dropout=0.5), (T, F), get_backend("cpu"))
    X = np.random.RandomState(0).standard_normal((N, T, F))
    predicted = layer.forward(X, training=False)
    assert_allclose(layer.forward(X, training=False), predicted)
    first, second = (layer.forward(X, training=True).copy() for _ in range(2))
    assert not np.allclose(first, predicted) and not np.allclose(first, second)
    ratio = layer._cache["att_Pd"] / layer._cache["att_P"]
    assert set(np.unique(ratio.round(6))) == {0.0, 2.0}  # dropped, or kept and doubled


def test_split_draws_give_each_copy_its_rows_of_the_whole_batch():
    import copy

    layer = build(MultiHeadAttention(2, dropout=0.3), (T, F), get_backend("cpu"))
    X = np.random.RandomState(0).standard_normal((4, T, F))
    whole = copy.deepcopy(layer).forward(X, training=True)
    copies = [layer, copy.deepcopy(layer)]
    layer.split_draws(copies, [0, 1, 4])
    parts = [c.forward(X[a:b], training=True) for c, (a, b) in zip(copies, [(0, 1), (1, 4)])]
    assert_allclose(np.concatenate(parts), whole, atol=1e-12)


def test_frozen_layer_writes_no_gradient_and_still_passes_one_back():
    layer = build(MultiHeadAttention(2, trainable=False), (T, F), get_backend("cpu"))
    for grad in layer.grads.values():
        grad[...] = 7.0
    X = np.random.RandomState(0).standard_normal((N, T, F))
    layer.forward(X, training=True)
    dX = layer.backward(np.ones((N, T, F)))
    assert dX.shape == X.shape and np.abs(dX).sum() > 0
    assert all((grad == 7.0).all() for grad in layer.grads.values())


def test_pickles_and_predicts_the_same():
    layer = build(MultiHeadAttention(2, dropout=0.2), (T, F), get_backend("cpu"), dtype=np.float32)
    X = np.random.RandomState(0).standard_normal((N, T, F)).astype(np.float32)
    restored = pickle.loads(pickle.dumps(layer))
    assert_allclose(restored.forward(X, training=False), layer.forward(X, training=False))
    assert restored.forward(X, training=False).dtype == np.float32


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (MultiHeadAttention(3), (T, F), "do not split into num_heads=3"),
        (MultiHeadAttention(0), (T, F), "num_heads"),
        (MultiHeadAttention(2, key_dim=0), (T, F), "key_dim"),
        (MultiHeadAttention(2, query_steps=T), (T, F), r"query_steps must be None or an integer"),
        (MultiHeadAttention(2, query_steps=2, causal=True), (T, F), "causal=True is for self"),
        (MultiHeadAttention(2, dropout=1.0), (T, F), "dropout"),
        (MultiHeadAttention(2), (F,), r"sequences of shape \(timesteps, features\)"),
    ],
)
def test_bad_configurations_are_refused_at_build(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build_layer(
            layer,
            shape,
            backend=get_backend("cpu"),
            dtype=np.float32,
            rng=np.random.RandomState(0),
        )


def test_a_mask_that_does_not_fit_the_steps_is_refused():
    layer = build(MultiHeadAttention(2), (T, F), get_backend("cpu"))
    with pytest.raises(ValueError, match=r"padding mask has shape \(3, 4\)"):
        layer.forward(np.zeros((N, T, F)), training=False, mask=np.ones((N, 4), bool))


def test_is_a_layer_with_masks_and_thread_splits():
    assert issubclass(MultiHeadAttention, Layer)
    assert MultiHeadAttention.supports_mask and MultiHeadAttention.shardable

"""Tests for sknet/layers/_transformer.py: the encoder block against NumPy and PyTorch."""

import copy
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import TransformerEncoderBlock
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import (
    block_grads_from_torch,
    block_oracle,
    build,
    numpy_params,
    perturb,
    torch_block,
)

N, T, F, HEADS, UNITS = 3, 5, 8, 2, 12
PERTURBED = ("bq", "bk", "bv", "bo", "b1", "b2", "gamma1", "beta1", "gamma2", "beta2")


def padding_mask():
    mask = np.ones((N, T), bool)
    mask[1, 3:] = False
    mask[2, :1] = False
    return mask


def block(**kw):
    return TransformerEncoderBlock(HEADS, UNITS, **{"dropout": 0.0, **kw})


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("causal", [False, True], ids=["", "causal"])
def test_forward_matches_the_numpy_oracle(backend, norm_first, activation, causal):
    rng = np.random.RandomState(0)
    layer = build(
        block(norm_first=norm_first, activation=activation, causal=causal), (T, F), backend
    )
    perturb(layer, rng, PERTURBED)
    X, mask = rng.standard_normal((N, T, F)), padding_mask()
    Y = layer.forward(backend.asarray(X), training=False, mask=backend.asarray(mask))
    expected = block_oracle(numpy_params(layer), X, HEADS, mask, norm_first, activation, causal)
    assert_allclose(backend.to_numpy(Y), expected, atol=1e-12)


class Masked(TransformerEncoderBlock):
    """The block with a fixed padding mask, for the finite-difference check."""

    def forward(self, X, *, training, mask=None):
        return super().forward(X, training=training, mask=padding_mask()[: X.shape[0]])

    def backward(self, dY):
        return super().backward(dY)


@pytest.mark.parametrize(
    "layer",
    [
        block(),
        block(norm_first=True, activation="gelu"),
        block(dropout=0.3),
        block(dropout=0.3, norm_first=True, causal=True),
        Masked(HEADS, UNITS, dropout=0.2),
        Masked(HEADS, UNITS, dropout=0.0, norm_first=True),
    ],
    ids=["post", "pre-gelu", "post-dropout", "pre-dropout-causal", "masked-post", "masked-pre"],
)
def test_gradients(layer):
    errors = check_layer_gradients(layer, (T, F), n_samples=N)
    assert len(errors) == 17  # X and the 16 parameters
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_equal_to_torch_transformer_encoder_layer(norm_first, activation):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    layer = build(block(norm_first=norm_first, activation=activation), (T, F), get_backend("cpu"))
    perturb(layer, rng, PERTURBED)
    X, mask = rng.standard_normal((N, T, F)), padding_mask()
    Y = layer.forward(X, training=True, mask=mask)
    R = rng.standard_normal(Y.shape)
    dX = layer.backward(R.copy())

    module = torch_block(layer, activation).train()  # the same path as while training
    Xt = torch.tensor(X, requires_grad=True)
    Xz = torch.where(torch.tensor(mask)[:, :, None], Xt, 0.0)  # padded steps enter as zeros
    Yt = module(Xz, src_key_padding_mask=torch.tensor(~mask))
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)
    grads = block_grads_from_torch(module)
    assert set(grads) == set(layer.grads)
    for name, grad in grads.items():
        assert_allclose(layer.grads[name], grad, atol=1e-12, err_msg=name)


def test_dropout_is_the_same_whether_the_batch_is_split_or_not():
    layer = build(block(dropout=0.3), (T, F), get_backend("cpu"))
    X = np.random.RandomState(0).standard_normal((4, T, F))
    whole = copy.deepcopy(layer)
    Y = whole.forward(X, training=True)
    dX = whole.backward(np.ones_like(Y))
    copies = [layer, copy.deepcopy(layer)]
    layer.split_draws(copies, [0, 3, 4])
    parts = [c.forward(X[a:b], training=True) for c, (a, b) in zip(copies, [(0, 3), (3, 4)])]
    assert_allclose(np.concatenate(parts), Y, atol=1e-12)
    dparts = [c.backward(np.ones_like(part)) for c, part in zip(copies, parts)]
    assert_allclose(np.concatenate(dparts), dX, atol=1e-12)
    grads = {k: copies[0].grads[k] + copies[1].grads[k] for k in layer.grads}
    for name, grad in whole.grads.items():
        assert_allclose(grads[name], grad, atol=1e-10, err_msg=name)
    assert not np.allclose(Y, whole.forward(X, training=False))  # it did drop


def test_frozen_block_keeps_its_gradients_untouched_and_passes_one_back():
    layer = build(block(trainable=False, norm_first=True), (T, F), get_backend("cpu"))
    for grad in layer.grads.values():
        grad[...] = 3.0
    X = np.random.RandomState(0).standard_normal((N, T, F))
    layer.forward(X, training=True)
    dX = layer.backward(np.ones((N, T, F)))
    assert np.abs(dX).sum() > 0
    assert all((grad == 3.0).all() for grad in layer.grads.values())


def test_default_feed_forward_width_and_pickle():
    layer = build(TransformerEncoderBlock(2), (T, F), get_backend("cpu"), dtype=np.float32)
    assert layer.params["W1"].shape == (F, 4 * F)
    X = np.random.RandomState(0).standard_normal((N, T, F)).astype(np.float32)
    restored = pickle.loads(pickle.dumps(layer))
    assert_allclose(restored.forward(X, training=False), layer.forward(X, training=False))


@pytest.mark.parametrize(
    "layer, message",
    [
        (TransformerEncoderBlock(3), "do not split into num_heads=3"),
        (TransformerEncoderBlock(2, 0), "ff_units"),
        (TransformerEncoderBlock(2, activation="tanh"), "activation"),
        (TransformerEncoderBlock(2, dropout=-0.1), "dropout"),
        (TransformerEncoderBlock(2, norm_first="yes"), "norm_first"),
        (TransformerEncoderBlock(2, epsilon=0), "epsilon"),
    ],
)
def test_bad_configurations_are_refused_at_build(layer, message):
    with pytest.raises(ValueError, match=message):
        build_layer(
            layer,
            (T, F),
            backend=get_backend("cpu"),
            dtype=np.float32,
            rng=np.random.RandomState(0),
        )

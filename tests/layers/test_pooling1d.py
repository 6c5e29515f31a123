"""Tests for sknet/layers/_pooling1d.py: 1-D pooling against NumPy and PyTorch."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import AvgPool1D, GlobalAvgPool1D, GlobalMaxPool1D, MaxPool1D
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import build

T, C = 8, 3
POOLS = [
    dict(pool_size=2),
    dict(pool_size=3, stride=1),
    dict(pool_size=3, stride=2, padding=1),
    dict(pool_size=2, stride=3),
]


def pool_oracle(X, k, stride, pad, kind):
    N, T, C = X.shape
    fill = -np.inf if kind == "max" else 0.0
    Xp = np.concatenate([np.full((N, pad[0], C), fill), X, np.full((N, pad[1], C), fill)], axis=1)
    OT = (Xp.shape[1] - k) // stride + 1
    windows = np.stack([Xp[:, t * stride : t * stride + k] for t in range(OT)], axis=1)
    return windows.max(axis=2) if kind == "max" else windows.mean(axis=2)


@pytest.mark.parametrize("kind, cls", [("max", MaxPool1D), ("avg", AvgPool1D)])
@pytest.mark.parametrize("kw", POOLS)
def test_forward_matches_the_numpy_oracle(backend, kind, cls, kw):
    layer = build(cls(**kw), (T, C), backend)
    X = np.random.RandomState(0).standard_normal((4, T, C))
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=False))
    expected = pool_oracle(
        X, kw["pool_size"], kw.get("stride") or kw["pool_size"], layer._padding, kind
    )
    assert_allclose(Y, expected, atol=1e-12)


@pytest.mark.parametrize("cls", [MaxPool1D, AvgPool1D])
@pytest.mark.parametrize("kw", POOLS + [dict(pool_size=3, padding="same", stride=1)])
def test_gradients(cls, kw):
    errors = check_layer_gradients(cls(**kw), (T, C), n_samples=3)
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kw", POOLS)
def test_equal_to_torch_pooling(kind, kw):
    torch = pytest.importorskip("torch")
    cls = MaxPool1D if kind == "max" else AvgPool1D
    layer = build(cls(**kw), (T, C), get_backend("cpu"))
    rng = np.random.RandomState(1)
    X = rng.standard_normal((4, T, C))
    Y = layer.forward(X, training=True)
    R = rng.standard_normal(Y.shape)
    dX = layer.backward(R.copy())
    args = dict(kernel_size=kw["pool_size"], stride=kw.get("stride"), padding=layer._padding[0])
    module = torch.nn.MaxPool1d(**args) if kind == "max" else torch.nn.AvgPool1d(**args)
    Xt = torch.tensor(X, requires_grad=True)
    Yt = module(Xt.transpose(1, 2)).transpose(1, 2)
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)


def test_global_max_pool_with_and_without_a_mask(backend):
    rng = np.random.RandomState(2)
    layer = build(GlobalMaxPool1D(), (T, C), backend)
    X = rng.standard_normal((3, T, C))
    assert_allclose(backend.to_numpy(layer.forward(backend.asarray(X), training=False)), X.max(1))
    mask = np.ones((3, T), bool)
    mask[1, 5:] = False
    mask[2] = False  # padding only
    X[1, 5:] = 100.0
    Y = backend.to_numpy(
        layer.forward(backend.asarray(X), training=True, mask=backend.asarray(mask))
    )
    assert_allclose(Y[:2], [X[0].max(0), X[1, :5].max(0)])
    assert (Y[2] == 0).all()
    dX = backend.to_numpy(layer.backward(backend.asarray(np.ones((3, C)))))
    assert (dX[2] == 0).all() and (dX[1, 5:] == 0).all()
    assert (dX[:2].sum(axis=1) == 1).all()  # one step per feature gets it


def test_global_max_pool_gradient_and_torch():
    errors = check_layer_gradients(GlobalMaxPool1D(), (T, C), n_samples=3)
    assert max(errors.values()) < 1e-6, errors
    torch = pytest.importorskip("torch")
    layer = build(GlobalMaxPool1D(), (T, C), get_backend("cpu"))
    X, R = np.random.RandomState(3).standard_normal((2, T, C)), np.ones((2, C))
    layer.forward(X, training=True)
    Xt = torch.tensor(X, requires_grad=True)
    torch.nn.AdaptiveMaxPool1d(1)(Xt.transpose(1, 2)).sum().backward()
    assert_allclose(layer.backward(R), Xt.grad.numpy())


@pytest.mark.parametrize("pool", [GlobalMaxPool1D, GlobalAvgPool1D])
def test_a_mask_that_does_not_fit_the_steps_is_refused(pool):
    layer = build(pool(), (T, C), get_backend("cpu"))
    with pytest.raises(ValueError, match="padding_value masks only layers"):
        layer.forward(np.zeros((2, T, C)), training=False, mask=np.ones((2, T + 1), bool))


@pytest.mark.parametrize(
    "layer, message",
    [
        (MaxPool1D(0), "pool_size"),
        (AvgPool1D(2, stride=0), "stride"),
        (MaxPool1D(2, padding=2), "at most half the pool size"),
        (AvgPool1D(2, padding="full"), "padding"),
        (MaxPool1D(T + 1), "does not fit"),
    ],
)
def test_bad_configurations_are_refused_at_build(layer, message):
    with pytest.raises(ValueError, match=message):
        build_layer(
            layer,
            (T, C),
            backend=get_backend("cpu"),
            dtype=np.float32,
            rng=np.random.RandomState(0),
        )


@pytest.mark.parametrize("Pool", [MaxPool1D, AvgPool1D])
@pytest.mark.parametrize("pool_size", [9, 20])
def test_a_pool_size_longer_than_the_sequences_names_pool_size_and_the_steps(Pool, pool_size):
    with pytest.raises(ValueError, match=rf"pool_size={pool_size} .*sequences of 8 steps"):
        Pool(pool_size).build((8, 3), backend=get_backend("cpu"), dtype=np.float32, rng=None)

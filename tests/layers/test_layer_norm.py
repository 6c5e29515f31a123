"""Tests for sknet/layers/_layer_norm.py: LayerNorm against NumPy and PyTorch."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import LayerNorm
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import build, layer_norm_oracle, numpy_params, perturb


@pytest.mark.parametrize("shape", [(6,), (4, 6)], ids=["rows", "sequences"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_matches_the_numpy_oracle(backend, shape, dtype):
    rng = np.random.RandomState(0)
    layer = build(LayerNorm(epsilon=1e-3), shape, backend, dtype=dtype)
    perturb(layer, rng, ["gamma", "beta"])
    X = (3 + 2 * rng.standard_normal((5,) + shape)).astype(dtype)
    Y = layer.forward(backend.asarray(X), training=False)
    assert Y.dtype == dtype
    p = numpy_params(layer)
    expected = layer_norm_oracle(X.astype(np.float64), p["gamma"], p["beta"], 1e-3)
    assert_allclose(backend.to_numpy(Y), expected, atol=1e-12 if dtype == np.float64 else 1e-5)


@pytest.mark.parametrize("shape", [(5,), (3, 4)])
def test_gradients(shape):
    errors = check_layer_gradients(LayerNorm(), shape, n_samples=4)
    assert set(errors) == {"X", "gamma", "beta"}
    assert max(errors.values()) < 1e-6, errors


def test_equal_to_torch_layer_norm():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    layer = build(LayerNorm(), (4, 6), get_backend("cpu"))
    perturb(layer, rng, ["gamma", "beta"])
    X, R = rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 4, 6))
    Y = layer.forward(X, training=True)
    dX = layer.backward(R.copy())
    module = torch.nn.LayerNorm(6, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        module.weight.copy_(torch.tensor(numpy_params(layer)["gamma"]))
        module.bias.copy_(torch.tensor(numpy_params(layer)["beta"]))
    Xt = torch.tensor(X, requires_grad=True)
    Yt = module(Xt)
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)
    assert_allclose(layer.grads["gamma"], module.weight.grad.numpy(), atol=1e-12)
    assert_allclose(layer.grads["beta"], module.bias.grad.numpy(), atol=1e-12)


def test_frozen_layer_norm_writes_no_gradient(backend):
    layer = build(LayerNorm(trainable=False), (4,), backend)
    layer.grads["gamma"][...] = 5.0
    X = backend.asarray(np.random.RandomState(0).standard_normal((3, 4)))
    layer.forward(X, training=True)
    dX = layer.backward(backend.asarray(np.random.RandomState(1).standard_normal((3, 4))))
    assert (backend.to_numpy(layer.grads["gamma"]) == 5.0).all()
    assert np.abs(backend.to_numpy(dX)).sum() > 0


def test_non_contiguous_input_is_normalized_as_its_copy():
    layer = build(LayerNorm(), (3,), get_backend("cpu"))
    X = np.random.RandomState(0).standard_normal((3, 6))[:, ::2]
    assert_allclose(layer.forward(X, training=False), layer.forward(X.copy(), training=False))


@pytest.mark.parametrize("epsilon", [0, -1.0, "small", True])
def test_bad_epsilon_is_refused(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        build_layer(
            LayerNorm(epsilon=epsilon),
            (3,),
            backend=get_backend("cpu"),
            dtype=np.float32,
            rng=np.random.RandomState(0),
        )

"""Tests for sknet/layers/_activation.py and the activation kernels of the backends."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import ACTIVATIONS
from sknet.layers import Activation
from sknet.utils import check_layer_gradients


def oracle(name, z):
    """Plain NumPy definitions, written independently of sknet."""
    if name == "identity":
        return z
    if name == "logistic":
        return 1 / (1 + np.exp(-z))
    if name == "tanh":
        return np.tanh(z)
    if name == "relu":
        return np.where(z > 0, z, 0.0)
    if name == "leaky_relu":
        return np.where(z > 0, z, 0.01 * z)
    if name == "elu":
        return np.where(z > 0, z, np.exp(z) - 1)
    if name == "gelu":
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    if name == "silu":
        return z / (1 + np.exp(-z))
    raise AssertionError(name)


def build(layer, shape, backend, dtype=np.float64):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(0))
    return layer


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_forward_matches_oracle(name, backend):
    z = np.random.RandomState(0).standard_normal((5, 7)) * 3
    layer = build(Activation(name), (7,), backend)
    for training in (True, False):
        Y = backend.to_numpy(layer.forward(backend.asarray(z), training=training))
        assert_allclose(Y, oracle(name, z), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_backward_matches_finite_differences(name, backend):
    z = np.random.RandomState(1).standard_normal((4, 6))
    dY = np.random.RandomState(2).standard_normal((4, 6))
    layer = build(Activation(name), (6,), backend)
    layer.forward(backend.asarray(z), training=True)
    dX = backend.to_numpy(layer.backward(backend.asarray(dY.copy())))
    h = 1e-6
    numeric = (oracle(name, z + h) - oracle(name, z - h)) / (2 * h) * dY
    assert_allclose(dX, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_gradient_check(name):
    errors = check_layer_gradients(Activation(name), (2, 3))
    assert set(errors) == {"X"}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_float32_forward_keeps_dtype_and_input(name, backend):
    z = np.random.RandomState(0).standard_normal((3, 4)).astype(np.float32)
    z_before = z.copy()
    layer = build(Activation(name), (4,), backend, dtype=np.float32)
    Y = layer.forward(backend.asarray(z), training=True)
    assert Y.dtype == np.float32
    assert_allclose(backend.to_numpy(Y), oracle(name, z.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert_allclose(z, z_before)  # the input is never overwritten


def test_shape_is_kept(backend):
    layer = build(Activation("relu"), (2, 3, 4), backend, dtype=np.float32)
    assert layer.output_shape_ == (2, 3, 4)
    X = backend.asarray(np.ones((5, 2, 3, 4), dtype=np.float32))
    assert layer.forward(X, training=False).shape == (5, 2, 3, 4)


def test_unknown_activation_is_a_clear_error(backend):
    with pytest.raises(
        ValueError,
        match=r"The 'activation' parameter of Activation must be a str among .* Got 'swishy'",
    ):
        build(Activation("swishy"), (3,), backend)

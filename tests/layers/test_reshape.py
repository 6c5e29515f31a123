"""Tests for sknet/layers/_reshape.py."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet.layers import Flatten
from sknet.utils import check_layer_gradients


def build(shape, backend, dtype=np.float64):
    layer = Flatten()
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(0))
    return layer


@pytest.mark.parametrize("shape, flat", [((3, 4, 5), 60), ((2, 3), 6), ((7,), 7), ((1, 1, 1), 1)])
def test_output_shape(shape, flat, backend):
    layer = build(shape, backend)
    assert layer.output_shape_ == (flat,)
    assert layer.params == {} and layer.grads == {}


@pytest.mark.parametrize("training", [True, False])
def test_forward_keeps_c_order_per_sample(training, backend):
    X = np.arange(2 * 3 * 2 * 4, dtype=np.float64).reshape(2, 3, 2, 4)
    layer = build((3, 2, 4), backend)
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=training))
    assert Y.shape == (2, 24)
    assert_array_equal(Y, X.reshape(2, -1))
    assert_array_equal(Y[1], np.arange(24, 48))


def test_backward_restores_the_sample_shape(backend):
    layer = build((3, 2, 4), backend)
    X = np.random.RandomState(0).standard_normal((5, 3, 2, 4))
    layer.forward(backend.asarray(X), training=True)
    dY = np.random.RandomState(1).standard_normal((5, 24))
    dX = backend.to_numpy(layer.backward(backend.asarray(dY.copy())))
    assert dX.shape == (5, 3, 2, 4)
    assert_array_equal(dX, dY.reshape(5, 3, 2, 4))
    assert_array_equal(dX[2, 1, 0], dY[2, 8:12])


def test_batch_size_can_change(backend):
    layer = build((2, 2), backend)
    for n in (3, 1, 4):
        Y = layer.forward(backend.asarray(np.ones((n, 2, 2))), training=True)
        assert Y.shape == (n, 4)
        assert layer.backward(backend.asarray(np.ones((n, 4)))).shape == (n, 2, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype, backend):
    layer = build((2, 3), backend, dtype=dtype)
    Y = layer.forward(backend.asarray(np.ones((2, 2, 3), dtype=dtype)), training=True)
    assert Y.dtype == dtype
    assert layer.backward(backend.asarray(np.ones((2, 6), dtype=dtype))).dtype == dtype


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,)])
def test_gradient_check(shape):
    errors = check_layer_gradients(Flatten(), shape)
    assert set(errors) == {"X"}
    assert errors["X"] < 1e-8

"""Tests for sknet/layers/_dropout.py."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.layers import Dropout
from sknet.utils import check_layer_gradients


def build(rate, backend, shape=(1000,), seed=0, dtype=np.float32):
    layer = Dropout(rate)
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def test_identity_when_predicting(backend):
    layer = build(0.5, backend)
    X = backend.asarray(np.ones((4, 1000), dtype=np.float32))
    assert layer.forward(X, training=False) is X


def test_drops_the_requested_fraction_and_rescales(backend):
    layer = build(0.3, backend)
    X = backend.asarray(np.ones((20, 1000), dtype=np.float32))
    Y = backend.to_numpy(layer.forward(X, training=True))
    kept = Y != 0
    assert abs(1 - kept.mean() - 0.3) < 0.02
    # the rate applied is 0.3 to the nearest 1/65536 (16-bit draws), its scale exact
    rate = round(0.3 * 65536) / 65536
    assert_allclose(Y[kept], 1 / (1 - rate), rtol=1e-6)
    assert abs(Y.mean() - 1) < 0.03  # expectation preserved


def test_backward_uses_the_forward_mask(backend):
    layer = build(0.5, backend, shape=(10,))
    X = backend.asarray(np.random.RandomState(0).standard_normal((3, 10)).astype(np.float32))
    Y = backend.to_numpy(layer.forward(X, training=True)).copy()
    dX = backend.to_numpy(layer.backward(backend.asarray(np.ones((3, 10), np.float32))))
    assert_allclose((dX != 0), (Y != 0))
    assert_allclose(dX[dX != 0], 2.0)


def test_same_seed_same_masks_different_seed_different_masks(backend):
    X = backend.asarray(np.ones((2, 1000), dtype=np.float32))
    a, b, c = build(0.5, backend, seed=1), build(0.5, backend, seed=1), build(0.5, backend, seed=2)
    ya, yb, yc = (backend.to_numpy(layer.forward(X, training=True)).copy() for layer in (a, b, c))
    assert_allclose(ya, yb)
    assert not np.array_equal(ya, yc)
    # a new mask each batch
    assert not np.array_equal(ya, backend.to_numpy(a.forward(X, training=True)))


def test_rate_zero_is_identity(backend):
    layer = build(0.0, backend)
    X = backend.asarray(np.ones((2, 1000), dtype=np.float32))
    assert_allclose(backend.to_numpy(layer.forward(X, training=True)), 1.0)


def test_gradient_check():
    assert check_layer_gradients(Dropout(0.4), (6,))["X"] < 1e-8


@pytest.mark.parametrize("rate", [-0.1, 1.0, "half"])
def test_bad_rate_is_a_clear_error(rate, backend):
    with pytest.raises(
        ValueError,
        match=r"The 'rate' parameter of Dropout must be a float in the range \[0(\.0)?, 1(\.0)?\)",
    ):
        build(rate, backend)

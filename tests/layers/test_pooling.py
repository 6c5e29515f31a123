"""Tests for sknet/layers/_pooling.py."""

import itertools
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import AvgPool2D, GlobalAvgPool2D, MaxPool2D
from sknet.utils import check_layer_gradients

COMBOS = [
    (k, s, p)
    for k, s, p in itertools.product([2, 3], [None, 1, 2], ["valid", 1, "same"])
    if not (p == "same" and k == 2)
]
INPUT = (2, 5, 6)  # (C, H, W)


def pool_oracle(X, k, stride, padding, kind):
    """Loops over windows; max pads with -inf, average with zeros (divisor k * k)."""
    s = k if stride is None else stride
    p = {"valid": 0, "same": (k - 1) // 2}.get(padding, padding)
    N, C, H, W = X.shape
    fill = -np.inf if kind == "max" else 0.0
    Xp = np.full((N, C, H + 2 * p, W + 2 * p), fill)
    Xp[:, :, p : p + H, p : p + W] = X
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    Y = np.empty((N, C, OH, OW))
    for n, c, y, x in np.ndindex(Y.shape):
        window = Xp[n, c, y * s : y * s + k, x * s : x * s + k]
        Y[n, c, y, x] = window.max() if kind == "max" else window.sum() / (k * k)
    return Y


def build(layer, backend, input_shape=INPUT, dtype=np.float64):
    layer.build(input_shape, backend=backend, dtype=dtype, rng=np.random.RandomState(0))
    return layer


@pytest.mark.parametrize("pool_size, stride, padding", COMBOS)
def test_max_pool_matches_loop_oracle(pool_size, stride, padding, backend):
    # negative inputs: a padded zero would win if padding were not -inf
    X = -np.abs(np.random.RandomState(0).standard_normal((2,) + INPUT)) - 0.1
    layer = build(MaxPool2D(pool_size, stride=stride, padding=padding), backend)
    expected = pool_oracle(X, pool_size, stride, padding, "max")
    assert layer.output_shape_ == expected.shape[1:]
    assert np.isfinite(expected).all() and (expected < 0).all()
    for training in (True, False):
        Y = layer.forward(backend.asarray(X), training=training)
        assert_allclose(backend.to_numpy(Y), expected, rtol=0, atol=0)


def max_pool_gradient_oracle(X, dY, k, stride, padding):
    """Loops over windows, adding each window's dY to its first maximum."""
    s = k if stride is None else stride
    p = {"valid": 0, "same": (k - 1) // 2}.get(padding, padding)
    N, C, H, W = X.shape
    Xp = np.full((N, C, H + 2 * p, W + 2 * p), -np.inf)
    Xp[:, :, p : p + H, p : p + W] = X
    dXp = np.zeros_like(Xp)
    for n, c, y, x in np.ndindex(dY.shape):
        window = Xp[n, c, y * s : y * s + k, x * s : x * s + k]
        i, j = np.unravel_index(np.argmax(window), window.shape)
        dXp[n, c, y * s + i, x * s + j] += dY[n, c, y, x]
    return dXp[:, :, p : p + H, p : p + W]


@pytest.mark.parametrize("pool_size, stride, padding", COMBOS)
def test_max_pool_backward_matches_loop_oracle(pool_size, stride, padding, backend):
    rng = np.random.RandomState(1)
    X = rng.randn(3, *INPUT)
    layer = build(MaxPool2D(pool_size, stride=stride, padding=padding), backend)
    Y = layer.forward(backend.asarray(X), training=True)
    dY = rng.randn(*Y.shape)
    dX = backend.to_numpy(layer.backward(backend.asarray(dY)))
    expected = max_pool_gradient_oracle(X, dY, pool_size, stride, padding)
    assert dX.shape == X.shape
    assert_allclose(dX, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pool_size, stride, padding", COMBOS)
def test_avg_pool_matches_loop_oracle(pool_size, stride, padding, backend):
    # positive inputs: padded pixels must count as zeros in a k * k divisor
    X = np.abs(np.random.RandomState(0).standard_normal((2,) + INPUT)) + 0.1
    layer = build(AvgPool2D(pool_size, stride=stride, padding=padding), backend)
    expected = pool_oracle(X, pool_size, stride, padding, "avg")
    assert layer.output_shape_ == expected.shape[1:]
    for training in (True, False):
        Y = layer.forward(backend.asarray(X), training=training)
        assert_allclose(backend.to_numpy(Y), expected, rtol=1e-12)


def test_avg_pool_corner_divides_by_the_full_window(backend):
    layer = build(AvgPool2D(3, stride=1, padding=1), backend, input_shape=(1, 3, 3))
    Y = backend.to_numpy(layer.forward(backend.asarray(np.ones((1, 1, 3, 3))), training=False))
    assert_allclose(Y[0, 0], [[4 / 9, 6 / 9, 4 / 9], [6 / 9, 1, 6 / 9], [4 / 9, 6 / 9, 4 / 9]])


@pytest.mark.parametrize("pool_size, stride, padding", COMBOS)
@pytest.mark.parametrize("Pool", [MaxPool2D, AvgPool2D])
def test_gradients_match_finite_differences(Pool, pool_size, stride, padding):
    layer = Pool(pool_size, stride=stride, padding=padding)
    errors = check_layer_gradients(layer, (2, 5, 4), n_samples=2)
    assert set(errors) == {"X"}


@pytest.mark.parametrize("stride", [None, 1])
def test_max_pool_tie_sends_the_gradient_to_one_input(stride, backend):
    layer = build(MaxPool2D(2, stride=stride), backend, input_shape=(1, 4, 4))
    X = np.ones((1, 1, 4, 4))
    Y = layer.forward(backend.asarray(X), training=True)
    dY = np.random.RandomState(0).uniform(1, 2, Y.shape)
    dX = backend.to_numpy(layer.backward(backend.asarray(dY.copy())))
    assert_allclose(dX.sum(), dY.sum())
    if stride is None:  # disjoint windows: exactly one nonzero per window
        windows = dX[0, 0].reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(2, 2, 4)
        assert ((windows != 0).sum(axis=2) == 1).all()
        assert (windows[:, :, 0] != 0).all()  # the first maximum of each window wins
        assert_allclose(windows.sum(axis=2), dY[0, 0])


def test_max_pool_backward_routes_to_the_maximum(backend):
    X = np.array([[[[1.0, 5.0, 0.0, 2.0], [3.0, 4.0, 7.0, 1.0]]]])
    layer = build(MaxPool2D(2), backend, input_shape=(1, 2, 4))
    Y = layer.forward(backend.asarray(X), training=True)
    assert_allclose(backend.to_numpy(Y), [[[[5.0, 7.0]]]])
    dX = backend.to_numpy(layer.backward(backend.asarray(np.array([[[[10.0, 20.0]]]]))))
    assert_allclose(dX, [[[[0, 10, 0, 0], [0, 0, 20, 0]]]])


def test_global_avg_pool_forward(backend):
    X = np.random.RandomState(0).standard_normal((3, 4, 2, 5))
    layer = build(GlobalAvgPool2D(), backend, input_shape=(4, 2, 5))
    assert layer.output_shape_ == (4,)
    for training in (True, False):
        Y = backend.to_numpy(layer.forward(backend.asarray(X), training=training))
        assert_allclose(Y, X.mean(axis=(2, 3)), rtol=1e-12)


def test_global_avg_pool_backward(backend):
    layer = build(GlobalAvgPool2D(), backend, input_shape=(2, 3, 4))
    layer.forward(backend.asarray(np.zeros((2, 2, 3, 4))), training=True)
    dY = np.array([[12.0, 24.0], [-12.0, 6.0]])
    dX = backend.to_numpy(layer.backward(backend.asarray(dY.copy())))
    assert dX.shape == (2, 2, 3, 4)
    assert_allclose(dX, np.broadcast_to((dY / 12)[:, :, None, None], dX.shape))


def test_global_avg_pool_gradient_check():
    assert set(check_layer_gradients(GlobalAvgPool2D(), (3, 2, 4))) == {"X"}


@pytest.mark.parametrize(
    "Pool, kwargs, input_shape, output_shape",
    [
        (MaxPool2D, {}, (3, 5, 6), (3, 2, 3)),
        (AvgPool2D, dict(pool_size=3), (1, 9, 8), (1, 3, 2)),
        (MaxPool2D, dict(pool_size=3, stride=2, padding="same"), (2, 7, 6), (2, 4, 3)),
        (
            AvgPool2D,
            dict(pool_size=(2, 3), stride=(1, 2), padding=(1, 0)),
            (1, 4, 7),
            (1, 5, 3),
        ),
    ],
)
def test_output_shape(Pool, kwargs, input_shape, output_shape, backend):
    layer = Pool(**kwargs)
    assert build(layer, backend, input_shape=input_shape).output_shape_ == output_shape
    Y = layer.forward(backend.asarray(np.zeros((2,) + input_shape)), training=False)
    assert Y.shape == (2,) + output_shape


@pytest.mark.parametrize("Pool", [MaxPool2D, AvgPool2D])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(Pool, dtype, backend):
    layer = build(Pool(2, padding=1), backend, dtype=dtype)
    X = backend.asarray(np.ones((2,) + INPUT, dtype=dtype))
    Y = layer.forward(X, training=True)
    assert Y.dtype == dtype
    assert layer.backward(backend.asarray(np.ones(Y.shape, dtype=dtype))).dtype == dtype


@pytest.mark.parametrize(
    "layer, input_shape, message",
    [
        (MaxPool2D(), (5,), "expects images"),
        (AvgPool2D(), (2, 5), "expects images"),
        (GlobalAvgPool2D(), (5,), "expects images"),
        (GlobalAvgPool2D(), (1, 1, 5, 5), "expects images"),
        (MaxPool2D(0), (1, 4, 4), "'pool_size' parameter of MaxPool2D .*Got 0 instead"),
        (AvgPool2D((2,)), (1, 4, 4), "pool_size must be a positive int"),
        (MaxPool2D(2.0), (1, 4, 4), "'pool_size' parameter of MaxPool2D .*Got 2.0 instead"),
        (MaxPool2D(2, stride=0), (1, 4, 4), "'stride' parameter of MaxPool2D .*Got 0 instead"),
        (AvgPool2D(2, padding="full"), (1, 4, 4), "'padding' parameter of AvgPool2D .*Got 'full'"),
        (MaxPool2D(2, padding=-1), (1, 4, 4), "'padding' parameter of MaxPool2D .*Got -1 instead"),
        (MaxPool2D(2, padding="same"), (1, 4, 4), "'same' needs an odd window"),
        (AvgPool2D(3), (1, 2, 4), "does not fit"),
        (MaxPool2D((2, 5)), (1, 4, 4), "does not fit"),
    ],
)
def test_bad_configuration_is_a_clear_error(layer, input_shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, get_backend("cpu"), input_shape=input_shape)


@pytest.mark.parametrize("Pool", [MaxPool2D, AvgPool2D])
def test_padding_larger_than_half_the_window_is_refused(Pool):
    with pytest.raises(ValueError, match="at most half"):
        Pool(2, stride=1, padding=2).build(
            (1, 2, 2), backend=get_backend("cpu"), dtype=np.float64, rng=np.random.RandomState(0)
        )


@pytest.mark.parametrize(
    "layer, shape",
    [
        (MaxPool2D(16), (1, 8, 8)),
        (AvgPool2D(9), (2, 8, 8)),
        (MaxPool2D((2, 9)), (1, 8, 8)),
        (AvgPool2D(5), (1, 4, 6)),
    ],
    ids=["max", "avg", "max-wide", "avg-short"],
)
def test_a_pool_size_larger_than_the_images_names_pool_size_and_the_image_size(layer, shape):
    size = re.escape(str(shape[1:]))
    pool = re.escape(repr(layer.pool_size))
    with pytest.raises(ValueError, match=rf"pool_size={pool} .*images of size {size}"):
        layer.build(shape, backend=get_backend("cpu"), dtype=np.float32, rng=None)

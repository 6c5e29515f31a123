"""Tests for sknet/layers/_conv.py."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import Conv2D
from sknet.utils import check_layer_gradients
from tests.layers.test_activation import oracle as activation_oracle

PADDINGS = ["valid", "same", 1, (2, 0)]
STRIDES = [1, 2, (2, 1)]
KERNELS = [3, (3, 2)]
COMBOS = [
    (k, s, p)
    for k, s, p in itertools.product(KERNELS, STRIDES, PADDINGS)
    if not (p == "same" and k == (3, 2))
]
INPUT = (2, 5, 6)  # (C, H, W)


def as_pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def padding_pair(padding, kernel):
    if padding == "valid":
        return 0, 0
    if padding == "same":
        return (kernel[0] - 1) // 2, (kernel[1] - 1) // 2
    return as_pair(padding)


def conv_oracle(X, W, b, stride, padding):
    """Direct convolution (cross-correlation), zero padding done by hand."""
    N, C, H, Wd = X.shape
    F, _, kh, kw = W.shape
    sh, sw = stride
    ph, pw = padding
    Xp = np.zeros((N, C, H + 2 * ph, Wd + 2 * pw))
    Xp[:, :, ph : ph + H, pw : pw + Wd] = X
    OH = (H + 2 * ph - kh) // sh + 1
    OW = (Wd + 2 * pw - kw) // sw + 1
    Y = np.empty((N, F, OH, OW))
    for n in range(N):
        for f in range(F):
            for y in range(OH):
                for x in range(OW):
                    patch = Xp[n, :, y * sh : y * sh + kh, x * sw : x * sw + kw]
                    Y[n, f, y, x] = (patch * W[f]).sum() + (0.0 if b is None else b[f])
    return Y


def build(layer, backend, input_shape=INPUT, dtype=np.float64, seed=0):
    layer.build(input_shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def with_random_bias(layer, backend, seed=1):
    b = np.random.RandomState(seed).standard_normal(layer.filters)
    layer.params["b"] = backend.asarray(b, layer.dtype_)
    return b


@pytest.mark.parametrize("kernel, stride, padding", COMBOS)
def test_forward_matches_direct_convolution(kernel, stride, padding, backend):
    X = np.random.RandomState(0).standard_normal((2,) + INPUT)
    layer = build(Conv2D(3, kernel, stride=stride, padding=padding), backend)
    b = with_random_bias(layer, backend)
    W = backend.to_numpy(layer.params["W"])
    expected = conv_oracle(X, W, b, as_pair(stride), padding_pair(padding, as_pair(kernel)))
    assert layer.output_shape_ == expected.shape[1:]
    for training in (True, False):
        Y = layer.forward(backend.asarray(X), training=training)
        assert_allclose(backend.to_numpy(Y), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "tanh", "gelu"])
@pytest.mark.parametrize("kernel, stride, padding", [(3, 1, "same"), ((3, 2), (2, 1), (2, 0))])
def test_forward_with_activation(activation, kernel, stride, padding, backend):
    X = np.random.RandomState(0).standard_normal((2,) + INPUT)
    layer = build(
        Conv2D(3, kernel, stride=stride, padding=padding, activation=activation),
        backend,
    )
    b = with_random_bias(layer, backend)
    W = backend.to_numpy(layer.params["W"])
    Z = conv_oracle(X, W, b, as_pair(stride), padding_pair(padding, as_pair(kernel)))
    expected = activation_oracle(activation, Z)
    for training in (True, False):
        Y = layer.forward(backend.asarray(X), training=training)
        assert_allclose(backend.to_numpy(Y), expected, rtol=1e-12, atol=1e-12)


def test_forward_without_bias_has_no_b(backend):
    X = np.random.RandomState(0).standard_normal((2,) + INPUT)
    layer = build(Conv2D(2, 3, use_bias=False, padding=1), backend)
    assert set(layer.params) == set(layer.grads) == {"W"}
    W = backend.to_numpy(layer.params["W"])
    Y = layer.forward(backend.asarray(X), training=False)
    assert_allclose(backend.to_numpy(Y), conv_oracle(X, W, None, (1, 1), (1, 1)), rtol=1e-12)


@pytest.mark.parametrize("kernel", [(1, 3), (5, 3)])
def test_same_padding_of_a_non_square_kernel(kernel, backend):
    X = np.random.RandomState(0).standard_normal((2,) + INPUT)
    layer = build(Conv2D(2, kernel, padding="same"), backend)
    assert layer.output_shape_ == (2,) + INPUT[1:]
    W = backend.to_numpy(layer.params["W"])
    expected = conv_oracle(X, W, None, (1, 1), ((kernel[0] - 1) // 2, (kernel[1] - 1) // 2))
    Y = layer.forward(backend.asarray(X), training=False)
    assert_allclose(backend.to_numpy(Y), expected, rtol=1e-12, atol=1e-12)


def test_same_padding_with_an_even_kernel_is_an_error():
    with pytest.raises(ValueError, match="'same' needs an odd window"):
        build(Conv2D(2, (3, 2), padding="same"), get_backend("cpu"))


@pytest.mark.parametrize("kernel, stride, padding", COMBOS)
@pytest.mark.parametrize("use_bias", [True, False])
def test_gradients_match_finite_differences(kernel, stride, padding, use_bias):
    layer = Conv2D(2, kernel, stride=stride, padding=padding, use_bias=use_bias)
    errors = check_layer_gradients(layer, (2, 5, 4), n_samples=2)
    assert set(errors) == ({"X", "W", "b"} if use_bias else {"X", "W"})


@pytest.mark.parametrize("activation", ["tanh", "relu", "gelu"])
@pytest.mark.parametrize("kernel, stride, padding", [(3, 2, "same"), ((3, 2), (2, 1), (2, 0))])
def test_gradients_with_activation(activation, kernel, stride, padding):
    layer = Conv2D(
        2,
        kernel,
        stride=stride,
        padding=padding,
        activation=activation,
        init="glorot_uniform",
    )
    assert set(check_layer_gradients(layer, (2, 5, 4), n_samples=2)) == {"X", "W", "b"}


def test_backward_by_hand(backend):
    # 1x1 kernel: a Dense layer over channels at every pixel.
    rng = np.random.RandomState(0)
    X = rng.standard_normal((2, 3, 2, 2))
    dY = rng.standard_normal((2, 4, 2, 2))
    layer = build(Conv2D(4, 1), backend, input_shape=(3, 2, 2))
    W = backend.to_numpy(layer.params["W"])[:, :, 0, 0]  # (F, C)
    layer.forward(backend.asarray(X), training=True)
    dX = layer.backward(backend.asarray(dY.copy()))
    assert_allclose(
        backend.to_numpy(layer.grads["W"])[:, :, 0, 0],
        np.einsum("nfyx,ncyx->fc", dY, X),
        rtol=1e-12,
    )
    assert_allclose(backend.to_numpy(layer.grads["b"]), dY.sum(axis=(0, 2, 3)), rtol=1e-12)
    assert_allclose(backend.to_numpy(dX), np.einsum("nfyx,fc->ncyx", dY, W), rtol=1e-12)


def test_skip_input_grad_returns_none_and_keeps_param_grads(backend):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((2,) + INPUT)
    dY = rng.standard_normal((2, 3, 3, 2))
    full = build(Conv2D(3, 3, stride=(1, 2)), backend)
    skip = build(Conv2D(3, 3, stride=(1, 2)), backend)
    skip.skip_input_grad = True
    for layer in (full, skip):
        layer.forward(backend.asarray(X), training=True)
    assert full.backward(backend.asarray(dY.copy())) is not None
    assert skip.backward(backend.asarray(dY.copy())) is None
    for key in ("W", "b"):
        assert np.abs(backend.to_numpy(skip.grads[key])).max() > 0
        assert_allclose(
            backend.to_numpy(skip.grads[key]),
            backend.to_numpy(full.grads[key]),
            rtol=1e-12,
        )


def test_skip_input_grad_in_the_gradient_check():
    layer = Conv2D(2, 3, padding=1)
    layer.skip_input_grad = True
    assert set(check_layer_gradients(layer, (1, 4, 4), n_samples=2)) == {"W", "b"}


def test_gradients_are_overwritten_not_accumulated(backend):
    X = backend.asarray(np.ones((2,) + INPUT))
    layer = build(Conv2D(2, 3), backend)
    grads = []
    for _ in range(2):
        layer.forward(X, training=True)
        layer.backward(backend.asarray(np.ones((2, 2, 3, 4))))
        grads.append(backend.to_numpy(layer.grads["W"]).copy())
    assert_allclose(grads[1], grads[0])
    assert_allclose(grads[0], np.full((2, 2, 3, 3), 2 * 3 * 4))


@pytest.mark.parametrize(
    "kwargs, input_shape, output_shape",
    [
        (dict(filters=4), (3, 8, 8), (4, 6, 6)),
        (dict(filters=4, padding="same"), (3, 8, 7), (4, 8, 7)),
        (dict(filters=4, padding="same", stride=2), (3, 8, 7), (4, 4, 4)),
        (
            dict(filters=2, kernel_size=(3, 2), stride=(2, 1), padding=(2, 0)),
            (1, 7, 6),
            (2, 5, 5),
        ),
        (dict(filters=5, kernel_size=1), (2, 3, 4), (5, 3, 4)),
        (
            dict(filters=1, kernel_size=(2, 5), stride=3, padding=1),
            (1, 10, 9),
            (1, 4, 3),
        ),
    ],
)
def test_output_shape(kwargs, input_shape, output_shape, backend):
    layer = Conv2D(**kwargs)
    assert build(layer, backend, input_shape=input_shape) is layer
    assert layer.output_shape_ == output_shape
    C = input_shape[0]
    kh, kw = as_pair(kwargs.get("kernel_size", 3))
    assert layer.params["W"].shape == (output_shape[0], C, kh, kw)
    assert layer.params["b"].shape == (output_shape[0],)
    Y = layer.forward(backend.asarray(np.zeros((3,) + input_shape)), training=False)
    assert Y.shape == (3,) + output_shape


def test_build_returns_the_output_shape():
    layer = Conv2D(4, 3, padding=1)
    out = layer.build(
        (2, 5, 5),
        backend=get_backend("cpu"),
        dtype=np.float64,
        rng=np.random.RandomState(0),
    )
    assert out == layer.output_shape_ == (4, 5, 5)


@pytest.mark.parametrize(
    "kwargs, input_shape, message",
    [
        (dict(filters=2), (5,), r"expects images of shape \(channels, height, width\)"),
        (dict(filters=2), (2, 5), "expects images"),
        (dict(filters=2), (1, 2, 5, 5), "expects images"),
        (
            dict(filters=0),
            (1, 5, 5),
            r"'filters' parameter of Conv2D must be an int in the range \[1, inf\)\. Got 0",
        ),
        (dict(filters=-2), (1, 5, 5), "'filters' parameter of Conv2D .*Got -2 instead"),
        (dict(filters=2.0), (1, 5, 5), "'filters' parameter of Conv2D .*Got 2.0 instead"),
        (dict(filters=2, kernel_size=0), (1, 5, 5), "'kernel_size' parameter of Conv2D .*Got 0"),
        (
            dict(filters=2, kernel_size=(3,)),
            (1, 5, 5),
            "kernel_size must be a positive int",
        ),
        (
            dict(filters=2, kernel_size=2.5),
            (1, 5, 5),
            "'kernel_size' parameter of Conv2D .*Got 2.5",
        ),
        (dict(filters=2, use_bias="no"), (1, 5, 5), "'use_bias' parameter of Conv2D must be an"),
        (dict(filters=2, stride=0), (1, 5, 5), "'stride' parameter of Conv2D .*Got 0 instead"),
        (dict(filters=2, stride=(1, -1)), (1, 5, 5), "stride must be a positive int"),
        (dict(filters=2, padding="full"), (1, 5, 5), "'padding' parameter of Conv2D .*Got 'full'"),
        (dict(filters=2, padding=-1), (1, 5, 5), "'padding' parameter of Conv2D .*Got -1 instead"),
        (
            dict(filters=2, padding=(1, 2, 3)),
            (1, 5, 5),
            "padding must be 'valid', 'same'",
        ),
        (dict(filters=2, kernel_size=5), (1, 4, 6), "does not fit"),
        (dict(filters=2, kernel_size=(3, 7), padding=1), (1, 5, 4), "does not fit"),
        (dict(filters=2, activation="sigmoid"), (1, 5, 5), "'activation' parameter of Conv2D"),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, input_shape, message):
    with pytest.raises(ValueError, match=message):
        build(Conv2D(**kwargs), get_backend("cpu"), input_shape=input_shape)


def test_window_that_fits_only_with_padding_is_accepted():
    layer = build(Conv2D(2, 5, padding=1), get_backend("cpu"), input_shape=(1, 3, 3))
    assert layer.output_shape_ == (2, 1, 1)


@pytest.mark.parametrize("training", [True, False])
def test_float32_in_float32_out(training, backend):
    X = np.random.RandomState(0).standard_normal((2,) + INPUT)
    layer32 = build(Conv2D(3, 3, padding="same", activation="relu"), backend, dtype=np.float32)
    layer64 = build(Conv2D(3, 3, padding="same", activation="relu"), backend)
    assert layer32.params["W"].dtype == np.float32
    Y = layer32.forward(backend.asarray(X.astype(np.float32)), training=training)
    assert Y.dtype == np.float32
    expected = backend.to_numpy(layer64.forward(backend.asarray(X), training=False))
    assert_allclose(backend.to_numpy(Y), expected, rtol=1e-5, atol=1e-5)
    if training:
        dX = layer32.backward(backend.asarray(np.ones(Y.shape, dtype=np.float32)))
        assert dX.dtype == np.float32
        assert layer32.grads["W"].dtype == layer32.grads["b"].dtype == np.float32


def _numpy_backend(numba):
    from sknet.backend._numpy import NumpyBackend

    backend = NumpyBackend()
    if not numba:
        backend.kernels = None
    return backend


@pytest.mark.parametrize("numba", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("activation", [None, "relu", "tanh", "gelu"])
@pytest.mark.parametrize("kernel, stride, padding", COMBOS)
@pytest.mark.parametrize("channels", [1, 2, 8])
def test_cpu_paths_match_the_channels_first_one(
    kernel, stride, padding, activation, numba, channels
):
    # The NumPy backend computes one product per image below 8 channels and
    # with channels-last patches from 8 on; the generic backend with the
    # batch's channels-first patches: same numbers, input gradient included.
    from tests.conftest import GenericBackend

    cpu = _numpy_backend(numba)
    assert cpu.conv_per_image(channels) == (channels < 8)
    assert cpu.conv_channels_last(channels) == (channels >= 8)
    rng = np.random.RandomState(0)
    shape = (channels,) + INPUT[1:]
    X = rng.standard_normal((3,) + shape)
    results = []
    for backend in (cpu, GenericBackend()):
        layer = build(Conv2D(3, kernel, stride=stride, padding=padding, activation=activation),
                      backend, input_shape=shape)  # fmt: skip
        with_random_bias(layer, backend)
        Y = layer.forward(X, training=True).copy()
        dY = np.random.RandomState(2).standard_normal(Y.shape)
        dX = layer.backward(dY.copy()).copy()
        grads = {key: value.copy() for key, value in layer.grads.items()}
        results.append((Y, dX, grads, layer.forward(X, training=False)))
    (Y, dX, grads, P), (Y0, dX0, grads0, P0) = results
    for got, expected in [(Y, Y0), (dX, dX0), (grads["W"], grads0["W"]),
                          (grads["b"], grads0["b"]), (P, P0)]:  # fmt: skip
        assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("channels", [1, 8])
@pytest.mark.parametrize("kernel, stride, padding", [(3, 1, "same"), ((3, 2), (2, 1), (2, 0))])
def test_cpu_paths_gradients_match_finite_differences(kernel, stride, padding, channels):
    # (2 channels, the per-image path: every other gradient check of this module)
    layer = Conv2D(2, kernel, stride=stride, padding=padding, activation="tanh")
    errors = check_layer_gradients(layer, (channels, 5, 4), n_samples=2)
    assert set(errors) == {"X", "W", "b"}

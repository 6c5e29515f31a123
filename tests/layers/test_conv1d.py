"""Tests for sknet/layers/_conv1d.py: Conv1D against NumPy and PyTorch."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import Conv1D
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import build, conv1d_oracle, numpy_params

T, C = 9, 3

CONFIGS = [
    dict(filters=4, kernel_size=3),
    dict(filters=4, kernel_size=3, padding="same"),
    dict(filters=2, kernel_size=4, padding="same"),  # an even window: the extra step on the right
    dict(filters=3, kernel_size=3, stride=2, padding=1),
    dict(filters=3, kernel_size=2, dilation=3, padding="same"),
    dict(filters=5, kernel_size=3, stride=2, dilation=2, padding="same"),
    dict(filters=1, kernel_size=1, use_bias=False),
]


def padding_of(layer):
    return layer._padding


@pytest.mark.parametrize("kw", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_matches_the_numpy_oracle(backend, kw, dtype):
    rng = np.random.RandomState(0)
    layer = build(Conv1D(**kw), (T, C), backend, dtype=dtype)
    X = rng.standard_normal((4, T, C)).astype(dtype)
    Y = layer.forward(backend.asarray(X), training=False)
    p = numpy_params(layer)
    expected = conv1d_oracle(
        X.astype(np.float64),
        p["W"],
        p.get("b", 0.0),
        kw.get("stride", 1),
        padding_of(layer),
        kw.get("dilation", 1),
    )
    assert Y.shape == expected.shape and Y.dtype == dtype
    assert_allclose(backend.to_numpy(Y), expected, atol=1e-12 if dtype == np.float64 else 1e-5)


def test_same_padding_keeps_the_steps_at_stride_one_and_divides_them_at_stride_s():
    cpu = get_backend("cpu")
    assert build(Conv1D(2, 4, padding="same"), (T, C), cpu).output_shape_ == (T, 2)
    assert build(Conv1D(2, 3, stride=2, padding="same"), (T, C), cpu).output_shape_ == (5, 2)


@pytest.mark.parametrize(
    "kw",
    CONFIGS
    + [dict(filters=3, kernel_size=3, activation="relu"), dict(filters=3, activation="gelu")],
)
def test_gradients(kw):
    errors = check_layer_gradients(Conv1D(**kw), (T, C), n_samples=3)
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("kw", CONFIGS[:6])
def test_equal_to_torch_conv1d(kw):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    layer = build(Conv1D(**kw), (T, C), get_backend("cpu"))
    X = rng.standard_normal((4, T, C))
    Y = layer.forward(X, training=True)
    R = rng.standard_normal(Y.shape)
    dX = layer.backward(R.copy())
    p = numpy_params(layer)
    left, right = padding_of(layer)
    conv = torch.nn.Conv1d(
        C,
        kw["filters"],
        kw["kernel_size"],
        stride=kw.get("stride", 1),
        dilation=kw.get("dilation", 1),
        dtype=torch.float64,
    )
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(p["W"].transpose(2, 1, 0)))
        conv.bias.copy_(torch.tensor(p["b"]))
    Xt = torch.tensor(X, requires_grad=True)
    padded = torch.nn.functional.pad(Xt.transpose(1, 2), (left, right))
    Yt = conv(padded).transpose(1, 2)
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)
    assert_allclose(layer.grads["W"], conv.weight.grad.numpy().transpose(2, 1, 0), atol=1e-12)
    assert_allclose(layer.grads["b"], conv.bias.grad.numpy(), atol=1e-12)


def test_torch_same_padding_is_ours_at_stride_one():
    torch = pytest.importorskip("torch")
    layer = build(Conv1D(3, 4, padding="same", dilation=2), (T, C), get_backend("cpu"))
    conv = torch.nn.Conv1d(C, 3, 4, padding="same", dilation=2, dtype=torch.float64)
    p = numpy_params(layer)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(p["W"].transpose(2, 1, 0)))
        conv.bias.copy_(torch.tensor(p["b"]))
    X = np.random.RandomState(2).standard_normal((2, T, C))
    expected = conv(torch.tensor(X).transpose(1, 2)).transpose(1, 2).detach().numpy()
    assert_allclose(layer.forward(X, training=False), expected, atol=1e-12)


def test_frozen_conv_writes_no_gradient_and_a_first_layer_returns_none():
    layer = build(Conv1D(2, 3, trainable=False), (T, C), get_backend("cpu"))
    layer.grads["W"][...] = 4.0
    X = np.random.RandomState(0).standard_normal((2, T, C))
    layer.forward(X, training=True)
    assert layer.backward(np.ones((2, T - 2, 2))).shape == X.shape
    assert (layer.grads["W"] == 4.0).all()
    layer.skip_input_grad = True
    layer.forward(X, training=True)
    assert layer.backward(np.ones((2, T - 2, 2))) is None


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (Conv1D(0), (T, C), "filters"),
        (Conv1D(2, 0), (T, C), "kernel_size"),
        (Conv1D(2, stride=0), (T, C), "stride"),
        (Conv1D(2, dilation=-1), (T, C), "dilation"),
        (Conv1D(2, padding="full"), (T, C), "padding"),
        (Conv1D(2, 5, dilation=3), (T, C), "does not fit in sequences of 9 steps"),
        (Conv1D(2), (T, C, 1), r"sequences of shape \(timesteps, features\)"),
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

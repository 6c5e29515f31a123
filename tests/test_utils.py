"""Tests for sknet/utils.py."""

import re

import numpy as np
import pytest

from sknet import autodiff as ad
from sknet.autodiff._recording import recorded_backward
from sknet.layers import (
    Activation,
    AvgPool2D,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool2D,
    Layer,
    MaxPool2D,
)
from sknet.utils import check_layer_gradients


class Scale(Layer):
    """The docstring example of Layer: multiply by a learned scalar."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.params = {"s": backend.asarray(rng.uniform(0.5, 2.0, 1), dtype)}
        self.grads = {"s": backend.xp.zeros((1,), dtype=dtype)}
        return input_shape

    def forward(self, X, *, training):
        if training:
            self._cache["X"] = X
        return X * self.params["s"]

    def backward(self, dY):
        self.grads["s"][...] = (dY * self._cache["X"]).sum()
        return dY * self.params["s"]


class DoubleInputGrad(Scale):
    def backward(self, dY):
        super().backward(dY)
        return 2 * dY * self.params["s"]


class WrongSignWeightGrad(Scale):
    def backward(self, dY):
        dX = super().backward(dY)
        self.grads["s"] *= -1
        return dX


class Square(Layer):
    """No parameters; dX of X**2 is 2 X dY."""

    def build(self, input_shape, *, backend, dtype, rng):
        return super().build(input_shape, backend=backend, dtype=dtype, rng=rng)

    def forward(self, X, *, training):
        if training:
            self._cache["X"] = X
        return X * X

    def backward(self, dY):
        return 2 * self._cache["X"] * dY


class SquareMissingFactor(Square):
    def backward(self, dY):
        return self._cache["X"] * dY


BUILT_IN = [
    pytest.param(Dense(3, activation="tanh"), (4,), {"X", "W", "b"}, id="Dense"),
    pytest.param(Activation("gelu"), (5,), {"X"}, id="Activation"),
    pytest.param(Dropout(0.3), (6,), {"X"}, id="Dropout"),
    pytest.param(
        Conv2D(2, 3, padding="same", activation="tanh"),
        (2, 4, 4),
        {"X", "W", "b"},
        id="Conv2D",
    ),
    pytest.param(MaxPool2D(2, stride=1), (2, 4, 4), {"X"}, id="MaxPool2D"),
    pytest.param(AvgPool2D(3, padding=1), (2, 4, 4), {"X"}, id="AvgPool2D"),
    pytest.param(GlobalAvgPool2D(), (2, 3, 3), {"X"}, id="GlobalAvgPool2D"),
    pytest.param(BatchNorm(), (4,), {"X", "gamma", "beta"}, id="BatchNorm-1d"),
    pytest.param(BatchNorm(), (2, 3, 3), {"X", "gamma", "beta"}, id="BatchNorm-2d"),
    pytest.param(Flatten(), (2, 3, 2), {"X"}, id="Flatten"),
]


@pytest.mark.parametrize("layer, input_shape, keys", BUILT_IN)
def test_every_built_in_layer_passes(layer, input_shape, keys):
    errors = check_layer_gradients(layer, input_shape)
    assert isinstance(errors, dict)
    assert set(errors) == keys
    assert all(isinstance(v, float) and 0 <= v < 1e-5 for v in errors.values())


@pytest.mark.parametrize("layer, input_shape, keys", BUILT_IN)
def test_the_layer_passed_in_is_not_modified(layer, input_shape, keys):
    before = layer.get_params()
    check_layer_gradients(layer, input_shape)
    assert not hasattr(layer, "params")
    assert not hasattr(layer, "backend_")
    assert layer.get_params() == before


def test_a_correct_custom_layer_passes():
    errors = check_layer_gradients(Scale(), (3, 2))
    assert set(errors) == {"X", "s"}
    assert max(errors.values()) < 1e-8


def test_a_correct_layer_without_parameters_passes():
    assert set(check_layer_gradients(Square(), (4,))) == {"X"}


@pytest.mark.parametrize(
    "layer, name",
    [
        (DoubleInputGrad(), "X"),
        (WrongSignWeightGrad(), "s"),
        (SquareMissingFactor(), "X"),
    ],
)
def test_a_wrong_gradient_is_reported_by_name(layer, name):
    with pytest.raises(AssertionError, match=rf"{type(layer).__name__}: the gradient of '{name}'"):
        check_layer_gradients(layer, (3,))
    assert not hasattr(layer, "params")


def test_the_error_is_relative_to_the_largest_entry():
    # dX off by a factor 2 everywhere: the error is |2g - g| / |2g| = 0.5
    with pytest.raises(AssertionError, match="off by 0.5 "):
        check_layer_gradients(DoubleInputGrad(), (3,))


def test_a_loose_tolerance_accepts_a_small_error():
    class SlightlyOff(Square):
        def backward(self, dY):
            return 2.001 * self._cache["X"] * dY

    with pytest.raises(AssertionError):
        check_layer_gradients(SlightlyOff(), (4,))
    errors = check_layer_gradients(SlightlyOff(), (4,), tol=1e-3)
    assert 1e-4 < errors["X"] < 1e-3


def test_skip_input_grad_checks_only_the_parameters():
    class NoInputGrad(Scale):
        skip_input_grad = True

        def backward(self, dY):
            super().backward(dY)  # writes grads["s"], returns no dX

    assert set(check_layer_gradients(NoInputGrad(), (3,))) == {"s"}


def test_the_check_is_deterministic():
    a = check_layer_gradients(Conv2D(2, 3), (1, 4, 4), random_state=3)
    b = check_layer_gradients(Conv2D(2, 3), (1, 4, 4), random_state=3)
    assert a == b


class NaNGradient(Layer):
    """Returns a NaN input gradient: must never pass the check."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        return input_shape

    def forward(self, X, *, training):
        return 2 * X

    def backward(self, dY):
        return dY * np.nan


def test_nan_gradients_fail_the_check():
    with pytest.raises(AssertionError, match="'X'"):
        check_layer_gradients(NaNGradient(), (3,))


class ScaledNormalization(Layer):
    """Normalizes ``s * X`` per sample: invariant to ``s``, whose true gradient is zero."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("s", [1.5])
        return input_shape

    def forward(self, X, *, training):
        Z = X * self.params["s"]
        centered = Z - ad.mean(Z, axis=1, keepdims=True)
        return centered / ad.sqrt(ad.mean(centered * centered, axis=1, keepdims=True))


def test_a_correct_layer_whose_true_gradient_is_zero_passes():
    # The central differences of a zero gradient are rounding noise (~1e-10); a
    # purely relative measure called that a 100% error.
    errors = check_layer_gradients(ScaledNormalization(), (5,))
    assert set(errors) == {"X", "s"}
    assert errors["s"] < 1e-5 and errors["X"] < 1e-5


def test_a_wrong_gradient_that_should_be_zero_still_fails():
    class WrongScaleGradient(ScaledNormalization):
        def backward(self, dY):
            dX = recorded_backward(self, dY)
            self.grads["s"][...] = 1e-3  # the true gradient is 0
            return dX

    with pytest.raises(AssertionError, match="the gradient of 's'"):
        check_layer_gradients(WrongScaleGradient(), (5,))


def test_atol_bounds_the_differences_of_near_zero_gradients():
    class SlightlyNonZero(ScaledNormalization):
        def backward(self, dY):
            dX = recorded_backward(self, dY)
            self.grads["s"][...] = 1e-6  # the true gradient is 0
            return dX

    with pytest.raises(AssertionError, match="'s'"):
        check_layer_gradients(SlightlyNonZero(), (5,))
    assert check_layer_gradients(SlightlyNonZero(), (5,), atol=1e-5)["s"] <= 1e-5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_samples": 0}, "n_samples must be a positive integer, got 0"),
        ({"n_samples": -2}, "n_samples must be a positive integer, got -2"),
        ({"n_samples": 2.5}, "n_samples must be a positive integer, got 2.5"),
        ({"n_samples": True}, "n_samples must be a positive integer, got True"),
        ({"eps": 0.0}, "eps must be a positive number, got 0.0"),
        ({"tol": float("nan")}, "tol must be a positive number, got nan"),
        ({"atol": -1.0}, "atol must be a positive number, got -1.0"),
    ],
)
def test_a_check_that_could_not_fail_is_refused(kwargs, message):
    # n_samples=0 compared empty arrays and passed whatever the gradient.
    with pytest.raises(ValueError, match=re.escape(message)):
        check_layer_gradients(DoubleInputGrad(), (3,), **kwargs)

"""Initializers (sknet/layers/_init.py): what a user's ``init`` callable returns is checked."""

import re

import numpy as np
import pytest

from sknet import NeuralNetRegressor
from sknet.layers import Conv2D, Dense, Flatten, Layer
from sknet.layers._init import SklearnGlorotUniform, glorot_uniform, he_uniform, initial_weights

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

rng = np.random.RandomState(0)
X = rng.rand(20, 4).astype(np.float32)


def fit(layers, X=X):
    y = X.reshape(len(X), -1).sum(axis=1)
    return NeuralNetRegressor(layers=layers, max_iter=1, device="cpu", random_state=0).fit(X, y)


def small_uniform(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return rng.uniform(-0.1, 0.1, weight_shape), np.zeros(n_biases)


def wrong_weight_shape(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.zeros((2, 2)), np.zeros(n_biases)


def wrong_bias_shape(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.zeros(weight_shape), np.zeros(n_biases + 1)


def returns_none(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return None


def weights_only(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.zeros(weight_shape)


def nan_weights(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.full(weight_shape, np.nan), np.zeros(n_biases)


def infinite_biases(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.zeros(weight_shape), np.full(n_biases, -np.inf)


def complex_weights(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.ones(weight_shape) * 1j, np.zeros(n_biases)


def string_weights(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.full(weight_shape, "a"), np.zeros(n_biases)


def ragged_weights(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return [[1.0], [1.0, 2.0]], np.zeros(n_biases)


def beyond_float32(rng, weight_shape, n_biases, fan_in, fan_out, activation):
    return np.full(weight_shape, 1e300), np.zeros(n_biases)


@pytest.mark.parametrize(
    "init, error, message",
    [
        (
            wrong_weight_shape,
            ValueError,
            "init=wrong_weight_shape returned W of shape (2, 2); the layer needs (4, 3)",
        ),
        (
            wrong_bias_shape,
            ValueError,
            "init=wrong_bias_shape returned b of shape (4,); the layer needs (3,)",
        ),
        (
            returns_none,
            TypeError,
            "init=returns_none must return a pair (W, b), W of shape "
            "(4, 3) and b of shape (3,); got NoneType None",
        ),
        (
            weights_only,
            TypeError,
            "init=weights_only must return a pair (W, b), W of shape "
            "(4, 3) and b of shape (3,); got ndarray of shape (4, 3)",
        ),
        (nan_weights, ValueError, "init=nan_weights returned W with NaN or infinite values"),
        (infinite_biases, ValueError, "init=infinite_biases returned b with NaN or infinite"),
        (complex_weights, TypeError, "init=complex_weights returned W of dtype complex128"),
        (string_weights, TypeError, "init=string_weights returned W of dtype <U1"),
        (ragged_weights, TypeError, "init=ragged_weights must return a pair (W, b), W of"),
        (
            beyond_float32,
            ValueError,
            "Dense: the initial value of the parameter 'W' is not finite in float32",
        ),
    ],
)
def test_what_an_initializer_returns_is_checked_naming_it(init, error, message):
    # Before: shapes failed in NumPy's matmul or the bias kernel at the first batch, NaN
    # and 1e300 trained into "non-finite parameter weights", complex weights trained
    # silently (their imaginary part dropped), None failed to unpack.
    with pytest.raises(error, match=re.escape(message)):
        fit([Dense(3, init=init), Dense(1)])


def test_a_conv_initializer_is_checked_against_the_kernel_shape():
    images = rng.rand(6, 1, 5, 5).astype(np.float32)
    with pytest.raises(
        ValueError, match=re.escape("returned W of shape (2, 2); the layer needs (2, 1, 3, 3)")
    ):
        fit([Conv2D(2, 3, init=wrong_weight_shape), Flatten(), Dense(1)], X=images)


def test_a_correct_initializer_is_used_as_given():
    model = fit([Dense(3, init=small_uniform), Dense(1)])
    W = model.network_.layers[0].params["W"]
    assert W.dtype == np.float32 and np.abs(W).max() <= 0.1


@pytest.mark.parametrize(
    "init", [glorot_uniform, he_uniform, SklearnGlorotUniform("logistic"), "glorot_uniform"]
)
def test_the_stock_initializers_pass_their_check(init):
    W, b = initial_weights(init, np.random.RandomState(0), (3, 4), 4, 3, 4, "relu")
    assert W.shape == (3, 4) and b.shape == (4,) and W.dtype == np.float64


def test_a_users_layer_declaring_a_non_finite_parameter_is_named():
    class Overflowing(Layer):
        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.add_param("s", [np.nan])
            return input_shape

        def forward(self, X, *, training):
            return X * self.params["s"]

    with pytest.raises(ValueError, match="Overflowing: the initial value of the parameter 's'"):
        fit([Overflowing(), Dense(1)])

"""Tests for sknet/layers/_dense.py."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from sknet.backend import ACTIVATIONS, get_backend
from sknet.layers import Dense
from sknet.utils import check_layer_gradients
from tests.layers.test_activation import oracle


def build(layer, n_in, backend, dtype=np.float64, seed=0):
    layer.build((n_in,), backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


@pytest.mark.parametrize("activation", [None] + sorted(ACTIVATIONS))
def test_forward_matches_numpy_oracle(activation, backend):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((6, 5))
    layer = build(Dense(4, activation=activation), 5, backend)
    W = backend.to_numpy(layer.params["W"])
    b = backend.to_numpy(layer.params["b"])
    expected = oracle(activation or "identity", X @ W + b)
    for training in (True, False):
        Y = layer.forward(backend.asarray(X), training=training)
        assert_allclose(backend.to_numpy(Y), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("activation", [None] + sorted(ACTIVATIONS))
@pytest.mark.parametrize("use_bias", [True, False])
def test_gradients_match_finite_differences(activation, use_bias):
    errors = check_layer_gradients(Dense(3, activation=activation, use_bias=use_bias), (4,))
    assert set(errors) == ({"X", "W", "b"} if use_bias else {"X", "W"})


def test_backward_by_hand(backend):
    X = np.array([[1.0, 2.0], [3.0, -1.0]])
    dY = np.array([[1.0, 0.0, 2.0], [0.5, 1.0, -1.0]])
    layer = build(Dense(3), 2, backend)
    layer.forward(backend.asarray(X), training=True)
    dX = layer.backward(backend.asarray(dY.copy()))
    W = backend.to_numpy(layer.params["W"])
    assert_allclose(backend.to_numpy(layer.grads["W"]), X.T @ dY)
    assert_allclose(backend.to_numpy(layer.grads["b"]), dY.sum(axis=0))
    assert_allclose(backend.to_numpy(dX), dY @ W.T)


def test_gradients_are_overwritten_not_accumulated(backend):
    X = backend.asarray(np.ones((2, 3)))
    dY = np.ones((2, 2))
    layer = build(Dense(2), 3, backend)
    for _ in range(3):
        layer.forward(X, training=True)
        layer.backward(backend.asarray(dY.copy()))
    assert_allclose(backend.to_numpy(layer.grads["W"]), np.full((3, 2), 2.0))


def test_skip_input_grad_returns_none_and_keeps_param_grads(backend):
    layer = build(Dense(2), 3, backend)
    layer.skip_input_grad = True
    layer.forward(backend.asarray(np.ones((4, 3))), training=True)
    assert layer.backward(backend.asarray(np.ones((4, 2)))) is None
    assert_allclose(backend.to_numpy(layer.grads["W"]), np.full((3, 2), 4.0))


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_gives_dense_results(fmt):
    backend = get_backend("cpu")
    X = sp.random(8, 6, density=0.3, format=fmt, random_state=0)
    dY = np.random.RandomState(1).standard_normal((8, 4))
    dense, sparse = (build(Dense(4, activation="relu"), 6, backend) for _ in range(2))
    Y_dense = dense.forward(X.toarray(), training=True).copy()
    Y_sparse = sparse.forward(backend.asarray(X), training=True)
    assert_allclose(Y_sparse, Y_dense)
    dense.backward(dY.copy())
    sparse.backward(dY.copy())
    assert_allclose(sparse.grads["W"], dense.grads["W"])
    assert_allclose(sparse.grads["b"], dense.grads["b"])


def test_training_buffers_are_reused_and_sliced(backend):
    layer = build(Dense(3, activation="relu"), 2, backend, dtype=np.float32)
    X = backend.asarray(np.ones((5, 2), dtype=np.float32))
    first = layer.forward(X, training=True)
    second = layer.forward(X, training=True)
    assert first.dtype == np.float32
    assert backend.xp.shares_memory(first, second)  # no allocation per batch
    small = layer.forward(X[:2], training=True)
    assert small.shape == (2, 3)
    assert backend.xp.shares_memory(first, small)


def test_initialization_is_sklearn_glorot_and_seeded(backend):
    a = build(Dense(50), 30, backend, seed=3)
    b = build(Dense(50), 30, backend, seed=3)
    W = backend.to_numpy(a.params["W"])
    bound = np.sqrt(6 / (30 + 50))
    assert np.abs(W).max() <= bound and np.abs(W).max() > 0.9 * bound
    assert_allclose(W, backend.to_numpy(b.params["W"]))
    logistic = build(Dense(50, activation="logistic"), 30, backend, seed=3)
    assert np.abs(backend.to_numpy(logistic.params["W"])).max() <= np.sqrt(2 / 80)


def test_he_uniform_init_has_zero_bias(backend):
    layer = build(Dense(10, init="he_uniform"), 6, backend)
    assert_allclose(backend.to_numpy(layer.params["b"]), 0)
    assert np.abs(backend.to_numpy(layer.params["W"])).max() <= np.sqrt(6 / 6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(units=-3),
            r"'units' parameter of Dense must be an int in the range \[1, inf\)\. Got -3",
        ),
        (dict(units=2.5), r"'units' parameter of Dense must be an int .*Got 2.5 instead"),
        (dict(units=True), r"'units' parameter of Dense must be an int .*Got True instead"),
        (
            dict(units=2, activation="sigmoid"),
            "'activation' parameter of Dense must be a str among",
        ),
        (dict(units=2, init="normal"), "'init' parameter of Dense must be a str among"),
        # a flag is a bool: a string is not read by its truthiness
        (
            dict(units=2, use_bias="no"),
            "'use_bias' parameter of Dense must be an instance of 'bool'",
        ),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build(Dense(**kwargs), 3, get_backend("cpu"))


def test_non_flat_input_asks_for_flatten():
    with pytest.raises(ValueError, match="Flatten"):
        Dense(2).build(
            (3, 4), backend=get_backend("cpu"), dtype=np.float32, rng=np.random.RandomState(0)
        )


def test_pickled_layer_holds_numpy_and_drops_buffers(backend):
    layer = build(Dense(3, activation="tanh"), 2, backend, dtype=np.float32)
    layer.forward(backend.asarray(np.ones((4, 2), dtype=np.float32)), training=True)
    state = layer.__getstate__()
    assert "backend_" not in state and "_buffers" not in state and "_cache" not in state
    assert all(type(v) is np.ndarray for v in state["params"].values())
    clone = pickle.loads(pickle.dumps(layer))
    assert_allclose(clone.params["W"], backend.to_numpy(layer.params["W"]))
    assert clone.backend_.name == "cpu"


def test_layer_is_a_configurable_estimator_like_object():
    layer = Dense(8, activation="relu")
    assert layer.get_params() == {
        "units": 8,
        "activation": "relu",
        "use_bias": True,
        "init": "glorot_uniform",
        "trainable": True,
        "lr_scale": 1.0,
        "weights": None,
    }
    assert repr(layer) == "Dense(activation='relu', units=8)"
    assert layer.set_params(units=4).units == 4

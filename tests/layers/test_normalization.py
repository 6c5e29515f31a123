"""Tests for sknet/layers/_normalization.py."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import BatchNorm
from sknet.utils import check_layer_gradients

# per-sample shape, axes the statistics run over (batch axis included)
SHAPES = [
    pytest.param((4,), (0,), id="1d"),
    pytest.param((3, 4, 5), (0, 2, 3), id="2d"),
]


def build(layer, shape, backend, dtype=np.float64):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(0))
    return layer


def data(shape, n=8, seed=0):
    rng = np.random.RandomState(seed)
    # features with very different means and scales
    scale = rng.uniform(0.5, 5, shape[0])
    shift = rng.uniform(-10, 10, shape[0])
    extra = (1,) * (len(shape) - 1)
    X = rng.standard_normal((n,) + shape)
    return X * scale.reshape(shape[:1] + extra) + shift.reshape(shape[:1] + extra)


def per_feature(v, shape):
    """A (features,) vector broadcast against a batch of samples of ``shape``."""
    return v.reshape((1, shape[0]) + (1,) * (len(shape) - 1))


def to_numpy(backend, arrays):
    return {k: backend.to_numpy(v).copy() for k, v in arrays.items()}


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_training_output_is_normalized_per_feature(shape, axes, backend):
    layer = build(BatchNorm(), shape, backend)
    Y = backend.to_numpy(layer.forward(backend.asarray(data(shape)), training=True))
    assert Y.shape == (8,) + shape
    assert_allclose(Y.mean(axis=axes), 0, atol=1e-12)
    assert_allclose(Y.var(axis=axes), 1, rtol=1e-4)


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_training_output_matches_the_formula(shape, axes, backend):
    X = data(shape)
    layer = build(BatchNorm(epsilon=1e-3), shape, backend)
    rng = np.random.RandomState(1)
    gamma, beta = rng.uniform(0.5, 2, shape[0]), rng.standard_normal(shape[0])
    layer.params["gamma"][...] = backend.asarray(gamma)
    layer.params["beta"][...] = backend.asarray(beta)
    mean, var = X.mean(axis=axes, keepdims=True), X.var(axis=axes, keepdims=True)
    expected = (X - mean) / np.sqrt(var + 1e-3) * per_feature(gamma, shape) + per_feature(
        beta, shape
    )
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=True))
    assert_allclose(Y, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape, axes", SHAPES)
@pytest.mark.parametrize("momentum", [0.9, 0.5, 0.0])
def test_running_statistics_after_one_batch(shape, axes, momentum, backend):
    X = data(shape)
    layer = build(BatchNorm(momentum=momentum), shape, backend)
    rng = np.random.RandomState(2)
    init_mean, init_var = rng.standard_normal(shape[0]), rng.uniform(0.5, 2, shape[0])
    layer.state["running_mean"][...] = backend.asarray(init_mean)
    layer.state["running_var"][...] = backend.asarray(init_var)
    layer.forward(backend.asarray(X), training=True)
    state = to_numpy(backend, layer.state)
    batch_var = X.var(axis=axes, ddof=1)  # unbiased: m / (m - 1) times the batch variance
    assert_allclose(
        state["running_mean"],
        momentum * init_mean + (1 - momentum) * X.mean(axis=axes),
        rtol=1e-12,
    )
    assert_allclose(
        state["running_var"],
        momentum * init_var + (1 - momentum) * batch_var,
        rtol=1e-12,
    )


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_initial_running_statistics_are_zero_mean_unit_variance(shape, axes, backend):
    layer = build(BatchNorm(), shape, backend)
    state = to_numpy(backend, layer.state)
    assert_allclose(state["running_mean"], np.zeros(shape[0]))
    assert_allclose(state["running_var"], np.ones(shape[0]))
    assert_allclose(backend.to_numpy(layer.params["gamma"]), 1)
    assert_allclose(backend.to_numpy(layer.params["beta"]), 0)


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_prediction_uses_the_running_statistics_and_keeps_them(shape, axes, backend):
    X = data(shape, seed=3)
    layer = build(BatchNorm(epsilon=1e-2), shape, backend)
    rng = np.random.RandomState(4)
    mean, var = rng.standard_normal(shape[0]), rng.uniform(0.5, 2, shape[0])
    gamma, beta = rng.uniform(0.5, 2, shape[0]), rng.standard_normal(shape[0])
    layer.state["running_mean"][...] = backend.asarray(mean)
    layer.state["running_var"][...] = backend.asarray(var)
    layer.params["gamma"][...] = backend.asarray(gamma)
    layer.params["beta"][...] = backend.asarray(beta)
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=False))
    expected = (X - per_feature(mean, shape)) / np.sqrt(per_feature(var, shape) + 1e-2)
    expected = expected * per_feature(gamma, shape) + per_feature(beta, shape)
    assert_allclose(Y, expected, rtol=1e-12, atol=1e-12)
    state = to_numpy(backend, layer.state)
    assert_allclose(state["running_mean"], mean, rtol=0)
    assert_allclose(state["running_var"], var, rtol=0)


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_running_statistics_converge_to_the_data_statistics(shape, axes, backend):
    X = data(shape, n=64, seed=5)
    layer = build(BatchNorm(momentum=0.5), shape, backend)
    for _ in range(60):
        layer.forward(backend.asarray(X), training=True)
    state = to_numpy(backend, layer.state)
    assert_allclose(state["running_mean"], X.mean(axis=axes), rtol=1e-10)
    assert_allclose(state["running_var"], X.var(axis=axes, ddof=1), rtol=1e-10)
    # then prediction on the training batch is (almost) the training output
    train = backend.to_numpy(layer.forward(backend.asarray(X), training=True)).copy()
    test = backend.to_numpy(layer.forward(backend.asarray(X), training=False))
    assert_allclose(test, train, atol=0.05)


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_backward_of_a_constant_gradient_is_zero(shape, axes, backend):
    # sum(Y) does not depend on X: the per-feature mean of Y is beta.
    layer = build(BatchNorm(), shape, backend)
    layer.forward(backend.asarray(data(shape)), training=True)
    dX = layer.backward(backend.asarray(np.ones((8,) + shape)))
    assert_allclose(backend.to_numpy(dX), 0, atol=1e-12)
    assert_allclose(backend.to_numpy(layer.grads["beta"]), 8 * np.prod(shape[1:]))
    assert_allclose(backend.to_numpy(layer.grads["gamma"]), 0, atol=1e-10)


@pytest.mark.parametrize("shape", [(4,), (2, 3, 2)])
def test_gradients_match_finite_differences(shape):
    errors = check_layer_gradients(BatchNorm(), shape, n_samples=4)
    assert set(errors) == {"X", "gamma", "beta"}


def test_gradient_check_with_a_two_sample_batch():
    check_layer_gradients(BatchNorm(epsilon=1e-3), (3,), n_samples=2)


@pytest.mark.parametrize("shape, axes", SHAPES)
def test_pickle_keeps_state_as_numpy(shape, axes, backend):
    layer = build(BatchNorm(), shape, backend, dtype=np.float32)
    layer.forward(backend.asarray(data(shape).astype(np.float32)), training=True)
    expected = to_numpy(backend, layer.state)
    state = layer.__getstate__()
    assert set(state["state"]) == {"running_mean", "running_var"}
    assert all(type(v) is np.ndarray for v in state["state"].values())
    clone = pickle.loads(pickle.dumps(layer))
    for key, value in expected.items():
        assert type(clone.state[key]) is np.ndarray
        assert clone.state[key].dtype == np.float32
        assert_allclose(clone.state[key], value)
    assert not np.allclose(expected["running_mean"], 0)  # the batch moved it


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
def test_dtype_is_kept(dtype, training, backend):
    layer = build(BatchNorm(), (3, 2, 2), backend, dtype=dtype)
    Y = layer.forward(backend.asarray(data((3, 2, 2)).astype(dtype)), training=training)
    assert Y.dtype == dtype
    assert all(v.dtype == dtype for v in layer.state.values())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(momentum=-0.1), r"'momentum' parameter of BatchNorm must be a float in the range"),
        (dict(momentum=1.0), r"'momentum' parameter of BatchNorm .*Got 1.0 instead"),
        (dict(momentum="0.9"), r"'momentum' parameter of BatchNorm .*Got '0.9' instead"),
        (dict(momentum=float("nan")), r"'momentum' parameter of BatchNorm .*Got nan instead"),
        (dict(momentum=True), r"'momentum' parameter of BatchNorm .*Got True instead"),
        (dict(epsilon=0), r"'epsilon' parameter of BatchNorm must be a float in the range \(0"),
        (dict(epsilon=-1e-5), r"'epsilon' parameter of BatchNorm .*Got -1e-05 instead"),
        (dict(epsilon="small"), r"'epsilon' parameter of BatchNorm .*Got 'small' instead"),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build(BatchNorm(**kwargs), (3,), get_backend("cpu"))


@pytest.mark.parametrize("shape", [(), (3, 4), (1, 2, 3, 4)])
def test_wrong_input_rank_is_a_clear_error(shape):
    with pytest.raises(ValueError, match=r"BatchNorm expects samples of shape \(features,\)"):
        build(BatchNorm(), shape, get_backend("cpu"))

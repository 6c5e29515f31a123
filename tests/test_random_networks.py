"""Property tests: random small networks, checked where the capabilities meet.

Each seed builds a network from a random mix of what a user can compose:
nested containers (``Sequential``, ``Residual``, ``Concatenate``), stock layers
with hand-written backward passes, forward-only layers (differentiated by
``sknet.autodiff``), user layers with parameters, and frozen layers. Every
network is checked four ways:

- its gradients against finite differences (float64, ``check_layer_gradients``);
- a fit with batches split over threads against a fit with whole batches;
- a fit with the data streamed from host memory against one with the data in place;
- a pickled and unpickled model against the original, predicting and training on.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import sknet.engine._sharding as sharding
from sknet import NeuralNetRegressor
from sknet import autodiff as ad
from sknet.layers import Concatenate, Dense, Dropout, Layer, Residual, Sequential
from sknet.utils import check_layer_gradients, estimate_memory

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SEEDS = range(8)
N_FEATURES = 6


class Swish(Layer):
    """Forward-only, no parameters."""

    def forward(self, X, *, training):
        return X * ad.sigmoid(X)


class Affine(Layer):
    """Forward-only, with parameters (declared with add_param)."""

    def __init__(self, units=4):
        self.units = units

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n = input_shape[0]
        self.add_param("W", rng.normal(0, n**-0.5, (n, self.units)), regularized=True)
        self.add_param("b", rng.normal(0, 0.1, self.units))
        return (self.units,)

    def forward(self, X, *, training):
        return ad.tanh(X @ self.params["W"] + self.params["b"])


def _block(rng, width, depth, frozen_ok):
    """A random layer taking and returning samples of ``width`` features."""
    kinds = ["dense", "swish", "affine"] + (
        ["sequential", "residual", "concat"] if depth < 2 else []
    )
    kind = kinds[rng.randint(len(kinds))]
    trainable = not (frozen_ok and rng.rand() < 0.3)
    if kind == "dense":
        act = ["relu", "tanh", "logistic", None][rng.randint(4)]
        return Dense(width, activation=act, trainable=trainable)
    if kind == "swish":
        return Swish()
    if kind == "affine":
        return Affine(width, trainable=trainable)
    inner = [_block(rng, width, depth + 1, frozen_ok) for _ in range(rng.randint(1, 3))]
    if kind == "sequential":
        return Sequential(inner, trainable=None if rng.rand() < 0.7 else trainable)
    if kind == "residual":
        return Residual(inner)
    first = width // 2
    return Concatenate([Sequential([*inner[:-1], Dense(first)]), Affine(width - first)])


def random_layers(seed, *, frozen_ok=True, dropout=False):
    rng = np.random.RandomState(seed)
    layers = [Dense(N_FEATURES, activation="tanh")]  # the data's own width first
    for _ in range(rng.randint(1, 4)):
        layers.append(_block(rng, N_FEATURES, 0, frozen_ok))
        if dropout and rng.rand() < 0.5:
            layers.append(Dropout(0.2))
    return layers


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(160, N_FEATURES))
    y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], X[:, 3] - X[:, 4]])
    return X, y


def make(layers, **kw):
    params = dict(
        max_iter=3, batch_size=40, random_state=0, device="cpu", dtype="float64", alpha=1e-3
    )
    return NeuralNetRegressor(layers, **{**params, **kw})


@pytest.mark.parametrize("seed", SEEDS)
def test_gradients_of_a_random_network(seed):
    network = Sequential(random_layers(seed, frozen_ok=False))
    errors = check_layer_gradients(network, (N_FEATURES,), n_samples=5, random_state=seed)
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("seed", SEEDS)
def test_frozen_layers_of_a_random_network_stay_bit_identical(seed, data):
    X, y = data
    layers = random_layers(seed)
    start = make(layers, max_iter=1).fit(X, y)
    before = {
        key: {k: v.copy() for k, v in leaf.params.items()} for key, leaf in start.network_.leaves()
    }
    trained = make(layers, warm_start=True).fit(
        X, y
    )  # a fresh network (not warm yet): the same start
    for key, leaf in trained.network_.leaves():
        if leaf.params and not leaf.trainable:
            for name, value in leaf.params.items():
                assert_array_equal(value, before[key][name])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_network_trains_the_same_split_over_threads(seed, data, monkeypatch):
    X, y = data
    layers = random_layers(seed, dropout=True)
    monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 1)
    whole = make(layers).fit(X, y)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    shardable = all(layer.shardable for layer in whole.layers_)
    split = make(layers).fit(X, y)
    assert_allclose(split.loss_curve_, whole.loss_curve_, rtol=1e-9)
    for a, b in zip(whole.network_.weights(), split.network_.weights()):
        assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    assert shardable == all(getattr(layer, "shardable", False) for layer in split.layers_)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_network_trains_the_same_streamed(seed):
    rng = np.random.RandomState(seed)
    # float32 data for a float64 fit: copied, so they stream (data of the fit's dtype
    # are used in place on the CPU); larger than the model
    X = rng.normal(size=(2000, N_FEATURES)).astype(np.float32)
    y = X[:, :2] * X[:, 2:4]
    est = make(random_layers(seed, dropout=True), max_iter=2)
    estimate = estimate_memory(est, X, y)
    limit = int(estimate.total - estimate["data"] // 2)  # half the data does not fit
    in_memory = clone(est).fit(X, y)
    streamed = clone(est).set_params(max_device_memory=limit).fit(X, y)
    assert in_memory.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert_allclose(streamed.loss_curve_, in_memory.loss_curve_, rtol=1e-12)
    assert_array_equal(streamed.predict(X), in_memory.predict(X))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_pickled_random_network_predicts_and_trains_on_the_same(seed, data):
    X, y = data
    est = make(random_layers(seed, dropout=True), warm_start=True).fit(X, y)
    restored = pickle.loads(pickle.dumps(est))
    assert_array_equal(restored.predict(X), est.predict(X))
    est.fit(X, y)
    restored.fit(X, y)
    assert_array_equal(restored.predict(X), est.predict(X))
    assert restored.loss_curve_ == est.loss_curve_

"""Tests for sknet/engine/_network.py: building, running, chunked prediction, moving, pickling."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

import sknet.engine._network
from sknet import NeuralNetRegressor
from sknet.backend import get_backend
from sknet.callbacks import Callback, EarlyStopping
from sknet.engine._network import Network
from sknet.layers import (
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    Layer,
    Sequential,
)
from sknet.layers._tree import walk
from tests.conftest import make_backend
from tests.user_containers import Gate, Wrap


class EveryOther(Layer):
    """Keeps every other feature; returns its shape from build without setting output_shape_."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        return ((input_shape[0] + 1) // 2,)

    def forward(self, X, *, training):
        return X[:, ::2]

    def backward(self, dY):  # pragma: no cover - not trained here
        raise NotImplementedError


class Wide(Layer):
    """An identity layer that claims a large per-sample intermediate."""

    def __init__(self, values=10_000):
        self.values = values

    def forward(self, X, *, training):
        return X

    def backward(self, dY):  # pragma: no cover - not trained here
        return dY

    def values_per_sample(self):
        return self.values


class SeenType(Dense):
    """A Dense that records the type of the input it was given."""

    def forward(self, X, *, training):
        self.seen_ = type(X)
        return super().forward(X, training=training)


class SeenTypeBatchNorm(BatchNorm):
    def forward(self, X, *, training):
        self.seen_ = type(X)
        return super().forward(X, training=training)


def build(layers, input_shape, backend, *, dtype=np.float32, seed=0, **kwargs):
    return Network.build(
        layers,
        input_shape,
        backend=backend,
        dtype=dtype,
        rng=np.random.RandomState(seed),
        **kwargs,
    )


def rows(n, d, seed=0, dtype=np.float32):
    return np.random.RandomState(seed).standard_normal((n, d)).astype(dtype)


def host(backend, x):
    return np.array(backend.to_numpy(x))


# -- build -----------------------------------------------------------------------------
def test_build_builds_the_layers_passed_records_shapes_and_appends_the_head(backend):
    layers = [Dense(6, "relu"), EveryOther(), BatchNorm()]
    seen = []

    def head(shape):
        seen.append(shape)
        return [Dense(2)]

    network = build(layers, [5], backend, head=head)
    # the very objects passed are built (copying them is the caller's business)
    assert all(built is given for built, given in zip(network.layers, layers))
    assert len(network.layers) == 4 and isinstance(network.layers[-1], Dense)
    assert layers[0].params["W"].shape == (5, 6)
    # the network records every returned shape, even one the layer did not set
    assert [layer.output_shape_ for layer in network.layers] == [(6,), (3,), (3,), (2,)]
    assert seen == [(3,)]
    assert network.layers[-1].params["W"].shape == (3, 2)
    assert network.output_shape == (2,)
    assert network.input_shape == (5,)
    network.prepare_training()  # the training plan: backward stops at the first layer
    assert [layer.skip_input_grad for layer in network.layers] == [True, False, False, False]
    assert network.dtype == np.float32
    assert network.backend is backend


def test_build_without_head_uses_the_given_layers_only(backend):
    network = build([Flatten(), Dense(3)], (2, 3), backend)
    assert len(network.layers) == 2
    assert network.output_shape == (3,)
    # the plan: Flatten has nothing to train, so backward starts (and stops) at Dense
    plan = network.prepare_training()
    assert plan.backward_from == 1
    assert network.layers[1].skip_input_grad


# -- forward ---------------------------------------------------------------------------
def test_forward_reshapes_flat_rows_to_the_input_shape(backend):
    network = build([Conv2D(2, 3, activation="relu"), Flatten(), Dense(3)], (1, 4, 4), backend)
    X = rows(5, 16)
    flat = host(backend, network.forward(backend.asarray(X), training=False))
    shaped = host(backend, network.forward(backend.asarray(X.reshape(5, 1, 4, 4)), training=False))
    assert flat.shape == (5, 3)
    assert_allclose(flat, shaped, rtol=1e-6)


def test_forward_densifies_sparse_input_for_a_layer_without_sparse_support():
    backend = get_backend("cpu")
    X = sp.random(20, 6, density=0.4, format="csr", random_state=0, dtype=np.float32)
    network = build([SeenTypeBatchNorm(), Dense(3)], (6,), backend)
    out = network.forward(X, training=False)
    assert network.layers[0].seen_ is np.ndarray
    assert_allclose(out, network.forward(X.toarray(), training=False), rtol=1e-6)
    # a first layer that accepts sparse input gets it as it is
    network = build([SeenType(3)], (6,), backend)
    out = network.forward(X, training=False)
    assert sp.issparse(X) and network.layers[0].seen_ is type(X)
    assert_allclose(out, network.forward(X.toarray(), training=False), rtol=1e-5, atol=1e-6)


def test_input_mask_of_token_ids_and_of_sequences(backend):
    ids = backend.asarray(np.array([[3, 1, 0, 0], [2, 0, 5, 0]], dtype=np.float32))
    network = build([Embedding(6, 2), GlobalAvgPool1D()], (4,), backend, padding_value=0)
    assert_array_equal(
        host(backend, network.input_mask(ids)),
        [[True, True, False, False], [True, False, True, False]],
    )

    X = np.ones((2, 3, 2), dtype=np.float32)
    X[0, 2] = -1  # one padded step
    X[1, 1, 0] = -1  # only one feature equals the padding value: a real step
    X = backend.asarray(X)
    seq = build([GlobalAvgPool1D()], (3, 2), backend, padding_value=-1)
    assert_array_equal(host(backend, seq.input_mask(X)), [[True, True, False], [True, True, True]])
    assert build([GlobalAvgPool1D()], (3, 2), backend).input_mask(X) is None


def test_forward_passes_the_padding_mask_to_layers_that_support_it(backend):
    X = np.arange(12, dtype=np.float32).reshape(2, 3, 2) + 1
    X[0, 1:] = 0  # the first sequence has one real step
    network = build([GlobalAvgPool1D()], (3, 2), backend, padding_value=0)
    out = host(backend, network.forward(backend.asarray(X), training=False))
    assert_allclose(out, [X[0, 0], X[1].mean(axis=0)], rtol=1e-6)
    # without padding_value every step counts
    plain = build([GlobalAvgPool1D()], (3, 2), backend)
    assert_allclose(
        host(backend, plain.forward(backend.asarray(X), training=False)), X.mean(axis=1), rtol=1e-6
    )


# -- predict ---------------------------------------------------------------------------
def test_predict_in_chunks_matches_one_forward(backend, monkeypatch):
    network = build([Dense(8, "tanh"), Dense(3)], (5,), backend)
    X = rows(200, 5)
    whole = host(backend, network.forward(backend.asarray(X), training=False))
    monkeypatch.setattr(sknet.engine._network, "_PREDICT_CHUNK_BYTES", 1)
    assert network.predict_chunk_rows() == 64  # the smallest chunk: 4 chunks here
    calls = []

    def output(Z):
        calls.append(Z.shape[0])
        return Z * 2

    P = network.predict(X, output=output)
    assert calls == [64, 64, 64, 8]
    assert type(P) is np.ndarray
    assert_allclose(P, 2 * whole, rtol=1e-5, atol=1e-6)


def test_predict_gives_numpy_of_the_network_dtype(backend):
    network = build([Dense(4, "relu"), Dense(2)], (3,), backend, dtype=np.float32)
    X = rows(10, 3, dtype=np.float64)
    P = network.predict(X)
    assert type(P) is np.ndarray and P.dtype == np.float32 and P.shape == (10, 2)
    expected = host(backend, network.forward(backend.asarray(X, np.float32), training=False))
    assert_allclose(P, expected, rtol=1e-6)


@pytest.mark.parametrize(
    "layers, input_shape",
    [
        ([Flatten()], (16,)),
        ([Flatten()], (4, 4)),
        ([Dropout(0.5)], (16,)),
    ],
)
def test_identity_network_predicts_a_copy_not_the_input(layers, input_shape, backend):
    network = build(layers, input_shape, backend)
    X = rows(6, 16)
    P = network.predict(X)
    assert_array_equal(P.reshape(6, 16), X)
    assert not np.shares_memory(P, X)
    P[...] = 0
    assert X.any()  # writing the predictions leaves the data alone


def test_predict_chunk_rows_uses_the_largest_values_per_sample(backend):
    network = build([Dense(4), Wide(2000), Dense(2)], (8,), backend)
    assert network.predict_chunk_rows() == (4 << 20) // (2000 * 4)  # 524
    narrow = build([Dense(4), Wide(1), Dense(2)], (8,), backend)
    assert narrow.predict_chunk_rows() == 8192  # capped at _PREDICT_CHUNK
    float64 = build([Dense(4), Wide(2000), Dense(2)], (8,), backend, dtype=np.float64)
    assert float64.predict_chunk_rows() == (4 << 20) // (2000 * 8)  # bytes, not values
    tiny = build([Dense(4), Wide(10**8), Dense(2)], (8,), backend)
    assert tiny.predict_chunk_rows() == 64  # at least 64 rows


# -- arrays ------------------------------------------------------------------------------
def test_weights_include_state_and_save_load_round_trips(backend):
    network = build([Dense(4), BatchNorm(), Dense(2)], (3,), backend)
    weights = network.weights()
    assert len(network.params()) == 6 and len(weights) == 8  # W, b, gamma, beta, W, b + 2 stats
    assert weights[-2] is network.layers[1].state["running_mean"]
    original = [host(backend, w) for w in weights]
    saved = network.save_weights()
    assert not any(backend.xp.shares_memory(s, w) for s, w in zip(saved, weights))
    for w in weights:
        w += 1
    network.load_weights(saved)
    for w, before in zip(network.weights(), original):
        assert_array_equal(host(backend, w), before)
    # loaded in place: the same arrays
    assert all(a is b for a, b in zip(network.weights(), weights))
    # NumPy copies load too (what a pickled BestWeights holds)
    for w in weights:
        w -= 1
    network.load_weights([host(backend, s) for s in saved])
    for w, before in zip(network.weights(), original):
        assert_array_equal(host(backend, w), before)


def test_astype_casts_params_and_state(backend):
    network = build([Dense(4), BatchNorm(), Dense(2)], (3,), backend, dtype=np.float32)
    network.layers[1].state["running_mean"][...] = 0.25
    before = [host(backend, w) for w in network.weights()]
    assert network.astype(np.float32) is network
    assert network.astype("float64") is network
    assert network.dtype == np.float64
    assert all(layer.dtype_ == np.float64 for layer in network.layers)
    after = network.weights()
    assert len(after) == len(before)
    for w, b in zip(after, before):
        assert w.dtype == np.float64
        assert_array_equal(host(backend, w), b.astype(np.float64))
    assert network.layers[1].state["running_var"].dtype == np.float64
    X = rows(5, 3, dtype=np.float64)
    assert network.predict(X).dtype == np.float64


def test_to_backend_same_backend_is_a_no_op(backend):
    network = build([Dense(4), BatchNorm(), Dense(2)], (3,), backend)
    weights = network.weights()
    assert network.to_backend(backend) is network
    assert all(a is b for a, b in zip(network.weights(), weights))
    assert network.backend is backend


def test_to_backend_moves_to_another_backend():
    generic, cpu = make_backend("generic"), get_backend("cpu")
    network = build([Dense(4, "relu"), BatchNorm(), Dense(2)], (3,), generic)
    X = rows(7, 3)
    expected = network.predict(X)
    network.to_backend(cpu)
    assert network.backend is cpu
    assert all(layer.backend_ is cpu for layer in network.layers)
    assert_allclose(network.predict(X), expected, rtol=1e-6)
    # a network whose backend matches but one layer lags behind still moves that layer
    network.layers[1].backend_ = generic
    network.to_backend(cpu)
    assert network.layers[1].backend_ is cpu


def test_release_drops_grads_and_buffers_keeps_params(backend):
    network = build([Dense(4, "relu"), Dropout(0.3), Dense(2)], (3,), backend)
    X = backend.asarray(rows(5, 3))
    Y = network.forward(X, training=True)
    network.backward(backend.xp.ones_like(Y))
    assert network.layers[0].grads and network.layers[0]._buffers
    params = [host(backend, p) for p in network.params()]
    network.release()
    for layer in network.layers:
        assert layer.grads == {} and layer._buffers == {} and layer._cache == {}
    for p, before in zip(network.params(), params):
        assert_array_equal(host(backend, p), before)
    assert network.predict(rows(2, 3)).shape == (2, 2)


def test_reseed_sets_the_dropout_stream(backend):
    network = build([Dropout(0.5)], (200,), backend)
    X = backend.asarray(np.ones((4, 200), dtype=np.float32))

    def masks(offset, n=2):
        network.reseed(offset)
        return [host(backend, network.forward(X, training=True)) for _ in range(n)]

    first = masks(0)
    assert not np.array_equal(first[0], first[1])  # a new mask each batch
    again = masks(0)
    for a, b in zip(first, again):
        assert_array_equal(a, b)
    other = masks(1000)
    assert not np.array_equal(first[0], other[0])
    assert_array_equal(masks(1000)[0], other[0])


def test_pickle_gives_numpy_arrays_and_predicts(backend):
    network = build([Dense(4, "relu"), BatchNorm(), Dense(2)], (3,), backend)
    network.layers[1].state["running_var"][...] = 2.0
    X = rows(9, 3)
    expected = network.predict(X)
    loaded = pickle.loads(pickle.dumps(network))
    assert all(type(w) is np.ndarray for w in loaded.weights())
    assert loaded.backend is get_backend("cpu")
    assert all(layer.backend_ is loaded.backend for layer in loaded.layers)
    assert loaded.input_shape == (3,) and loaded.output_shape == (2,)
    assert loaded.dtype == np.float32
    assert_allclose(loaded.predict(X), expected, rtol=1e-6)
    assert_array_equal(loaded.layers[1].state["running_var"], 2.0)


# -- the weights are the tree's -------------------------------------------------------


@pytest.mark.parametrize(
    "make, n_holders",
    [
        (lambda: [Wrap(Dense(16, activation="tanh"))], 2),
        (lambda: [Wrap(Dense(16, activation="tanh")), Gate(Dense(8, activation="tanh"))], 4),
    ],
    ids=["discovered", "declared"],
)
def test_early_stopping_restores_a_users_container_at_its_best_epoch(make, n_holders):
    """A user's container's inner layers come back from the best epoch, as its head does."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(120, 5))
    y = X @ rng.normal(size=5) + rng.normal(scale=2.0, size=120)
    X_val, y_val = X[:40] + rng.normal(size=(40, 5)), y[:40]

    class Record(Callback):
        def on_epoch_end(self, state, epoch, logs):
            self.seen_ = getattr(self, "seen_", {})
            self.seen_[epoch] = [
                {k: np.array(v) for k, v in leaf.params.items()}
                for _, leaf in state.network.leaves()
            ]

    est = NeuralNetRegressor(
        make(),
        max_iter=40,
        learning_rate_init=0.05,
        random_state=0,
        device="cpu",
        callbacks=[Record(), EarlyStopping("valid_loss", patience=2)],
    ).fit(X, y, X_val=X_val, y_val=y_val)
    record, stopper = est.callbacks_
    assert stopper.best_epoch_ < stopper.stopped_epoch_
    best = record.seen_[stopper.best_epoch_]
    final = [leaf.params for _, leaf in est.network_.leaves()]
    assert len(best) == len(final) == n_holders  # the inner layers, Gate's scalar, the head
    for saved, now in zip(best, final):
        for key in saved:
            assert_array_equal(now[key], saved[key])


class Careless(Wrap):
    """A container whose to_backend and astype forget its block."""

    def to_backend(self, backend):
        self.backend_ = backend
        return self

    def astype(self, dtype):
        self.dtype_ = np.dtype(dtype)
        return self


def test_weights_moving_and_casting_reach_every_layer_of_a_users_container():
    backend = get_backend("cpu")
    layers = [Careless(Dense(3)), Gate(Sequential([Dense(2)]))]
    network = Network.build(
        layers, (4,), backend=backend, dtype=np.float32, rng=np.random.RandomState(0)
    )
    inner = network.layers[0].block_
    gate, gated = network.layers[1], network.layers[1].block_.blocks_[0]
    expected = [inner.params["W"], inner.params["b"], gate.params["s"], *gated.params.values()]
    assert [id(w) for w in network.weights()] == [id(w) for w in expected]
    network.astype(np.float64)
    assert all(w.dtype == np.float64 for w in network.weights())
    assert inner.dtype_ == np.float64
    generic = make_backend("generic")
    network.to_backend(generic)
    assert all(layer.backend_ is generic for _, layer in walk(network.layers))
    loaded = pickle.loads(pickle.dumps(network))
    assert all(layer.backend_ is loaded.backend for _, layer in walk(loaded.layers))

"""Tests for sknet/layers/_recurrent.py and sknet/layers/_sequence.py."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import (
    GRU,
    LSTM,
    Dense,
    Embedding,
    GlobalAvgPool1D,
    Layer,
    SimpleRNN,
    TimeDistributed,
)
from sknet.utils import check_layer_gradients


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def build(layer, shape, backend, dtype=np.float64, seed=0):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def numpy_params(layer):
    return {k: layer.backend_.to_numpy(v) for k, v in layer.params.items()}


# -- plain step-by-step oracles, written from the equations ---------------------------


def rnn_oracle(p, X, d=""):
    h = np.zeros((X.shape[0], p["U" + d].shape[0]))
    out = []
    for t in range(X.shape[1]):
        h = np.tanh(X[:, t] @ p["W" + d] + h @ p["U" + d] + p["b" + d])
        out.append(h)
    return np.stack(out, axis=1)


def lstm_oracle(p, X, d=""):
    H = p["U" + d].shape[0]
    h = c = np.zeros((X.shape[0], H))
    out = []
    for t in range(X.shape[1]):
        z = X[:, t] @ p["W" + d] + h @ p["U" + d] + p["b" + d]
        i, f = sigmoid(z[:, :H]), sigmoid(z[:, H : 2 * H])
        o, g = sigmoid(z[:, 2 * H : 3 * H]), np.tanh(z[:, 3 * H :])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)


def gru_oracle(p, X, d=""):
    H = p["U" + d].shape[0]
    h = np.zeros((X.shape[0], H))
    out = []
    for t in range(X.shape[1]):
        x = X[:, t] @ p["W" + d] + p["b" + d]
        hh = h @ p["U" + d] + p["bh" + d]
        z = sigmoid(x[:, :H] + hh[:, :H])
        r = sigmoid(x[:, H : 2 * H] + hh[:, H : 2 * H])
        n = np.tanh(x[:, 2 * H :] + r * hh[:, 2 * H :])
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out, axis=1)


ORACLES = {SimpleRNN: rnn_oracle, LSTM: lstm_oracle, GRU: gru_oracle}
CELLS = [SimpleRNN, LSTM, GRU]


@pytest.mark.parametrize("Cell", CELLS)
@pytest.mark.parametrize("return_sequences", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_forward_matches_a_step_by_step_oracle(Cell, return_sequences, bidirectional, backend):
    X = np.random.RandomState(0).standard_normal((3, 5, 4))
    layer = build(
        Cell(6, return_sequences=return_sequences, bidirectional=bidirectional), (5, 4), backend
    )
    p = numpy_params(layer)
    oracle = ORACLES[Cell]
    expected = oracle(p, X)
    if bidirectional:
        backward = oracle(p, X[:, ::-1], "r")[:, ::-1]
        expected = np.concatenate([expected, backward], axis=-1)
        if not return_sequences:  # last state of each direction
            expected = np.concatenate([expected[:, -1, :6], expected[:, 0, 6:]], axis=-1)
    elif not return_sequences:
        expected = expected[:, -1]
    for training in (True, False):
        Y = backend.to_numpy(layer.forward(backend.asarray(X), training=training))
        assert_allclose(Y, expected, rtol=1e-10, atol=1e-12)
    assert layer.output_shape_ == expected.shape[1:]


@pytest.mark.parametrize("Cell", CELLS)
@pytest.mark.parametrize("return_sequences", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_gradients_through_time(Cell, return_sequences, bidirectional):
    errors = check_layer_gradients(
        Cell(3, return_sequences=return_sequences, bidirectional=bidirectional), (4, 2)
    )
    names = {"W", "U", "b"} | ({"bh"} if Cell is GRU else set())
    if bidirectional:
        names |= {n + "r" for n in names}
    assert set(errors) == names | {"X"}


def test_simple_rnn_with_another_activation():
    check_layer_gradients(SimpleRNN(3, activation="relu", return_sequences=True), (4, 2))


def test_lstm_initialisation(backend):
    layer = build(LSTM(4), (3, 2), backend)
    p = numpy_params(layer)
    assert_allclose(p["b"], np.r_[np.zeros(4), np.ones(4), np.zeros(8)])
    for k in range(4):  # orthogonal recurrent blocks
        block = p["U"][:, 4 * k : 4 * (k + 1)]
        assert_allclose(block.T @ block, np.eye(4), atol=1e-12)


# -- masks --------------------------------------------------------------------------


class Masked(Layer):
    """Runs the wrapped layer with a fixed mask (for the gradient checker)."""

    def __init__(self, layer, mask):
        self.layer = layer
        self.mask = mask

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        out = self.layer.build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.params, self.grads = self.layer.params, self.layer.grads
        return out

    def forward(self, X, *, training):
        return self.layer.forward(X, training=training, mask=self.backend_.asarray(self.mask))

    def backward(self, dY):
        return self.layer.backward(dY)

    def to_backend(self, backend):
        self.layer.to_backend(backend)
        self.backend_ = backend
        self.params, self.grads = self.layer.params, self.layer.grads
        return self


# three sequences of 5 steps: full, post-padded to length 3, pre-padded to length 2
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 1, 1]], dtype=bool)


@pytest.mark.parametrize("Cell", CELLS)
@pytest.mark.parametrize("return_sequences", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_does_not_leak(Cell, return_sequences, bidirectional, backend):
    rng = np.random.RandomState(1)
    X = rng.standard_normal((3, 5, 2))
    X[~MASK] = 99.0  # padding values that would change everything if they leaked
    layer = build(
        Cell(4, return_sequences=return_sequences, bidirectional=bidirectional), (5, 2), backend
    )
    padded = backend.to_numpy(
        layer.forward(backend.asarray(X), training=False, mask=backend.asarray(MASK))
    )
    for n in range(3):
        steps = np.flatnonzero(MASK[n])
        short = build(  # the same weights, built for the real steps alone
            Cell(4, return_sequences=return_sequences, bidirectional=bidirectional),
            (len(steps), 2),
            backend,
        )
        short.params.update(layer.params)
        alone = backend.to_numpy(
            short.forward(backend.asarray(X[n : n + 1, steps]), training=False)
        )[0]
        if return_sequences:
            assert_allclose(padded[n, steps], alone, rtol=1e-10, atol=1e-12)
        else:
            assert_allclose(padded[n], alone, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("Cell", CELLS)
@pytest.mark.parametrize("return_sequences", [True, False])
def test_gradients_with_a_mask(Cell, return_sequences):
    for bidirectional in (False, True):
        check_layer_gradients(
            Masked(Cell(3, return_sequences=return_sequences, bidirectional=bidirectional), MASK),
            (5, 2),
        )


def test_global_average_over_real_steps_only(backend):
    X = np.arange(30, dtype=float).reshape(3, 5, 2)
    layer = build(GlobalAvgPool1D(), (5, 2), backend)
    Y = backend.to_numpy(
        layer.forward(backend.asarray(X), training=False, mask=backend.asarray(MASK))
    )
    expected = np.stack([X[n, MASK[n]].mean(axis=0) for n in range(3)])
    assert_allclose(Y, expected)
    assert_allclose(
        backend.to_numpy(layer.forward(backend.asarray(X), training=False)), X.mean(axis=1)
    )
    check_layer_gradients(Masked(GlobalAvgPool1D(), MASK), (5, 2))
    check_layer_gradients(GlobalAvgPool1D(), (5, 2))


# -- embedding and per-step layers ----------------------------------------------------


def test_embedding_lookup_and_gradient(backend):
    layer = build(Embedding(7, 3), (4,), backend)
    ids = np.array([[0, 6, 6, 2], [2, 2, 2, 1]], dtype=float)
    E = numpy_params(layer)["E"]
    Y = backend.to_numpy(layer.forward(backend.asarray(ids), training=True))
    assert_allclose(Y, E[ids.astype(int)])
    dY = np.random.RandomState(0).standard_normal((2, 4, 3))
    assert layer.backward(backend.asarray(dY)) is None
    expected = np.zeros_like(E)
    np.add.at(expected, ids.astype(int).ravel(), dY.reshape(-1, 3))  # repeated ids add up
    assert_allclose(backend.to_numpy(layer.grads["E"]), expected)
    assert layer.output_shape_ == (4, 3)


@pytest.mark.parametrize(
    "ids, message",
    [
        ([[0, 7]], r"token ids must be in \[0, 7\) .*got values from 0 to 7"),
        ([[-1, 2]], r"token ids must be in \[0, 7\) .*got values from -1 to 2"),
        ([[0.5, 1]], r"token ids must be whole numbers .*got 0.5 at \(0, 0\)"),
        ([[np.nan, 1]], r"token ids must be whole numbers .*got nan"),
    ],
)
def test_embedding_rejects_bad_ids(ids, message):
    layer = build(Embedding(7, 3), (2,), get_backend("cpu"))
    with pytest.raises(ValueError, match=message):
        layer.forward(np.array(ids, dtype=float), training=False)
    if not np.isnan(ids[0][0]) and float(ids[0][0]).is_integer():  # integers: the same check
        with pytest.raises(ValueError, match=message):
            layer.forward(np.array(ids, dtype=np.int64), training=False)


def test_time_distributed_dense_is_a_dense_per_step(backend):
    X = np.random.RandomState(0).standard_normal((2, 3, 4))
    layer = build(TimeDistributed(Dense(5, activation="tanh")), (3, 4), backend)
    p = numpy_params(layer)
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=False))
    assert_allclose(Y, np.tanh(X @ p["W"] + p["b"]))
    assert layer.output_shape_ == (3, 5) and layer.regularized == ("W",)
    assert layer.params is layer.layer_.params  # the estimator's views reach the inner layer
    errors = check_layer_gradients(TimeDistributed(Dense(2)), (3, 4))
    assert set(errors) == {"X", "W", "b"}
    restored = pickle.loads(pickle.dumps(layer))
    assert restored.params is restored.layer_.params
    restored.to_backend(backend)
    assert restored.params is restored.layer_.params


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (LSTM(0), (3, 2), r"'units' parameter of LSTM must be an int in the range \[1, inf\)"),
        (GRU(3), (6,), r"expects sequences of shape \(timesteps, features\)"),
        (SimpleRNN(3, activation="swish"), (3, 2), "'activation' parameter of SimpleRNN must"),
        (Embedding(0, 3), (4,), r"'input_dim' parameter of Embedding must be an int in"),
        (Embedding(5, 3), (4, 2), r"token ids of shape \(timesteps,\)"),
        (GlobalAvgPool1D(), (4,), "expects sequences"),
        (TimeDistributed("dense"), (3, 2), "must be an sknet Layer"),
    ],
)
def test_bad_configurations(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, shape, get_backend("cpu"))


def test_prediction_chunks_account_for_the_gates_of_every_step():
    """An LSTM's per-sample work is its gates over all steps, not its output."""
    layer = LSTM(16, bidirectional=True)
    layer.build(
        (10, 3), backend=get_backend("cpu"), dtype=np.float32, rng=np.random.RandomState(0)
    )
    assert layer.output_shape_ == (32,)
    assert layer.values_per_sample() == 2 * 10 * (4 * 16 + 16 + 3 + 1)

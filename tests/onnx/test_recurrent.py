"""Converters of the recurrent layers (sknet/onnx/_recurrent.py): ONNX's operators or a Scan."""

import numpy as np
import pytest

from sknet import RNNClassifier, RNNRegressor
from sknet.backend import ACTIVATIONS
from sknet.layers import GRU, LSTM, Dense, Embedding, SimpleRNN, TimeDistributed
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted, op_types

pytestmark = pytest.mark.filterwarnings(*FILTERS)

RECURRENT = {"LSTM": LSTM, "GRU": GRU, "SimpleRNN": SimpleRNN}


def _sequences(n=48, T=6, F=3, padding=None, rng=None):
    rng = rng or np.random.RandomState(0)
    X = rng.standard_normal((n, T, F))
    if padding is not None:
        lengths = rng.randint(1, T + 1, n)
        for row, length in enumerate(lengths):
            if row % 3 == 0:
                X[row, length:] = padding  # after the sequence
            elif row % 3 == 1:
                X[row, : T - length] = padding  # before it
            else:
                X[row, length // 2 : length // 2 + 1] = padding  # a step inside
    return X


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("padding", [None, 0.0])
def test_recurrent_layers(kind, bidirectional, return_sequences, padding):
    X = _sequences(padding=padding)
    layer = RECURRENT[kind](4, bidirectional=bidirectional, return_sequences=return_sequences)
    layers = [layer] + ([TimeDistributed(Dense(2))] if return_sequences else [])
    reg = fitted(layers, X, padding_value=padding)
    model = assert_round_trip(reg, X)
    # the operator without a mask, sknet's step in a Scan with one
    operator = {"LSTM": "LSTM", "GRU": "GRU", "SimpleRNN": "RNN"}[kind]
    assert (operator in op_types(model)) == (padding is None)
    assert ("Scan" in op_types(model)) == (padding is not None)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_every_activation_of_simple_rnn(activation):
    X = _sequences()
    reg = fitted([SimpleRNN(5, activation=activation, bidirectional=True)], X)
    model = assert_round_trip(reg, X)
    assert ("RNN" in op_types(model)) == (activation in ("logistic", "relu", "tanh"))


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@pytest.mark.parametrize("padding", [None, 0.0])
def test_float64_runs_as_a_scan(kind, padding):
    X = _sequences(padding=padding)
    reg = fitted([RECURRENT[kind](3, bidirectional=True)], X, dtype="float64")
    model = assert_round_trip(reg, X)
    assert "Scan" in op_types(model)


def test_stacked_layers_and_token_ids():
    rng = np.random.RandomState(0)
    ids = rng.randint(1, 20, (64, 8))
    ids[::2, 5:] = 0
    ids[1::2, :3] = 0
    layers = [Embedding(20, 4), LSTM(5, return_sequences=True), GRU(3, bidirectional=True)]
    clf = fitted(layers, ids, classifier=True, padding_value=0)
    assert_round_trip(clf, ids)


def test_rnn_estimators(digits):
    X, y = digits
    clf = RNNClassifier(
        cell="gru", units=(8,), bidirectional=True, max_iter=2, random_state=0, device="cpu"
    )
    clf.fit(X[:300].reshape(-1, 8, 8), y[:300])
    assert_round_trip(clf, X[:300].reshape(-1, 8, 8))
    reg = RNNRegressor(cell="lstm", units=(6,), max_iter=2, random_state=0, device="cpu")
    reg.fit(X[:300].reshape(-1, 8, 8), y[:300] / 9)
    assert_round_trip(reg, X[:300].reshape(-1, 8, 8))

"""Converters of the sequence layers (sknet/onnx/_sequence.py): token ids, masks, pooling."""

import numpy as np
import pytest

from sknet.layers import GRU, Dense, Embedding, GlobalAvgPool1D, TimeDistributed
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted

pytestmark = pytest.mark.filterwarnings(*FILTERS)


def _token_ids(n=64, T=7, vocabulary=12, padding=0, rng=None):
    rng = rng or np.random.RandomState(0)
    ids = rng.randint(1, vocabulary, (n, T))
    lengths = rng.randint(1, T + 1, n)
    for row, length in enumerate(lengths):  # padding after or before the tokens
        if row % 2:
            ids[row, length:] = padding
        else:
            ids[row, : T - length] = padding
    return ids


@pytest.mark.parametrize("padding_value", [None, 0])
def test_embedding_and_pooling_of_token_ids(padding_value):
    ids = _token_ids()
    clf = fitted(
        [Embedding(12, 4), TimeDistributed(Dense(5, activation="relu")), GlobalAvgPool1D()],
        ids,
        classifier=True,
        padding_value=padding_value,
    )
    model = assert_round_trip(clf, ids)
    assert model.graph.input[0].type.tensor_type.elem_type == 7  # int64 ids


def test_a_padding_value_no_id_equals():
    ids = _token_ids()
    reg = fitted([Embedding(12, 3), GlobalAvgPool1D()], ids, padding_value=0.5)
    assert_round_trip(reg, ids)


def test_pooling_of_padded_float_sequences():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((48, 6, 3))
    X[::3, 4:] = -1.0  # padded steps: every feature is padding_value
    X[1::3, :2] = -1.0
    X[2, 2, 0] = -1.0  # one feature only: a real step
    reg = fitted([TimeDistributed(Dense(4)), GlobalAvgPool1D()], X, padding_value=-1.0)
    assert_round_trip(reg, X)


def test_sequences_of_sequences_give_each_step_its_mask():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((40, 3, 5, 2))  # (n, steps, substeps, features)
    X[::2, :, 3:] = 0.0
    X[1::4, 1] = 0.0
    layers = [TimeDistributed(GRU(3)), GlobalAvgPool1D()]
    reg = fitted(layers, X, padding_value=0.0)
    assert_round_trip(reg, X)


@pytest.mark.parametrize("padding_value", [0, -1, 2], ids=["0", "-1", "2"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_integer_padding_value_of_float_sequences(padding_value, dtype):
    """The padding constant takes the input's dtype: ONNX Runtime loads the model."""
    rng = np.random.RandomState(0)
    X = rng.standard_normal((48, 6, 3))
    X[::3, 4:] = padding_value
    X[1::3, :2] = padding_value
    reg = fitted(
        [TimeDistributed(Dense(4)), GlobalAvgPool1D()], X, padding_value=padding_value, dtype=dtype
    )
    model = assert_round_trip(reg, X)
    (pad,) = (t for t in model.graph.initializer if t.name == "padding_value")
    assert pad.data_type == model.graph.input[0].type.tensor_type.elem_type


def test_an_id_outside_the_table_gives_a_zero_vector_not_another_row():
    """predict refuses such ids; the graph gives them the zero vector (documented)."""
    from sknet.onnx import to_onnx
    from tests.onnx.helpers import run

    ids = _token_ids(vocabulary=12)
    reg = fitted([Embedding(12, 3), GlobalAvgPool1D(), Dense(2)], ids)
    embedding, *others = reg.network_.layers
    model = to_onnx(reg)
    bad = np.array([[-1, -12, 12, 1000, -(2**40), 2**40, 11]], np.int64)
    with pytest.raises(ValueError, match=r"must be in \[0, 12\)"):
        reg.predict(bad)
    (got,) = run(model, bad)
    vectors = np.zeros((1, 7, 3), np.float32)  # six zero vectors and the row of id 11
    vectors[0, 6] = embedding.params["E"][11]
    expected = vectors
    for layer in others:
        expected = layer.forward(expected, training=False)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    (fine,) = run(model, ids)
    np.testing.assert_allclose(fine, reg.predict(ids), atol=1e-5)

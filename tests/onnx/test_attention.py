"""Converters of LayerNorm, the attention and the transformer block (sknet/onnx/_attention.py)."""

import numpy as np
import pytest

from sknet.layers import (
    Dense,
    Embedding,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    LayerNorm,
    MultiHeadAttention,
    PositionEmbedding,
    SinusoidalPositionEmbedding,
    TimeDistributed,
    TransformerEncoderBlock,
)
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted

pytestmark = pytest.mark.filterwarnings(*FILTERS)


def _token_ids(n=64, T=8, vocabulary=30, rng=None):
    rng = rng or np.random.RandomState(0)
    ids = rng.randint(1, vocabulary, (n, T))
    lengths = rng.randint(1, T + 1, n)
    for row, length in enumerate(lengths):
        if row % 2:
            ids[row, length:] = 0
        else:
            ids[row, : T - length] = 0
    return ids


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padding_value", [None, 0])
def test_a_text_transformer(norm_first, padding_value):
    ids = _token_ids()
    layers = [
        Embedding(30, 8),
        PositionEmbedding(),
        TransformerEncoderBlock(2, 16, dropout=0.1, norm_first=norm_first),
        TransformerEncoderBlock(4, activation="gelu", norm_first=norm_first, causal=True),
        GlobalAvgPool1D(),
    ]
    clf = fitted(layers, ids, classifier=True, padding_value=padding_value)
    assert_round_trip(clf, ids)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_self_attention_of_padded_sequences(causal, dtype):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((48, 6, 4))
    X[::3, 4:] = 0.0
    X[1::3, :5] = 0.0
    X[7] = 0.0  # no real key: zero weights
    layers = [
        SinusoidalPositionEmbedding(),
        MultiHeadAttention(2, key_dim=3, causal=causal, dropout=0.2),
        LayerNorm(),
        GlobalMaxPool1D(),
    ]
    reg = fitted(layers, X, padding_value=0.0, dtype=dtype)
    assert_round_trip(reg, X)


@pytest.mark.parametrize("padding_value", [None, 0])
def test_cross_attention(padding_value):
    ids = _token_ids(T=9)  # the first 4 steps attend to the other 5 (padded keys: no weight)
    layers = [Embedding(30, 6), MultiHeadAttention(2, query_steps=4), TimeDistributed(Dense(2))]
    assert_round_trip(fitted(layers, ids, padding_value=padding_value), ids)
    layers = [Embedding(30, 6), MultiHeadAttention(3, query_steps=4), GlobalAvgPool1D()]
    assert_round_trip(fitted(layers, ids), ids)


def test_layer_norm_of_rows_and_steps():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((64, 5)) * 3 + 2
    assert_round_trip(fitted([Dense(6), LayerNorm(epsilon=1e-3), Dense(3)], X), X)
    S = rng.standard_normal((32, 4, 3))
    assert_round_trip(fitted([LayerNorm(), TimeDistributed(Dense(2))], S), S)


@pytest.mark.parametrize(
    "block",
    [
        lambda: MultiHeadAttention(2),
        lambda: MultiHeadAttention(2, query_steps=3),
        lambda: TransformerEncoderBlock(2, 8, norm_first=True),
        lambda: TransformerEncoderBlock(2, 8),
    ],
    ids=["self", "cross", "pre-norm", "post-norm"],
)
def test_padded_steps_enter_the_attention_as_zeros_in_the_graph_too(block):
    """Outputs at padded steps are those of zeros there, also where a Dense reads them."""
    rng = np.random.RandomState(0)
    X = rng.standard_normal((48, 6, 4))
    X[::3, 4:] = -1.0  # padded steps hold padding_value, which the layers see as zeros
    X[1::3, :2] = -1.0
    reg = fitted([block(), TimeDistributed(Dense(2))], X, padding_value=-1)
    assert_round_trip(reg, X)

"""NeuralNetClassifier with the sequence layers: transformers and 1-D convolutions on token ids."""

import numpy as np
import pytest

from sknet import NeuralNetClassifier
from sknet.layers import (
    Conv1D,
    Embedding,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    LayerNorm,
    MaxPool1D,
    MultiHeadAttention,
    PositionEmbedding,
    Residual,
    Sequential,
    SinusoidalPositionEmbedding,
    TransformerEncoderBlock,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

VOCAB, STEPS = 10, 12


def token_task(n, seed):
    """Sequences of 4 to 12 tokens (1..9), padded with 0 at the end; label: token 1 occurs."""
    rng = np.random.RandomState(seed)
    X = rng.randint(2, VOCAB, (n, STEPS))
    lengths = rng.randint(4, STEPS + 1, n)
    y = rng.rand(n) < 0.5
    for i in range(n):
        if y[i]:
            X[i, rng.randint(lengths[i])] = 1
        X[i, lengths[i] :] = 0
    return X, y.astype(int)


def fit(layers, X, y, **kw):
    params = dict(
        padding_value=0,
        max_iter=25,
        batch_size=32,
        learning_rate_init=3e-3,
        random_state=0,
        device="cpu",
    )
    return NeuralNetClassifier(layers, **{**params, **kw}).fit(X, y)


@pytest.mark.parametrize(
    "layers",
    [
        [
            Embedding(VOCAB, 16),
            PositionEmbedding(),
            TransformerEncoderBlock(2, 32, dropout=0.1),
            TransformerEncoderBlock(2, 32, dropout=0.1, norm_first=True),
            GlobalAvgPool1D(),
        ],
        [
            Embedding(VOCAB, 16),
            SinusoidalPositionEmbedding(),
            MultiHeadAttention(4),
            LayerNorm(),
            GlobalMaxPool1D(),
        ],
        [
            Embedding(VOCAB, 16),
            Conv1D(16, 3, padding="same", activation="relu"),
            GlobalMaxPool1D(),
        ],
    ],
    ids=["transformer", "attention", "conv1d"],
)
def test_sequence_networks_learn_a_token_task_with_padding_masks(layers):
    X, y = token_task(600, 0)
    clf = fit(layers, X[:400], y[:400])
    assert clf.score(X[400:], y[400:]) > 0.9
    assert clf.loss_curve_[-1] < 0.5 * clf.loss_curve_[0]


@pytest.mark.parametrize(
    "middle",
    [
        [TransformerEncoderBlock(2, 16, dropout=0.0)],
        [Residual([MultiHeadAttention(2, causal=True)]), Sequential([LayerNorm()])],
        [Sequential([TransformerEncoderBlock(2, 16, norm_first=True), LayerNorm()])],
    ],
    ids=["block", "in-residual", "in-sequential"],
)
@pytest.mark.parametrize("pool", [GlobalAvgPool1D, GlobalMaxPool1D])
def test_with_a_padding_value_what_the_padding_holds_changes_no_prediction(middle, pool):
    # The padding token's vector is overwritten after the fit: the masked network's
    # attention and pooling (inside containers too) never read padded steps; the same
    # network without masks does.
    X, y = token_task(200, 1)
    layers = [Embedding(VOCAB, 8), *middle, pool()]
    for padding_value, same in ((0, True), (None, False)):
        clf = fit(layers, X, y, max_iter=3, padding_value=padding_value)
        before = clf.predict_proba(X)
        clf.network_.layers[0].params["E"][0] = 5.0
        assert np.allclose(clf.predict_proba(X), before, atol=1e-6) is same


def test_a_pooling_that_changes_the_steps_before_a_masked_layer_is_a_clear_error():
    X, y = token_task(64, 2)
    layers = [Embedding(VOCAB, 8), MaxPool1D(2), GlobalMaxPool1D()]
    with pytest.raises(ValueError, match=r"GlobalMaxPool1D: the padding mask has shape"):
        fit(layers, X, y, max_iter=1)
    fit(layers, X, y, max_iter=1, padding_value=None)  # without padding it trains

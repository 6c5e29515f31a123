"""Sequences of any length (sknet/estimators/_sequence_input.py): ragged lists, other widths.

With ``padding_value``, the same sequence gets the same prediction however it is
padded: as a ragged list, padded to fewer or more steps than in fit, or to the
fitted number; a sequence longer than the fitted width runs at a wider one where
the network's weights allow it, and is refused, naming the layer, where not.
"""

import numpy as np
import pytest

from sknet import FeatureExtractor, NeuralNetClassifier, RNNClassifier, RNNRegressor
from sknet.layers import (
    GRU,
    LSTM,
    Conv1D,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    PositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerEncoderBlock,
)
from sknet.text import pad_sequences

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

VOCAB, FITTED = 20, 32
TOLERANCE = {"float32": 1e-6, "float64": 1e-12}


def token_sequences(n=120, longest=20, seed=0):
    """Token ids 2..19 of 3 to ``longest`` steps; label: token 7 occurs."""
    rng = np.random.RandomState(seed)
    sequences = [rng.randint(2, VOCAB, rng.randint(3, longest + 1)) for _ in range(n)]
    return sequences, np.array([int((s == 7).any()) for s in sequences])


TOKEN_NETWORKS = {
    "gru": lambda: [Embedding(VOCAB, 8), GRU(8, return_sequences=True), GlobalAvgPool1D()],
    "bidirectional lstm": lambda: [Embedding(VOCAB, 8), LSTM(6, bidirectional=True)],
    "transformer": lambda: [
        Embedding(VOCAB, 8),
        SinusoidalPositionEmbedding(),
        TransformerEncoderBlock(num_heads=2, ff_units=16),
        GlobalAvgPool1D(),
    ],
}


def fitted(layers, X, y, dtype="float32", fit_params=None, **kw):
    params = dict(padding_value=0, max_iter=3, random_state=0, device="cpu", dtype=dtype)
    return NeuralNetClassifier(layers, **{**params, **kw}).fit(X, y, **(fit_params or {}))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("network", sorted(TOKEN_NETWORKS))
def test_the_same_sequence_gets_the_same_prediction_however_it_is_padded(network, dtype):
    sequences, y = token_sequences()
    clf = fitted(TOKEN_NETWORKS[network](), pad_sequences(sequences, FITTED), y, dtype)
    assert clf.input_shape_ == (FITTED,)
    reference = clf.predict_proba(pad_sequences(sequences, FITTED))
    for X in (sequences, pad_sequences(sequences, 24), pad_sequences(sequences, 40)):
        np.testing.assert_allclose(clf.predict_proba(X), reference, rtol=0, atol=TOLERANCE[dtype])
    np.testing.assert_array_equal(clf.predict(sequences), clf.predict(pad_sequences(sequences)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recurrent_presets_on_steps_of_features_padded_anywhere(dtype):
    rng = np.random.RandomState(0)
    sequences = [rng.normal(size=(rng.randint(3, 15), 2)) for _ in range(80)]
    y = np.array([s[:, 0].sum() for s in sequences])
    reg = RNNRegressor(units=(6,), padding_value=0.0, max_iter=3, random_state=0, dtype=dtype)
    reg.fit(pad_sequences(sequences, 16, value=0.0), y)
    reference = reg.predict(pad_sequences(sequences, 16))
    for X in (
        sequences,
        pad_sequences(sequences, 15),
        pad_sequences(sequences, 40),
        pad_sequences(sequences, 16, padding="pre"),  # the state is carried over padding
        pad_sequences(sequences, 40).reshape(80, -1),  # flat rows of (steps, features)
    ):
        np.testing.assert_allclose(reg.predict(X), reference, rtol=0, atol=TOLERANCE[dtype])


def test_a_ragged_fit_pads_to_the_longest_sequence_or_to_input_shape():
    sequences, y = token_sequences(longest=17)
    layers = TOKEN_NETWORKS["gru"]
    clf = fitted(layers(), sequences, y)
    assert clf.input_shape_ == (17,) and clf.n_features_in_ == 17
    padded = fitted(layers(), pad_sequences(sequences), y)
    np.testing.assert_array_equal(clf.predict_proba(sequences), padded.predict_proba(sequences))
    assert fitted(layers(), sequences, y, input_shape=(25,)).input_shape_ == (25,)
    reg = RNNRegressor(units=(4,), padding_value=-1.0, max_iter=2, random_state=0)
    steps = [np.ones((n, 3)) for n in (2, 5, 4)]
    assert reg.fit(steps, [1.0, 2.0, 3.0]).input_shape_ == (5, 3)


def test_validation_sets_partial_fit_and_warm_starts_take_other_widths():
    sequences, y = token_sequences()
    X = pad_sequences(sequences, FITTED)
    validation = dict(X_val=sequences[:30], y_val=y[:30])  # ragged
    clf = fitted(TOKEN_NETWORKS["gru"](), X, y, fit_params=validation)
    assert len(clf.history_) == 3 and "valid_score" in clf.history_[0]
    clf.partial_fit(pad_sequences(sequences, 24), y)
    clf.set_params(warm_start=True, max_iter=1).fit(sequences, y)
    assert clf.input_shape_ == (FITTED,)
    longer = [np.full(FITTED + 5, 3)] + sequences[1:]
    with pytest.raises(ValueError, match="longer than the 32 steps .* training data must fit"):
        clf.partial_fit(longer, y)


def test_longer_sequences_run_wider_and_their_prediction_depends_on_them_alone():
    sequences, y = token_sequences()
    for layers in (
        TOKEN_NETWORKS["gru"](),
        [Embedding(VOCAB, 8), Conv1D(8, 3, padding="same", activation="relu"), GlobalMaxPool1D()],
    ):
        clf = fitted(layers, pad_sequences(sequences, FITTED), y)
        rng = np.random.RandomState(1)
        long = [rng.randint(2, VOCAB, 50), rng.randint(2, VOCAB, 70)]
        alone = clf.predict_proba(long)
        together = clf.predict_proba(sequences[:5] + long)
        np.testing.assert_allclose(together[5:], alone, rtol=0, atol=1e-6)
        np.testing.assert_allclose(
            together[:5], clf.predict_proba(sequences[:5]), rtol=0, atol=1e-6
        )
        np.testing.assert_allclose(
            clf.predict_proba(pad_sequences(long, 90)), alone, rtol=0, atol=1e-6
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_network_rebuilt_wider_computes_what_the_fitted_one_does(dtype):
    sequences, y = token_sequences()
    for network in ("gru", "transformer"):
        clf = fitted(TOKEN_NETWORKS[network](), pad_sequences(sequences, FITTED), y, dtype)
        wider = clf._network_at(4 * FITTED)
        output = clf._loss.output
        np.testing.assert_allclose(
            wider.predict(pad_sequences(sequences, 4 * FITTED), output=output),
            clf.network_.predict(pad_sequences(sequences, FITTED), output=output),
            rtol=0,
            atol=TOLERANCE[dtype],
        )
        assert wider.layers[1] is not clf.network_.layers[1]  # the fitted one is untouched


@pytest.mark.parametrize(
    "layers, culprit",
    [
        (
            [Embedding(VOCAB, 4), PositionEmbedding(), GlobalAvgPool1D()],
            r"PositionEmbedding \(layers_\[1\]\)",
        ),
        (
            [Embedding(VOCAB, 4), GRU(4, return_sequences=True), Flatten()],
            r"Dense \(layers_\[3\]\)",
        ),
    ],
)
def test_a_network_of_one_width_takes_shorter_sequences_and_refuses_longer_ones(layers, culprit):
    sequences, y = token_sequences()
    clf = fitted(layers, pad_sequences(sequences, FITTED), y)
    reference = clf.predict_proba(pad_sequences(sequences, FITTED))
    np.testing.assert_allclose(clf.predict_proba(sequences), reference, rtol=0, atol=1e-6)
    np.testing.assert_allclose(
        clf.predict_proba(pad_sequences(sequences, 48)), reference, rtol=0, atol=1e-6
    )
    with pytest.raises(ValueError, match=culprit + ".*Cut the sequences to 32 steps"):
        clf.predict([np.full(FITTED + 1, 3)])


def test_without_padding_value_another_width_says_to_set_it():
    sequences, y = token_sequences()
    X = pad_sequences(sequences, FITTED)
    clf = RNNClassifier(
        layers=TOKEN_NETWORKS["gru"](), max_iter=1, random_state=0, device="cpu"
    ).fit(X, y)
    with pytest.raises(
        ValueError,
        match="X has 24 features, but RNNClassifier is expecting 32 .*Set padding_value",
    ):
        clf.predict(X[:, :24])
    with pytest.raises(ValueError, match="different lengths: set padding_value"):
        clf.predict(sequences)
    steps = RNNClassifier(units=(3,), max_iter=1, random_state=0).fit(
        np.zeros((4, 8, 2)), [0, 1] * 2
    )
    with pytest.raises(
        ValueError, match="X has sequences of 6 steps, but .* 8 steps. Set padding_value"
    ):
        steps.predict(np.zeros((2, 6, 2)))
    with pytest.raises(ValueError, match="different lengths: set padding_value"):
        RNNClassifier(units=(3,), max_iter=1).fit(sequences, y)


def test_feature_extractor_takes_longer_sequences_where_its_features_do_not_depend_on_them():
    sequences, y = token_sequences()
    clf = fitted(TOKEN_NETWORKS["gru"](), pad_sequences(sequences, FITTED), y)
    long = sequences[:3] + [np.full(50, 7)]
    pooled = FeatureExtractor(clf, layer=2).fit(pad_sequences(sequences, FITTED), y)
    assert pooled.transform(long).shape == (4, 8)
    np.testing.assert_allclose(
        pooled.transform(long)[:3], pooled.transform(sequences[:3]), rtol=0, atol=1e-6
    )
    per_step = FeatureExtractor(clf, layer=1).fit(pad_sequences(sequences, FITTED), y)
    assert per_step.transform(sequences[:3]).shape == (3, FITTED * 8)
    with pytest.raises(ValueError, match="depends on the number of steps"):
        per_step.transform(long)

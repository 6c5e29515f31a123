"""Batches grouped by sequence length (``group_by_length=True``, sknet/engine/_lengths.py):
a batch cut to its longest sequence trains what the whole width trains, batches are
grouped and cut, fits are reproducible, and what cannot be cut is refused by name."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from sknet import NeuralNetClassifier, NeuralNetRegressor, RNNClassifier
from sknet import autodiff as ad
from sknet.engine import _lengths
from sknet.engine._lengths import MIN_STEPS, POOL_BATCHES, batch_steps, group_rows
from sknet.engine._trainer import Trainer
from sknet.layers import (
    GRU,
    LSTM,
    Conv1D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    Layer,
    Residual,
    Sequential,
    SinusoidalPositionEmbedding,
    TimeDistributed,
    TransformerEncoderBlock,
)
from sknet.layers._tree import walk
from sknet.text import TextVectorizer

STEPS = 64

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def token_sequences(n=120, longest=20, seed=0):
    """Token ids ``(n, STEPS)``, padded with 0 after 2 to ``longest`` real steps."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(2, longest + 1, n)
    X = np.zeros((n, STEPS), dtype=np.int64)
    for i, length in enumerate(lengths):
        X[i, :length] = rng.randint(2, 40, length)
    y = (X[:, :3].sum(axis=1) > 60).astype(int)
    return X, y, lengths


class StepAffine(Layer):
    """Forward-only (differentiated by sknet.autodiff): tanh(X W + b) at every step."""

    def __init__(self, units=4):
        self.units = units

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n = input_shape[-1]
        self.add_param("W", rng.normal(0, n**-0.5, (n, self.units)))
        self.add_param("b", rng.normal(0, 0.1, self.units))
        return input_shape[:-1] + (self.units,)

    def forward(self, X, *, training):
        return ad.tanh(X @ self.params["W"] + self.params["b"]) * ad.sigmoid(X[..., :1])


STACKS = {
    "conv": lambda: [
        Embedding(40, 6),
        Conv1D(5, 3, padding="same", activation="relu"),
        GlobalMaxPool1D(),
    ],
    "transformer": lambda: [
        Embedding(40, 8),
        SinusoidalPositionEmbedding(),
        TransformerEncoderBlock(num_heads=2, ff_units=12, dropout=0.0),
        GlobalAvgPool1D(),
    ],
    "lstm": lambda: [Embedding(40, 6), LSTM(5)],
    "gru-sequences-in-a-container": lambda: [
        Embedding(40, 6),
        Sequential([GRU(5, return_sequences=True), TimeDistributed(Dense(4))]),
        GlobalAvgPool1D(),
    ],
    "frozen-embedding-and-a-residual": lambda: [
        Embedding(40, 6, trainable=False),
        Residual([TimeDistributed(Dense(6, activation="tanh"))]),
        LSTM(4),
    ],
    "forward-only": lambda: [Embedding(40, 6), StepAffine(5), GRU(4)],
}


def weights(est):
    return [np.asarray(w) for w in est.network_.weights()]


@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("dtype, rtol, atol", [("float64", 1e-10, 1e-13), ("float32", 2e-4, 1e-5)])
def test_a_batch_cut_to_its_longest_sequence_trains_what_the_whole_width_trains(
    stack, dtype, rtol, atol
):
    # One batch an epoch: grouping reorders the rows within it and cuts it to 32 of 64
    # steps (the longest sequence has 20); the padding being masked, the epoch's step is
    # the whole width's, up to the order of the sums.
    X, y, _ = token_sequences()
    params = dict(padding_value=0, batch_size=len(X), max_iter=3, dtype=dtype, random_state=0)
    whole = NeuralNetClassifier(layers=STACKS[stack](), **params).fit(X, y)
    cut = NeuralNetClassifier(layers=STACKS[stack](), group_by_length=True, **params).fit(X, y)
    assert cut.loss_curve_ == pytest.approx(whole.loss_curve_, rel=rtol)
    for a, b in zip(weights(cut), weights(whole)):
        assert_allclose(a, b, rtol=rtol, atol=atol)
    assert_allclose(cut.predict_proba(X), whole.predict_proba(X), rtol=rtol, atol=atol)


def test_weighted_and_early_stopped_grouped_fits():
    X, y, _ = token_sequences(n=200)
    w = np.random.RandomState(1).rand(200)
    params = dict(padding_value=0, batch_size=200, max_iter=2, dtype="float64", random_state=0)
    whole = NeuralNetClassifier(layers=STACKS["lstm"](), **params).fit(X, y, sample_weight=w)
    cut = NeuralNetClassifier(layers=STACKS["lstm"](), group_by_length=True, **params)
    cut.fit(X, y, sample_weight=w)
    assert_allclose(cut.predict_proba(X), whole.predict_proba(X), rtol=1e-10)
    stopped = NeuralNetClassifier(
        layers=STACKS["lstm"](),
        group_by_length=True,
        early_stopping=True,
        n_iter_no_change=2,
        **{**params, "batch_size": 16, "max_iter": 30},
    ).fit(X, y)
    assert len(stopped.validation_scores_) == stopped.n_iter_  # scored at the full width
    assert stopped.best_validation_score_ == max(stopped.validation_scores_)


def test_batches_are_grouped_by_length_and_each_cut_to_hold_its_longest(monkeypatch):
    X, y, lengths = token_sequences(n=400, longest=60)
    seen = []
    cut = _lengths.cut_steps

    def recording(data_X, steps, per_step):
        seen.append(steps)
        return cut(data_X, steps, per_step)

    monkeypatch.setattr("sknet.engine._trainer.cut_steps", recording)
    batches = []
    forward = _lengths.NetworksByWidth.at

    def at(self, steps):
        batches.append(steps)
        return forward(self, steps)

    monkeypatch.setattr(_lengths.NetworksByWidth, "at", at)
    est = NeuralNetClassifier(
        layers=STACKS["lstm"](),
        padding_value=0,
        group_by_length=True,
        batch_size=16,
        max_iter=1,
        random_state=0,
    ).fit(X, y)
    assert est.n_iter_ == 1
    assert seen and set(seen) <= {STEPS, STEPS // 2, STEPS // 4, STEPS // 8}
    assert min(seen) == MIN_STEPS and STEPS // 2 in seen  # the shortest batches cut most

    rows = np.random.RandomState(0).permutation(400)
    grouped = group_rows(rows, lengths, 16)
    assert sorted(grouped) == list(range(400))  # a reordering of the epoch's rows
    pool = POOL_BATCHES * 16
    for start in range(0, 400, pool):  # longest first within each pool, the pool's rows
        part = grouped[start : start + pool]
        assert list(lengths[part]) == sorted(lengths[part], reverse=True)
        assert set(part) == set(rows[start : start + pool])
    sorted_15 = group_rows(rows, lengths, 15)  # 26 whole batches, then 10 rows
    shuffled = group_rows(rows, lengths, 15, np.random.RandomState(1))
    batches = [sorted(sorted_15[a : a + 15]) for a in range(0, 390, 15)]
    drawn = [sorted(shuffled[a : a + 15]) for a in range(0, 390, 15)]
    assert drawn != batches and sorted(drawn) == sorted(batches)  # the batches, reordered
    assert list(shuffled[390:]) == list(sorted_15[390:])  # the last, smaller batch stays last
    for width, start in zip(batch_steps(grouped, lengths, 16, STEPS), range(0, 400, 16)):
        longest = lengths[grouped[start : start + 16]].max()
        assert width >= longest and (width + 1) // 2 < max(longest, MIN_STEPS)
    # an odd width halves too, rounded up: 95, 48, 24, 12
    odd = np.array([3, 11, 20, 40, 90])
    assert batch_steps(np.arange(5), odd, 1, 95) == [12, 12, 24, 48, 95]


def test_a_grouped_fit_with_dropout_is_reproducible_and_draws_fresh_masks():
    X, y, _ = token_sequences(n=200, longest=30)
    layers = [
        Embedding(40, 8),
        TransformerEncoderBlock(num_heads=2, ff_units=12, dropout=0.3),
        GlobalAvgPool1D(),
    ]
    params = dict(padding_value=0, group_by_length=True, batch_size=20, max_iter=3, random_state=0)
    a = NeuralNetClassifier(layers=layers, **params).fit(X, y)
    b = NeuralNetClassifier(layers=layers, **params).fit(X, y)
    for wa, wb in zip(weights(a), weights(b)):
        np.testing.assert_array_equal(wa, wb)
    other = NeuralNetClassifier(layers=layers, **{**params, "random_state": 1}).fit(X, y)
    assert any(not np.array_equal(wa, wo) for wa, wo in zip(weights(a), weights(other)))


def test_the_copies_share_the_networks_arrays_and_random_streams():
    X, y, _ = token_sequences()
    layers = [
        Embedding(40, 8),
        Dropout(0.2),
        TransformerEncoderBlock(num_heads=2, ff_units=12, dropout=0.3),
        GlobalAvgPool1D(),
    ]
    est = NeuralNetClassifier(layers=layers, padding_value=0, max_iter=1, random_state=0)
    network = est.fit(X, y).network_
    by_width = Trainer(network, est._loss, lengths=np.ones(len(X), int))._widths  # laid out
    assert by_width.at(STEPS) is network
    copy = by_width.at(16)
    assert copy is by_width.at(16) and copy.input_shape == (16,)
    for (_, leaf), (_, twin) in zip(network.leaves(), copy.leaves()):
        for name in ("params", "state", "grads"):
            ours, theirs = getattr(leaf, name), getattr(twin, name)
            assert all(theirs[k] is ours[k] for k in ours)
    random = [
        (a, b)
        for (_, a), (_, b) in zip(walk(network.layers), walk(copy.layers))
        if hasattr(a, "_stream")
    ]
    assert len(random) == 2  # the Dropout and the block's attention
    for a, b in random:
        assert b._stream() is a._stream()


def test_group_by_length_needs_padding_and_a_network_that_runs_at_fewer_steps():
    X, y, _ = token_sequences()
    with pytest.raises(ValueError, match="group_by_length=True .* set padding_value"):
        NeuralNetClassifier(layers=STACKS["lstm"](), group_by_length=True).fit(X, y)
    with pytest.raises(ValueError, match="group_by_length"):
        NeuralNetClassifier(layers=STACKS["lstm"](), padding_value=0, group_by_length="yes").fit(
            X, y
        )
    flat = [Embedding(40, 4), Flatten(), Dense(8)]  # weights of the width's shape
    est = NeuralNetClassifier(layers=flat, padding_value=0, group_by_length=True, max_iter=1)
    with pytest.raises(ValueError, match=r"Dense \(layers_\[2\]\) .* Set group_by_length=False"):
        est.fit(X, y)


def test_rnn_presets_on_steps_of_features_in_a_pipeline_pickle_without_the_copies():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((150, 40, 3))
    lengths = rng.randint(3, 15, 150)
    for i, length in enumerate(lengths):
        X[i, length:] = 0.0
    y = (X[:, 0, 0] > 0).astype(int)
    params = dict(units=6, padding_value=0.0, max_iter=2, random_state=0, batch_size=150)
    whole = RNNClassifier(**params, dtype="float64").fit(X, y)
    cut = RNNClassifier(**params, dtype="float64", group_by_length=True).fit(X, y)
    assert_allclose(cut.predict_proba(X), whole.predict_proba(X), rtol=1e-10)
    loaded = pickle.loads(pickle.dumps(cut))
    assert_allclose(loaded.predict_proba(X), cut.predict_proba(X))
    assert len(pickle.dumps(cut)) < 1.2 * len(pickle.dumps(whole))  # no width's copy kept
    reg = NeuralNetRegressor(
        layers=[GRU(4)], padding_value=0.0, group_by_length=True, max_iter=2, random_state=0
    )
    assert np.isfinite(clone(reg).fit(X, X[:, 0, 1]).predict(X)).all()


def test_a_text_pipeline_groups_its_batches():
    rng = np.random.RandomState(0)
    words = np.array(["good", "bad", "fine", "dull", "film", "plot", "actor", "scene"])
    texts = [" ".join(rng.choice(words, rng.randint(2, 40))) for _ in range(200)]
    y = np.array(["pos" if t.count("good") > t.count("bad") else "neg" for t in texts])

    def pipeline(group_by_length):
        return make_pipeline(
            TextVectorizer(output_sequence_length=64),
            NeuralNetClassifier(
                layers=[Embedding(12, 8), LSTM(6)],
                padding_value=0,
                group_by_length=group_by_length,
                batch_size=len(texts),  # one batch: grouped or not, the same step
                max_iter=3,
                dtype="float64",
                random_state=0,
            ),
        )

    cut, whole = pipeline(True).fit(texts, y), pipeline(False).fit(texts, y)
    assert_allclose(cut.predict_proba(texts), whole.predict_proba(texts), rtol=1e-10)
    assert not np.allclose(cut[-1].loss_curve_[0], cut[-1].loss_curve_[-1])  # it trained


def test_grouped_batches_split_over_threads_and_streamed_rows(monkeypatch):
    from sknet.engine import _sharding
    from sknet.utils import estimate_memory

    rng = np.random.RandomState(0)
    X = rng.standard_normal((256, 32, 3)).astype(np.float32)
    for i, length in enumerate(rng.randint(2, 30, 256)):
        X[i, length:] = 0.0
    y = (X[:, 0, 0] > 0).astype(int)
    params = dict(
        layers=[LSTM(5)],
        padding_value=0.0,
        group_by_length=True,
        max_iter=2,
        batch_size=64,
        dtype="float64",
        random_state=0,
        device="cpu",
    )
    alone = NeuralNetClassifier(**params).fit(X, y)
    monkeypatch.setattr(_sharding, "cpu_threads", lambda: 2)
    monkeypatch.setattr(_sharding, "MIN_SHARD_WORK", 0)  # whole-width batches split
    split = NeuralNetClassifier(**params).fit(X, y)
    assert_allclose(split.predict_proba(X), alone.predict_proba(X), rtol=1e-9)
    monkeypatch.setattr(_sharding, "cpu_threads", lambda: 1)
    # float32 rows for a float64 network are copied: under a limit, they stream, in the
    # grouped order, at the fitted width (the same batches: the same model)
    estimate = estimate_memory(NeuralNetClassifier(**params), X, y)
    limit = int(estimate.total - estimate["data"] // 2)
    streamed = NeuralNetClassifier(**params, max_device_memory=limit).fit(X, y)
    assert streamed.data_placement_ == "streamed"
    assert_allclose(streamed.predict_proba(X), alone.predict_proba(X), rtol=1e-9)

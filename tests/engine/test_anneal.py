"""learning_rate='anneal': the plateau of scikit-learn's rule, then two half epochs at lower rates.

And the tabular estimators' ``learning_rate_init='auto'``, the rate it starts from.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits

from sknet import MLPClassifier, MLPRegressor, TabularClassifier, TabularRegressor
from sknet.callbacks import Callback
from sknet.engine._convergence import ANNEAL_EPOCHS, ANNEAL_FACTOR, ANNEAL_FRACTION


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16, y[:600]


class Weights(Callback):
    """The network's weights at the end of each epoch (after the built-in rules)."""

    def on_train_begin(self, state):
        self.epochs = []

    def on_epoch_end(self, state, epoch, logs):
        self.epochs.append([w.copy() for w in state.network.weights()])


def plateau_epoch(scores, tol, n_iter_no_change, higher_is_better=True):
    """The 1-based epoch at which scikit-learn's count first exceeds ``n_iter_no_change``."""
    best, count = -np.inf, 0
    for epoch, score in enumerate(scores, start=1):
        score = score if higher_is_better else -score
        count = count + 1 if score < best + tol else 0
        best = max(best, score)
        if count > n_iter_no_change:
            return epoch
    return None


def rates(est):
    return [row["learning_rate"] for row in est.history_]


def small(cls=MLPClassifier, **params):
    """A small network with the anneal; ``params`` over these."""
    defaults = dict(hidden_layer_sizes=(8,), learning_rate="anneal", random_state=0, device="cpu")
    return cls(**{**defaults, **params})


@pytest.mark.parametrize("solver", ["sgd", "adam", "adamw"])
def test_the_anneal_follows_the_plateau_from_the_best_epochs_weights(digits, solver):
    X, y = digits
    est = MLPClassifier(
        hidden_layer_sizes=(16,),
        solver=solver,
        learning_rate="anneal",
        learning_rate_init=0.05 if solver == "sgd" else 0.01,
        early_stopping=True,
        n_iter_no_change=2,
        tol=1e-3,
        random_state=0,
        device="cpu",
        callbacks=[Weights()],
    ).fit(X, y)
    scores = est.validation_scores_
    plateau = plateau_epoch(scores, est.tol, est.n_iter_no_change)
    assert plateau is not None and plateau < 200
    rate = est.learning_rate_init
    expected = [rate] * plateau + [rate / ANNEAL_FACTOR**k for k in range(1, ANNEAL_EPOCHS + 1)]
    assert rates(est) == pytest.approx(expected, rel=1e-12)
    assert est.n_iter_ == plateau + ANNEAL_EPOCHS
    # At the plateau the weights went back to the best epoch's before the anneal began.
    best = int(np.argmax(scores[:plateau]))
    assert best < plateau - 1  # a plateau: the last epoch was not the best
    recorded = est.callbacks_[0].epochs  # the fit's copy of the callback
    for at_plateau, at_best in zip(recorded[plateau - 1], recorded[best]):
        np.testing.assert_array_equal(at_plateau, at_best)
    # What the model keeps is the best of all epochs, annealed ones included.
    assert est.best_validation_score_ == max(scores)


class RowsSeen(Callback):
    """The rows each epoch trained on (the sizes of its batches), and ``t_`` after it."""

    def on_train_begin(self, state):
        self.epochs, self.t = [], []

    def on_epoch_begin(self, state, epoch):
        self.epochs.append(0)

    def on_batch_end(self, state, batch, size):
        self.epochs[-1] += size

    def on_epoch_end(self, state, epoch, logs):
        self.t.append(state.estimator.t_)


@pytest.mark.parametrize(
    "batch_size, half",
    [
        (64, 320),  # 540 training rows: 9 batches, the anneal's epochs 5 of them
        (60, 300),  # 9 batches of 60
        (270, 270),  # 2 batches: one
        (600, 540),  # 1 batch: an epoch of one batch stays whole
    ],
)
def test_the_anneals_epochs_train_on_half_the_batches(digits, batch_size, half):
    X, y = digits
    est = small(
        early_stopping=True,
        n_iter_no_change=1,
        tol=1e-3,
        batch_size=batch_size,
        callbacks=[RowsSeen()],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # batch_size=600 is clipped to the 540 rows
        est.fit(X, y)
    seen = est.callbacks_[0]
    n_train = X.shape[0] - int(np.ceil(0.1 * X.shape[0]))  # less the validation split
    assert ANNEAL_FRACTION == 0.5 and n_train == 540 and est.n_iter_ > ANNEAL_EPOCHS
    assert seen.epochs == [n_train] * (est.n_iter_ - ANNEAL_EPOCHS) + [half] * ANNEAL_EPOCHS
    assert seen.t == list(np.cumsum(seen.epochs))  # t_ counts the rows trained on


class FirstRows(Callback):
    """Every epoch trains on the first ``n`` rows of its order."""

    def __init__(self, n):
        self.n = n

    def on_train_begin(self, state):
        state.epoch_rows = self.n


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_epoch_of_fewer_rows_trains_the_first_of_its_order(digits, dtype):
    # Unshuffled, epochs of the first 200 rows train what a fit on those rows trains.
    X, y = digits
    params = dict(shuffle=False, max_iter=3, batch_size=50, dtype=dtype, learning_rate="constant")
    with pytest.warns(Warning, match="Maximum iterations"):
        part = small(**params, callbacks=[FirstRows(200)]).fit(X, y)
    with pytest.warns(Warning, match="Maximum iterations"):
        alone = small(**params).fit(X[:200], y[:200])
    for a, b in zip(part.network_.weights(), alone.network_.weights()):
        np.testing.assert_array_equal(a, b)
    assert part.loss_curve_ == alone.loss_curve_  # the mean over the rows trained on
    assert part.t_ == alone.t_ == 600


@pytest.mark.parametrize("bad", [0, -3, 2.5, float("nan"), "half", None, True])
def test_epoch_rows_that_are_not_a_positive_integer_are_refused_by_name(digits, bad):
    X, y = digits
    with pytest.raises(ValueError, match="epoch_rows must be a positive integer of rows"):
        small(max_iter=2, callbacks=[FirstRows(bad)]).fit(X, y)


def test_epoch_rows_beyond_the_training_rows_mean_all_of_them(digits):
    X, y = digits
    params = dict(max_iter=2, random_state=0, batch_size=100)
    with pytest.warns(Warning, match="Maximum iterations"):
        many = small(**params, callbacks=[FirstRows(np.int64(10**6)), RowsSeen()]).fit(X, y)
    with pytest.warns(Warning, match="Maximum iterations"):
        plain = small(**params).fit(X, y)
    assert many.callbacks_[1].epochs == [600, 600]
    for a, b in zip(many.network_.weights(), plain.network_.weights()):
        np.testing.assert_array_equal(a, b)


def test_without_early_stopping_the_anneal_watches_the_training_loss(digits):
    X, y = digits
    est = small(
        MLPRegressor, learning_rate_init=0.01, n_iter_no_change=1, tol=1e-2, callbacks=[Weights()]
    ).fit(X, y.astype(float))
    plateau = plateau_epoch(est.loss_curve_, est.tol, est.n_iter_no_change, False)
    assert plateau is not None
    assert est.n_iter_ == plateau + ANNEAL_EPOCHS
    assert rates(est)[plateau:] == pytest.approx([0.01 / 4, 0.01 / 16])
    recorded = est.callbacks_[0].epochs
    # no best weights to go back to: the anneal continues from the last epoch's
    assert any(
        not np.array_equal(a, b) for a, b in zip(recorded[plateau - 1], recorded[plateau - 2])
    )


def test_the_anneal_says_what_it_does(digits, capsys):
    X, y = digits
    small(early_stopping=True, n_iter_no_change=1, tol=0.5, verbose=True).fit(X, y)
    out = capsys.readouterr().out
    assert (
        "Validation score did not improve more than tol=0.500000 for 1 consecutive epochs. "
        "Annealing the learning rate from the best epoch." in out
    )
    assert out.rstrip().endswith("Annealed for 2 epochs. Stopping.")


def test_a_warm_started_fit_after_an_anneal_starts_at_the_full_rate(digits):
    X, y = digits
    params = dict(solver="sgd", learning_rate_init=0.05, n_iter_no_change=1, tol=0.5)
    est = small(warm_start=True, **params).fit(X, y)
    first = len(est.history_)
    assert rates(est)[-1] == pytest.approx(0.05 / 16)
    est.fit(X, y)
    assert rates(est)[first] == 0.05
    assert est.n_iter_ == 1 + ANNEAL_EPOCHS  # its own plateau (tol=0.5: the first epoch)


def test_partial_fit_trains_at_the_constant_rate(digits):
    X, y = digits
    est = small(n_iter_no_change=1, tol=10.0)
    for _ in range(4):
        est.partial_fit(X, y, classes=np.unique(y))
    assert rates(est) == [0.001] * 4


def test_a_refused_schedule_names_the_options():
    with pytest.raises(ValueError, match="'anneal'"):
        MLPClassifier(learning_rate="cosine", device="cpu").fit([[0.0], [1.0]], [0, 1])


# -- the tabular estimators' rate ------------------------------------------------------------
def table(n, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.choice(["x", "y", "z"], n)})
    y = X["a"] + (X["b"] == "x") + 0.1 * rng.normal(size=n)
    return X, y.to_numpy()


@pytest.mark.parametrize(
    "n_rows, batch_size, expected",
    [
        (1000, "auto", 0.008),  # 900 training rows: 5 batches an epoch
        (1000, 10, 0.008),  # 90 batches
        (1000, 9, 0.004),  # 100 batches
        (1000, 8, 0.004),
    ],
)
def test_auto_starts_higher_when_an_epoch_has_few_batches(n_rows, batch_size, expected):
    X, y = table(n_rows)
    reg = TabularRegressor(batch_size=batch_size, max_iter=2, random_state=0, device="cpu")
    with pytest.warns(Warning, match="Maximum iterations"):
        reg.fit(X, y)
    assert rates(reg)[0] == expected
    assert reg.learning_rate_init == "auto"  # a parameter, left as given


def test_a_given_rate_is_the_rate_and_auto_clones():
    X, y = table(300)
    reg = TabularRegressor(learning_rate_init=0.02, max_iter=1, random_state=0, device="cpu")
    with pytest.warns(Warning, match="Maximum iterations"):
        reg.fit(X, y)
    assert rates(reg) == [0.02]
    assert clone(TabularClassifier()).get_params()["learning_rate_init"] == "auto"
    with pytest.raises(ValueError, match="learning_rate_init"):
        TabularRegressor(learning_rate_init="fast", device="cpu").fit(X, y)


@pytest.mark.parametrize("weight_averaging", [None, 0.5])
def test_a_tabular_anneal_keeps_the_best_epoch(weight_averaging):
    X, y = table(2000)
    reg = TabularRegressor(
        learning_rate="anneal",
        n_iter_no_change=3,
        weight_averaging=weight_averaging,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    plateau = plateau_epoch(reg.validation_scores_, reg.tol, reg.n_iter_no_change)
    assert reg.n_iter_ in (plateau + ANNEAL_EPOCHS, reg.max_iter)
    assert rates(reg)[plateau:] == pytest.approx([0.002, 0.0005])
    assert reg.best_validation_score_ == max(reg.validation_scores_)
    assert reg.score(X, y) > 0.9


def test_an_lr_scheduler_with_the_anneal_is_refused_with_what_to_do():
    from sknet.callbacks import LRScheduler

    X, y = table(200)
    reg = TabularRegressor(learning_rate="anneal", callbacks=[LRScheduler("cosine")], device="cpu")
    with pytest.raises(ValueError, match="give learning_rate='constant' with an LRScheduler"):
        reg.fit(X, y)
    reg.set_params(learning_rate="constant", max_iter=2)
    with pytest.warns(Warning, match="Maximum iterations"):
        reg.fit(X, y)
    assert rates(reg)[1] < rates(reg)[0]  # the cosine's

"""Ctrl-C during a fit: what the estimator keeps (docs/user_guide/training.md, "Stopping a fit").

A ``KeyboardInterrupt`` raised while the epochs run (here by a batch's
``Trainer.loss_and_gradients``, after a given number of batches) ends
training with the warning "Training interrupted by user.": ``n_iter_`` and
``history_`` count the epochs that completed, the weights are those the last
finished batch left (the interrupted epoch's first batches are kept), or the
best epoch's when early stopping restores it, L-BFGS keeps its last complete
iteration, and the model predicts and continues with ``warm_start``. Each
expected model is read from an uninterrupted fit with the same seed, by a
callback that copies the weights after every batch and every epoch.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_digits

from sknet import MLPClassifier
from sknet.callbacks import Callback, EarlyStopping
from sknet.engine._trainer import Trainer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: 240 rows in batches of 40: six batches an epoch
NET = dict(hidden_layer_sizes=(16,), batch_size=40, random_state=0, device="cpu")
BATCHES = 6


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:240] / 16, y[:240]


class Snapshots(Callback):
    """Copies of the weights: at the start, after each batch, after each epoch."""

    def on_train_begin(self, state):
        self.start = _copy(state)
        self.batches, self.epochs = {}, {}

    def on_batch_end(self, state, batch, size):
        self.batches[state.epoch, batch] = _copy(state)

    def on_epoch_end(self, state, epoch, logs):
        self.epochs[epoch] = _copy(state)


def _copy(state):
    return [np.array(w) for w in state.weights()]


def assert_weights(est, expected):
    weights = est.network_.weights()
    assert len(weights) == len(expected)
    for w, e in zip(weights, expected):
        assert_array_equal(w, e)


def differs(est, other):
    return any(not np.array_equal(w, e) for w, e in zip(est.network_.weights(), other))


def interrupt_at(monkeypatch, call):
    """Raise KeyboardInterrupt in the ``call``-th batch (loss evaluation) of the fits."""
    original, calls = Trainer.loss_and_gradients, []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "loss_and_gradients", interrupted)
    return calls


def interrupted_fit(est, X, y, **fit_params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y, **fit_params)
    messages = [(w.category, str(w.message)) for w in caught]
    assert (UserWarning, "Training interrupted by user.") in messages
    return est


def test_mid_epoch_the_weights_of_the_last_finished_batch_are_kept(digits, monkeypatch):
    X, y = digits
    reference = MLPClassifier(**NET, max_iter=5, callbacks=[Snapshots()]).fit(X, y)
    snapshots = reference.callbacks_[0]
    interrupt_at(monkeypatch, 2 * BATCHES + 3 + 1)  # epochs 1, 2 and three batches of 3
    clf = interrupted_fit(MLPClassifier(**NET, max_iter=5), X, y)
    # two epochs completed: they are what n_iter_, history_, loss_ and t_ count
    assert clf.n_iter_ == 2 and [row["epoch"] for row in clf.history_] == [1, 2]
    assert clf.loss_curve_ == [row["train_loss"] for row in reference.history_[:2]]
    assert clf.loss_ == clf.loss_curve_[-1] and clf.t_ == 2 * len(y)
    # the weights: after epoch 3's third batch (index 2), not rolled back to epoch 2
    assert_weights(clf, snapshots.batches[3, 2])
    assert differs(clf, snapshots.epochs[2])
    assert clf.predict(X).shape == y.shape
    assert np.isfinite(clf.predict_proba(X)).all()


def test_in_the_first_epoch_nothing_is_counted(digits, monkeypatch):
    X, y = digits
    snapshots = MLPClassifier(**NET, max_iter=1, callbacks=[Snapshots()]).fit(X, y).callbacks_[0]
    interrupt_at(monkeypatch, 3)
    clf = interrupted_fit(MLPClassifier(**NET), X, y)
    assert clf.n_iter_ == 0 and clf.history_ == [] and clf.loss_curve_ == []
    assert not hasattr(clf, "loss_")
    assert_weights(clf, snapshots.batches[1, 1])  # two batches ran
    assert clf.predict(X).shape == y.shape


def test_with_early_stopping_the_best_epoch_is_kept(digits, monkeypatch):
    X, y = digits
    net = dict(NET, early_stopping=True, n_iter_no_change=50, max_iter=12)
    batches = 6  # 216 training rows: 24 (validation_fraction=0.1) are held out
    reference = MLPClassifier(**net, callbacks=[Snapshots()]).fit(X, y)
    snapshots = reference.callbacks_[0]
    interrupt_at(monkeypatch, 6 * batches + 2 + 1)  # in epoch 7
    clf = interrupted_fit(MLPClassifier(**net), X, y)
    assert clf.n_iter_ == 6 and len(clf.validation_scores_) == 6
    best = int(np.argmax(clf.validation_scores_)) + 1
    assert clf.best_validation_score_ == max(clf.validation_scores_)
    assert_weights(clf, snapshots.epochs[best])
    assert best < 6, "the test needs a best epoch before the last one"
    # before any epoch completed, early stopping keeps the initial weights
    monkeypatch.undo()
    interrupt_at(monkeypatch, 2)
    first = interrupted_fit(MLPClassifier(**net), X, y)
    assert first.n_iter_ == 0 and first.validation_scores_ == []
    assert_weights(first, snapshots.start)


def test_an_early_stopping_callback_restores_its_best_epoch(digits, monkeypatch):
    X, y = digits
    X_val, y_val = X[200:], y[200:]
    X, y = X[:200], y[:200]  # five batches an epoch

    def net(**kwargs):
        stop = EarlyStopping(monitor="valid_loss", patience=50)
        return MLPClassifier(
            **NET, max_iter=30, learning_rate_init=0.05, callbacks=[stop], **kwargs
        )

    reference = net().set_params(callbacks=[EarlyStopping(patience=50), Snapshots()])
    snapshots = reference.fit(X, y, X_val=X_val, y_val=y_val).callbacks_[1]
    interrupt_at(monkeypatch, 20 * 5 + 3)  # in epoch 21
    clf = interrupted_fit(net(), X, y, X_val=X_val, y_val=y_val)
    assert clf.n_iter_ == 20
    losses = [row["valid_loss"] for row in clf.history_]
    best = int(np.argmin(losses)) + 1
    assert clf.callbacks_[0].best_epoch_ == best < 20, "the test needs an earlier best"
    assert_weights(clf, snapshots.epochs[best])


def test_a_warm_start_continues_from_the_kept_weights(digits, monkeypatch):
    X, y = digits
    calls = interrupt_at(monkeypatch, 2 * BATCHES + 3 + 1)
    clf = interrupted_fit(MLPClassifier(**NET, max_iter=5), X, y)
    kept = [np.array(w) for w in clf.network_.weights()]
    monkeypatch.undo()
    assert len(calls) == 2 * BATCHES + 3 + 1
    clf.set_params(warm_start=True, max_iter=2, callbacks=[Snapshots()]).fit(X, y)
    # the next fit starts from the weights the interrupted one kept, and its epochs
    # follow the two that completed
    snapshots = clf.callbacks_[0]
    for w, k in zip(snapshots.start, kept):
        assert_array_equal(w, k)
    assert [row["epoch"] for row in clf.history_] == [1, 2, 3, 4]
    assert clf.n_iter_ == 2 and clf.predict(X).shape == y.shape


def test_lbfgs_keeps_its_last_complete_iteration(digits, monkeypatch):
    X, y = digits
    net = dict(NET, solver="lbfgs", max_iter=15)

    class Evaluations(Snapshots):
        """And how many loss evaluations each iteration's end came after."""

        def on_epoch_end(self, state, epoch, logs):
            super().on_epoch_end(state, epoch, logs)
            self.after = getattr(self, "after", {})
            self.after[epoch] = len(calls)

    calls = interrupt_at(monkeypatch, 10**9)  # counts only
    reference = MLPClassifier(**net, callbacks=[Evaluations()]).fit(X, y)
    snapshots = reference.callbacks_[0]
    monkeypatch.undo()
    interrupt_at(monkeypatch, snapshots.after[3] + 1)  # the first evaluation after it
    clf = interrupted_fit(MLPClassifier(**net), X, y)
    assert clf.n_iter_ == 3 and len(clf.history_) == 3
    assert clf.loss_ == clf.history_[-1]["train_loss"] == reference.history_[2]["train_loss"]
    assert_weights(clf, snapshots.epochs[3])
    assert clf.predict(X).shape == y.shape
    # interrupted before its first iteration: the initial weights, and their loss
    monkeypatch.undo()
    interrupt_at(monkeypatch, 1)
    first = interrupted_fit(MLPClassifier(**net), X, y)
    assert first.n_iter_ == 0 and first.history_ == [] and np.isfinite(first.loss_)
    assert_weights(first, snapshots.start)

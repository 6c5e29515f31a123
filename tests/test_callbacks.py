"""Tests for sknet/callbacks.py, history_, X_val/y_val, PrintLog/ProgressBar and class_weight."""

import os
import re

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import train_test_split

from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor
from sknet.callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    LRScheduler,
    PrintLog,
    ProgressBar,
    TerminateOnNaN,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def split(digits):
    X, y = digits
    return train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)


class Recorder(Callback):
    """Records every hook call."""

    def __init__(self, stop_at=None):
        self.stop_at = stop_at

    def on_train_begin(self, state):
        self.calls_ = ["train_begin"]

    def on_epoch_begin(self, state, epoch):
        self.calls_.append(("epoch_begin", epoch))

    def on_batch_end(self, state, batch, size):
        self.calls_.append(("batch", batch, size))

    def on_epoch_end(self, state, epoch, logs):
        self.calls_.append(("epoch_end", epoch, dict(logs)))
        return self.stop_at is not None and epoch >= self.stop_at

    def on_train_end(self, state):
        self.calls_.append("train_end")


def test_hooks_are_called_in_order_on_copies(split):
    X_train, _, y_train, _ = split
    recorder = Recorder()
    clf = MLPClassifier(max_iter=2, batch_size=500, callbacks=[recorder], device="cpu")
    clf.fit(X_train, y_train)
    assert not hasattr(recorder, "calls_")  # the object passed is never modified
    calls = clf.callbacks_[0].calls_
    assert calls[0] == "train_begin" and calls[-1] == "train_end"
    assert calls[1] == ("epoch_begin", 1)
    assert [c[1:] for c in calls if c[0] == "batch"][:3] == [(0, 500), (1, 500), (2, 347)]
    epoch_ends = [c for c in calls if c[0] == "epoch_end"]
    assert [c[1] for c in epoch_ends] == [1, 2]
    assert epoch_ends[-1][2] == clf.history_[-1]


def test_a_callback_can_stop_training(split):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(max_iter=50, callbacks=[Recorder(stop_at=3)], device="cpu")
    clf.fit(X_train, y_train)
    assert clf.n_iter_ == 3 and len(clf.history_) == 3


def test_callbacks_clone_with_the_estimator():
    clf = MLPClassifier(callbacks=[EarlyStopping(patience=3)])
    twin = clone(clf)
    assert twin.callbacks[0] is not clf.callbacks[0]
    assert twin.callbacks[0].patience == 3


def test_non_callbacks_are_refused(split):
    X_train, _, y_train, _ = split
    with pytest.raises(TypeError, match="callbacks must be sknet.callbacks.Callback"):
        MLPClassifier(callbacks=[print], device="cpu").fit(X_train, y_train)


# -- history ----------------------------------------------------------------------


def test_history_rows(split):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(max_iter=3, random_state=0, device="cpu")
    clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert [row["epoch"] for row in clf.history_] == [1, 2, 3]
    assert set(clf.history_[0]) == {
        "epoch",
        "train_loss",
        "valid_loss",
        "valid_score",
        "learning_rate",
        "duration",
    }
    assert [row["train_loss"] for row in clf.history_] == clf.loss_curve_
    last = clf.history_[-1]
    assert last["valid_score"] == pytest.approx(clf.score(X_val, y_val))
    proba = np.clip(clf.predict_proba(X_val), 1e-12, 1)
    log_loss = -np.log(proba[np.arange(len(y_val)), y_val]).mean()
    assert last["valid_loss"] == pytest.approx(log_loss, rel=1e-4)
    assert last["learning_rate"] == 0.001 and last["duration"] > 0
    assert clf.validation_scores_ is None  # sklearn's attribute needs early_stopping


def test_history_without_validation_and_across_warm_starts(split):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(max_iter=2, warm_start=True, device="cpu").fit(X_train, y_train)
    assert clf.history_[0]["valid_loss"] is None and clf.history_[0]["valid_score"] is None
    clf.fit(X_train, y_train)
    assert [row["epoch"] for row in clf.history_] == [1, 2, 3, 4]
    clf.set_params(warm_start=False).fit(X_train, y_train)
    assert [row["epoch"] for row in clf.history_] == [1, 2]


def test_lbfgs_history_and_callbacks(split):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(
        solver="lbfgs", max_iter=30, callbacks=[Recorder(stop_at=4)], device="cpu"
    ).fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert len(clf.history_) == 4 and clf.history_[-1]["valid_score"] > 0.5
    assert clf.n_iter_ == 4


# -- validation data ------------------------------------------------------------------


def test_early_stopping_uses_the_given_validation_set(split):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(
        max_iter=200, early_stopping=True, n_iter_no_change=3, random_state=0, device="cpu"
    )
    clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert clf.t_ == clf.n_iter_ * len(X_train)  # no rows held out of training
    assert clf.best_validation_score_ == max(clf.validation_scores_)
    assert clf.score(X_val, y_val) == pytest.approx(clf.best_validation_score_)
    assert [row["valid_score"] for row in clf.history_] == clf.validation_scores_


def test_validation_data_with_sample_weight_and_regression(split):
    X_train, X_val, y_train, y_val = split
    reg = MLPRegressor(max_iter=3, random_state=0, device="cpu")
    reg.fit(
        X_train,
        y_train.astype(float),
        X_val=X_val,
        y_val=y_val.astype(float),
        sample_weight_val=np.ones(len(y_val)),
    )
    assert reg.history_[-1]["valid_score"] == pytest.approx(reg.score(X_val, y_val))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"X_val": np.ones((3, 64))}, "X_val and y_val must be given together"),
        ({"y_val": [0, 1, 2]}, "X_val and y_val must be given together"),
        ({"sample_weight_val": np.ones(3)}, "without X_val and y_val"),
        ({"X_val": np.ones((3, 5)), "y_val": [0, 1, 2]}, "X has 5 features"),
        ({"X_val": np.ones((3, 64)), "y_val": [0, 1, 42]}, "classes not in"),
    ],
)
def test_bad_validation_data(bad, message, split):
    X_train, _, y_train, _ = split
    with pytest.raises(ValueError, match=message):
        MLPClassifier(max_iter=2, device="cpu").fit(X_train, y_train, **bad)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("nope", "validation_data must be a tuple"),
        ((np.ones((3, 64)),), "validation_data must be a tuple"),
    ],
)
def test_deprecated_validation_data(bad, message, split):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(max_iter=2, device="cpu")
    with pytest.warns(FutureWarning, match="transform_input"):
        clf.fit(X_train, y_train, validation_data=(X_val, y_val))
    assert clf.history_[-1]["valid_score"] == pytest.approx(clf.score(X_val, y_val))
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match=message):
        clf.fit(X_train, y_train, validation_data=bad)


def test_validation_data_in_partial_fit_and_pipelines(split):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(device="cpu").partial_fit(
        X_train, y_train, classes=np.arange(10), X_val=X_val, y_val=y_val
    )
    assert clf.history_[0]["valid_score"] is not None
    pipe = make_pipeline(MinMaxScaler(), MLPClassifier(max_iter=2, device="cpu"))
    pipe.fit(X_train, y_train, mlpclassifier__X_val=X_val, mlpclassifier__y_val=y_val)
    assert pipe[-1].history_[-1]["valid_loss"] is not None


# -- stock callbacks --------------------------------------------------------------------


def test_early_stopping_callback_restores_the_best_weights(split):
    X_train, X_val, y_train, y_val = split
    stopper = EarlyStopping(monitor="valid_loss", patience=3)
    clf = MLPClassifier(
        max_iter=300, learning_rate_init=0.02, callbacks=[stopper], random_state=0, device="cpu"
    )
    clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    used = clf.callbacks_[0]
    losses = [row["valid_loss"] for row in clf.history_]
    assert used.stopped_epoch_ == len(losses) < 300
    assert used.best_epoch_ == int(np.argmin(losses)) + 1 == len(losses) - 3
    proba = np.clip(clf.predict_proba(X_val), 1e-12, 1)
    restored_loss = -np.log(proba[np.arange(len(y_val)), y_val]).mean()
    assert restored_loss == pytest.approx(min(losses), rel=1e-4)
    assert used._best.epoch is None  # the copy is dropped: nothing outlives fit


def test_early_stopping_on_a_score_and_on_a_missing_key(split):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(
        max_iter=100, callbacks=[EarlyStopping("valid_score", patience=2)], device="cpu"
    ).fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert clf.callbacks_[0].best_value_ == max(r["valid_score"] for r in clf.history_)
    with pytest.raises(ValueError, match="pass X_val and y_val to fit"):
        MLPClassifier(max_iter=2, callbacks=[EarlyStopping()], device="cpu").fit(X_train, y_train)
    with pytest.raises(ValueError, match="not in the history"):
        MLPClassifier(max_iter=2, callbacks=[EarlyStopping("accuracy")], device="cpu").fit(
            X_train, y_train
        )


def test_checkpoint_writes_the_best_model_atomically(split, tmp_path, monkeypatch):
    X_train, X_val, y_train, y_val = split
    path = tmp_path / "best.joblib"
    clf = MLPClassifier(
        max_iter=6, random_state=0, callbacks=[Checkpoint(path)], device="cpu"
    ).fit(X_train, y_train, X_val=X_val, y_val=y_val)
    saved = clf.callbacks_[0].saved_epochs_
    losses = [row["valid_loss"] for row in clf.history_]
    assert saved[-1] == int(np.argmin(losses)) + 1
    best = joblib.load(path)
    assert best.history_[-1]["epoch"] == saved[-1]
    assert_allclose(best.coefs_[0], best.layers_[0].params["W"])
    assert os.listdir(tmp_path) == ["best.joblib"]  # no temporary file left behind
    # a crash while writing leaves the previous file intact
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(joblib, "dump", crash)
    with pytest.raises(OSError, match="disk full"):
        MLPClassifier(max_iter=2, callbacks=[Checkpoint(path, monitor=None)], device="cpu").fit(
            X_train, y_train
        )
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["best.joblib"]


def test_checkpoint_every_epoch(split, tmp_path):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(
        max_iter=3, callbacks=[Checkpoint(tmp_path / "last.pkl", monitor=None)], device="cpu"
    ).fit(X_train, y_train)
    assert clf.callbacks_[0].saved_epochs_ == [1, 2, 3]
    assert_array_equal(joblib.load(tmp_path / "last.pkl").predict(X_train), clf.predict(X_train))


@pytest.mark.parametrize("solver", ["sgd", "adam"])
def test_lr_scheduler_step_and_cosine(solver, split):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(
        solver=solver,
        learning_rate_init=0.1,
        max_iter=6,
        device="cpu",
        callbacks=[LRScheduler("step", step_size=2, gamma=0.5)],
    )
    clf.fit(X_train, y_train)
    # each row holds the rate used during that epoch
    assert [row["learning_rate"] for row in clf.history_] == [0.1, 0.1, 0.05, 0.05, 0.025, 0.025]
    assert clf.learning_rate_init == 0.1  # the parameter is untouched
    clf = MLPClassifier(
        solver=solver,
        learning_rate_init=0.1,
        max_iter=4,
        device="cpu",
        callbacks=[LRScheduler("cosine", T_max=4, min_lr=0.0)],
    )
    clf.fit(X_train, y_train)
    assert_allclose(
        [row["learning_rate"] for row in clf.history_],
        [0.1, 0.1 * (1 + np.cos(np.pi / 4)) / 2, 0.05, 0.1 * (1 + np.cos(3 * np.pi / 4)) / 2],
    )


def test_lr_scheduler_reduces_on_plateau(split):
    X_train, _, y_train, _ = split

    class Flat(Callback):  # makes the monitored value stall
        provides = ("stalled",)

        def on_epoch_end(self, state, epoch, logs):
            logs["stalled"] = 1.0

    clf = MLPClassifier(
        max_iter=5,
        learning_rate_init=0.01,
        device="cpu",
        callbacks=[Flat(), LRScheduler("plateau", monitor="stalled", patience=2, gamma=0.1)],
    )
    clf.fit(X_train, y_train)
    lrs = [row["learning_rate"] for row in clf.history_]
    assert lrs[:3] == [0.01, 0.01, 0.01] and lrs[3] == pytest.approx(0.001)


class BatchRates(Callback):
    """The learning rate each batch was trained with (placed before the scheduler)."""

    def on_train_begin(self, state):
        self.rates_ = []

    def on_batch_end(self, state, batch, size):
        self.rates_.append(state.learning_rate)


@pytest.mark.parametrize("solver", ["sgd", "adam", "adamw"])
def test_lr_scheduler_warms_up_batch_by_batch_then_anneals(solver, split):
    X_train, _, y_train, _ = split
    X, y = X_train[:200], y_train[:200]  # 4 batches of 50 an epoch
    clf = MLPClassifier(
        solver=solver,
        learning_rate_init=0.01,
        batch_size=50,
        max_iter=6,
        device="cpu",
        callbacks=[BatchRates(), LRScheduler("cosine", warmup=2)],  # T_max: 6 - 2
    ).fit(X, y)
    rates = clf.callbacks_[0].rates_
    cosine = [0.01 * (1 + np.cos(np.pi * e / 4)) / 2 for e in range(4)]
    expected = [0.01 * k / 8 for k in range(1, 9)] + [c for c in cosine for _ in range(4)]
    assert_allclose(rates, expected, rtol=1e-12)
    assert_allclose([row["learning_rate"] for row in clf.history_], expected[3::4])
    step = MLPClassifier(
        learning_rate_init=0.01,
        batch_size=50,
        max_iter=4,
        device="cpu",
        callbacks=[LRScheduler("step", step_size=1, gamma=0.5, warmup=1)],
    ).fit(X, y)
    assert_allclose([row["learning_rate"] for row in step.history_], [0.01, 0.01, 0.005, 0.0025])


@pytest.mark.parametrize("warmup", [-1, 1.5, True])
def test_lr_scheduler_refuses_a_bad_warmup(warmup, split):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(max_iter=1, device="cpu", callbacks=[LRScheduler(warmup=warmup)])
    with pytest.raises(ValueError, match=r"'warmup' parameter of LRScheduler must be an int in"):
        clf.fit(X_train[:50], y_train[:50])


def test_terminate_on_nan_keeps_the_last_finite_model(split):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(
        solver="sgd",
        learning_rate_init=1e5,
        momentum=0.99,
        max_iter=30,
        random_state=0,
        device="cpu",
        callbacks=[TerminateOnNaN()],
    )
    with pytest.warns(UserWarning, match="loss became non-finite at epoch"):
        with np.errstate(all="ignore"):
            clf.fit(X_train * 100, y_train)
    assert all(np.isfinite(c).all() for c in clf.coefs_)
    assert np.isfinite(clf.loss_curve_).all() and len(clf.history_) == clf.n_iter_
    assert np.isfinite(clf.predict_proba(X_train)).all()


def test_print_log_table_and_progress_bar_off_a_terminal(split, capsys):
    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(max_iter=2, callbacks=[PrintLog(), ProgressBar()], device="cpu")
    clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert lines[0].split() == [
        "epoch",
        "train_loss",
        "valid_loss",
        "valid_score",
        "lr",
        "seconds",
    ]
    assert re.match(r"\s+1\s+\d+\.\d{5}\s+\d+\.\d{5}\s+0\.\d{5}\s+0\.001\s+\d+\.\d{3}$", lines[1])
    assert len(lines) == 3 and "Iteration" not in out
    # stderr is not a terminal here: one line per epoch with the time left, no bar drawn
    lines = err.splitlines()
    assert len(lines) == len(clf.history_) == 2
    for i, (line, row) in enumerate(zip(lines, clf.history_), 1):
        head = re.escape(f"epoch {i}/2: train_loss {row['train_loss']:.5f}")
        assert re.fullmatch(head + r", at most \d+:\d\d:\d\d left", line), line


def test_progress_bar_draws_tqdm_on_a_terminal(split, monkeypatch):
    pytest.importorskip("tqdm")
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    X_train, _, y_train, _ = split
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    MLPClassifier(max_iter=1, callbacks=[ProgressBar()], device="cpu").fit(X_train, y_train)
    assert "epoch 1" in stream.getvalue() and "rows" in stream.getvalue()  # tqdm's bar


def test_nothing_printed_at_verbose_0(split, capsys):
    X_train, _, y_train, _ = split
    MLPClassifier(max_iter=2, callbacks=[EarlyStopping("train_loss")], device="cpu").fit(
        X_train, y_train
    )
    assert capsys.readouterr() == ("", "")


def test_callbacks_on_the_convnet(split):
    X_train, X_val, y_train, y_val = split
    clf = ConvNetClassifier(
        conv_filters=(4,),
        dense_units=(16,),
        learning_rate_init=0.02,
        max_iter=200,
        device="cpu",
        random_state=0,
        callbacks=[EarlyStopping(patience=2)],
    )
    clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    assert clf.callbacks_[0].stopped_epoch_ == len(clf.history_) < 200


def test_pickled_model_leaves_callback_state_behind(split):
    import pickle

    X_train, X_val, y_train, y_val = split
    clf = MLPClassifier(
        max_iter=3, callbacks=[EarlyStopping(), TerminateOnNaN()], device="cpu"
    ).fit(X_train, y_train, X_val=X_val, y_val=y_val)
    restored = pickle.loads(pickle.dumps(clf))
    assert restored.callbacks_[0].best_epoch_ == clf.callbacks_[0].best_epoch_
    assert not hasattr(restored.callbacks_[1], "_weights")
    assert not hasattr(restored.callbacks_[0], "_best")


# -- class_weight -----------------------------------------------------------------------


def test_class_weight_dict_equals_sample_weight(split):
    X_train, _, y_train, _ = split
    weights = {c: 1.0 + c for c in range(10)}
    kw = dict(max_iter=3, random_state=0, device="cpu")
    a = MLPClassifier(class_weight=weights, **kw).fit(X_train, y_train)
    b = MLPClassifier(**kw).fit(X_train, y_train, sample_weight=1.0 + y_train)
    assert_allclose(a.coefs_[0], b.coefs_[0])


def test_class_weight_multiplies_sample_weight(split):
    X_train, _, y_train, _ = split
    sw = np.random.RandomState(0).rand(len(y_train))
    kw = dict(max_iter=3, random_state=0, device="cpu")
    a = MLPClassifier(class_weight={c: 2.0 for c in range(10)}, **kw).fit(
        X_train, y_train, sample_weight=sw
    )
    b = MLPClassifier(**kw).fit(X_train, y_train, sample_weight=2.0 * sw)
    assert_allclose(a.coefs_[0], b.coefs_[0], rtol=1e-5, atol=1e-7)


def test_balanced_class_weight_helps_a_rare_class(digits):
    X, y = digits
    rare = np.flatnonzero(y == 3)[10:]
    keep = np.setdiff1d(np.arange(len(y)), rare)
    X_imb, y_imb = X[keep], (y[keep] == 3).astype(int)
    kw = dict(max_iter=30, random_state=0, device="cpu")
    plain = MLPClassifier(**kw).fit(X_imb, y_imb)
    balanced = MLPClassifier(class_weight="balanced", **kw).fit(X_imb, y_imb)
    threes = X[y == 3]
    assert balanced.predict(threes).mean() > plain.predict(threes).mean()


def test_balanced_class_weight_is_refused_by_partial_fit(split):
    X_train, _, y_train, _ = split
    with pytest.raises(ValueError, match="'balanced' is not supported by partial_fit"):
        MLPClassifier(class_weight="balanced", device="cpu").partial_fit(
            X_train, y_train, classes=np.arange(10)
        )
    ConvNetClassifier(
        class_weight={0: 2.0}, conv_filters=(2,), dense_units=(4,), max_iter=1, device="cpu"
    ).fit(X_train, y_train)


def test_validation_set_through_metadata_routing(split):
    import sklearn
    from sklearn.model_selection import cross_validate

    X_train, X_val, y_train, y_val = split
    with sklearn.config_context(enable_metadata_routing=True):
        clf = MLPClassifier(max_iter=2, device="cpu").set_fit_request(
            X_val=True, y_val=True, sample_weight=False
        )
        result = cross_validate(
            clf,
            X_train,
            y_train,
            cv=2,
            return_estimator=True,
            params={"X_val": X_val, "y_val": y_val},
        )
    for fitted in result["estimator"]:
        assert fitted.history_[-1]["valid_score"] == pytest.approx(fitted.score(X_val, y_val))


def test_verbose_2_prints_scikit_learn_lines_and_adds_no_callback(split, capsys):
    X_train, _, y_train, _ = split
    clf = MLPClassifier(max_iter=2, verbose=2, device="cpu").fit(X_train, y_train)
    out, err = capsys.readouterr()
    assert [line.split(",")[0] for line in out.strip().splitlines()] == [
        "Iteration 1",
        "Iteration 2",
    ]
    assert err == "" and clf.callbacks_ == []


def test_unfreeze_trains_the_head_first_then_everything(split):
    from sknet.callbacks import Unfreeze
    from sknet.layers import Conv2D, Dense, Flatten

    X_train, _, y_train, _ = split

    class Watch(Callback):  # the first layer's weights at the start of each epoch
        def on_epoch_begin(self, state, epoch):
            self.seen_ = getattr(self, "seen_", []) + [state.network.layers[0].params["W"].copy()]

    layers = [
        Conv2D(4, 3, activation="relu", trainable=False),
        Flatten(),
        Dense(16, activation="relu", trainable=False),
    ]
    clf = ConvNetClassifier(
        layers=layers,
        max_iter=5,
        random_state=0,
        device="cpu",
        callbacks=[Unfreeze(epoch=3, lr_scale=0.5), Watch()],
    )
    clf.fit(X_train, y_train)
    seen = clf.callbacks_[1].seen_ + [clf.layers_[0].params["W"]]
    assert_array_equal(seen[0], seen[1])  # frozen in epochs 1 and 2
    assert_array_equal(seen[1], seen[2])
    assert not np.array_equal(seen[2], seen[3])  # trains from epoch 3 on
    assert clf.callbacks_[0].unfrozen_ == [0, 2]
    assert clf.layers_[0].trainable and clf.layers_[0].lr_scale == 0.5
    assert sum(m.size for m in clf._optimizer.ms) == sum(
        p.size for layer in clf.layers_ for p in layer.params.values()
    )
    assert clf.layers[0].trainable is False  # the parameter is untouched
    clf.set_params(warm_start=True, callbacks=None).fit(X_train, y_train)
    assert not clf.layers_[0].trainable  # the next fit follows the parameter again
    with pytest.raises(ValueError, match="Unfreeze needs solver"):
        ConvNetClassifier(
            layers=layers, solver="lbfgs", max_iter=2, device="cpu", callbacks=[Unfreeze()]
        ).fit(X_train, y_train)

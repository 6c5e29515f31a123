"""The callbacks at their seams: failed and interrupted fits, continued fits, frames,
pickles, parallel fits, DataParallel, bad parameters, solvers without a learning rate."""

import csv
import os
import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.utils.validation import check_is_fitted

from sknet import MLPRegressor, TabularClassifier, TabularRegressor
from sknet.callbacks import (
    Callback,
    Checkpoint,
    CSVLogger,
    EarlyStopping,
    LRScheduler,
    PrintLog,
    ProgressBar,
    TensorBoardLogger,
    TerminateOnNaN,
    Unfreeze,
)
from tests.callbacks.helpers import data, mlp

#: a few epochs, no convergence stop
EPOCHS = dict(tol=0.0, n_iter_no_change=50)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def epochs_of(path):
    return [int(row["epoch"]) for row in rows(path)]


def board_steps(path, tag="train_loss"):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reader = EventAccumulator(os.fspath(path), size_guidance={"scalars": 0})
    reader.Reload()
    return reader.Scalars(tag)


class FailsAt(Callback):
    """Raises at the end of epoch ``epoch``."""

    def __init__(self, epoch=2):
        self.epoch = epoch

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.epoch:
            raise RuntimeError("a callback failed")
        return False


class InterruptAt(Callback):
    """A Ctrl-C after the first batch of epoch ``epoch``."""

    def __init__(self, epoch=3):
        self.epoch = epoch

    def on_epoch_begin(self, state, epoch):
        self._epoch = epoch

    def on_batch_end(self, state, batch, size):
        if self._epoch == self.epoch and batch == 0:
            raise KeyboardInterrupt


class Ends(Callback):
    """Records its begin and end in ``log`` (a list shared by its copies)."""

    def __init__(self, log):
        self.log = log

    def __deepcopy__(self, memo):  # fit's copy keeps the same list
        return Ends(self.log)

    def on_train_begin(self, state):
        self.log.append("begin")

    def on_train_end(self, state):
        self.log.append("end")


# (a) a fit that fails mid-way ------------------------------------------------------------


def test_a_callback_failing_at_epoch_2_leaves_the_files_and_the_previous_model(tmp_path):
    X, y = data()
    previous = mlp([], max_iter=3, **EPOCHS)
    with pytest.warns(Warning, match="Maximum iterations"):
        previous.fit(X, y)
    proba, n_iter = previous.predict_proba(X), previous.n_iter_
    log = []
    previous.set_params(
        max_iter=5,
        callbacks=[
            CSVLogger(tmp_path / "h.csv"),
            TensorBoardLogger(tmp_path / "run"),
            Checkpoint(tmp_path / "m.joblib", monitor=None),
            FailsAt(2),
            Ends(log),
        ],
    )
    with pytest.raises(RuntimeError, match="a callback failed"):
        previous.fit(X, y)
    assert log == ["begin", "end"]
    assert previous.n_iter_ == n_iter
    np.testing.assert_array_equal(previous.predict_proba(X), proba)
    assert epochs_of(tmp_path / "h.csv") == [1, 2]
    assert [s.step for s in board_steps(tmp_path / "run")] == [1, 2]
    saved = joblib.load(tmp_path / "m.joblib")  # the last complete epoch, readable
    assert saved.n_iter_ == 2 and saved.predict(X).shape == y.shape


def test_a_diverging_loss_without_terminate_on_nan_fails_with_the_finished_epochs_logged(
    tmp_path,
):
    rng = np.random.RandomState(0)
    X = rng.rand(60, 3)
    y = X.sum(axis=1) * 1e8
    log = []
    reg = MLPRegressor(
        hidden_layer_sizes=(8,),
        solver="sgd",
        learning_rate_init=10.0,
        momentum=0.0,
        max_iter=8,
        random_state=0,
        device="cpu",
        callbacks=[CSVLogger(tmp_path / "h.csv"), TensorBoardLogger(tmp_path / "run"), Ends(log)],
        **EPOCHS,
    )
    with pytest.raises(ValueError, match="non-finite"), np.errstate(all="ignore"):
        reg.fit(X, y)
    assert log == ["begin", "end"]
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(reg)
    finished = epochs_of(tmp_path / "h.csv")
    assert finished == list(range(1, len(finished) + 1)) and finished
    assert all(np.isfinite(float(row["train_loss"])) for row in rows(tmp_path / "h.csv"))
    assert [s.step for s in board_steps(tmp_path / "run")] == finished
    # with TerminateOnNaN the same fit keeps the finite epochs, and the file says the same
    reg.set_params(callbacks=[TerminateOnNaN(), CSVLogger(tmp_path / "t.csv")])
    with pytest.warns(UserWarning, match="non-finite"), np.errstate(all="ignore"):
        reg.fit(X, y)
    assert epochs_of(tmp_path / "t.csv") == [row["epoch"] for row in reg.history_]


def test_ctrl_c_inside_a_batch_keeps_the_complete_epochs_everywhere(tmp_path):
    X, y = data()
    log = []
    clf = mlp(
        [
            CSVLogger(tmp_path / "h.csv"),
            TensorBoardLogger(tmp_path / "run"),
            Checkpoint(tmp_path / "m.joblib", monitor=None),
            InterruptAt(3),
            Ends(log),
        ],
        batch_size=20,
        max_iter=6,
        warm_start=True,
        **EPOCHS,
    )
    with pytest.warns(UserWarning, match="interrupted by user"):
        clf.fit(X, y)
    assert log == ["begin", "end"]
    assert clf.n_iter_ == 2
    assert epochs_of(tmp_path / "h.csv") == [1, 2]
    assert joblib.load(tmp_path / "m.joblib").n_iter_ == 2
    # warm_start continues after the completed epochs, in the same file and run
    clf.set_params(
        callbacks=[CSVLogger(tmp_path / "h.csv"), TensorBoardLogger(tmp_path / "run")],
        max_iter=2,
    )
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    expected = [row["epoch"] for row in clf.history_]
    assert expected == [1, 2, 3, 4]
    assert epochs_of(tmp_path / "h.csv") == expected
    assert [s.step for s in board_steps(tmp_path / "run")] == expected


# (b) continued fits ----------------------------------------------------------------------


def test_warm_start_and_partial_fit_number_every_epoch_once(tmp_path):
    X, y = data()
    loggers = [CSVLogger(tmp_path / "h.csv"), TensorBoardLogger(tmp_path / "runs" / "{run}")]
    clf = mlp(loggers, max_iter=2, warm_start=True, **EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
        clf.fit(X, y)
    clf.partial_fit(X, y)
    clf.partial_fit(X, y)
    expected = [row["epoch"] for row in clf.history_]
    assert expected == [1, 2, 3, 4, 5, 6]
    assert epochs_of(tmp_path / "h.csv") == expected
    np.testing.assert_allclose(
        [float(row["train_loss"]) for row in rows(tmp_path / "h.csv")],
        [row["train_loss"] for row in clf.history_],
    )
    (run,) = (tmp_path / "runs").iterdir()
    assert [s.step for s in board_steps(run)] == expected


def _fail_a_continuation(clf, X, y, loggers):
    """A continued fit that fails at its second epoch, then one that succeeds."""
    clf.set_params(callbacks=[*loggers(), FailsAt(len(clf.history_) + 2)])
    with pytest.raises(RuntimeError, match="a callback failed"):
        clf.fit(X, y)
    clf.set_params(callbacks=loggers())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    return [row["epoch"] for row in clf.history_]


def test_after_a_failed_continuation_the_csv_holds_each_epoch_once(tmp_path):
    X, y = data()
    path = tmp_path / "h.csv"
    clf = mlp([CSVLogger(path)], max_iter=2, warm_start=True, **EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    expected = _fail_a_continuation(clf, X, y, lambda: [CSVLogger(path)])
    assert expected == [1, 2, 3, 4]
    assert epochs_of(path) == expected  # observed: [1, 2, 3, 4, 3, 4]


def test_after_a_failed_continuation_the_board_holds_each_step_once(tmp_path):
    X, y = data()
    path = tmp_path / "run"
    clf = mlp([TensorBoardLogger(path)], max_iter=2, warm_start=True, **EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    expected = _fail_a_continuation(clf, X, y, lambda: [TensorBoardLogger(path)])
    assert [s.step for s in board_steps(path)] == expected  # observed: [1, 2, 3, 4, 3, 4]


# (c) tabular estimators on a frame, weights averaged -------------------------------------


@pytest.mark.parametrize("Estimator", [TabularClassifier, TabularRegressor])
def test_tabular_estimators_on_a_frame_log_their_history(Estimator, tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = data()
    frame = pd.DataFrame(
        {"a": X[:, 0], "b": X[:, 1], "c": pd.Categorical(np.where(X[:, 2] > 0.5, "u", "v"))}
    )
    target = y if Estimator is TabularClassifier else X[:, 0] + X[:, 1]
    est = Estimator(
        max_iter=3,
        random_state=0,
        device="cpu",
        early_stopping=True,
        callbacks=[CSVLogger(tmp_path / "h.csv"), TensorBoardLogger(tmp_path / "run")],
    )
    assert est.get_params()["weight_averaging"]  # on by default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(frame, target)
    logged = rows(tmp_path / "h.csv")
    assert [int(r["epoch"]) for r in logged] == [r["epoch"] for r in est.history_]
    for key in ("valid_loss", "valid_score"):
        assert [float(r[key]) for r in logged] == [r[key] for r in est.history_]
        np.testing.assert_array_equal(
            np.float32([s.value for s in board_steps(tmp_path / "run", key)]),
            np.float32([r[key] for r in est.history_]),
        )


# (d) clone and pickle --------------------------------------------------------------------


def _all_callbacks(tmp_path):
    return [
        EarlyStopping(monitor="train_loss", patience=2),
        Checkpoint(tmp_path / "m.joblib", monitor=None),
        LRScheduler("cosine"),
        TerminateOnNaN(),
        PrintLog(),
        ProgressBar(),
        CSVLogger(tmp_path / "h.csv"),
        TensorBoardLogger(tmp_path / "run"),
    ]


class PicklesMidFit(Callback):
    """Pickles the estimator at each epoch's end, while the loggers hold open files."""

    def on_epoch_end(self, state, epoch, logs):
        self.pickled_ = pickle.dumps(state.estimator)
        return False


def test_clone_pickle_and_joblib_before_and_after_fit(tmp_path, capsys):
    X, y = data()
    clf = mlp([*_all_callbacks(tmp_path), PicklesMidFit()], max_iter=3, **EPOCHS)
    for copy in (clone(clf), pickle.loads(pickle.dumps(clf))):
        assert [type(c) for c in copy.callbacks] == [type(c) for c in clf.callbacks]
        assert copy.callbacks[6].get_params() == clf.callbacks[6].get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    mid = pickle.loads(clf.callbacks_[-1].pickled_)  # pickled with the files open
    assert mid.predict(X).shape == y.shape
    joblib.dump(clf, tmp_path / "fitted.joblib")
    for loaded in (pickle.loads(pickle.dumps(clf)), joblib.load(tmp_path / "fitted.joblib")):
        assert (loaded.predict(X) == clf.predict(X)).all()
        assert loaded.callbacks_[6].path_ == str(tmp_path / "h.csv")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded.fit(X, y)  # and fits again
    fresh = clone(clf)
    assert not hasattr(fresh, "callbacks_")
    assert [c.get_params() for c in fresh.callbacks] == [c.get_params() for c in clf.callbacks]
    capsys.readouterr()


# (e) fits in processes at once -----------------------------------------------------------


def test_cross_val_score_in_two_processes_each_fit_its_own_csv(tmp_path):
    X, y = data()
    est = mlp([EarlyStopping(monitor="train_loss"), CSVLogger(tmp_path / "logs" / "{run}.csv")])
    scores = cross_val_score(est, X, y, cv=3, n_jobs=2, error_score="raise")
    assert np.isfinite(scores).all()
    files = sorted((tmp_path / "logs").iterdir())
    assert len(files) == 3
    for path in files:
        epochs = epochs_of(path)
        assert epochs == list(range(1, len(epochs) + 1)) and epochs


# (f) DataParallel ------------------------------------------------------------------------


def test_data_parallel_with_a_csv_logger_and_early_stopping(tmp_path):
    pytest.importorskip("distributed")
    from sknet.distributed import DataParallel
    from tests.conftest import local_dask_client

    X, y = data(300)
    est = mlp(
        [
            EarlyStopping(monitor="valid_loss", patience=1),
            CSVLogger(tmp_path / "h.csv"),
        ],
        max_iter=4,
        **EPOCHS,
    )
    with local_dask_client() as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel = DataParallel(est, client=client).fit(
            X[:200], y[:200], X_val=X[200:], y_val=y[200:]
        )
    fitted = parallel.estimator_
    epochs = [row["epoch"] for row in fitted.history_]
    assert epochs_of(tmp_path / "h.csv") == epochs  # one line per epoch, from the driver
    assert [float(r["valid_loss"]) for r in rows(tmp_path / "h.csv")] == [
        r["valid_loss"] for r in fitted.history_
    ]
    stop = fitted.callbacks_[0]
    assert stop.best_epoch_ in epochs
    assert stop.best_value_ == min(r["valid_loss"] for r in fitted.history_)


# (g) bad parameters ----------------------------------------------------------------------


class Epochs(Callback):
    """Counts the epochs that began (in a list shared by its copies)."""

    def __init__(self, seen):
        self.seen = seen

    def __deepcopy__(self, memo):
        return Epochs(self.seen)

    def on_epoch_begin(self, state, epoch):
        self.seen.append(epoch)


@pytest.mark.parametrize(
    "callback, error, match",
    [
        (EarlyStopping(monitor="train_loss", patience=-1), ValueError, "patience.*EarlyStopping"),
        (EarlyStopping(monitor="nope"), ValueError, "EarlyStopping: monitor='nope'"),
        (EarlyStopping(monitor="valid_loss"), ValueError, "needs a validation set"),
        (EarlyStopping(monitor="train_loss", mode="up"), ValueError, "'mode'"),
        (Checkpoint("never.joblib", monitor="nope"), ValueError, "Checkpoint: monitor='nope'"),
        (LRScheduler("plateau", monitor="nope"), ValueError, "monitor='nope'"),
        (LRScheduler("step", step_size=0), ValueError, "step_size"),
        (Unfreeze(epoch=0), ValueError, "epoch"),
        (Unfreeze(epoch=1, layers=[7]), ValueError, r"layers=\[7\]"),
        (TensorBoardLogger("never", histogram_freq=-1), ValueError, "histogram_freq"),
        (CSVLogger("never.csv", separator=";;"), ValueError, "separator"),
        (object(), TypeError, "Callback objects, got object"),
        (EarlyStopping, TypeError, "Callback objects, got type"),
    ],
)
def test_bad_callbacks_are_refused_before_the_first_epoch(
    callback, error, match, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    X, y = data()
    seen = []
    clf = mlp([Epochs(seen), callback])
    with pytest.raises(error, match=match):
        clf.fit(X, y)
    assert seen == []
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(clf)
    assert not os.path.exists("never.joblib") and not os.path.exists("never.csv")


def test_a_checkpoint_into_a_missing_directory_makes_it(tmp_path):
    X, y = data()
    path = tmp_path / "missing" / "m.joblib"
    clf = mlp([Checkpoint(path, monitor=None)], max_iter=2, **EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    assert joblib.load(path).n_iter_ == 2  # the directory made, as the loggers make theirs


def test_a_checkpoint_whose_directory_cannot_be_made_is_refused_up_front(tmp_path):
    X, y = data()
    seen = []
    (tmp_path / "a_file").write_text("")
    path = tmp_path / "a_file" / "m.joblib"  # a file where the directory would be
    clf = mlp([Epochs(seen), Checkpoint(path, monitor=None)], max_iter=2, **EPOCHS)
    with pytest.raises(ValueError, match="Checkpoint: path=.*a_file"):
        clf.fit(X, y)
    assert seen == []


# (h) solvers and layers a callback cannot act on -----------------------------------------


def test_lr_scheduler_with_sgd_and_lbfgs(tmp_path):
    X, y = data()
    clf = mlp(
        [LRScheduler("step", step_size=1, gamma=0.5), CSVLogger(tmp_path / "h.csv")],
        solver="sgd",
        max_iter=3,
        **EPOCHS,
    )
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    rates = [row["learning_rate"] for row in clf.history_]
    assert rates == pytest.approx([1e-3, 5e-4, 2.5e-4])
    assert [float(r["learning_rate"]) for r in rows(tmp_path / "h.csv")] == rates
    seen = []
    lbfgs = mlp([Epochs(seen), LRScheduler("cosine")], solver="lbfgs")
    with pytest.raises(ValueError, match="LRScheduler needs solver="):
        lbfgs.fit(X, y)
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(lbfgs)


def test_unfreeze_without_a_frozen_layer_changes_nothing():
    X, y = data()
    plain = mlp([], max_iter=3, **EPOCHS)
    unfreeze = mlp([Unfreeze(epoch=2)], max_iter=3, **EPOCHS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain.fit(X, y)
        unfreeze.fit(X, y)
    assert unfreeze.callbacks_[0].unfrozen_ == []
    np.testing.assert_array_equal(unfreeze.predict_proba(X), plain.predict_proba(X))
    with pytest.raises(ValueError, match="Unfreeze needs solver="):
        mlp([Unfreeze(epoch=1)], solver="lbfgs").fit(X, y)

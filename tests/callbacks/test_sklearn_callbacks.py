"""scikit-learn's own callbacks (sklearn.callback) on sknet's estimators (``_sklearn_bridge``).

Each fit is the root task of the estimator's task tree and each epoch (each
L-BFGS iteration) a leaf task under it; scikit-learn's ProgressBar shows the
progress over the epochs, ScoringMonitor scores each of them, GridSearchCV
propagates them to its fits, and sknet's own callbacks work beside them. With a
scikit-learn that has no sklearn.callback, fitting is unchanged and
set_callbacks says which version it needs.
"""

import copy
import pickle
import re
import subprocess
import sys
import textwrap
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, cross_validate

import sknet
from sknet import MLPClassifier, MLPRegressor, RNNClassifier, TabularClassifier
from sknet.callbacks import Callback, Checkpoint, EarlyStopping, PrintLog
from sknet.callbacks._sklearn_bridge import SKLEARN_CALLBACKS_VERSION
from sknet.engine._trainer import Trainer

try:
    from sklearn import callback as sklearn_callback
    from sklearn.callback import ScoringMonitor
except ImportError:  # scikit-learn before 1.9: only the test of that case runs
    sklearn_callback = ScoringMonitor = None

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: what runs with any scikit-learn
WITHOUT_SKLEARN_CALLBACK = {"test_without_sklearn_callback_fits_are_unchanged"}


@pytest.fixture(autouse=True)
def _needs_sklearn_callback(request):
    if sklearn_callback is None and request.node.name not in WITHOUT_SKLEARN_CALLBACK:
        pytest.skip(f"needs scikit-learn >= {SKLEARN_CALLBACKS_VERSION} (sklearn.callback)")


FAST = dict(hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:240] / 16, y[:240]


class Recorder:
    """A scikit-learn callback (the FitCallback hooks) that records what it is told."""

    def __init__(self, stop_at=None):
        self.stop_at = stop_at
        self.calls = []

    def setup(self, estimator, context):
        self.calls.append(("setup", context.task_name))

    def teardown(self, estimator, context):
        self.calls.append(("teardown", context.task_name))

    def on_fit_task_begin(self, estimator, context, *, X=None, y=None, metadata=None):
        self.calls.append(("begin", context.task_name, context.task_id))

    def on_fit_task_end(
        self, estimator, context, *, X=None, y=None, metadata=None, fitted_estimator=None
    ):
        self.calls.append(("end", context.task_name, context.task_id))
        self.last = dict(context=context, X=X, y=y, metadata=metadata, fitted=fitted_estimator)
        if fitted_estimator is not None:  # what it predicts now (it shares the network)
            self.last["proba"] = fitted_estimator.predict_proba(X)
        if context.task_name == "epoch":
            self.epochs = getattr(self, "epochs", []) + [self.last]
        return context.task_name == "epoch" and context.task_id + 1 == self.stop_at

    def tasks(self, kind):
        return [c for c in self.calls if c[0] in ("begin", "end") and c[1] == kind]


class PropagatedRecorder(Recorder):
    """The same, propagated by a meta-estimator to the estimators it fits."""

    max_propagation_depth = None


def epoch_calls(n):
    return [c for i in range(n) for c in (("begin", "epoch", i), ("end", "epoch", i))]


def test_every_estimator_takes_set_callbacks():
    for name in sknet.__all__:
        cls = getattr(sknet, name)
        if isinstance(cls, type) and issubclass(cls, sknet.estimators._base.BaseNeuralNetwork):
            recorder = Recorder()
            est = cls()
            assert est.set_callbacks(recorder) is est
            assert est._skl_callbacks == [recorder]
            assert "_skl_callbacks" not in est.set_callbacks().__dict__  # none: removed


def test_each_epoch_is_a_task_of_the_fit(digits):
    X, y = digits
    w = np.linspace(0.5, 1.5, len(y))
    recorder = Recorder()
    clf = MLPClassifier(**FAST).set_callbacks(recorder).fit(X, y, sample_weight=w)
    assert clf.n_iter_ == 3
    assert recorder.calls == [
        ("setup", "fit"),
        ("begin", "fit", 0),
        *epoch_calls(3),
        ("end", "fit", 0),
        ("teardown", "fit"),
    ]
    root = recorder.last["context"]
    assert root.max_subtasks == clf.max_iter and root.parent is None
    assert [child.task_name for child in root._children_map.values()] == ["epoch"] * 3
    for epoch in recorder.epochs:  # the data of the fit, and a model that predicts
        assert epoch["X"] is X and epoch["y"] is y
        assert epoch["metadata"]["sample_weight"] is w
        assert epoch["fitted"] is not clf and epoch["fitted"].network_ is clf.network_
    # the last epoch's model is the fitted one; the root task's is the final model
    assert recorder.last["fitted"].n_iter_ == 3
    assert_array_equal(recorder.last["fitted"].predict(X), clf.predict(X))
    # nothing of the fit's task tree stays on the estimator
    assert "_callback_fit_ctx" not in clf.__dict__


def test_the_fitted_estimator_of_an_epoch_predicts_with_that_epochs_weights(digits):
    X, y = digits
    recorder = Recorder()
    MLPClassifier(**FAST).set_callbacks(recorder).fit(X, y)
    for i, epoch in enumerate(recorder.epochs):
        after = MLPClassifier(**{**FAST, "max_iter": i + 1}).fit(X, y)
        assert epoch["fitted"].n_iter_ == i + 1
        assert_array_equal(epoch["proba"], after.predict_proba(X))


def test_a_scikit_learn_callback_stops_the_fit():
    X, y = load_digits(return_X_y=True)
    recorder = Recorder(stop_at=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # stopped, not max_iter reached
        clf = MLPClassifier(**{**FAST, "max_iter": 10}).set_callbacks(recorder)
        clf.fit(X[:240] / 16, y[:240])
    assert clf.n_iter_ == 2 and len(clf.history_) == 2
    assert recorder.tasks("epoch") == epoch_calls(2)


def test_partial_fit_is_a_task_of_one_epoch(digits):
    X, y = digits
    recorder = Recorder()
    clf = MLPClassifier(**FAST).set_callbacks(recorder)
    clf.partial_fit(X, y, classes=np.arange(10)).partial_fit(X, y)
    assert recorder.calls == 2 * [
        ("setup", "partial_fit"),
        ("begin", "partial_fit", 0),
        *epoch_calls(1),
        ("end", "partial_fit", 0),
        ("teardown", "partial_fit"),
    ]
    assert recorder.last["context"].max_subtasks == 1 and len(clf.history_) == 2


@pytest.mark.parametrize("max_iter", [3, 200])
def test_each_lbfgs_iteration_is_a_task(digits, max_iter):
    X, y = digits
    recorder = Recorder()
    clf = MLPClassifier(**{**FAST, "solver": "lbfgs", "max_iter": max_iter, "tol": 1e-2})
    clf.set_callbacks(recorder).fit(X, y)
    n = clf.n_iter_
    assert len(clf.history_) == n and recorder.epochs[0]["X"] is X
    # as scikit-learn's LogisticRegression: each iteration begins when the previous
    # ends; the one that L-BFGS did not run, once it converged, ends empty
    converged = n < max_iter
    assert recorder.tasks("epoch") == epoch_calls(n + converged)
    assert all(e["fitted"] is not None for e in recorder.epochs[:n])
    if converged:
        assert recorder.epochs[n]["X"] is None and recorder.epochs[n]["fitted"] is None
    assert recorder.calls[-2:] == [("end", "fit", 0), ("teardown", "fit")]
    assert recorder.last["context"].max_subtasks == max_iter


def test_lbfgs_stops_when_a_callback_asks(digits):
    X, y = digits
    recorder = Recorder(stop_at=2)
    clf = MLPClassifier(**{**FAST, "solver": "lbfgs", "max_iter": 50})
    clf.set_callbacks(recorder).fit(X, y)
    assert clf.n_iter_ == 2 and recorder.tasks("epoch") == epoch_calls(2)


def test_scoring_monitor_scores_every_epoch(digits):
    X, y = digits
    w = np.linspace(0.5, 1.5, len(y))
    monitor = ScoringMonitor(scoring="accuracy")
    clf = MLPClassifier(**FAST).set_callbacks(monitor).fit(X, y, sample_weight=w)
    rows = monitor.get_logs().data
    assert [(r["task_name"], r["task_id_path"]) for r in rows] == [
        ("fit", (0,)),
        ("epoch", (0, 0)),
        ("epoch", (0, 1)),
        ("epoch", (0, 2)),
    ]
    # the weighted accuracy of the model: at the end of the fit and of its last epoch
    expected = clf.score(X, y, sample_weight=w)
    assert rows[0]["accuracy"] == rows[-1]["accuracy"] == pytest.approx(expected)
    assert all(r["estimator_name"] == "MLPClassifier" for r in rows)


def test_scoring_monitor_on_a_tabular_classifier_scores_the_frame():
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    n = 200
    X = pd.DataFrame(
        {"x": rng.normal(size=n), "kind": pd.Categorical(rng.choice(["a", "b", "c"], n))}
    )
    y = np.where(X["x"] + (X["kind"] == "a") > 0.3, "yes", "no")
    monitor = ScoringMonitor(scoring=["accuracy", "neg_log_loss"])
    clf = TabularClassifier(
        hidden_layer_sizes=(8,), n_members=2, d_embedding=4, n_bins=4, max_iter=4,
        random_state=0, device="cpu",
    )  # fmt: skip
    clf.set_callbacks(monitor).fit(X, y)
    rows = monitor.get_logs().data
    assert [r["task_name"] for r in rows] == ["fit"] + ["epoch"] * clf.n_iter_
    assert rows[0]["accuracy"] == pytest.approx(clf.score(X, y))  # the best epoch's model
    assert all(np.isfinite(r["neg_log_loss"]) for r in rows)


def test_an_rnn_reports_its_epochs():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(120, 6, 2)).astype(np.float32)
    y = (X[:, :, 0].sum(axis=1) > 0).astype(int)
    recorder, monitor = Recorder(), ScoringMonitor(scoring="accuracy")
    rnn = RNNClassifier(cell="gru", units=(4,), max_iter=2, random_state=0, device="cpu")
    rnn.set_callbacks(recorder, monitor).fit(X, y)
    assert recorder.tasks("epoch") == epoch_calls(2)
    rows = monitor.get_logs().data
    assert rows[0]["accuracy"] == pytest.approx(rnn.score(X, y))


def test_a_regressor_is_scored_too(digits):
    X, y = digits
    monitor = ScoringMonitor(scoring="r2")
    reg = MLPRegressor(**FAST).set_callbacks(monitor).fit(X, y.astype(float))
    assert monitor.get_logs().data[0]["r2"] == pytest.approx(reg.score(X, y))


def test_inside_grid_search_each_fit_is_a_candidates_task(digits):
    X, y = digits
    recorder = PropagatedRecorder()
    search = GridSearchCV(MLPClassifier(**FAST), {"alpha": [1e-4, 1e-2]}, cv=2)
    search.set_callbacks(recorder).fit(X, y)
    # four fits of the search, then the refit: each with its three epochs
    fits = [c for c in recorder.calls if c[:2] == ("begin", "fit")]
    assert len(fits) == 1 + 5  # the search's own root, then the networks'
    assert len(recorder.tasks("epoch")) == 5 * 3 * 2
    assert ("setup", "fit") == recorder.calls[0] and recorder.calls.count(("setup", "fit")) == 1
    # a network's root task hangs under the search's: the tree is one
    epoch = recorder.epochs[-1]["context"]  # the refit's last
    path = sklearn_callback._callback_context.get_context_path(epoch)
    names = [(ctx.estimator_name, ctx.task_name) for ctx in path]
    assert names == [("GridSearchCV", "fit"), ("MLPClassifier", "fit"), ("MLPClassifier", "epoch")]
    assert path[1].source_task_name == "refit-with-best-params"
    # nothing propagated is left on the estimators
    assert "_skl_callbacks" not in search.best_estimator_.__dict__
    assert "_parent_callback_ctx" not in search.best_estimator_.__dict__


def test_callbacks_of_the_estimator_in_grid_search_and_cross_validate(digits):
    X, y = digits
    monitor = ScoringMonitor(scoring="accuracy")
    net = MLPClassifier(**FAST).set_callbacks(monitor)
    GridSearchCV(net, {"alpha": [1e-4, 1e-2]}, cv=2).fit(X, y)
    (run,) = monitor.get_logs(select="all")  # the search's tree: one run
    assert len(run.data) == 5 * (1 + 3)
    assert {r["task_id_path"][:1] for r in run.data} == {(0,)}
    # cross_validate propagates nothing: each fit (of a clone) is a run of its own
    monitor = ScoringMonitor(scoring="accuracy")
    scores = cross_validate(MLPClassifier(**FAST).set_callbacks(monitor), X, y, cv=3)
    runs = monitor.get_logs(select="all")
    assert len(runs) == 3 and all(len(r.data) == 1 + 3 for r in runs)
    assert len(scores["test_score"]) == 3


def test_sknet_callbacks_work_beside_them(digits, capsys):
    X, y = digits
    recorder = Recorder()
    stop = EarlyStopping(monitor="train_loss", patience=1, min_delta=10.0)
    clf = MLPClassifier(**{**FAST, "max_iter": 20}, callbacks=[stop, PrintLog()])
    clf.set_callbacks(recorder).fit(X, y)
    assert clf.n_iter_ == 2 and clf.callbacks_[0].stopped_epoch_ == 2
    assert recorder.tasks("epoch") == epoch_calls(2)
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 2  # PrintLog's table
    # the model the root task gets is the one EarlyStopping restored (epoch 1)
    assert_allclose(recorder.last["proba"], clf.predict_proba(X))


def test_ctrl_c_ends_the_open_epoch_empty_and_the_fit_normally(digits, monkeypatch):
    X, y = digits
    original, calls = Trainer.loss_and_gradients, []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2 * 2 + 1:  # two batches of 200 and 40 rows per epoch
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "loss_and_gradients", interrupted)
    recorder = Recorder()
    clf = MLPClassifier(**{**FAST, "max_iter": 10}).set_callbacks(recorder)
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        clf.fit(X, y)
    assert clf.n_iter_ == 2
    assert recorder.tasks("epoch") == epoch_calls(3)
    assert recorder.epochs[2]["X"] is None and recorder.epochs[2]["fitted"] is None
    assert recorder.calls[-2:] == [("end", "fit", 0), ("teardown", "fit")]


def test_a_failed_fit_tears_the_callbacks_down(digits):
    X, y = digits

    class Boom(Callback):
        def on_epoch_end(self, state, epoch, logs):
            raise RuntimeError("boom")

    recorder = Recorder()
    clf = MLPClassifier(**FAST, callbacks=[Boom()]).set_callbacks(recorder)
    with pytest.raises(RuntimeError, match="boom"):
        clf.fit(X, y)
    # the epoch's task ended before the failing callback ran; the fit's does not end,
    # and the callbacks are torn down
    assert recorder.calls[-2:] == [("end", "epoch", 0), ("teardown", "fit")]
    assert ("end", "fit", 0) not in recorder.calls
    assert "_callback_fit_ctx" not in clf.__dict__


def test_set_callbacks_refuses_sknet_callbacks_and_other_objects():
    with pytest.raises(TypeError, match="PrintLog is one of sknet's callbacks: pass it in"):
        MLPClassifier().set_callbacks(PrintLog())
    with pytest.raises(TypeError, match="FitCallback protocol"):
        MLPClassifier().set_callbacks("ProgressBar")
    with pytest.raises(TypeError, match="set_callbacks"):
        MLPClassifier(callbacks=[ScoringMonitor(scoring="accuracy")], max_iter=1).fit(
            [[0.0], [1.0]], [0, 1]
        )


def test_clone_and_pickle_keep_the_callbacks(digits, tmp_path):
    X, y = digits
    monitor = ScoringMonitor(scoring="accuracy")
    clf = MLPClassifier(**FAST).set_callbacks(monitor)
    assert clone(clf)._skl_callbacks[0] is monitor  # by reference, as scikit-learn does
    assert len(pickle.loads(pickle.dumps(clf))._skl_callbacks) == 1
    clf.fit(X, y)
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict(X), clf.predict(X))
    restored.fit(X, y)  # the restored copy of the monitor logs its own runs
    assert len(restored._skl_callbacks[0].get_logs(select="all")) == 2
    assert len(monitor.get_logs(select="all")) == 1
    # a model saved during the fit (Checkpoint) holds no task tree
    path = tmp_path / "model.joblib"
    MLPClassifier(**FAST, callbacks=[Checkpoint(path, monitor=None)]).set_callbacks(
        Recorder()
    ).fit(X, y)
    saved = joblib.load(path)
    assert "_callback_fit_ctx" not in saved.__dict__ and saved.n_iter_ == 3
    assert "_skl_callbacks_to_teardown" not in saved.__dict__


def test_a_shallow_copy_shares_the_network_and_rebuilds_nothing(digits, monkeypatch):
    X, y = digits
    clf = MLPClassifier(**FAST).fit(X, y)
    monkeypatch.setattr(
        sknet.estimators._persistence, "check_loaded_network", pytest.fail
    )  # what unpickling does: not for a copy
    twin = copy.copy(clf)
    assert twin is not clf and twin.network_ is clf.network_
    assert_array_equal(twin.predict(X), clf.predict(X))


# -- scikit-learn's ProgressBar (needs rich) ---------------------------------------------
def test_progress_bar_shows_the_progress_over_the_epochs(digits, capsys):
    pytest.importorskip("rich")
    from sklearn.callback import ProgressBar
    from sklearn.callback._progressbar import RichProgressMonitor

    X, y = digits
    records, original = [], RichProgressMonitor._on_task_end

    def recording(self, task_info):
        original(self, task_info)
        records.append(self.root_rich_task.progress)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RichProgressMonitor, "_on_task_end", recording)
        MLPClassifier(**{**FAST, "max_iter": 4}).set_callbacks(ProgressBar()).fit(X, y)
    # a quarter more after each epoch, and 100% at the end of the fit
    assert_allclose(records, [0.25, 0.5, 0.75, 1.0, 1.0])
    out = capsys.readouterr().out
    assert "MLPClassifier - fit" in out and "100%" in out


def test_progress_bar_in_grid_search_and_with_early_stopping(digits, capsys):
    pytest.importorskip("rich")
    from sklearn.callback import ProgressBar

    X, y = digits
    net = MLPClassifier(**{**FAST, "max_iter": 30}, early_stopping=True, n_iter_no_change=2)
    search = GridSearchCV(net, {"alpha": [1e-4, 1e-2]}, cv=2)
    search.set_callbacks(ProgressBar()).fit(X, y)
    out = capsys.readouterr().out
    assert re.search(r"GridSearchCV - candidate-split-evaluation \| MLPClassifier - fit", out)
    assert re.search(r"GridSearchCV - refit-with-best-params \| MLPClassifier - fit", out)
    # the fits stopped early: their bars still end at 100%
    assert search.best_estimator_.n_iter_ < 30
    assert "100%" in out and not re.search(r"\b[0-9]{1,2}%", out)


# -- a scikit-learn without sklearn.callback -----------------------------------------------
def test_without_sklearn_callback_fits_are_unchanged():
    # scikit-learn 1.6 to 1.8 has no sklearn.callback: the package made unimportable
    # (its modules that scikit-learn's own code imports loaded first, as they would not
    # exist there), then sknet imported afresh.
    script = textwrap.dedent(
        """
        import pickle, sys, warnings
        import sklearn.model_selection, sklearn.pipeline, sklearn.linear_model
        sys.modules["sklearn.callback"] = None
        import numpy as np
        import sknet
        from sknet import MLPClassifier
        from sknet.callbacks._sklearn_bridge import sklearn_callbacks_available
        assert not sklearn_callbacks_available()
        X = np.random.RandomState(0).rand(60, 4)
        y = (X[:, 0] > 0.5).astype(int)
        warnings.simplefilter("ignore")
        for solver in ("adam", "lbfgs"):
            clf = MLPClassifier(hidden_layer_sizes=(4,), solver=solver, max_iter=3,
                                random_state=0, device="cpu").fit(X, y)
            assert clf.n_iter_ == 3 and len(clf.history_) == 3
            print(repr([row["train_loss"] for row in clf.history_]))
        pickle.loads(pickle.dumps(clf)).predict(X)
        sklearn.model_selection.GridSearchCV(clf, {"alpha": [1e-4, 1e-3]}, cv=2).fit(X, y)
        try:
            clf.set_callbacks(object())
        except ImportError as exc:
            print(exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    # the same fits as with sklearn.callback here
    X = np.random.RandomState(0).rand(60, 4)
    y = (X[:, 0] > 0.5).astype(int)
    for solver, line in zip(("adam", "lbfgs"), result.stdout.splitlines()):
        clf = MLPClassifier(
            hidden_layer_sizes=(4,), solver=solver, max_iter=3, random_state=0, device="cpu"
        ).fit(X, y)
        assert line == repr([row["train_loss"] for row in clf.history_])
    assert f"set_callbacks needs scikit-learn >= {SKLEARN_CALLBACKS_VERSION}" in result.stdout
    assert "sknet's own callbacks (the callbacks parameter) work" in result.stdout

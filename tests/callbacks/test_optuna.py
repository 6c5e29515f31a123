"""sknet/callbacks/_optuna.py: OptunaPruning with a real study and Optuna's pruners."""

import copy
import pickle
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from sknet.callbacks import OptunaPruning
from tests.callbacks.helpers import data, mlp, search

optuna = pytest.importorskip("optuna", reason='needs optuna: pip install "sknet-nn[optuna]"')

MAX_ITER = 8


@pytest.fixture(autouse=True)
def quiet_optuna():
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(verbosity)


def validation_split():
    X, y = data(200)
    return X[:150], y[:150], X[150:], y[150:]


def objective(trial):
    X, y, X_val, y_val = validation_split()
    clf = mlp(
        [OptunaPruning(trial)],  # valid_loss, minimized
        learning_rate_init=trial.suggest_float("learning_rate_init", 1e-5, 1e-1, log=True),
        tol=0.0,
        n_iter_no_change=MAX_ITER + 1,
        max_iter=MAX_ITER,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget of epochs
        clf.fit(X, y, X_val=X_val, y_val=y_val)
    trial.set_user_attr("history", [row["valid_loss"] for row in clf.history_])
    return clf.history_[-1]["valid_loss"]


def test_a_study_with_a_median_pruner_prunes_some_trials_and_completes():
    study = optuna.create_study(
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=2),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.optimize(objective, n_trials=12)
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.FAIL not in states
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert pruned and complete and len(pruned) + len(complete) == 12
    for trial in complete:  # every epoch reported, at its step
        steps = sorted(trial.intermediate_values)
        assert steps == list(range(1, MAX_ITER + 1))
        assert [trial.intermediate_values[s] for s in steps] == trial.user_attrs["history"]
    for trial in pruned:  # stopped at the epoch the pruner said so, after the warm-up
        steps = sorted(trial.intermediate_values)
        assert steps == list(range(1, len(steps) + 1)) and steps[-1] >= 2  # n_warmup_steps
        assert "history" not in trial.user_attrs  # the fit raised: the objective stopped
    assert any(len(t.intermediate_values) < MAX_ITER for t in pruned)
    assert study.best_trial.state == optuna.trial.TrialState.COMPLETE


def always_pruned():
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=0.0))
    return study, study.ask()  # any loss is above 0: pruned at the first report


def test_a_pruned_fit_raises_trial_pruned_and_leaves_the_estimator_as_before():
    X, y, X_val, y_val = validation_split()
    study, trial = always_pruned()
    clf = mlp([OptunaPruning(trial)])
    with pytest.raises(optuna.TrialPruned, match="pruned at epoch 1"):
        clf.fit(X, y, X_val=X_val, y_val=y_val)
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(clf)  # a first fit that did not complete: unfitted
    # a model already fitted keeps its weights through a pruned warm start
    fitted = mlp([], warm_start=True).fit(X, y)
    before = [w.copy() for w in fitted.network_.weights()]
    history = list(fitted.history_)
    fitted.set_params(callbacks=[OptunaPruning(always_pruned()[1], monitor="train_loss")])
    with pytest.raises(optuna.TrialPruned):
        fitted.fit(X, y)
    assert fitted.history_ == history
    for a, b in zip(before, fitted.network_.weights()):
        np.testing.assert_array_equal(a, b)
    assert (fitted.predict(X) == mlp([]).fit(X, y).predict(X)).all()
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    assert study.trials[0].intermediate_values.keys() == {1}


def test_clones_and_copies_report_to_the_same_trial():
    X, y, X_val, y_val = validation_split()
    study = optuna.create_study()
    trial = study.ask()
    clf = mlp([OptunaPruning(trial, monitor="valid_score")])
    assert clone(clf).callbacks[0].trial is trial
    assert copy.deepcopy(clf).callbacks[0].trial is trial
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    assert clf.callbacks_[0].trial is trial  # the fit's working copy too
    reported = study.trials[0].intermediate_values
    assert [reported[s] for s in sorted(reported)] == clf.callbacks_[0].reported_
    assert clf.callbacks_[0].reported_ == [row["valid_score"] for row in clf.history_]


def test_a_pickled_model_leaves_the_trial_behind_and_says_so_when_refitted():
    X, y = data()
    clf = mlp([OptunaPruning(optuna.create_study().ask(), monitor="train_loss")]).fit(X, y)
    loaded = pickle.loads(pickle.dumps(clf))
    assert loaded.callbacks[0].trial is None and loaded.callbacks[0].monitor == "train_loss"
    assert (loaded.predict(X) == clf.predict(X)).all()
    with pytest.raises(ValueError, match="OptunaPruning has no trial"):
        loaded.fit(X, y)


def test_a_search_in_processes_is_refused_clearly():
    trial = optuna.create_study().ask()
    with pytest.raises(ValueError, match="OptunaPruning has no trial.*threads"):
        search(mlp([OptunaPruning(trial, monitor="train_loss")]), n_jobs=2)


def test_the_monitor_is_checked_before_the_first_epoch():
    X, y = data()
    trial = optuna.create_study().ask()
    with pytest.raises(ValueError, match="monitor='valid_loss' needs a validation set"):
        mlp([OptunaPruning(trial)]).fit(X, y)
    with pytest.raises(ValueError, match="'trial' parameter of OptunaPruning"):
        mlp([OptunaPruning("a trial")]).fit(X, y)
    assert trial.study.trials[0].intermediate_values == {}


def test_without_optuna_the_error_names_the_extra(monkeypatch):
    trial = optuna.create_study().ask()
    monkeypatch.setitem(sys.modules, "optuna", None)
    X, y = data()
    with pytest.raises(ImportError, match=r'pip install "sknet-nn\[optuna\]"'):
        mlp([OptunaPruning(trial, monitor="train_loss")]).fit(X, y)

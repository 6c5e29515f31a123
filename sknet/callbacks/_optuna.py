"""OptunaPruning: report a history value to an Optuna trial each epoch, stop a pruned fit."""

import copy

from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods

from sknet.callbacks._runs import import_extra
from sknet.engine._callbacks import Callback


class OptunaPruning(Callback):
    """Report a value of ``history_`` to an Optuna trial each epoch; stop what it prunes.

    After each epoch the monitored value is reported to ``trial`` at step
    ``epoch``; when the study's pruner (``MedianPruner``, ...) says the trial
    should stop, the fit raises Optuna's own ``optuna.TrialPruned``,
    which an objective lets through for Optuna to mark the trial pruned. A
    pruned fit is a fit that did not complete: the estimator is left as it was
    before ``fit`` (unfitted after a first fit), as after any failed fit.
    Needs ``pip install "sknet-nn[optuna]"``.

    The trial is shared, never copied: the estimator's clones and the fit's
    working copy (``callbacks_``) report to the same trial. It is not saved
    with the model either (pickling leaves ``trial=None``: a trial belongs to
    a study running in this process), so a search whose fits run in other
    processes (``GridSearchCV(n_jobs=2)``) cannot report to it; those fits
    are refused with a ValueError saying so. One fit per trial: the steps are
    the epochs, and a second fit reporting the same steps would have Optuna
    ignore them.

    Parameters
    ----------
    trial : optuna.trial.Trial
        The trial the objective received.
    monitor : str, default='valid_loss'
        Key of ``history_`` to report, as :class:`EarlyStopping` takes it
        (``'valid_loss'``, ``'valid_score'``, ``'train_loss'``, ...): the
        value the study's direction optimizes (``'minimize'`` for a loss,
        ``'maximize'`` for a score).

    Attributes
    ----------
    reported_ : list of float
        The values reported by the last fit, one per epoch.

    See Also
    --------
    EarlyStopping : Stop a fit whose monitored value stops improving.

    Examples
    --------
    >>> import optuna
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import OptunaPruning
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> def objective(trial):
    ...     clf = MLPClassifier(
    ...         hidden_layer_sizes=(trial.suggest_int("units", 4, 32),), early_stopping=True,
    ...         tol=1.0, n_iter_no_change=1, random_state=0, device="cpu",
    ...         callbacks=[OptunaPruning(trial, monitor="valid_score")])
    ...     return clf.fit(X, y).best_validation_score_
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(),
    ...                             sampler=optuna.samplers.RandomSampler(seed=0))
    >>> study.optimize(objective, n_trials=3)
    >>> len(study.trials)
    3
    """

    _parameter_constraints: dict = {
        "trial": [HasMethods(["report", "should_prune"]), None],
        "monitor": [str],
    }

    def __init__(self, trial, monitor="valid_loss"):
        self.trial = trial
        self.monitor = monitor

    def on_train_begin(self, state):
        state.check_monitor(self.monitor, "OptunaPruning")
        if self.trial is None:
            raise ValueError(
                "OptunaPruning has no trial: a trial is not pickled with the model, so a "
                "fit in another process (GridSearchCV(n_jobs=...) with processes, a "
                "loaded model) has none; give the fit its trial, or run the search's "
                "jobs in threads (joblib.parallel_backend('threading'))"
            )
        self._optuna = import_extra("optuna", "optuna", "OptunaPruning")
        self.reported_ = []

    def on_epoch_end(self, state, epoch, logs):
        value = float(logs[self.monitor])
        self.trial.report(value, step=epoch)
        self.reported_.append(value)
        if self.trial.should_prune():
            raise self._optuna.TrialPruned(f"Trial was pruned at epoch {epoch}.")
        return False

    def on_train_end(self, state):
        self._optuna = None

    def __sklearn_clone__(self):
        # The trial is a handle on the running study: clones share it.
        params = self.get_params(deep=False)
        return type(self)(
            **{k: v if k == "trial" else clone(v, safe=False) for k, v in params.items()}
        )

    def __deepcopy__(self, memo):
        memo[id(self.trial)] = self.trial  # shared by the copy, and by all it copies along
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __getstate__(self):
        return {**super().__getstate__(), "trial": None}

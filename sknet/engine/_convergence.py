"""scikit-learn's MLP rules between epochs, as built-in callbacks.

Two callbacks make sknet end an epoch exactly as
``sklearn.neural_network.MLPClassifier`` does:

- :class:`ScikitLearnLog` (reporting) prints scikit-learn's own lines when
  ``verbose`` is set: ``Iteration 1, loss = 0.69314718`` and, with
  ``early_stopping=True``, ``Validation score: 0.912000``.
- :class:`ScikitLearnConvergence` (stochastic solvers) updates ``n_iter_``,
  ``t_``, ``loss_``, ``loss_curve_``, ``best_loss_``, ``validation_scores_``
  and ``best_validation_score_``, counts epochs without ``tol`` improvement
  (the optimizer prints its convergence message), warns at ``max_iter``, and
  with ``early_stopping=True`` keeps the best weights and puts them back at
  the end (or when the loss becomes non-finite, with a ``ConvergenceWarning``,
  as scikit-learn 1.6+ ends such a fit). With ``learning_rate='anneal'``
  (sknet's), the first time the count runs out training does not stop: it
  goes back to the best epoch's weights and trains :data:`ANNEAL_EPOCHS`
  more epochs of :data:`ANNEAL_FRACTION` of the batches each, the rate divided
  by :data:`ANNEAL_FACTOR` before each, then stops.

The trainer calls them first, in that order, before the user's callbacks,
through the same hooks they have (:class:`sknet.callbacks.Callback`); so a
user's ``EarlyStopping`` restores its own best weights after these, and wins.
"""

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sknet.engine._callbacks import BestWeights, Callback

#: Epochs ``learning_rate='anneal'`` trains after the plateau, and the factor
#: the rate is divided by before each: on the tables of
#: ``benchmarks/bench_tabular.py`` (then compared on ``tune_tabular.py``'s),
#: two epochs at 1/4 and 1/16 of the rate from the best epoch's weights,
#: after 3 epochs without improvement, scored as well as or better than 8
#: epochs of patience at the full rate, and better than one such epoch.
ANNEAL_EPOCHS = 2
ANNEAL_FACTOR = 4.0
#: The share of an epoch's batches each epoch of the anneal trains on (the
#: first of its shuffled order; rounded up): over three seeds of the benchmark's ten
#: tables, half epochs scored within each table's seed-to-seed spread of
#: whole ones (diamonds' RMSE +1.1%, the most) for 7% less fit time; on
#: ``tune_tabular.py``'s tables, a mean distance to boosting of -1.72
#: against -1.80 (RMSE % or AUC points), where a single whole epoch of
#: the anneal (at 1/4 or 1/10 of the rate) gave -1.69 and -1.71.
ANNEAL_FRACTION = 0.5


class ScikitLearnLog(Callback):
    """Print scikit-learn's per-iteration lines (``verbose`` set)."""

    def on_train_begin(self, state):
        self._first_epoch = len(state.history) + 1  # iterations count from 1 per fit

    def on_epoch_end(self, state, epoch, logs):
        print("Iteration %d, loss = %.8f" % (epoch - self._first_epoch + 1, logs["train_loss"]))
        if state.estimator.early_stopping and state.optimizer is not None:
            print("Validation score: %f" % logs["valid_score"])
        return False


class ScikitLearnConvergence(Callback):
    """scikit-learn's end-of-epoch bookkeeping and stopping rule.

    Parameters
    ----------
    incremental : bool, default=False
        ``partial_fit``: one epoch, no ``max_iter`` warning.
    """

    def __init__(self, incremental=False):
        self.incremental = incremental

    @staticmethod
    def reset(est):
        """scikit-learn's fitted attributes of the stochastic solvers, as a first fit sets them."""
        est.loss_curve_ = []
        est._no_improvement_count = 0
        if est.early_stopping:
            est.validation_scores_, est.best_validation_score_ = [], -np.inf
            est.best_loss_ = None
        else:
            est.best_loss_ = np.inf
            est.validation_scores_ = est.best_validation_score_ = None

    def on_train_begin(self, state):
        est = state.estimator
        est.n_iter_ = 0
        if est.early_stopping and est.validation_scores_ is None:  # switched on warm
            est.validation_scores_, est.best_validation_score_ = [], -np.inf
        if not est.early_stopping and est.best_loss_ is None:  # switched off warm
            est.best_loss_ = np.inf
        self._converged = self._restored = False
        self._best = None
        self._rate = state.learning_rate if state.optimizer is not None else None
        self._annealing = None  # epochs of the anneal left, once it began
        if est.early_stopping:
            self._best = BestWeights()
            # scikit-learn keeps the initial weights until an epoch improves
            self._best.save(state.network, None)

    def on_epoch_end(self, state, epoch, logs):
        est, optimizer = state.estimator, state.optimizer
        loss = logs["train_loss"]
        est.n_iter_ += 1
        est.loss_ = loss
        est.t_ += state.epoch_rows
        est.loss_curve_.append(loss)
        self._count_no_improvement(state, logs)
        optimizer.iteration_ends(est.t_)
        if self._annealing is not None:
            return self._anneal(state)
        if est._no_improvement_count > est.n_iter_no_change:
            what = "Validation score" if est.early_stopping else "Training loss"
            msg = "%s did not improve more than tol=%f for %d consecutive epochs." % (
                what,
                est.tol,
                est.n_iter_no_change,
            )
            if est.learning_rate == "anneal" and not self.incremental:
                self._annealing = ANNEAL_EPOCHS
                est._no_improvement_count = 0
                if self._best is not None:  # from the best epoch's weights
                    self._best.restore(state.network)
                if est.verbose:
                    print(msg + " Annealing the learning rate from the best epoch.")
                return self._anneal(state)
            if optimizer.trigger_stopping(msg, est.verbose):
                self._converged = True
                return True
            est._no_improvement_count = 0
        return False

    def _anneal(self, state):
        """One more epoch of the anneal at a lower rate, or stop once they are done."""
        if self._annealing == 0:
            if state.estimator.verbose:
                print("Annealed for %d epochs. Stopping." % ANNEAL_EPOCHS)
            self._converged = True
            return True
        self._annealing -= 1
        state.learning_rate = state.learning_rate / ANNEAL_FACTOR
        # whole batches: an epoch of one batch stays whole (a weight still equals a repeat)
        batches = math.ceil(ANNEAL_FRACTION * math.ceil(state.n_train_rows / state.batch_size))
        state.epoch_rows = min(batches * state.batch_size, state.n_train_rows)
        return False

    def _count_no_improvement(self, state, logs):
        est = state.estimator
        if est.early_stopping:
            score = logs["valid_score"]
            est.validation_scores_.append(score)
            if score < est.best_validation_score_ + est.tol:
                est._no_improvement_count += 1
            else:
                est._no_improvement_count = 0
            if score > est.best_validation_score_:
                est.best_validation_score_ = score
                self._best.save(state.network, logs["epoch"])
        else:
            loss = est.loss_curve_[-1]
            if loss > est.best_loss_ - est.tol:
                est._no_improvement_count += 1
            else:
                est._no_improvement_count = 0
            if loss < est.best_loss_:
                est.best_loss_ = loss

    def on_nan(self, state, epoch):
        if self._best is None:
            return False
        self._best.restore(state.network)
        self._restored = True
        best = self._best.epoch
        warnings.warn(
            f"The loss became non-finite at epoch {epoch}; training stopped and the "
            + (
                "initial weights are kept (no epoch improved the validation score)."
                if best is None
                else f"weights of the best validation epoch ({best}) are kept."
            )
            + " Lower learning_rate_init or scale the input features.",
            ConvergenceWarning,
        )
        return True

    def on_train_end(self, state):
        est = state.estimator
        if self._annealing is not None:  # a later fit (warm_start) starts at the fit's rate
            state.learning_rate = self._rate
        if self._best is not None:
            if not self._restored:
                self._best.restore(state.network)
            self._best.clear()
        if (
            not self.incremental
            and not self._converged
            and not self._restored
            and est.n_iter_ == est.max_iter
        ):
            warnings.warn(
                "Stochastic Optimizer: Maximum iterations (%d) reached and the "
                "optimization hasn't converged yet." % est.max_iter,
                ConvergenceWarning,
            )

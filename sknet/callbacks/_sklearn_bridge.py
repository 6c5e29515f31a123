"""scikit-learn's own callbacks (``sklearn.callback``, scikit-learn 1.9+) on sknet's fits.

scikit-learn 1.9 has an experimental callback API: an estimator deriving from
``sklearn.callback.CallbackSupportMixin`` takes callbacks with
``set_callbacks`` (``sklearn.callback.ProgressBar``, ``ScoringMonitor``, or
any object with the ``FitCallback`` hooks) and reports its fit to them as a
tree of tasks. Every sknet estimator does, this way:

- a call to ``fit`` is the estimator's root task ``"fit"`` (``partial_fit``:
  ``"partial_fit"``), with room for as many subtasks as it may run epochs
  (``max_iter``; one for ``partial_fit``);
- each epoch, and each L-BFGS iteration, is a leaf task ``"epoch"`` under it:
  ``on_fit_task_begin`` before its first batch, ``on_fit_task_end`` after the
  epoch's history row is recorded, with ``X``, ``y`` and ``metadata``
  (``{"sample_weight": ...}``) as given to ``fit`` and a ``fitted_estimator``
  that predicts with the epoch's weights (a shallow copy that shares the
  network being trained); an ``on_fit_task_end`` returning True stops training
  after that epoch, as a callback of sknet's does;
- an epoch that did not end (Ctrl-C, an error, a non-finite loss handled by a
  callback) ends as an empty task (no data, no fitted estimator), and the
  root task ends, with the fitted model, when ``fit`` returns;
- inside a meta-estimator that propagates callbacks (``GridSearchCV``,
  ``Pipeline``) the root task is the meta-estimator's leaf task for that fit
  (scikit-learn merges the two); ``clone`` keeps the callbacks, so each fit of
  ``cross_validate`` is a run of its own.

Two pieces make it: :class:`SklearnCallbacksMixin` (``set_callbacks``;
:class:`~sknet.estimators._base.BaseNeuralNetwork` derives from it) with
:func:`fit_task`, which decorates ``BaseNeuralNetwork._fit`` to open the root
task, and :class:`EpochTasks`, the built-in sknet callback (see
:func:`epoch_tasks`) that turns the trainer's epochs into tasks. A fit with
no scikit-learn callback runs exactly as before.

With a scikit-learn that has no ``sklearn.callback`` (1.6 to 1.8), importing
and fitting are unchanged and ``set_callbacks`` raises an ImportError naming
the version it needs.
"""

import contextvars
import functools

import sklearn as _sklearn

from sknet.backend import is_device_array as _is_device_array
from sknet.engine._callbacks import Callback

try:
    from sklearn.callback import CallbackSupportMixin as _CallbackSupportMixin
    from sklearn.callback import with_callbacks as _with_callbacks
except ImportError:  # scikit-learn before 1.9
    _CallbackSupportMixin = _with_callbacks = None

#: the first scikit-learn with ``sklearn.callback``
SKLEARN_CALLBACKS_VERSION = "1.9"

#: ``{id(estimator): _FitTask}`` of the fits with scikit-learn callbacks under way here
_FIT_TASKS = contextvars.ContextVar("sknet_sklearn_fit_tasks", default=None)


def sklearn_callbacks_available():
    """Whether this scikit-learn has its callback API (``sklearn.callback``)."""
    return _CallbackSupportMixin is not None


class SklearnCallbacksMixin(object if _CallbackSupportMixin is None else _CallbackSupportMixin):
    """scikit-learn's ``set_callbacks`` on an sknet estimator (see the module's docstring)."""

    def set_callbacks(self, *callbacks):
        """Set scikit-learn's callbacks (``sklearn.callback``, scikit-learn 1.9+).

        Each epoch of a fit (each L-BFGS iteration) is a task of the fit's task
        tree: ``ProgressBar()`` shows the progress over the epochs, and
        ``ScoringMonitor(scoring=...)`` scores the model after each of them on
        the data given to ``fit``. The callbacks are kept by :func:`~sklearn.base.clone`
        and in a pickle, and set on a meta-estimator (``GridSearchCV``), they
        reach the fits it makes. sknet's own callbacks still go in the
        ``callbacks`` parameter; both kinds can be used together.

        Parameters
        ----------
        *callbacks : callback instances
            scikit-learn callbacks (objects with the ``FitCallback`` hooks);
            none removes those set before.

        Returns
        -------
        self : object
            The estimator.

        Raises
        ------
        ImportError
            With a scikit-learn older than 1.9, which has no callback API.
        TypeError
            When given one of sknet's callbacks, or an object that is not a
            scikit-learn callback.
        """
        if _CallbackSupportMixin is None:
            raise ImportError(
                f"set_callbacks needs scikit-learn >= {SKLEARN_CALLBACKS_VERSION} (its "
                f"sklearn.callback API); this is scikit-learn {_sklearn.__version__}. "
                "sknet's own callbacks (the callbacks parameter) work with any version."
            )
        for callback in callbacks:
            if isinstance(callback, Callback):
                raise TypeError(
                    f"{type(callback).__name__} is one of sknet's callbacks: pass it in the "
                    f"callbacks parameter, {type(self).__name__}(callbacks=[...]); "
                    "set_callbacks takes scikit-learn's (sklearn.callback)"
                )
        return super().set_callbacks(*callbacks)

    def __copy__(self):
        # A shallow copy (the fitted estimator scikit-learn's callbacks get after each
        # epoch): the same attributes, no pickle round trip, no rebuilt network.
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __getstate__(self):
        state = dict(super().__getstate__())
        # a fit's task tree (a Checkpoint pickles the model during fit) stays out
        for name in ("_callback_fit_ctx", "_skl_callbacks_to_teardown"):
            state.pop(name, None)
        return state


class _FitTask:
    """A fit's root task: its context, the data the hooks get, the subtasks it has room for."""

    def __init__(self, context, data, n_tasks):
        self.context = context
        self.data = data
        self.n_tasks = n_tasks


def fit_task(fit):
    """Decorate ``BaseNeuralNetwork._fit``: a fit with scikit-learn callbacks is their root task.

    Without scikit-learn callbacks set (or propagated by a meta-estimator),
    ``_fit`` runs as it is.
    """

    @functools.wraps(fit)
    def run(est, X, y, sample_weight, incremental, validation_args):
        if _with_callbacks is None or not getattr(est, "_skl_callbacks", None):
            return fit(est, X, y, sample_weight, incremental, validation_args)
        return _fit_in_task(est, fit, X, y, sample_weight, incremental, validation_args)

    return run


def _fit_in_task(est, fit, X, y, sample_weight, incremental, validation_args):
    """``fit`` as the root task of the estimator's callbacks (set up and torn down around it)."""
    est._validate_params()  # the task's room comes from max_iter
    # what the callbacks score with is on the host, as the fit validates it
    X, y, sample_weight = (a.get() if _is_device_array(a) else a for a in (X, y, sample_weight))
    n_tasks = 1 if incremental else est.max_iter
    context = est._init_callback_context(
        task_name="partial_fit" if incremental else "fit", max_subtasks=n_tasks
    )
    metadata = None if sample_weight is None else {"sample_weight": sample_weight}
    data = {"X": X, "y": y, "metadata": metadata}
    context.call_on_fit_task_begin(estimator=est, **data)
    running = {**(_FIT_TASKS.get() or {}), id(est): _FitTask(context, data, n_tasks)}
    token = _FIT_TASKS.set(running)
    try:
        fit(est, X, y, sample_weight, incremental, validation_args)
    finally:
        _FIT_TASKS.reset(token)
    context.call_on_fit_task_end(estimator=est, reconstruction_attributes={}, **data)
    return est


if _with_callbacks is not None:
    _fit_in_task = _with_callbacks(_fit_in_task)


def epoch_tasks(est):
    """``[EpochTasks(...)]`` for a fit of ``est`` that is a root task, else ``[]``."""
    task = (_FIT_TASKS.get() or {}).get(id(est))
    return [] if task is None else [EpochTasks(task)]


class EpochTasks(Callback):
    """Each epoch of the fit a leaf task of scikit-learn's callbacks (built in).

    Stochastic solvers begin an epoch's task in ``on_epoch_begin``; L-BFGS,
    whose iterations have no beginning hook, begins the first in
    ``on_train_begin`` and each next one when the previous ends, as
    scikit-learn's ``LogisticRegression`` does. A task begun and not ended
    (Ctrl-C, an error) ends empty in ``on_train_end``.

    Parameters
    ----------
    task : _FitTask
        The fit's root task.
    """

    def __init__(self, task):
        self.task = task

    def on_train_begin(self, state):
        self._current, self._done = None, 0
        if state.optimizer is None:  # L-BFGS
            self._begin(state)

    def on_epoch_begin(self, state, epoch):
        if self._current is None:
            self._begin(state)

    def on_epoch_end(self, state, epoch, logs):
        if self._current is None:
            self._begin(state)
        task, self._current = self._current, None
        self._done += 1
        stop = task.call_on_fit_task_end(
            estimator=state.estimator, reconstruction_attributes={}, **self.task.data
        )
        if state.optimizer is None and not stop and self._done < self.task.n_tasks:
            self._begin(state)  # L-BFGS's next iteration starts now
        return bool(stop)

    def on_train_end(self, state):
        task, self._current = getattr(self, "_current", None), None
        if task is not None:
            task.call_on_fit_task_end(estimator=state.estimator)

    def _begin(self, state):
        self._current = self.task.context.subcontext(task_name="epoch")
        self._current.call_on_fit_task_begin(estimator=state.estimator, **self.task.data)

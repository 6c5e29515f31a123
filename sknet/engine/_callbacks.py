"""The hook interface of callbacks, and what a hook sees of a running fit.

:class:`Callback` is the base of every callback (the stock ones of
:mod:`sknet.callbacks`, the engine's own scikit-learn rules in
:mod:`~sknet.engine._convergence`, and users'); the trainer calls its hooks
with a :class:`TrainingState`, never its locals, and begins and ends them
through :class:`TrainingHooks`, which guarantees every begun callback its
``on_train_end``. :class:`BestWeights` is the
one save/restore helper of early stopping and of TerminateOnNaN;
:func:`improved` and :func:`resolve_mode` compare a monitored value with the
best so far, for the callbacks that watch one.
"""

import copy
import sys
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator


class Callback(BaseEstimator):
    """Base class of callbacks: every hook is a no-op.

    Subclasses store their configuration in ``__init__`` (like an estimator,
    so they clone) and keep run-time state in attributes starting with ``_``,
    which are not pickled.

    A callback that adds keys to the epoch's ``logs`` names them in
    ``provides``, so that callbacks after it may monitor them.

    Examples
    --------
    >>> from sknet.callbacks import Callback
    >>> class PrintLoss(Callback):
    ...     def on_epoch_end(self, state, epoch, logs):
    ...         print(f"epoch {epoch}: {logs['train_loss']:.3f}")
    """

    #: history keys this callback adds to ``logs`` in ``on_epoch_end``
    provides = ()
    #: whether ``on_batch_end`` only reads the fit (a progress bar): where the batches
    #: run elsewhere (:class:`~sknet.distributed.DataParallel`'s workers) it is then
    #: called after each epoch's batches ran; a callback that changes the fit batch by
    #: batch, and gives no :meth:`batch_learning_rates`, is refused there by name
    observes_batches = False

    def on_train_begin(self, state):
        """Called once before the first epoch of a call to fit.

        Check here that what the callback needs exists (raise a ValueError
        naming it otherwise): see :meth:`TrainingState.check_monitor`.
        """

    def on_epoch_begin(self, state, epoch):
        """Called before each epoch (numbered from 1 across warm starts)."""

    def on_batch_end(self, state, batch, size):
        """Called after each mini-batch update with its index and size."""

    def batch_learning_rates(self, state, n_batches):
        """The learning rate of each of the epoch's ``n_batches`` batches, or None.

        Called after ``on_epoch_begin`` where the batches run elsewhere than
        the callbacks (DataParallel's workers), by a callback whose
        ``on_batch_end`` schedules the learning rate: the rates its
        ``on_batch_end`` would set, batch by batch, so the workers step with
        them (:class:`~sknet.callbacks.LRScheduler`'s warm-up). None: the
        rate does not change within the epoch.
        """
        return None

    def on_epoch_end(self, state, epoch, logs):
        """Called after each epoch with its history row; return True to stop."""

    def on_train_end(self, state):
        """Called once when training ends, however it ends.

        Also when the fit fails, and when ``on_train_begin`` of this callback
        or of one after it raised: it must not assume that this callback's
        ``on_train_begin`` completed. ``sys.exc_info()`` is the fit's failure,
        if it failed.
        """

    def on_nan(self, state, epoch):
        """Called when the epoch's loss is not finite; return True if handled.

        Unhandled, a non-finite loss stops training with a ValueError.
        """
        return False

    def __getstate__(self):
        state = dict(super().__getstate__())
        return {k: v for k, v in state.items() if not k.startswith("_") or k == "_sklearn_version"}


class TrainingState:
    """What callbacks see of a running fit.

    Every hook gets this object as its first argument. Attributes it does not
    have are looked up on the estimator, so ``state.classes_`` or
    ``state.predict(X)`` work as they would on the estimator.

    Attributes
    ----------
    estimator : estimator
        The estimator being fitted.
    network : Network
        The network being trained (its layers are ``estimator.layers_``).
    optimizer : StochasticOptimizer or None
        The optimizer (``None`` with ``solver='lbfgs'``).
    epoch : int or None
        The current epoch, numbered from 1 across warm starts.
    n_train_rows : int
        Rows per epoch.
    epoch_rows : int
        Rows the next epoch trains on, the first of its shuffled order:
        ``n_train_rows`` unless a callback sets fewer between epochs (the
        anneal of ``learning_rate='anneal'`` trains half epochs); a positive
        integer, more than ``n_train_rows`` meaning all of them.
    batch_size : int
        Rows per batch (all rows with lbfgs).
    history : list of dict
        ``estimator.history_``: one row per epoch.
    has_validation : bool
        Whether a validation set is scored (``valid_loss``/``valid_score``).
    max_epochs : int or None
        The most epochs (L-BFGS iterations) this call to fit may run:
        ``max_iter``, one for ``partial_fit``; None when not known.

    Examples
    --------
    A callback reading the state after every epoch:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import Callback
    >>> class ShowState(Callback):
    ...     def on_epoch_end(self, state, epoch, logs):
    ...         print(f"epoch {state.epoch}: {state.n_train_rows} rows in batches of "
    ...               f"{state.batch_size}, {len(state.classes_)} classes")
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), batch_size=50, tol=1.0,
    ...                     n_iter_no_change=1, random_state=0, device="cpu",
    ...                     callbacks=[ShowState()]).fit(X[:200] / 16, y[:200])
    epoch 1: 200 rows in batches of 50, 10 classes
    epoch 2: 200 rows in batches of 50, 10 classes
    epoch 3: 200 rows in batches of 50, 10 classes
    """

    #: history keys every fit produces; validation keys need a validation set
    TRAIN_KEYS = ("epoch", "train_loss", "learning_rate", "duration")
    VALID_KEYS = ("valid_loss", "valid_score")

    def __init__(
        self,
        estimator,
        network,
        optimizer,
        *,
        n_train_rows,
        batch_size,
        history,
        has_validation,
        max_epochs=None,
    ):
        self.estimator = estimator
        self.network = network
        self.optimizer = optimizer
        self.epoch = None
        self.n_train_rows = self.epoch_rows = n_train_rows
        self.batch_size = batch_size
        self.history = history
        self.has_validation = has_validation
        self.max_epochs = max_epochs
        self.extra_keys = ()

    def __getattr__(self, name):
        # Only called for names this object lacks: the estimator's attributes.
        if name.startswith("__") or "estimator" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["estimator"], name)

    @property
    def epoch_rows(self):
        """Rows the next epoch trains on (set it between epochs to train fewer)."""
        return self.__dict__["_epoch_rows"]

    @epoch_rows.setter
    def epoch_rows(self, value):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ValueError(f"epoch_rows must be a positive integer of rows, got {value!r}")
        self.__dict__["_epoch_rows"] = min(int(value), self.n_train_rows)

    @property
    def learning_rate(self):
        """The base learning rate (SGD's rate, Adam's step size)."""
        return self.require_optimizer("learning_rate").base_learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        self.require_optimizer("learning_rate").base_learning_rate = value

    def require_optimizer(self, who):
        """The optimizer; a ValueError naming ``who`` with ``solver='lbfgs'``."""
        if self.optimizer is None:
            raise ValueError(
                f"{who} needs solver='sgd', 'adam' or 'adamw'; this "
                f"{type(self.estimator).__name__} has solver='lbfgs'"
            )
        return self.optimizer

    def check_monitor(self, monitor, who):
        """Raise a ValueError before training if ``monitor`` will have no value."""
        keys = self.TRAIN_KEYS + self.VALID_KEYS + tuple(self.extra_keys)
        if monitor not in keys:
            raise ValueError(
                f"{who}: monitor={monitor!r} is not in the history; choose one of {sorted(keys)}"
            )
        if monitor in self.VALID_KEYS and not self.has_validation:
            raise ValueError(
                f"{who}: monitor={monitor!r} needs a validation set: pass X_val and "
                "y_val to fit, or set early_stopping=True"
            )
        if monitor == "learning_rate":
            self.require_optimizer(f"{who} with monitor='learning_rate'")

    def weights(self):
        """The model's arrays (parameters and running statistics), live."""
        return self.network.weights()

    def update_trainable(self):
        """Apply changes of the layers' ``trainable``/``lr_scale`` made during training.

        Lays the parameters out again and moves the optimizer's state along
        (a newly trained parameter starts from zero state); call it from
        ``on_epoch_begin`` after changing the built layers (``state.network.layers``).
        """
        self.require_optimizer("Changing trainable layers during fit")
        self.__dict__["trainer"].relayout(self.optimizer)


class BestWeights:
    """A copy of the weights of one epoch, kept to be put back later.

    The one save/restore helper of early stopping (built-in and callback) and
    :class:`~sknet.callbacks.TerminateOnNaN`. Restores happen in ``on_train_end``
    (or ``on_nan``) in callback order: built-in callbacks first, the user's
    after, so what a user callback restores is what the model keeps.
    """

    def __init__(self):
        self.epoch = None
        self._arrays = None

    def save(self, network, epoch):
        """Copy the network's weights (into the same buffers after the first save)."""
        if self._arrays is None:
            self._arrays = network.save_weights()
        else:
            for saved, weight in zip(self._arrays, network.weights()):
                saved[...] = weight
        self.epoch = epoch

    def restore(self, network):
        """Put the saved weights back; False if nothing was saved."""
        if self._arrays is None:
            return False
        network.load_weights(self._arrays)
        return True

    def clear(self):
        self._arrays, self.epoch = None, None


def call_hook(callback, hook, state, *args):
    """``callback.<hook>(state, *args)``; whether it asks to stop (True, False or None)."""
    answer = getattr(callback, hook)(state, *args)
    if answer is not None and not isinstance(answer, (bool, np.bool_)):
        raise TypeError(
            f"{type(callback).__name__}.{hook} must return True, False or None, got "
            f"{type(answer).__name__} {answer!r:.60}"
        )
    return bool(answer)


class TrainingHooks:
    """The callbacks' ``on_train_begin`` and ``on_train_end``, with every end guaranteed.

    The one place a fit begins and ends its callbacks (every solver's loop:
    :meth:`Trainer.run_epochs <sknet.engine._trainer.Trainer.run_epochs>`,
    :func:`~sknet.engine._lbfgs.run_lbfgs`)::

        hooks = TrainingHooks(callbacks, state).begin()
        try:
            ...  # the epochs
        finally:
            hooks.end()

    Every callback whose ``on_train_begin`` ran, whether it returned or
    raised, gets its ``on_train_end``, in list order: when a later
    callback's ``on_train_begin`` fails (:meth:`begin` ends those that began,
    then raises), when an epoch or a hook fails, on ``KeyboardInterrupt``.
    A failing ``on_train_end`` keeps no other callback from its own. The
    first failure propagates: the fit's own if it failed, else the first
    ``on_train_end``'s; the others are added to its notes (Python 3.11+).
    During ``on_train_end``, ``sys.exc_info()`` is the fit's failure, if any.
    """

    def __init__(self, callbacks, state):
        self.callbacks = list(callbacks)
        self.state = state
        self._begun = []
        self._around = None

    def begin(self):
        """Call ``on_train_begin`` on each callback in order; returns ``self``."""
        self._around = sys.exc_info()[1]  # an exception handled around fit is not the fit's
        try:
            for callback in self.callbacks:
                self._begun.append(callback)
                call_hook(callback, "on_train_begin", self.state)
        except BaseException as error:
            self._end(error)
            raise
        return self

    def end(self):
        """Call ``on_train_end`` on every callback that began (in a ``finally``: see above)."""
        error = sys.exc_info()[1]
        failure = self._end(None if error is self._around else error)
        if failure is not None:
            raise failure

    def _end(self, error):
        """End the callbacks that began; the first failure of their ends if ``error`` is None."""
        begun, self._begun = self._begun, []
        first = error
        for callback in begun:
            try:
                call_hook(callback, "on_train_end", self.state)
            except BaseException as failure:  # noqa: BLE001 - the others end first
                if first is None:
                    first = failure
                elif hasattr(first, "add_note"):
                    first.add_note(
                        f"{type(callback).__name__}.on_train_end also failed: "
                        f"{type(failure).__name__}: {failure}"
                    )
        return None if first is error else first


def copy_callbacks(callbacks):
    """Working copies of ``callbacks``: the objects a user passes are never modified."""
    callbacks = [] if callbacks is None else list(callbacks)
    for callback in callbacks:
        if not isinstance(callback, Callback):
            hint = (
                "; scikit-learn's callbacks (sklearn.callback) are set with set_callbacks"
                if hasattr(callback, "on_fit_task_end")
                else ""
            )
            raise TypeError(
                "callbacks must be sknet.callbacks.Callback objects, got "
                f"{type(callback).__name__}{hint}"
            )
    return [copy.deepcopy(callback) for callback in callbacks]


def overrides(callback, hook):
    """Whether ``callback``'s class defines its own ``hook`` (not the no-op of Callback)."""
    return getattr(type(callback), hook) is not getattr(Callback, hook)


def improved(value, best, mode, min_delta):
    """Whether ``value`` beats ``best`` by more than ``min_delta`` (``mode`` 'min' or 'max').

    A missing or non-finite value never improves; any value beats no best.
    """
    if value is None or not np.isfinite(value):
        return False
    if best is None:
        return True
    return value < best - min_delta if mode == "min" else value > best + min_delta


def resolve_mode(mode, monitor):
    """``mode`` with ``'auto'`` resolved: scores are maximized, anything else minimized."""
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        return "max" if "score" in monitor else "min"
    return mode

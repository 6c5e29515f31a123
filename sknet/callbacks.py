"""Callbacks: code that runs at fixed points of training.

Give a list to any estimator's ``callbacks`` parameter. ``fit`` works on
copies (``callbacks_``), so the objects you pass are never modified and clone
with the estimator. Each hook receives the estimator; ``on_epoch_end`` also
receives the epoch's row of ``history_`` (``epoch``, ``train_loss``,
``valid_loss``, ``valid_score``, ``learning_rate``, ``duration``) and may return
``True`` to stop training.

Nothing in a hook forces a device synchronisation except what the hook itself
reads: the epoch's losses are already host numbers, and ``on_batch_end`` gets
only the batch's index and size.
"""

import math
import os
import sys
import tempfile
import warnings

import joblib
import numpy as np
from sklearn.base import BaseEstimator

__all__ = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "LRScheduler",
    "ProgressBar",
    "TerminateOnNaN",
]


class Callback(BaseEstimator):
    """Base class of callbacks: every hook is a no-op.

    Subclasses store their configuration in ``__init__`` (like an estimator,
    so they clone) and keep run-time state in attributes starting with ``_``,
    which are not pickled.

    Examples
    --------
    >>> from sknet.callbacks import Callback
    >>> class PrintLoss(Callback):
    ...     def on_epoch_end(self, estimator, epoch, logs):
    ...         print(f"epoch {epoch}: {logs['train_loss']:.3f}")
    """

    def on_train_begin(self, estimator):
        """Called once before the first epoch of a call to fit."""

    def on_epoch_begin(self, estimator, epoch):
        """Called before each epoch (numbered from 1 across warm starts)."""

    def on_batch_end(self, estimator, batch, size):
        """Called after each mini-batch update with its index and size."""

    def on_epoch_end(self, estimator, epoch, logs):
        """Called after each epoch with its history row; return True to stop."""

    def on_train_end(self, estimator):
        """Called once when training ends, however it ends."""

    def on_nan(self, estimator, epoch):
        """Called when the epoch's loss is not finite; return True if handled.

        Unhandled, a non-finite loss stops training with a ValueError.
        """
        return False

    def __getstate__(self):
        state = dict(super().__getstate__())
        return {k: v for k, v in state.items() if not k.startswith("_") or k == "_sklearn_version"}


def _improved(value, best, mode, min_delta):
    if value is None or not np.isfinite(value):
        return False
    if best is None:
        return True
    return value < best - min_delta if mode == "min" else value > best + min_delta


def _resolve_mode(mode, monitor):
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        return "max" if "score" in monitor else "min"
    return mode


def _monitored(logs, monitor):
    if monitor not in logs:
        raise ValueError(
            f"monitor={monitor!r} is not in the history; choose one of {sorted(logs)}"
        )
    value = logs[monitor]
    if value is None:
        raise ValueError(
            f"monitor={monitor!r} has no value: give fit validation_data, or set "
            "early_stopping=True, to have a validation set"
        )
    return value


class EarlyStopping(Callback):
    """Stop when a history value stops improving, and restore the best weights.

    Parameters
    ----------
    monitor : str, default='valid_loss'
        Key of ``history_`` to watch (``'valid_loss'``, ``'valid_score'``,
        ``'train_loss'``, ...).
    patience : int, default=5
        Epochs without improvement before stopping.
    min_delta : float, default=0.0
        Smallest change that counts as an improvement.
    mode : {'auto', 'min', 'max'}, default='auto'
        Whether lower or higher is better; ``'auto'`` maximizes keys containing
        "score" and minimizes the others.
    restore_best_weights : bool, default=True
        Put back the weights of the best epoch when training ends.

    Attributes
    ----------
    best_epoch_ : int
        The best epoch seen by the last fit.
    best_value_ : float
        Its monitored value.
    stopped_epoch_ : int or None
        The epoch at which this callback stopped training.
    """

    def __init__(self, monitor="valid_loss", patience=5, min_delta=0.0, mode="auto",
                 restore_best_weights=True):
        self.monitor = monitor
        self.patience = patience
        self.min_delta = min_delta
        self.mode = mode
        self.restore_best_weights = restore_best_weights

    def on_train_begin(self, estimator):
        self._mode = _resolve_mode(self.mode, self.monitor)
        self.best_value_, self.best_epoch_, self.stopped_epoch_ = None, None, None
        self._wait, self._best_weights = 0, None

    def on_epoch_end(self, estimator, epoch, logs):
        value = _monitored(logs, self.monitor)
        if _improved(value, self.best_value_, self._mode, self.min_delta):
            self.best_value_, self.best_epoch_, self._wait = value, epoch, 0
            if self.restore_best_weights:
                self._best_weights = [w.copy() for w in estimator._weights()]
            return False
        self._wait += 1
        if self._wait >= self.patience:
            self.stopped_epoch_ = epoch
            return True
        return False

    def on_train_end(self, estimator):
        if self._best_weights is not None:
            for weight, best in zip(estimator._weights(), self._best_weights):
                weight[...] = best
        self._best_weights = None  # nothing outlives fit but the model


class Checkpoint(Callback):
    """Save the model to a file after an epoch, atomically.

    The model is written to a temporary file in the same directory, then
    renamed over ``path``: a crash never leaves a half-written file.

    Parameters
    ----------
    path : str or path-like
        Where to save (with :func:`joblib.dump`).
    monitor : str or None, default='valid_loss'
        Save only when this history value improves; ``None`` saves after every
        epoch (the last model).
    mode : {'auto', 'min', 'max'}, default='auto'
        As in :class:`EarlyStopping`.

    Attributes
    ----------
    saved_epochs_ : list of int
        The epochs at which the model was written.
    """

    def __init__(self, path, monitor="valid_loss", mode="auto"):
        self.path = path
        self.monitor = monitor
        self.mode = mode

    def on_train_begin(self, estimator):
        if self.monitor is not None:
            self._mode = _resolve_mode(self.mode, self.monitor)
        self._best = None
        self.saved_epochs_ = []

    def on_epoch_end(self, estimator, epoch, logs):
        if self.monitor is not None:
            value = _monitored(logs, self.monitor)
            if not _improved(value, self._best, self._mode, 0.0):
                return False
            self._best = value
        self._save(estimator)
        self.saved_epochs_.append(epoch)
        return False

    def _save(self, estimator):
        estimator._export_fitted()  # e.g. coefs_ of the weights being saved
        path = os.fspath(self.path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".sknet-checkpoint-", dir=directory)
        os.close(fd)
        try:
            joblib.dump(estimator, tmp)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise


class LRScheduler(Callback):
    """Change the learning rate between epochs.

    For ``solver='sgd'`` this sets the learning rate; for ``'adam'`` the base
    step size (``learning_rate_init``) that Adam's bias correction scales.

    Parameters
    ----------
    policy : {'step', 'cosine', 'plateau'}, default='step'
        ``'step'``: multiply by ``gamma`` every ``step_size`` epochs.
        ``'cosine'``: anneal from the initial rate to ``min_lr`` over ``T_max``
        epochs. ``'plateau'``: multiply by ``gamma`` when ``monitor`` has not
        improved for ``patience`` epochs.
    step_size : int, default=10
    gamma : float, default=0.1
    T_max : int or None, default=None
        Epochs of the cosine schedule; ``None`` means the estimator's ``max_iter``.
    monitor : str, default='valid_loss'
        For ``'plateau'``.
    patience : int, default=5
        For ``'plateau'``.
    min_lr : float, default=0.0
        The rate never goes below this.
    """

    def __init__(self, policy="step", step_size=10, gamma=0.1, T_max=None,
                 monitor="valid_loss", patience=5, min_lr=0.0):
        self.policy = policy
        self.step_size = step_size
        self.gamma = gamma
        self.T_max = T_max
        self.monitor = monitor
        self.patience = patience
        self.min_lr = min_lr

    def on_train_begin(self, estimator):
        if self.policy not in ("step", "cosine", "plateau"):
            raise ValueError(
                f"policy must be 'step', 'cosine' or 'plateau', got {self.policy!r}"
            )
        self._initial = estimator._optimizer.base_learning_rate
        self._epochs, self._best, self._wait = 0, None, 0
        self._mode = _resolve_mode("auto", self.monitor)

    def on_epoch_end(self, estimator, epoch, logs):
        optimizer = estimator._optimizer
        self._epochs += 1
        lr = optimizer.base_learning_rate
        if self.policy == "step":
            lr = self._initial * self.gamma ** (self._epochs // self.step_size)
        elif self.policy == "cosine":
            T_max = self.T_max or estimator.max_iter
            progress = min(self._epochs, T_max) / T_max
            lr = self.min_lr + (self._initial - self.min_lr) * 0.5 * (
                1 + math.cos(math.pi * progress)
            )
        else:
            value = _monitored(logs, self.monitor)
            if _improved(value, self._best, self._mode, 0.0):
                self._best, self._wait = value, 0
            else:
                self._wait += 1
                if self._wait >= self.patience:
                    lr, self._wait = lr * self.gamma, 0
        optimizer.base_learning_rate = max(lr, self.min_lr)
        return False


class TerminateOnNaN(Callback):
    """Stop training on a non-finite loss and keep the last finite weights.

    Without it, a non-finite loss stops training with a ValueError and leaves
    the model as it was before ``fit``. With it, training stops with a warning
    and the model keeps the weights of the last epoch whose loss was finite.
    """

    def on_epoch_begin(self, estimator, epoch):
        self._weights = [w.copy() for w in estimator._weights()]
        self._optimizer_state = estimator._optimizer.snapshot()

    def on_nan(self, estimator, epoch):
        for weight, saved in zip(estimator._weights(), self._weights):
            weight[...] = saved
        estimator._optimizer.restore(self._optimizer_state)
        warnings.warn(
            f"The loss became non-finite at epoch {epoch}; training stopped and the "
            f"weights of epoch {epoch - 1} are kept.",
            UserWarning,
        )
        return True

    def on_train_end(self, estimator):
        self._weights = self._optimizer_state = None


class ProgressBar(Callback):
    """A progress bar over the batches of each epoch (tqdm, when installed).

    Without tqdm, prints one line per epoch instead. Output goes to stderr.
    """

    def on_train_begin(self, estimator):
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        self._tqdm, self._bar = tqdm, None

    def on_epoch_begin(self, estimator, epoch):
        if self._tqdm is not None:
            self._bar = self._tqdm(total=estimator._n_train_rows, desc=f"epoch {epoch}",
                                   unit="rows", leave=False, file=sys.stderr)

    def on_batch_end(self, estimator, batch, size):
        if self._bar is not None:
            self._bar.update(size)

    def on_epoch_end(self, estimator, epoch, logs):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        else:
            print(f"epoch {epoch}: train_loss {logs['train_loss']:.5f}", file=sys.stderr)
        return False

    def on_train_end(self, estimator):
        if self._bar is not None:
            self._bar.close()
        self._bar = None

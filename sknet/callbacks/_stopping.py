"""Stopping and saving: EarlyStopping, Checkpoint and TerminateOnNaN."""

import os
import tempfile
import warnings

import joblib
from sklearn.utils._param_validation import StrOptions as _StrOptions

from sknet.engine._averaging import put_averages as _put_averages
from sknet.engine._callbacks import BestWeights as _BestWeights
from sknet.engine._callbacks import Callback
from sknet.engine._callbacks import improved as _improved
from sknet.engine._callbacks import resolve_mode as _resolve_mode
from sknet.layers._constraints import Count as _Count
from sknet.layers._constraints import Number as _Number


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

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import EarlyStopping
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> stop = EarlyStopping(monitor="valid_score", patience=2)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), early_stopping=True, random_state=0,
    ...                     device="cpu", callbacks=[stop]).fit(X, y)
    >>> fitted = clf.callbacks_[0]  # the fitted copy; ``stop`` is unchanged
    >>> fitted.best_epoch_ is not None
    True
    >>> fitted.stopped_epoch_ - fitted.best_epoch_  # two epochs without improvement
    2
    """

    _parameter_constraints: dict = {
        "monitor": [str],
        "patience": [_Count(0)],
        "min_delta": [_Number(0, None, closed="left")],
        "mode": [_StrOptions({"auto", "min", "max"})],
        "restore_best_weights": ["boolean"],
    }

    def __init__(
        self,
        monitor="valid_loss",
        patience=5,
        min_delta=0.0,
        mode="auto",
        restore_best_weights=True,
    ):
        self.monitor = monitor
        self.patience = patience
        self.min_delta = min_delta
        self.mode = mode
        self.restore_best_weights = restore_best_weights

    def on_train_begin(self, state):
        state.check_monitor(self.monitor, "EarlyStopping")
        self._mode = _resolve_mode(self.mode, self.monitor)
        self.best_value_, self.best_epoch_, self.stopped_epoch_ = None, None, None
        self._wait, self._best = 0, _BestWeights()

    def on_epoch_end(self, state, epoch, logs):
        value = logs[self.monitor]
        if _improved(value, self.best_value_, self._mode, self.min_delta):
            self.best_value_, self.best_epoch_, self._wait = value, epoch, 0
            if self.restore_best_weights:
                self._best.save(state.network, epoch)
            return False
        self._wait += 1
        if self._wait >= self.patience:
            self.stopped_epoch_ = epoch
            return True
        return False

    def on_train_end(self, state):
        best = getattr(self, "_best", None)  # None: on_train_begin refused the monitor
        if best is not None:
            best.restore(state.network)
            best.clear()  # nothing outlives fit but the model


class Checkpoint(Callback):
    """Save the model to a file after an epoch, atomically.

    The model is written to a temporary file in the same directory, then
    renamed over ``path``: a crash never leaves a half-written file.

    Parameters
    ----------
    path : str or path-like
        Where to save (with :func:`joblib.dump`); its directory is created.
    monitor : str or None, default='valid_loss'
        Save only when this history value improves; ``None`` saves after every
        epoch (the last model).
    mode : {'auto', 'min', 'max'}, default='auto'
        As in :class:`EarlyStopping`.

    Attributes
    ----------
    saved_epochs_ : list of int
        The epochs at which the model was written.

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> import joblib
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import Checkpoint
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "model.joblib")
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu",
    ...                     callbacks=[Checkpoint(path, monitor=None)]).fit(X, y)
    >>> clf.callbacks_[0].saved_epochs_
    [1, 2, 3]
    >>> type(joblib.load(path)).__name__
    'MLPClassifier'
    >>> tmp.cleanup()
    """

    _parameter_constraints: dict = {
        "path": [str, os.PathLike],
        "monitor": [str, None],
        "mode": [_StrOptions({"auto", "min", "max"})],
    }

    def __init__(self, path, monitor="valid_loss", mode="auto"):
        self.path = path
        self.monitor = monitor
        self.mode = mode

    def on_train_begin(self, state):
        if self.monitor is not None:
            state.check_monitor(self.monitor, "Checkpoint")
            self._mode = _resolve_mode(self.mode, self.monitor)
        directory = os.path.dirname(os.path.abspath(os.fspath(self.path)))
        try:  # before the first epoch, as the loggers make theirs
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:  # a file there, no permission: say which
            raise ValueError(
                f"Checkpoint: path={os.fspath(self.path)!r} cannot be written: its directory "
                f"{directory!r} cannot be made ({exc.strerror or exc})"
            ) from exc
        self._best = None
        self.saved_epochs_ = []

    def on_epoch_end(self, state, epoch, logs):
        if self.monitor is not None:
            value = logs[self.monitor]
            if not _improved(value, self._best, self._mode, 0.0):
                return False
            self._best = value
        self._save(state.estimator)
        self.saved_epochs_.append(epoch)
        return False

    def _save(self, estimator):
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


class TerminateOnNaN(Callback):
    """Stop training on a non-finite loss and keep the last finite weights.

    Without it, a non-finite loss stops training with a ValueError and leaves
    the model as it was before ``fit``. With it, training stops with a warning
    and the model keeps the weights of the last epoch whose loss was finite.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import TerminateOnNaN
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[TerminateOnNaN()])
    >>> len(clf.fit(X, y).history_)  # finite losses: training as usual
    3
    """

    def on_train_begin(self, state):
        self._weights, self._optimizer_state = _BestWeights(), None

    def on_epoch_begin(self, state, epoch):
        self._weights.save(state.network, epoch - 1)
        if state.optimizer is not None:
            self._optimizer_state = state.optimizer.snapshot()

    def on_nan(self, state, epoch):
        self._weights.restore(state.network)
        if self._optimizer_state is not None:
            state.optimizer.restore(self._optimizer_state)
            # with the weights' average, the last finite epoch's model is its averages
            _put_averages(state.optimizer)
        warnings.warn(
            f"The loss became non-finite at epoch {epoch}; training stopped and the "
            f"weights of epoch {epoch - 1} are kept.",
            UserWarning,
        )
        return True

    def on_train_end(self, state):
        self._weights = self._optimizer_state = None

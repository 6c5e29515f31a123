"""Callbacks: code that runs at fixed points of training.

Give a list to any estimator's ``callbacks`` parameter. ``fit`` works on
copies (``callbacks_``), so the objects you pass are never modified and clone
with the estimator. Each hook receives a
:class:`~sknet.callbacks.TrainingState` first: the estimator
(``state.estimator``), the network, the optimizer, the epoch, the history and
the weights, through public attributes; attributes it lacks are looked up on
the estimator, so ``state.classes_`` works. ``on_epoch_end`` also receives
the epoch's row of ``history_`` (``epoch``, ``train_loss``, ``valid_loss``,
``valid_score``, ``learning_rate``, ``duration``) and may return ``True`` to
stop training.

Order: the estimator's built-in behaviour (scikit-learn's convergence rule,
``early_stopping``) runs first at every hook, then these callbacks in list
order; so what a callback restores in ``on_train_end`` is what the model
keeps. A callback that watches a value the fit will not produce (a validation
score without a validation set, a learning rate with ``solver='lbfgs'``) is
refused with a ``ValueError`` before the first epoch.

Nothing in a hook forces a device synchronisation except what the hook itself
reads: the epoch's losses are already host numbers, and ``on_batch_end`` gets
only the batch's index and size.
"""

import math
import os
import sys
import tempfile
import warnings
from numbers import Integral as _Integral
from numbers import Real as _Real

import joblib
from sklearn.utils._param_validation import StrOptions as _StrOptions

from sknet.engine._callbacks import BestWeights as _BestWeights
from sknet.engine._callbacks import Callback, TrainingState
from sknet.engine._callbacks import improved as _improved
from sknet.engine._callbacks import resolve_mode as _resolve_mode
from sknet.engine._schedules import cosine_rate as _cosine_rate
from sknet.engine._schedules import warmup_rate as _warmup_rate
from sknet.layers._constraints import Count as _Count
from sknet.layers._constraints import Number as _Number
from sknet.layers._tree import leaves as _leaves
from sknet.layers._tree import set_flags as _set_flags

__all__ = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "LRScheduler",
    "PrintLog",
    "ProgressBar",
    "TerminateOnNaN",
    "TrainingState",
    "Unfreeze",
]


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
        self._best.restore(state.network)
        self._best.clear()  # nothing outlives fit but the model


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


class LRScheduler(Callback):
    """Change the learning rate between epochs.

    For ``solver='sgd'`` this sets the learning rate; for ``'adam'`` and
    ``'adamw'`` the base step size (``learning_rate_init``) that Adam's bias
    correction scales. The recipe of tabular networks with AdamW is
    ``policy='cosine'`` with a ``warmup`` (the policy starts after it).

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
        Epochs of the cosine; ``None``: the estimator's ``max_iter - warmup``.
    monitor : str, default='valid_loss'
        For ``'plateau'``.
    patience : int, default=5
        For ``'plateau'``.
    min_lr : float, default=0.0
        The rate never goes below this.
    warmup : int, default=0
        Epochs of linear warm-up before the policy: the rate rises batch by
        batch, from ``initial / n`` to ``initial`` at batch ``n``, the last of them.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import LRScheduler
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> halve = LRScheduler(policy="step", step_size=1, gamma=0.5)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), solver="sgd", learning_rate_init=0.1,
    ...                     tol=1.0, n_iter_no_change=1, random_state=0, device="cpu",
    ...                     callbacks=[halve]).fit(X, y)
    >>> [row["learning_rate"] for row in clf.history_]
    [0.1, 0.05, 0.025]
    """

    _parameter_constraints: dict = {
        "policy": [_StrOptions({"step", "cosine", "plateau"})],
        "step_size": [_Count(1)],
        "gamma": [_Number(0, None)],
        "T_max": [_Count(1), None],
        "monitor": [str],
        "patience": [_Count(0)],
        "min_lr": [_Number(0, None, closed="left")],
        "warmup": [_Count(0)],
    }

    def __init__(
        self,
        policy="step",
        step_size=10,
        gamma=0.1,
        T_max=None,
        monitor="valid_loss",
        patience=5,
        min_lr=0.0,
        warmup=0,
    ):
        self.policy = policy
        self.step_size = step_size
        self.gamma = gamma
        self.T_max = T_max
        self.monitor = monitor
        self.patience = patience
        self.min_lr = min_lr
        self.warmup = warmup

    def on_train_begin(self, state):
        if self.policy not in ("step", "cosine", "plateau"):
            raise ValueError(f"policy must be 'step', 'cosine' or 'plateau', got {self.policy!r}")
        state.require_optimizer("LRScheduler")
        if self.policy == "plateau":
            state.check_monitor(self.monitor, "LRScheduler(policy='plateau')")
        warmup = self.warmup
        if isinstance(warmup, bool) or not isinstance(warmup, _Integral) or warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
        self._initial = state.learning_rate
        self._epochs, self._best, self._wait = 0, None, 0
        self._mode = _resolve_mode("auto", self.monitor)
        self._batches = math.ceil(state.n_train_rows / state.batch_size)
        self._steps = warmup * self._batches

    def on_epoch_begin(self, state, epoch):
        self._warm(state, self._epochs * self._batches + 1)  # the epoch's first batch

    def on_batch_end(self, state, batch, size):
        if batch + 1 < self._batches:  # the next one of this epoch (the history row
            self._warm(state, self._epochs * self._batches + batch + 2)  # keeps the last)

    def _warm(self, state, step):
        if step <= self._steps:
            state.learning_rate = _warmup_rate(self._initial, step, self._steps)

    def on_epoch_end(self, state, epoch, logs):
        self._epochs += 1
        epochs, lr = self._epochs - self.warmup, state.learning_rate  # after the warm-up
        if epochs <= 0:
            return False
        if self.policy == "step":
            lr = self._initial * self.gamma ** (epochs // self.step_size)
        elif self.policy == "cosine":
            T_max = self.T_max or max(state.estimator.max_iter - self.warmup, 1)
            lr = _cosine_rate(self._initial, self.min_lr, epochs, T_max)
        else:
            value = logs[self.monitor]
            if _improved(value, self._best, self._mode, 0.0):
                self._best, self._wait = value, 0
            else:
                self._wait += 1
                if self._wait >= self.patience:
                    lr, self._wait = lr * self.gamma, 0
        state.learning_rate = max(lr, self.min_lr)
        return False


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
        warnings.warn(
            f"The loss became non-finite at epoch {epoch}; training stopped and the "
            f"weights of epoch {epoch - 1} are kept.",
            UserWarning,
        )
        return True

    def on_train_end(self, state):
        self._weights = self._optimizer_state = None


class ProgressBar(Callback):
    """A progress bar over the batches of each epoch, on stderr.

    Draws a tqdm bar when tqdm is installed (``sknet-nn[progress]``) and stderr
    is a terminal; otherwise (a log file, a notebook's captured output, no
    tqdm, ``solver='lbfgs'``, whose iterations have no batches) prints one
    line per epoch instead. The bar closes with the epoch's last batch, so
    what other callbacks print at the end of the epoch (:class:`PrintLog`)
    does not leave a bar behind.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import ProgressBar
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[ProgressBar()])
    >>> len(clf.fit(X, y).history_)  # the progress went to stderr
    3
    """

    def on_train_begin(self, state):
        tqdm = None
        if _is_terminal(sys.stderr):
            try:
                from tqdm import tqdm
            except ImportError:
                pass
        self._tqdm, self._bar = tqdm, None

    def on_epoch_begin(self, state, epoch):
        if self._tqdm is not None and state.optimizer is not None:
            self._seen = 0
            self._bar = self._tqdm(
                total=state.n_train_rows,
                desc=f"epoch {epoch}",
                unit="rows",
                leave=False,
                file=sys.stderr,
            )

    def on_batch_end(self, state, batch, size):
        if self._bar is not None:
            self._bar.update(size)
            self._seen += size
            if self._seen >= state.n_train_rows:  # the epoch's last batch
                self._bar.close()
                self._bar = None

    def on_epoch_end(self, state, epoch, logs):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._tqdm is None or state.optimizer is None:
            print(f"epoch {epoch}: train_loss {logs['train_loss']:.5f}", file=sys.stderr)
        return False

    def on_train_end(self, state):
        if self._bar is not None:
            self._bar.close()
        self._bar = None


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class PrintLog(Callback):
    """Print a table with one row per epoch (stdout).

    Columns: epoch, train loss, validation loss and score (``-`` without a
    validation set), learning rate, seconds. ``verbose=True`` prints
    scikit-learn's own lines instead; both can be on.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import PrintLog
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[PrintLog()])
    >>> clf = clf.fit(X, y)  # doctest: +ELLIPSIS
    epoch  train_loss  valid_loss  valid_score         lr  seconds
        1  ...           -            -      0.001  ...
        2  ...
        3  ...
    """

    HEADER = (
        f"{'epoch':>5}  {'train_loss':>10}  {'valid_loss':>10}  {'valid_score':>11}  "
        f"{'lr':>9}  {'seconds':>7}"
    )

    def on_train_begin(self, state):
        print(self.HEADER)

    def on_epoch_end(self, state, epoch, logs):
        print(self.format_row(logs))
        return False

    @staticmethod
    def format_row(logs):
        """One line of the table for a history row."""

        def cell(value, width, spec):
            return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"

        return "  ".join(
            [
                cell(logs["epoch"], 5, "d"),
                cell(logs["train_loss"], 10, ".5f"),
                cell(logs["valid_loss"], 10, ".5f"),
                cell(logs["valid_score"], 11, ".5f"),
                cell(logs["learning_rate"], 9, ".3g"),
                cell(logs["duration"], 7, ".3f"),
            ]
        )


class Unfreeze(Callback):
    """Unfreeze frozen layers at a given epoch: train the new head first, then all.

    The usual schedule for fine-tuning a reused network (see
    :func:`sknet.layers.from_estimator`): the pretrained layers stay frozen
    while the new layers learn, then train too, typically with a small
    ``lr_scale``. Unfrozen parameters start with fresh optimizer state; the
    others keep theirs. A container (``Sequential``, ``Residual``, what
    :func:`~sknet.layers.from_estimator` returns for one) unfreezes with
    every layer inside it. The estimator's ``layers`` parameter is not
    changed: the next fit starts frozen again.

    Parameters
    ----------
    epoch : int, default=5
        The layers train from this epoch on, counted from 1 in each call to
        ``fit`` (with ``epoch=3``, epochs 1 and 2 train the other layers
        only), whatever earlier fits of a warm start ran.
    layers : list of int or None, default=None
        Indices into ``layers_`` of the layers to unfreeze (with everything
        inside them); ``None``: every layer with frozen parameters.
    lr_scale : float or None, default=None
        If given, the ``lr_scale`` (a positive number) of the unfrozen layers.

    Attributes
    ----------
    unfrozen_ : list of int
        The indices into ``layers_`` of the layers this callback unfroze in
        the last fit.

    Examples
    --------
    Train a new head on a frozen hidden layer for one epoch, then everything:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import ConvNetClassifier
    >>> from sknet.callbacks import Unfreeze
    >>> from sknet.layers import Dense, Flatten
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> layers = [Flatten(), Dense(16, activation="relu", trainable=False)]
    >>> clf = ConvNetClassifier(layers=layers, tol=1.0, n_iter_no_change=1, random_state=0,
    ...                         device="cpu", callbacks=[Unfreeze(epoch=2)]).fit(X, y)
    >>> clf.callbacks_[0].unfrozen_
    [1]
    >>> clf.layers_[1].trainable, clf.layers[1].trainable
    (True, False)
    """

    _parameter_constraints: dict = {
        "epoch": [_Count(1)],
        "layers": [list, tuple, None],
        "lr_scale": [_Number(0, None), None],
    }

    def __init__(self, epoch=5, layers=None, lr_scale=None):
        self.epoch = epoch
        self.layers = layers
        self.lr_scale = lr_scale

    def on_train_begin(self, state):
        if not isinstance(self.epoch, _Integral) or isinstance(self.epoch, bool) or self.epoch < 1:
            raise ValueError(f"Unfreeze: epoch must be a positive int, got {self.epoch!r}")
        if self.lr_scale is not None and (
            not isinstance(self.lr_scale, _Real)
            or isinstance(self.lr_scale, bool)
            or not math.isfinite(self.lr_scale)
            or self.lr_scale <= 0
        ):
            raise ValueError(
                f"Unfreeze: lr_scale must be a positive number or None, got {self.lr_scale!r}"
            )
        state.require_optimizer("Unfreeze")
        n = len(state.network.layers)
        if self.layers is not None and not all(
            isinstance(i, _Integral) and not isinstance(i, bool) and -n <= i < n
            for i in self.layers
        ):
            raise ValueError(f"Unfreeze: layers={self.layers!r} is out of range for {n} layers")
        self._first = len(state.history) + 1
        self.unfrozen_ = []

    def on_epoch_begin(self, state, epoch):
        if epoch - self._first + 1 != self.epoch:
            return
        layers = state.network.layers
        indices = range(len(layers)) if self.layers is None else self.layers
        for i in indices:
            frozen = [
                leaf for _, leaf in _leaves([layers[i]]) if leaf.params and not leaf.trainable
            ]
            if not frozen:
                continue
            _set_flags(layers[i], trainable=True, lr_scale=self.lr_scale)
            self.unfrozen_.append(i % len(layers))
        if self.unfrozen_:
            state.update_trainable()

"""Learning-rate schedules: LRScheduler (step, cosine, plateau, with a warm-up)."""

import math
from numbers import Integral as _Integral

from sklearn.utils._param_validation import StrOptions as _StrOptions

from sknet.engine._callbacks import Callback
from sknet.engine._callbacks import improved as _improved
from sknet.engine._callbacks import resolve_mode as _resolve_mode
from sknet.engine._schedules import cosine_rate as _cosine_rate
from sknet.engine._schedules import warmup_rate as _warmup_rate
from sknet.layers._constraints import Count as _Count
from sknet.layers._constraints import Number as _Number


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
        if getattr(state.estimator, "learning_rate", None) == "anneal":
            raise ValueError(
                "LRScheduler sets the learning rate each epoch, and learning_rate='anneal' "
                "(the tabular estimators' default) lowers it after the plateau: give "
                "learning_rate='constant' with an LRScheduler."
            )
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

    def batch_learning_rates(self, state, n_batches):
        # What on_batch_end sets before each batch of this epoch (DataParallel's workers
        # step with these rates): the warm-up's, or None once it is over.
        first = self._epochs * self._batches + 1
        if first > self._steps:
            return None
        rates, rate = [], state.learning_rate
        for b in range(n_batches):
            if b > 0 and first + b <= self._steps:
                rate = _warmup_rate(self._initial, first + b, self._steps)
            rates.append(rate)
        return rates

    def _warm(self, state, step):
        if step <= self._steps:
            state.learning_rate = _warmup_rate(self._initial, step, self._steps)

    def on_epoch_end(self, state, epoch, logs):
        self._epochs += 1
        epochs, lr = self._epochs - self.warmup, state.learning_rate  # after the warm-up
        if epochs <= 0:
            return False
        if self.policy == "step":
            try:
                lr = self._initial * self.gamma ** (epochs // self.step_size)
            except OverflowError:  # a float's power beyond any float
                raise ValueError(
                    f"LRScheduler: gamma={self.gamma!r} to the power {epochs // self.step_size} "
                    "overflows: the learning rate grew beyond any float; a gamma below 1 "
                    "decays it"
                ) from None
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

"""Watching a fit: ProgressBar (tqdm bars over the epochs and the batches, or a line
per epoch with the time left) and PrintLog (a table)."""

import sys
import time

from sknet.engine._callbacks import Callback


class ProgressBar(Callback):
    """Progress bars on stderr: one over the epochs, with the time left, and one per epoch.

    Where bars can be drawn, in a terminal or a Jupyter notebook, with tqdm
    installed (``sknet-nn[progress]``; ``tqdm.auto``, so a notebook gets its
    widgets), ``epochs=True`` draws a bar over the epochs of the fit, whose
    total is ``max_iter``, with the elapsed time, the time left and the last
    training loss; it ends where the fit stops, earlier than ``max_iter`` when
    early stopping or the ``tol`` rule stops it, or at Ctrl-C (``partial_fit``,
    one epoch, shows the batches only).
    ``batches=True`` draws, below it, a bar over the rows of each epoch
    (``solver='lbfgs'``, whose iterations have no batches, has none). The
    batch bar closes with the epoch's last batch, so what other callbacks
    print at the end of the epoch (:class:`PrintLog`, written above the bars)
    does not leave a bar behind.

    Elsewhere (a log file, no tqdm) it prints one line per epoch instead:
    ``epoch 3/200: train_loss 0.41234, at most 0:00:12 left`` with
    ``epochs=True`` (the time the remaining epochs up to ``max_iter`` take at
    this fit's pace so far: early stopping can only make it shorter), and
    ``epoch 3: train_loss 0.41234`` with ``epochs=False`` (and in
    ``partial_fit``). Epochs are numbered as in ``history_``, across warm
    starts.

    Parameters
    ----------
    epochs : bool, default=True
        Show the progress over the epochs, with the time left.
    batches : bool, default=True
        Show the progress over each epoch's batches (a bar only).

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

    _parameter_constraints: dict = {"epochs": ["boolean"], "batches": ["boolean"]}

    observes_batches = True  # it draws the batches done: after them is fine

    def __init__(self, epochs=True, batches=True):
        self.epochs = epochs
        self.batches = batches

    def __setstate__(self, state):
        super().__setstate__(state)
        for name in ("epochs", "batches"):  # pickled before these parameters existed
            self.__dict__.setdefault(name, True)

    def on_train_begin(self, state):
        if not (self.epochs or self.batches):
            raise ValueError(
                "ProgressBar(epochs=False, batches=False) shows nothing: set epochs=True "
                "or batches=True"
            )
        self._tqdm, self._bar, self._epochs_bar = _bar_class(), None, None
        self._first, self._started = len(state.history) + 1, time.perf_counter()
        max_epochs = getattr(state, "max_epochs", None)  # a state made without it
        self._last = None if max_epochs is None else self._first - 1 + max_epochs
        # over one epoch (partial_fit), the batches say it all
        self._over_epochs = self.epochs and max_epochs != 1
        if self._over_epochs and self._tqdm is not None:
            self._epochs_bar = self._tqdm(
                total=self._last,
                initial=self._first - 1,
                desc=type(state.estimator).__name__,
                unit="epoch",
                file=sys.stderr,
            )

    def on_epoch_begin(self, state, epoch):
        if self._draws_batches(state):
            self._seen = 0
            self._bar = self._tqdm(
                total=state.epoch_rows,
                desc=f"epoch {epoch}",
                unit="rows",
                leave=False,
                file=sys.stderr,
            )

    def on_batch_end(self, state, batch, size):
        if self._bar is not None:
            self._bar.update(size)
            self._seen += size
            if self._seen >= state.epoch_rows:  # the epoch's last batch
                self._bar.close()
                self._bar = None

    def on_epoch_end(self, state, epoch, logs):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._epochs_bar is not None:
            self._epochs_bar.set_postfix(train_loss=f"{logs['train_loss']:.5f}", refresh=False)
            self._epochs_bar.update(1)
        elif not self._draws_batches(state):  # no bar shows this epoch: a line
            print(self._line(epoch, logs), file=sys.stderr)
        return False

    def _draws_batches(self, state):
        return self.batches and self._tqdm is not None and state.optimizer is not None

    def _line(self, epoch, logs):
        """The epoch's line where no bar is drawn."""
        loss = f"train_loss {logs['train_loss']:.5f}"
        if not self._over_epochs or self._last is None:
            return f"epoch {epoch}: {loss}"
        done = epoch - self._first + 1
        left = (time.perf_counter() - self._started) / done * (self._last - epoch)
        return f"epoch {epoch}/{self._last}: {loss}, at most {_clock(left)} left"

    def on_train_end(self, state):
        for name in ("_bar", "_epochs_bar"):
            bar = getattr(self, name, None)
            if bar is not None:
                bar.close()
            setattr(self, name, None)


def _bar_class():
    """``tqdm.auto.tqdm`` where bars can be drawn (a terminal, a notebook), else None."""
    if not (_is_terminal(sys.stderr) or _in_notebook()):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def _in_notebook():
    """Whether this runs in a Jupyter kernel (where ``tqdm.auto`` draws widgets)."""
    ipython = sys.modules.get("IPython")  # never imported here: only if it runs us
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _clock(seconds):
    """``H:MM:SS``."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


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
        _print(self.HEADER)

    def on_epoch_end(self, state, epoch, logs):
        _print(self.format_row(logs))
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


def _print(line):
    """``print(line)``, above tqdm's bars when some are drawn (:class:`ProgressBar`'s)."""
    tqdm = getattr(sys.modules.get("tqdm"), "tqdm", None)  # loaded only if bars were drawn
    if tqdm is not None and getattr(tqdm, "_instances", None):
        tqdm.write(line, file=sys.stdout)
    else:
        print(line)

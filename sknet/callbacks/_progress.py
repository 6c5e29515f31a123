"""Watching a fit: ProgressBar (a tqdm bar, or a line per epoch) and PrintLog (a table)."""

import sys

from sknet.engine._callbacks import Callback


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

    observes_batches = True  # it draws the batches done: after them is fine

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
        if getattr(self, "_bar", None) is not None:
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

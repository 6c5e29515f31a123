"""CSVLogger: one line per epoch of ``history_`` in a CSV file, as Keras writes it."""

import csv
import os

from sknet.callbacks._runs import fit_path, run_name
from sknet.engine._callbacks import Callback


class CSVLogger(Callback):
    """Write each epoch's row of ``history_`` to a CSV file.

    Keras's ``CSVLogger``: a header naming the columns (``epoch``,
    ``train_loss``, ``valid_loss``, ``valid_score``, ``learning_rate``,
    ``duration`` and the keys callbacks add), then one line per epoch, written
    and flushed as the epoch ends, so a fit that fails or is interrupted keeps
    the lines of the epochs it finished. A value the fit does not have (a
    validation loss without a validation set, a learning rate with
    ``solver='lbfgs'``) is an empty field. Needs no other library.

    Parameters
    ----------
    path : str or path-like, default='history.csv'
        The file; its directory is created. ``{run}`` in it is replaced by a
        name unique to each fit (date, time, host, process, a counter), so the
        fits of a search each write their own file.
    separator : str, default=','
        The one character between fields.
    append : bool, default=False
        Add to the file instead of writing it anew; the header is written only
        to an empty file. A fit that continues a model (``warm_start=True``,
        ``partial_fit``) always appends, so that the file holds the whole of
        ``history_``.

    Attributes
    ----------
    path_ : str
        The file the last fit wrote.

    See Also
    --------
    TensorBoardLogger : The same values as TensorBoard scalars.
    MLflowLogger : The same values, the parameters and the model in MLflow.

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import CSVLogger
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> log = CSVLogger(os.path.join(tmp.name, "history.csv"))
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[log]).fit(X, y)
    >>> with open(clf.callbacks_[0].path_) as f:
    ...     lines = f.read().splitlines()
    >>> lines[0]
    'epoch,train_loss,valid_loss,valid_score,learning_rate,duration'
    >>> len(lines)  # the header and three epochs
    4
    >>> tmp.cleanup()
    """

    _parameter_constraints: dict = {
        "path": [str, os.PathLike],
        "separator": [str],
        "append": ["boolean"],
    }

    def __init__(self, path="history.csv", separator=",", append=False):
        self.path = path
        self.separator = separator
        self.append = append

    def on_train_begin(self, state):
        if len(self.separator) != 1:
            raise ValueError(f"CSVLogger: separator must be one character, got {self.separator!r}")
        self.path_ = fit_path(self.path, run_name())
        os.makedirs(os.path.dirname(os.path.abspath(self.path_)), exist_ok=True)
        continues = self.append or len(state.history) > 0
        self._file = open(self.path_, "a" if continues else "w", newline="", encoding="utf-8")
        self._writer = None

    def on_epoch_end(self, state, epoch, logs):
        if self._writer is None:
            self._writer = csv.DictWriter(
                self._file,
                fieldnames=list(logs),
                delimiter=self.separator,
                restval="",
                extrasaction="ignore",
            )
            if self._file.tell() == 0:
                self._writer.writeheader()
        self._writer.writerow({k: "" if v is None else v for k, v in logs.items()})
        self._file.flush()
        return False

    def on_train_end(self, state):
        if getattr(self, "_file", None) is not None:
            self._file.close()
        self._file = self._writer = None

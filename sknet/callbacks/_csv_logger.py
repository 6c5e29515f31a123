"""CSVLogger: one line per epoch of ``history_`` in a CSV file, as Keras writes it.

The file always parses (``pandas.read_csv``) and never loses a key: a key the
header lacks has the file written anew with every column (a temporary file
renamed over it), and a fit holds an exclusive lock on its file while it
writes (``fcntl.flock``), so that two fits never write one file.
"""

import contextlib
import csv
import errno
import os
import stat
import tempfile

from sklearn.utils._param_validation import Options

from sknet.callbacks._runs import fit_path, fit_run_name
from sknet.engine._callbacks import Callback

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


class FieldSeparator(Options):
    """One character that separates CSV fields: not the quote ``"``, not a line break."""

    def __init__(self):
        super().__init__(str, set())

    def is_satisfied_by(self, val):
        return (
            isinstance(val, str)
            and len(val) == 1
            and val != '"'
            and len(f"a{val}b".splitlines()) == 1
        )

    def __str__(self):
        return "a str of one character other than '\"' and a line break"


class CSVLogger(Callback):
    """Write each epoch's row of ``history_`` to a CSV file.

    Keras's ``CSVLogger``: a header naming the columns (``epoch``,
    ``train_loss``, ``valid_loss``, ``valid_score``, ``learning_rate``,
    ``duration`` and the keys callbacks add), then one line per epoch, written
    and flushed as the epoch ends, so a fit that fails or is interrupted keeps
    the lines of the epochs it finished (until a fit continues the model it
    left, which writes those epochs again in their place). A value the fit does not have (a
    validation loss without a validation set, a learning rate with
    ``solver='lbfgs'``, a key a callback adds from a later epoch on) is an
    empty field. When a row brings a key the header lacks (a callback's, or
    a continued fit's), the file is written anew with that column added (to
    a temporary file in the same directory, renamed over it), so that the
    file always holds every key and always parses (``pandas.read_csv``).
    Needs no other library.

    Put it after the callbacks that add keys to the history: a row is
    written when this callback's ``on_epoch_end`` comes.

    Parameters
    ----------
    path : str or path-like, default='history.csv'
        The file; its directory is created. ``{run}`` in it is replaced by a
        name unique to each fit (date, time, host, process, a counter), so the
        fits of a search each write their own file; a fit that continues a
        model (``warm_start=True``, ``partial_fit``) writes to the file of the
        fit it continues. A fit holds a lock on its file while it runs (on
        systems with ``fcntl``, all but Windows): a fit whose file another
        running fit is writing (without ``{run}``, the fits of a parallel
        search) stops before its first epoch with a ValueError.
    separator : str, default=','
        The one character between fields; not the quote ``"`` nor a line
        break.
    append : bool, default=False
        Add to the file instead of writing it anew; the header is written only
        to an empty file (and written anew with the union of the columns when
        the rows bring new keys). A fit that continues a model (``warm_start=True``,
        ``partial_fit``) always appends, so that the file holds the whole of
        ``history_`` (into an empty file, the rows of the fits it continues
        first).

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
        "separator": [FieldSeparator()],
        "append": ["boolean"],
    }

    def __init__(self, path="history.csv", separator=",", append=False):
        self.path = path
        self.separator = separator
        self.append = append

    def on_train_begin(self, state):
        self._file, self._columns = None, []
        self.path_ = fit_path(self.path, fit_run_name(state))
        try:
            self._start(state)
        except BaseException as exc:
            self.on_train_end(state)  # the file closed, its lock released
            if isinstance(exc, OSError):  # a directory, a device, no permission: say which
                reason = exc.strerror or str(exc)
                raise ValueError(
                    f"CSVLogger: path={self.path_!r} cannot be written: {reason}; give the "
                    "path of a file in a directory this process may write"
                ) from exc
            raise

    def _start(self, state):
        """Open (and lock) the file, read its header; with a continued fit's history first."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path_)), exist_ok=True)
        self._file = _open_locked(self.path_)
        if self._file is not None and not stat.S_ISREG(os.fstat(self._file.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device or a pipe)")
        if self._file is None:
            root, ext = os.path.splitext(os.fspath(self.path))
            raise ValueError(
                f"CSVLogger: path={self.path_!r} is being written by another fit that is "
                "still running (the fits of a parallel search, say); put '{run}' in path "
                f"(CSVLogger({root + '-{run}' + ext!r})) so that each fit writes a file of "
                "its own"
            )
        if not (self.append or state.history):  # a continued fit adds to its file
            self._file.truncate(0)
        rows = self._rows()
        self._columns = rows[0] if rows else []
        if not self._columns and state.history:  # a new file: the history it continues first
            self._write(state.history)
        elif state.history and "epoch" in self._columns:
            # the lines of a continued fit that failed after the history's last epoch: that
            # fit was undone, and this one writes those epochs again
            epoch, kept = self._columns.index("epoch"), rows[1:]
            while kept and _epoch(kept[-1], epoch) > len(state.history):
                kept.pop()
            if len(kept) < len(rows) - 1:
                self._rewrite(self._columns, kept)

    def on_epoch_end(self, state, epoch, logs):
        self._write([logs])
        return False

    def on_train_end(self, state):
        if getattr(self, "_file", None) is not None:
            self._file.close()  # and its lock with it
        self._file = None

    def _rows(self):
        """The rows the file holds, its header first."""
        self._file.seek(0)
        return list(csv.reader(self._file, delimiter=self.separator))

    def _write(self, rows):
        """Append history ``rows``; first, if they bring keys, the file anew with every column."""
        keys = dict.fromkeys(key for row in rows for key in row)
        new = [key for key in keys if key not in self._columns]
        if new and self._columns:
            self._rewrite(self._columns + new)
        elif new:  # an empty file: its header
            csv.writer(self._file, delimiter=self.separator).writerow(new)
            self._columns = new
        writer = csv.DictWriter(
            self._file, fieldnames=self._columns, delimiter=self.separator, restval=""
        )
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        self._file.flush()

    def _rewrite(self, columns, rows=None):
        """The file written anew with the header ``columns``, its rows (or ``rows``) kept,
        new fields empty.

        Written to a temporary file in the same directory, locked before anyone
        can see it, then renamed over the file: the file parses at every moment.
        """
        rows = self._rows()[1:] if rows is None else rows
        directory, name = os.path.split(os.path.abspath(self.path_))
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
        new = os.fdopen(fd, "a+", newline="", encoding="utf-8")
        try:
            _lock(new)
            os.chmod(temporary, stat.S_IMODE(os.fstat(self._file.fileno()).st_mode))
            writer = csv.writer(new, delimiter=self.separator)
            writer.writerow(columns)
            writer.writerows(row + [""] * (len(columns) - len(row)) for row in rows)
            new.flush()
            if fcntl is None:  # Windows refuses to rename over an open file (and has no lock)
                self._file.close()
            os.replace(temporary, self.path_)
        except BaseException:
            new.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._file.close()  # its lock held until the new file, locked, took its place
        self._file, self._columns = new, columns


def _epoch(row, column):
    """A line's epoch number (0 where the field is not one)."""
    field = row[column] if column < len(row) else ""
    return int(field) if field.strip().isdigit() else 0


def _lock(file):
    """Take ``file``'s exclusive lock (fcntl's, between processes and threads); False if taken."""
    if fcntl is None:  # Windows: no lock
        return True
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def _open_locked(path):
    """``path`` opened to read and append under this fit's lock; None if another fit holds it."""
    while True:
        file = open(path, "a+", newline="", encoding="utf-8")
        if not _lock(file):
            file.close()
            return None
        try:
            if os.path.samestat(os.fstat(file.fileno()), os.stat(path)):
                return file
        except FileNotFoundError:
            pass
        file.close()  # renamed over meanwhile (a rewrite): lock the file there now

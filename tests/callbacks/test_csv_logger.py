"""sknet/callbacks/_csv_logger.py: CSVLogger, a line per epoch of history_ (Keras's semantics)."""

import csv
import os
import pickle
import re
import subprocess
import sys
import threading

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from sklearn.base import clone

from sknet.callbacks import Callback, CSVLogger
from tests.callbacks.helpers import GRID, N_FITS, data, mlp, search


def read(path, separator=","):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter=separator))


def as_rows(history):
    """``history_`` as the CSV holds it: strings, an empty field for None."""
    return [["" if v is None else str(v) for v in row.values()] for row in history]


def test_one_line_per_epoch_with_a_header(tmp_path):
    X, y = data()
    clf = mlp([CSVLogger(tmp_path / "log.csv")], early_stopping=True).fit(X, y)
    lines = read(tmp_path / "log.csv")
    assert lines[0] == list(clf.history_[0])
    assert lines[0][:2] == ["epoch", "train_loss"]
    assert lines[1:] == as_rows(clf.history_)  # every value, at full precision
    assert float(lines[-1][1]) == clf.history_[-1]["train_loss"]
    assert clf.callbacks_[0].path_ == str(tmp_path / "log.csv")


def test_what_a_fit_lacks_is_an_empty_field_and_lbfgs_has_no_rate(tmp_path):
    X, y = data()
    mlp([CSVLogger(tmp_path / "adam.csv")]).fit(X, y)
    header, *rows = read(tmp_path / "adam.csv")
    assert {row[header.index("valid_loss")] for row in rows} == {""}
    assert all(row[header.index("learning_rate")] == "0.001" for row in rows)
    lbfgs = mlp([CSVLogger(tmp_path / "lbfgs.csv")], solver="lbfgs", max_iter=5, tol=1e-4)
    with pytest.warns(Warning, match="lbfgs failed to converge"):
        lbfgs.fit(X, y)
    header, *rows = read(tmp_path / "lbfgs.csv")
    assert rows and {row[header.index("learning_rate")] for row in rows} == {""}


def test_overwrite_or_append(tmp_path):
    X, y = data()
    path = tmp_path / "log.csv"
    first = mlp([CSVLogger(path)]).fit(X, y)
    again = mlp([CSVLogger(path)], random_state=1).fit(X, y)
    assert read(path)[1:] == as_rows(again.history_)  # written anew
    more = mlp([CSVLogger(path, append=True)], random_state=2).fit(X, y)
    lines = read(path)
    assert lines.count(lines[0]) == 1  # one header
    assert lines[1:] == as_rows(again.history_) + as_rows(more.history_)
    assert first.history_ != again.history_


class AddsKey(Callback):
    """Adds ``key`` to the history from epoch ``start`` on (declared in ``provides`` if asked)."""

    def __init__(self, key="late", start=2, declare=True):
        self.key = key
        self.start = start
        self.declare = declare

    @property
    def provides(self):
        return (self.key,) if self.declare else ()

    def on_epoch_end(self, state, epoch, logs):
        if epoch >= self.start:
            logs[self.key] = epoch / 8
        return False


def assert_holds_history(path, history, separator=","):
    """The file read back by pandas is ``history``: every key, in the rows' order, every value."""
    log = pd.read_csv(path, sep=separator)
    keys = list(dict.fromkeys(key for row in history for key in row))
    assert list(log.columns) == keys
    expected = pd.DataFrame([{k: row.get(k) for k in keys} for row in history], dtype=float)
    assert_frame_equal(log.astype(float), expected, check_exact=False, rtol=1e-15)


@pytest.mark.parametrize("declare", [True, False])
def test_a_key_a_callback_adds_after_the_first_epoch_reaches_the_file(tmp_path, declare):
    X, y = data()
    path = tmp_path / "log.csv"
    clf = mlp([AddsKey(declare=declare), CSVLogger(path)], tol=0.0, n_iter_no_change=3)
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.set_params(max_iter=4).fit(X, y)
    assert "late" not in clf.history_[0] and clf.history_[-1]["late"] == 0.5
    assert_holds_history(path, clf.history_)


def test_continued_fits_with_new_keys_keep_the_whole_history_readable(tmp_path):
    X, y = data()
    path = tmp_path / "log.csv"
    clf = mlp([CSVLogger(path)], warm_start=True, tol=0.0, n_iter_no_change=2, max_iter=2)
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    clf.set_params(callbacks=[AddsKey("warm", start=1), CSVLogger(path)])
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)  # warm_start: a key the file's header lacks
    clf.set_params(callbacks=[AddsKey("partial", start=1, declare=False), CSVLogger(path)])
    clf.partial_fit(X, y)  # another one, undeclared
    clf.partial_fit(X, y)
    assert len(clf.history_) == 6
    assert_holds_history(path, clf.history_)
    lines = read(path)
    assert lines[0][-2:] == ["warm", "partial"] and lines.count(lines[0]) == 1
    assert [row[-2:] for row in lines[1:3]] == [["", ""], ["", ""]]  # the first fit's rows


def test_a_continuation_into_a_new_file_writes_the_history_it_continues(tmp_path):
    X, y = data()
    clf = mlp([], warm_start=True).fit(X, y)  # no logger: nothing written
    clf.set_params(callbacks=[CSVLogger(tmp_path / "log.csv")]).fit(X, y)
    assert_holds_history(tmp_path / "log.csv", clf.history_)


def test_run_in_the_path_a_continued_fit_writes_the_file_it_continues(tmp_path):
    X, y = data()
    logger = CSVLogger(tmp_path / "logs" / "{run}.csv")
    clf = mlp([logger], warm_start=True, tol=0.0, n_iter_no_change=2, max_iter=2)
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    first = clf.callbacks_[0].path_
    clf.set_params(callbacks=[AddsKey(start=1), logger])
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    clf.partial_fit(X, y)
    assert clf.callbacks_[1].path_ == first
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [os.path.basename(first)]
    assert_holds_history(first, clf.history_)
    with pytest.warns(Warning, match="Maximum iterations"):
        fresh = clone(clf).set_params(warm_start=False).fit(X, y)  # a new model: its own file
    assert fresh.callbacks_[1].path_ != first
    assert len(list((tmp_path / "logs").iterdir())) == 2
    assert_holds_history(fresh.callbacks_[1].path_, fresh.history_)


def test_a_separator(tmp_path):
    X, y = data()
    clf = mlp([CSVLogger(tmp_path / "log.tsv", separator="\t")]).fit(X, y)
    assert read(tmp_path / "log.tsv", "\t")[1:] == as_rows(clf.history_)
    assert_holds_history(tmp_path / "log.tsv", clf.history_, separator="\t")
    clf = mlp([CSVLogger(tmp_path / "log.txt", separator=" ")]).fit(X, y)
    assert_holds_history(tmp_path / "log.txt", clf.history_, separator=" ")


@pytest.mark.parametrize("separator", [";;", "", "\n", "\r", '"', "\u2028", 1])
def test_a_separator_that_cannot_separate_fields_is_refused_before_the_fit(tmp_path, separator):
    X, y = data()
    clf = mlp([CSVLogger(tmp_path / "bad.csv", separator=separator)])
    message = r"(?s)'separator' parameter of CSVLogger must be .*Got " + re.escape(repr(separator))
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y)
    assert not (tmp_path / "bad.csv").exists()


class Waits(Callback):
    """Holds its fit at the end of the second epoch until the test lets it go."""

    def __init__(self, started, release):
        self.started = started
        self.release = release

    def __deepcopy__(self, memo):  # the fit's copy shares the events
        return self

    def on_epoch_end(self, state, epoch, logs):
        if epoch == 2:
            self.started.set()
            assert self.release.wait(60)
        return False


def fit_in_a_thread(logger):
    """Start a fit logging with ``logger`` in a thread, held after its second epoch.

    A key comes at the second epoch: the logger has written its file anew by then.
    """
    X, y = data()
    started, release = threading.Event(), threading.Event()
    clf = mlp([AddsKey(), logger, Waits(started, release)])
    thread = threading.Thread(target=clf.fit, args=(X, y))
    thread.start()
    assert started.wait(60)
    return clf, thread, release


def test_two_fits_at_once_into_one_file_the_second_is_refused(tmp_path):
    X, y = data()
    path = tmp_path / "history.csv"
    first, thread, release = fit_in_a_thread(CSVLogger(path))
    try:
        second = mlp([CSVLogger(path)], random_state=1)
        with pytest.raises(ValueError, match=r"(?s)another fit.*\{run\}") as info:
            second.fit(X, y)
        assert repr(str(path)) in str(info.value)
    finally:
        release.set()
        thread.join()
    assert_holds_history(path, first.history_)  # the first fit's file, whole
    mlp([CSVLogger(path)]).fit(X, y)  # free again once that fit ended


def test_with_run_in_the_path_two_fits_at_once_write_two_files(tmp_path):
    X, y = data()
    logger = CSVLogger(tmp_path / "{run}.csv")
    first, thread, release = fit_in_a_thread(logger)
    try:
        second = mlp([logger], random_state=1).fit(X, y)
    finally:
        release.set()
        thread.join()
    assert first.callbacks_[1].path_ != second.callbacks_[0].path_
    assert_holds_history(first.callbacks_[1].path_, first.history_)
    assert_holds_history(second.callbacks_[0].path_, second.history_)


@pytest.mark.skipif(sys.platform == "win32", reason="the lock is fcntl.flock's")
def test_a_file_another_process_writes_is_refused(tmp_path):
    X, y = data()
    path = tmp_path / "history.csv"
    holder = subprocess.Popen(  # another process's fit: it holds the file's lock
        [sys.executable, "-c", HOLDS_THE_LOCK, str(path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ValueError, match="another fit"):
            mlp([CSVLogger(path)]).fit(X, y)
    finally:
        holder.communicate("")
    mlp([CSVLogger(path)]).fit(X, y)


HOLDS_THE_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    sys.stdin.read()
"""


class ReadsTheFile(Callback):
    """After each epoch, the lines the CSV file already holds."""

    def __init__(self, path):
        self.path = path

    def on_train_begin(self, state):
        self.seen_ = []

    def on_epoch_end(self, state, epoch, logs):
        self.seen_.append(len(read(self.path)))


def test_each_line_is_on_disk_when_its_epoch_ends(tmp_path):
    X, y = data()
    path = tmp_path / "log.csv"
    clf = mlp([CSVLogger(path), ReadsTheFile(path)]).fit(X, y)
    assert clf.callbacks_[1].seen_ == [epoch + 1 for epoch in range(1, len(clf.history_) + 1)]


def test_run_in_the_path_gives_each_fit_of_a_search_its_own_file(tmp_path):
    logger = CSVLogger(tmp_path / "logs" / "{run}.csv")  # the directory is created
    grid = search(mlp([logger]), n_jobs=2)
    files = sorted((tmp_path / "logs").iterdir())
    assert len(files) == N_FITS and len(set(files)) == N_FITS
    for path in files:
        header, *rows = read(path)
        assert header[0] == "epoch" and [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    # the refit's file is the one its fitted copy names, with its history
    refit = grid.best_estimator_
    assert read(refit.callbacks_[0].path_)[1:] == as_rows(refit.history_)
    assert logger.__dict__.keys() == CSVLogger(tmp_path).__dict__.keys()  # never fitted
    assert grid.best_params_["alpha"] in GRID["alpha"]


def test_clone_and_pickle(tmp_path):
    X, y = data()
    clf = mlp([CSVLogger(tmp_path / "log.csv", separator=";")]).fit(X, y)
    twin = clone(clf)
    assert twin.callbacks[0] is not clf.callbacks[0]
    assert twin.callbacks[0].get_params() == clf.callbacks[0].get_params()
    loaded = pickle.loads(pickle.dumps(clf))
    assert loaded.callbacks_[0].path_ == clf.callbacks_[0].path_
    assert not [
        k for k in vars(loaded.callbacks_[0]) if k.startswith("_") and k != "_sklearn_version"
    ]
    assert (loaded.predict(X) == clf.predict(X)).all()
    loaded.fit(X, y)  # the loaded model trains and logs again
    assert read(tmp_path / "log.csv", ";")[1:] == as_rows(loaded.history_)

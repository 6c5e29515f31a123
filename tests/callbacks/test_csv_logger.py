"""sknet/callbacks/_csv_logger.py: CSVLogger, a line per epoch of history_ (Keras's semantics)."""

import csv
import pickle

import pytest
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


def test_a_continued_fit_appends_so_the_file_holds_history(tmp_path):
    X, y = data()
    path = tmp_path / "log.csv"
    clf = mlp([CSVLogger(path)], warm_start=True, tol=0.0, n_iter_no_change=2, max_iter=2)
    with pytest.warns(Warning):  # max_iter reached: ConvergenceWarning
        clf.fit(X, y)
    with pytest.warns(Warning):
        clf.fit(X, y)
    clf.partial_fit(X, y)
    assert len(clf.history_) == 5
    assert read(path)[1:] == as_rows(clf.history_)


def test_a_separator(tmp_path):
    X, y = data()
    clf = mlp([CSVLogger(tmp_path / "log.tsv", separator="\t")]).fit(X, y)
    assert read(tmp_path / "log.tsv", "\t")[1:] == as_rows(clf.history_)
    with pytest.raises(ValueError, match=r"separator must be one character, got ';;'"):
        mlp([CSVLogger(tmp_path / "bad.csv", separator=";;")]).fit(X, y)


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

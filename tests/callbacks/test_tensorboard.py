"""sknet/callbacks/_tensorboard.py: TensorBoardLogger, read back with TensorBoard's own reader."""

import os
import pickle
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from sknet.callbacks import TensorBoardLogger
from tests.callbacks.helpers import N_FITS, data, mlp, search

pytest.importorskip("tensorboard", reason='needs tensorboard: pip install "sknet-nn[tensorboard]"')
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)


def events(path):
    """TensorBoard's reader over a run's directory, everything kept."""
    reader = EventAccumulator(os.fspath(path), size_guidance={"scalars": 0, "histograms": 0})
    reader.Reload()
    return reader


def test_scalars_per_epoch_read_back_by_tensorboard(tmp_path):
    X, y = data()
    clf = mlp([TensorBoardLogger(tmp_path / "run")], early_stopping=True).fit(X, y)
    reader = events(clf.callbacks_[0].path_)
    keys = ["train_loss", "valid_loss", "valid_score", "learning_rate", "duration"]
    assert sorted(reader.Tags()["scalars"]) == sorted(keys)
    assert reader.Tags()["histograms"] == []
    for key in keys:
        scalars = reader.Scalars(key)
        assert [s.step for s in scalars] == [row["epoch"] for row in clf.history_]
        expected = np.float32([row[key] for row in clf.history_])  # simple_value: float32
        np.testing.assert_array_equal(np.float32([s.value for s in scalars]), expected)


def test_lbfgs_has_no_learning_rate(tmp_path):
    X, y = data()
    clf = mlp([TensorBoardLogger(tmp_path / "run")], solver="lbfgs", max_iter=5, tol=1e-4)
    with pytest.warns(Warning, match="lbfgs failed to converge"):
        clf.fit(X, y)
    assert sorted(events(tmp_path / "run").Tags()["scalars"]) == ["duration", "train_loss"]


def test_weight_histograms_every_n_epochs(tmp_path):
    X, y = data()
    board = TensorBoardLogger(tmp_path / "run", histogram_freq=2)
    clf = mlp([board], tol=0.0, n_iter_no_change=10, max_iter=4)
    with pytest.warns(Warning, match="Maximum iterations"):
        clf.fit(X, y)
    reader = events(tmp_path / "run")
    tags = ["layers_[0]/W", "layers_[0]/b", "layers_[1]/W", "layers_[1]/b"]
    assert sorted(reader.Tags()["histograms"]) == tags
    for tag, (path, name) in zip(tags, [(0, "W"), (0, "b"), (1, "W"), (1, "b")]):
        histograms = reader.Histograms(tag)
        assert [h.step for h in histograms] == [2, 4]
        last = histograms[-1].histogram_value  # the weights the fit ended with
        weights = np.asarray(clf.layers_[path].params[name], dtype=np.float64)
        assert last.num == weights.size == sum(last.bucket)
        assert last.min == pytest.approx(weights.min()) and last.max == weights.max()
        assert last.sum == pytest.approx(weights.sum())


def test_each_fit_of_a_search_is_a_run(tmp_path):
    grid = search(mlp([TensorBoardLogger(tmp_path / "runs" / "{run}")]), n_jobs=2)
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == N_FITS
    for run in runs:
        assert len(os.listdir(run)) == 1  # one event file: one writer per fit
        losses = events(run).Scalars("train_loss")
        assert [s.step for s in losses] == list(range(1, len(losses) + 1))
    refit = grid.best_estimator_
    losses = events(refit.callbacks_[0].path_).Scalars("train_loss")
    assert [s.value for s in losses] == pytest.approx([r["train_loss"] for r in refit.history_])


def test_a_fixed_path_gathers_successive_fits_in_one_run(tmp_path):
    X, y = data()
    clf = mlp([TensorBoardLogger(tmp_path / "run")], warm_start=True)
    clf.fit(X, y)
    first = len(clf.history_)
    clf.fit(X, y)  # continues: steps go on from the last epoch
    steps = [s.step for s in events(tmp_path / "run").Scalars("train_loss")]
    assert steps == list(range(1, len(clf.history_) + 1)) and len(steps) > first


def test_run_in_the_path_a_continued_fit_adds_to_the_run_it_continues(tmp_path):
    X, y = data()
    clf = mlp([TensorBoardLogger(tmp_path / "runs" / "{run}")], warm_start=True)
    clf.fit(X, y)
    clf.fit(X, y)  # continues: the same run, steps going on
    clf.partial_fit(X, y)
    (run,) = (tmp_path / "runs").iterdir()
    assert str(run) == clf.callbacks_[0].path_
    steps = [s.step for s in events(run).Scalars("train_loss")]
    assert steps == [row["epoch"] for row in clf.history_] and len(steps) > 3
    clone(clf).fit(X, y)  # a new model: a run of its own
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_clone_pickle_and_no_writer_left_open(tmp_path):
    X, y = data()
    clf = mlp([TensorBoardLogger(tmp_path / "run", histogram_freq=1)]).fit(X, y)
    assert clf.callbacks_[0]._writer is None  # closed when training ended
    assert clone(clf).callbacks[0].get_params() == clf.callbacks[0].get_params()
    loaded = pickle.loads(pickle.dumps(clf))
    assert loaded.callbacks_[0].path_ == str(tmp_path / "run")
    assert (loaded.predict(X) == clf.predict(X)).all()


def test_without_tensorboard_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    X, y = data()
    clf = mlp([TensorBoardLogger("never-written")])
    with pytest.raises(ImportError, match=r'pip install "sknet-nn\[tensorboard\]"'):
        clf.fit(X, y)
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(clf)
    assert not os.path.exists("never-written")

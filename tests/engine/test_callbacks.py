"""sknet/engine/_callbacks.py: every callback whose on_train_begin ran gets its on_train_end.

The fits' callbacks are copies, so the callbacks here record into :data:`EVENTS`
(a module-level list, not copied with them).
"""

import pytest

from sknet.callbacks import Callback, CSVLogger
from tests.callbacks.helpers import data, mlp

#: ``(name, hook)`` of every hook call of the recording callbacks, in order
EVENTS = []
#: the files the watched CSV loggers opened
OPENED = []


@pytest.fixture(autouse=True)
def clean():
    EVENTS.clear()
    OPENED.clear()
    yield
    EVENTS.clear()
    OPENED.clear()


class Recorder(Callback):
    """Records its train begin and end; raises ``error`` in ``fails_in``."""

    def __init__(self, name="recorder", fails_in=None, error=RuntimeError):
        self.name = name
        self.fails_in = fails_in
        self.error = error

    def _hook(self, hook):
        EVENTS.append((self.name, hook))
        if hook == self.fails_in:
            raise self.error(f"{self.name} fails in {hook}")

    def on_train_begin(self, state):
        self._hook("on_train_begin")

    def on_epoch_end(self, state, epoch, logs):
        if epoch == 2:
            self._hook("on_epoch_end")
        return False

    def on_train_end(self, state):
        self._hook("on_train_end")


class WatchedCSV(CSVLogger):
    """A CSVLogger whose opened file the test can look at afterwards."""

    def on_train_begin(self, state):
        super().on_train_begin(state)
        OPENED.append(self._file)


def ended(name):
    return (name, "on_train_end") in EVENTS


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failing_train_begin_ends_the_callbacks_that_began(solver, error, tmp_path):
    X, y = data()
    callbacks = [
        WatchedCSV(tmp_path / "log.csv"),
        Recorder("recorder"),
        Recorder("fails", fails_in="on_train_begin", error=error),
        Recorder("never"),
    ]
    with pytest.raises(error, match="fails fails in on_train_begin"):
        mlp(callbacks, solver=solver).fit(X, y)
    assert ended("recorder") and ended("fails")  # the one that raised ends too
    assert ("never", "on_train_begin") not in EVENTS and not ended("never")
    (file,) = OPENED
    assert file.closed
    assert EVENTS.index(("recorder", "on_train_end")) < EVENTS.index(("fails", "on_train_end"))


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_a_failing_epoch_end_ends_every_callback(solver, tmp_path):
    X, y = data()
    callbacks = [
        WatchedCSV(tmp_path / "log.csv"),
        Recorder("fails", fails_in="on_epoch_end"),
        Recorder("after"),
    ]
    with pytest.raises(RuntimeError, match="fails fails in on_epoch_end"):
        mlp(callbacks, solver=solver, tol=0.0, n_iter_no_change=5, max_iter=4).fit(X, y)
    assert ended("fails") and ended("after")
    assert OPENED[0].closed


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
def test_a_failing_train_end_keeps_no_other_callback_from_its_end(solver, tmp_path):
    X, y = data()
    callbacks = [
        Recorder("first", fails_in="on_train_end"),
        WatchedCSV(tmp_path / "log.csv"),
        Recorder("second", fails_in="on_train_end", error=KeyboardInterrupt),
        Recorder("last"),
    ]
    with pytest.raises(RuntimeError, match="first fails in on_train_end") as info:
        mlp(callbacks, solver=solver).fit(X, y)
    assert ended("first") and ended("second") and ended("last")
    assert OPENED[0].closed
    notes = getattr(info.value, "__notes__", [])  # Python 3.11+: the others' failures
    assert not notes or any("second fails in on_train_end" in note for note in notes)


def test_the_fits_failure_propagates_over_a_failing_train_end(tmp_path):
    X, y = data()
    callbacks = [
        Recorder("ends badly", fails_in="on_train_end"),
        Recorder("fails", fails_in="on_epoch_end", error=ValueError),
        Recorder("last"),
    ]
    with pytest.raises(ValueError, match="fails fails in on_epoch_end"):
        mlp(callbacks, tol=0.0, n_iter_no_change=5, max_iter=4).fit(X, y)
    assert ended("ends badly") and ended("fails") and ended("last")


def test_an_interrupted_epoch_ends_every_callback_and_keeps_the_model(tmp_path):
    X, y = data()
    callbacks = [
        WatchedCSV(tmp_path / "log.csv"),
        Recorder("interrupts", fails_in="on_epoch_end", error=KeyboardInterrupt),
        Recorder("after"),
    ]
    clf = mlp(callbacks, tol=0.0, n_iter_no_change=5, max_iter=4)
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        clf.fit(X, y)
    assert ended("interrupts") and ended("after") and OPENED[0].closed
    assert len(clf.history_) == 2

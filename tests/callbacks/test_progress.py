"""ProgressBar's bar over the epochs, with the time left (sknet/callbacks/_progress.py).

In a terminal or a notebook (tqdm.auto), a bar over the epochs whose total is
max_iter and that ends where the fit stops, beside the per-epoch bars over the
batches; elsewhere a line per epoch that says the time left. The per-epoch
bars alone, as before, are ``ProgressBar(epochs=False)``.
"""

import io
import pickle
import re
import sys
import types

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.utils._param_validation import InvalidParameterError

import sknet.callbacks._progress as progress
from sknet import MLPClassifier
from sknet.callbacks import PrintLog, ProgressBar
from sknet.engine._trainer import Trainer

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(hidden_layer_sizes=(8,), random_state=0, device="cpu")


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:240] / 16, y[:240]


class Terminal(io.StringIO):
    def isatty(self):
        return True


def on_a_terminal(monkeypatch):
    """stderr as a terminal, where tqdm's bars are drawn (in the test's body: pytest's
    capture puts its own stderr back after the fixtures)."""
    pytest.importorskip("tqdm.auto")
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


@pytest.fixture
def clock(monkeypatch):
    """perf_counter for ProgressBar: ten seconds more at each reading after the first."""
    readings = iter(range(0, 10**6, 10))
    monkeypatch.setattr(
        progress, "time", types.SimpleNamespace(perf_counter=lambda: next(readings))
    )


def final_bar_states(output):
    """The last drawing of each bar (tqdm redraws a line after ``\\r``)."""
    return [part.strip() for part in re.split(r"[\r\n]", output) if part.strip()]


def test_in_a_terminal_a_bar_over_the_epochs_and_one_over_each_epochs_batches(digits, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    MLPClassifier(**FAST, max_iter=3, batch_size=40, callbacks=[ProgressBar()]).fit(X, y)
    drawn = final_bar_states(terminal.getvalue())
    epochs = [line for line in drawn if line.startswith("MLPClassifier")]
    assert re.search(r"3/3 \[.*epoch.*train_loss=\d\.\d{5}\]$", epochs[-1])
    for epoch in (1, 2, 3):  # the batches of each epoch, in rows (cleared when it ends)
        assert any(re.match(rf"epoch {epoch}:.*/240 .*rows", line) for line in drawn)


def test_the_bar_ends_where_the_fit_stops(digits, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    clf = MLPClassifier(**FAST, tol=1.0, n_iter_no_change=1, callbacks=[ProgressBar()])
    clf.fit(X, y)  # the tol rule stops it after three epochs of max_iter=200
    assert clf.n_iter_ == 3
    last = [s for s in final_bar_states(terminal.getvalue()) if s.startswith("MLPClassifier")]
    assert re.search(r"\b3/200 \[", last[-1])
    assert "epoch 4" not in terminal.getvalue()


@pytest.mark.parametrize(("epochs", "batches"), [(True, False), (False, True)])
def test_either_bar_alone(digits, epochs, batches, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    bar = ProgressBar(epochs=epochs, batches=batches)
    MLPClassifier(**FAST, max_iter=2, callbacks=[bar]).fit(X, y)
    out = terminal.getvalue()
    assert ("MLPClassifier" in out) is epochs
    assert ("rows" in out) is batches
    # the loss in the epochs' bar; no line per epoch beside the bars
    assert ("train_loss=" in out) is epochs and "train_loss " not in out


def test_lbfgs_has_the_bar_over_its_iterations_and_no_batch_bars(digits, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    MLPClassifier(**FAST, solver="lbfgs", max_iter=4, callbacks=[ProgressBar()]).fit(X, y)
    out = terminal.getvalue()
    assert re.search(r"MLPClassifier.*4/4", out) and "rows" not in out


def test_off_a_terminal_a_line_per_epoch_says_the_time_left(digits, capsys, clock):
    X, y = digits
    clf = MLPClassifier(**FAST, max_iter=4, callbacks=[ProgressBar()]).fit(X, y)
    losses = [row["train_loss"] for row in clf.history_]
    # ten seconds an epoch: after epoch k of 4, (4 - k) * 10 seconds to go at most
    assert capsys.readouterr().err.splitlines() == [
        f"epoch {k}/4: train_loss {loss:.5f}, at most 0:00:{(4 - k) * 10:02d} left"
        for k, loss in enumerate(losses, 1)
    ]


def test_off_a_terminal_lines_follow_the_epochs_of_a_warm_start(digits, capsys, clock):
    X, y = digits
    clf = MLPClassifier(**FAST, max_iter=2, warm_start=True, callbacks=[ProgressBar()])
    clf.fit(X, y)
    capsys.readouterr()
    clf.set_params(max_iter=3).fit(X, y)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err] == ["epoch 3/5", "epoch 4/5", "epoch 5/5"]
    assert err[0].endswith("at most 0:00:20 left") and err[-1].endswith("0:00:00 left")


def test_without_the_epochs_the_lines_are_as_before(digits, capsys):
    X, y = digits
    clf = MLPClassifier(**FAST, max_iter=2, callbacks=[ProgressBar(epochs=False)]).fit(X, y)
    assert capsys.readouterr().err.splitlines() == [
        f"epoch {i}: train_loss {row['train_loss']:.5f}" for i, row in enumerate(clf.history_, 1)
    ]


def test_partial_fit_has_no_bar_over_one_epoch(digits, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    clf = MLPClassifier(**FAST, callbacks=[ProgressBar()])
    clf.partial_fit(X, y, classes=np.arange(10))
    assert "MLPClassifier" not in terminal.getvalue() and "rows" in terminal.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # off a terminal: a plain line
    clf.partial_fit(X, y)
    assert sys.stderr.getvalue().startswith("epoch 2: train_loss ")
    assert "left" not in sys.stderr.getvalue()


def test_in_a_notebook_tqdm_auto_draws_the_bars(digits, monkeypatch):
    pytest.importorskip("tqdm.auto")
    stream = io.StringIO()  # a kernel's stderr is no terminal
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "_in_notebook", lambda: True)
    X, y = digits
    MLPClassifier(**FAST, max_iter=2, callbacks=[ProgressBar()]).fit(X, y)
    assert "MLPClassifier" in stream.getvalue() and "rows" in stream.getvalue()
    assert "left" not in stream.getvalue()  # bars, not lines


def test_a_jupyter_kernel_is_recognized(monkeypatch):
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert progress._in_notebook()
    shell.config = {}  # a terminal IPython
    assert not progress._in_notebook()
    fake.get_ipython = lambda: None  # IPython imported, not running
    assert not progress._in_notebook()
    monkeypatch.delitem(sys.modules, "IPython")
    assert not progress._in_notebook()


def test_print_log_writes_above_the_bars(digits, capsys, monkeypatch):
    X, y = digits
    terminal = on_a_terminal(monkeypatch)
    clf = MLPClassifier(**FAST, max_iter=3, callbacks=[ProgressBar(), PrintLog()]).fit(X, y)
    assert "MLPClassifier" in terminal.getvalue()
    out = capsys.readouterr().out.splitlines()
    # tqdm.write: whole lines on stdout, the bars cleared and drawn again on stderr
    assert out[0] == PrintLog.HEADER
    assert out[1:] == [PrintLog.format_row(row) for row in clf.history_]


def test_ctrl_c_closes_the_bars_where_the_fit_stopped(digits, monkeypatch):
    X, y = digits
    bars = []

    class FakeBar:
        def __init__(self, total, initial=0, desc="", **kwargs):
            self.total, self.n, self.desc, self.closed = total, initial, desc, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def set_postfix(self, **kwargs):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(progress, "_bar_class", lambda: FakeBar)
    original, calls = Trainer.loss_and_gradients, []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2 * 6 + 3:  # in epoch 3, after two of its batches
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "loss_and_gradients", interrupted)
    clf = MLPClassifier(**FAST, batch_size=40, max_iter=10, callbacks=[ProgressBar()])
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        clf.fit(X, y)
    epochs, *batches = bars
    assert (epochs.desc, epochs.n, epochs.total) == ("MLPClassifier", 2, 10)
    assert [(b.desc, b.n) for b in batches] == [
        ("epoch 1", 240),
        ("epoch 2", 240),
        ("epoch 3", 80),
    ]
    assert all(bar.closed for bar in bars)


def test_parameters_are_checked(digits):
    X, y = digits
    with pytest.raises(InvalidParameterError, match="epochs"):
        MLPClassifier(**FAST, callbacks=[ProgressBar(epochs="yes")]).fit(X, y)
    with pytest.raises(ValueError, match=r"ProgressBar\(epochs=False, batches=False\) shows"):
        MLPClassifier(**FAST, callbacks=[ProgressBar(epochs=False, batches=False)]).fit(X, y)


def test_a_progress_bar_pickled_before_the_parameters_loads_with_them():
    bar = pickle.loads(pickle.dumps(ProgressBar(epochs=False)))
    assert (bar.epochs, bar.batches) == (False, True)
    old = ProgressBar.__new__(ProgressBar)
    old.__setstate__({})  # what an earlier sknet pickled: no parameters
    assert (old.epochs, old.batches) == (True, True)

"""The backward pass's weight gradients on a helper thread (sknet.backend._deferred).

The suite runs with one BLAS thread, where a fit starts no helper; the fit tests
here pretend the budget is two (``cpu_threads``) and check that the helper runs
the deferred products and that the model has the same bits as without it.
"""

import pickle
import threading

import numpy as np
import pandas as pd
import pytest

import sknet.backend._deferred as deferred
import sknet.engine._sharding as sharding
from sknet import TabularClassifier, TabularRegressor
from sknet.backend import get_backend
from sknet.callbacks import Callback

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_without_a_helper_a_call_runs_at_once_on_the_calling_thread():
    seen = []
    deferred.defer(lambda: seen.append(threading.get_ident()))
    assert seen == [threading.get_ident()]
    deferred.finish_deferred()  # nothing to wait for


def test_a_helper_runs_the_calls_in_order_on_another_thread():
    seen = []
    with deferred.helper_thread():
        for i in range(50):
            deferred.defer(lambda i=i: seen.append((i, threading.get_ident())))
        deferred.finish_deferred()
        assert [i for i, _ in seen] == list(range(50))
        assert {ident for _, ident in seen} != {threading.get_ident()}
        assert len({ident for _, ident in seen}) == 1


def test_the_block_waits_for_what_is_queued_and_ends_the_thread():
    release, seen = threading.Event(), []

    def slow():
        release.wait(5)
        seen.append(1)

    before = threading.active_count()
    with deferred.helper_thread():
        deferred.defer(slow)
        assert threading.active_count() == before + 1
        release.set()
    assert seen == [1]
    assert threading.active_count() == before


def test_disabled_and_nested_helpers_change_nothing():
    with deferred.helper_thread(enabled=False):
        seen = []
        deferred.defer(lambda: seen.append(threading.get_ident()))
        assert seen == [threading.get_ident()]
    with deferred.helper_thread():
        outer = deferred._ACTIVE.get()
        with deferred.helper_thread():
            assert deferred._ACTIVE.get() is outer
        assert deferred._ACTIVE.get() is outer
    assert deferred._ACTIVE.get() is None


def test_an_error_in_a_deferred_call_is_raised_by_the_wait_and_the_helper_goes_on():
    def fails():
        raise MemoryError("no room")

    seen = []
    with deferred.helper_thread():
        deferred.defer(fails)
        deferred.defer(seen.append, 1)  # still runs
        with pytest.raises(MemoryError, match="no room"):
            deferred.finish_deferred()
        assert seen == [1]
        deferred.defer(seen.append, 2)
        deferred.finish_deferred()  # the error was raised once
    assert seen == [1, 2]


def test_another_thread_does_not_see_this_threads_helper():
    seen = []
    with deferred.helper_thread():
        worker = threading.Thread(
            target=lambda: deferred.defer(seen.append, threading.get_ident())
        )
        worker.start()
        worker.join()
    assert seen == [worker.ident]  # ran at once, on its own thread


def test_backend_defer_writes_a_product_in_place_by_the_wait():
    backend = get_backend("cpu")
    rng = np.random.RandomState(0)
    A, B = rng.rand(300, 40), rng.rand(40, 30)
    out = np.zeros((300, 30))
    with deferred.helper_thread():
        backend.defer(backend.matmul, A, B, out)
        backend.finish_deferred()
        np.testing.assert_array_equal(out, A @ B)


def test_backend_defer_without_overlap_runs_at_once_beside_a_helper():
    backend, seen = get_backend("cpu"), []
    with deferred.helper_thread():
        backend.defer(lambda: seen.append(threading.get_ident()), overlap=False)
        assert seen == [threading.get_ident()]  # before any wait, on this thread
        backend.defer(lambda: seen.append(threading.get_ident()))
        backend.finish_deferred()
    assert seen[1] != threading.get_ident()


# -- in a fit ----------------------------------------------------------------------------
def table(n=600, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.uniform(size=n),
            "month": rng.randint(1, 13, size=n),
            "city": pd.Categorical(rng.choice(["x", "y", "z"], size=n)),
        }
    )
    X.loc[X.index[::17], "b"] = np.nan
    y = X["a"] * 2 + (X["city"] == "y") + np.sin(X["month"])
    return X, y.to_numpy()


@pytest.fixture
def counted_helpers(monkeypatch):
    """Counts the helper threads a fit starts and the calls they run."""
    counts = {"helpers": 0, "calls": 0}
    submit, init = deferred.HelperThread.submit, deferred.HelperThread.__init__

    def counting_init(self):
        counts["helpers"] += 1
        init(self)

    def counting_submit(self, fn, args):
        counts["calls"] += 1
        submit(self, fn, args)

    monkeypatch.setattr(deferred.HelperThread, "__init__", counting_init)
    monkeypatch.setattr(deferred.HelperThread, "submit", counting_submit)
    return counts


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("numeric_embedding", ["piecewise_linear", "periodic"])
def test_a_tabular_fit_with_a_helper_gives_the_same_bits(
    monkeypatch, counted_helpers, dtype, numeric_embedding
):
    X, y = table()
    params = dict(
        max_iter=4, batch_size=64, random_state=0, dtype=dtype, numeric_embedding=numeric_embedding
    )

    def fit(threads):
        monkeypatch.setattr(sharding, "cpu_threads", lambda: threads)
        return TabularRegressor(**params).fit(X, y)

    alone = fit(1)
    assert counted_helpers == {"helpers": 0, "calls": 0}
    helped = fit(2)
    assert counted_helpers["helpers"] == 1  # one for the whole fit
    assert counted_helpers["calls"] > 0
    for a, b in zip(alone.network_.weights(), helped.network_.weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(alone.predict(X), helped.predict(X))
    assert alone.history_[-1]["valid_loss"] == helped.history_[-1]["valid_loss"]


def test_partial_fit_starts_a_helper_for_its_batches_with_the_same_bits(
    monkeypatch, counted_helpers
):
    X, y = table()
    labels = np.where(y > np.median(y), "high", "low")
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    clf = TabularClassifier(early_stopping=False, max_iter=2, random_state=0, batch_size=100)
    clf.fit(X, labels)
    fitted = counted_helpers["helpers"]
    clf.partial_fit(X, labels)  # no run_epochs: the batches start their own helper
    assert counted_helpers["helpers"] == fitted + 1
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 1)
    again = TabularClassifier(early_stopping=False, max_iter=2, random_state=0, batch_size=100)
    again.fit(X, labels).partial_fit(X, labels)
    np.testing.assert_array_equal(clf.predict_proba(X), again.predict_proba(X))


def test_an_error_in_the_backward_pass_leaves_no_call_pending(monkeypatch, counted_helpers):
    from sknet.layers import EnsembleHead

    X, y = table()
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    calls = {"n": 0}
    backward = EnsembleHead.backward

    def failing(self, dY):  # the head runs first in the backward pass: fail on a later batch
        calls["n"] += 1
        if calls["n"] == 5:
            raise FloatingPointError("boom")
        return backward(self, dY)

    monkeypatch.setattr(EnsembleHead, "backward", failing)
    with pytest.raises(FloatingPointError, match="boom"):
        TabularRegressor(max_iter=3, batch_size=64, random_state=0).fit(X, y)
    assert deferred._ACTIVE.get() is None
    assert not any(t.name == "sknet-helper" for t in threading.enumerate())


class Pickles(Callback):
    """Pickles the estimator at the end of every epoch, as a checkpoint would."""

    def __init__(self):
        self.blobs = []

    def on_epoch_end(self, state, epoch, logs):
        self.blobs.append(pickle.dumps(state.estimator))


def test_an_estimator_pickled_by_a_callback_mid_fit_carries_no_helper(
    monkeypatch, counted_helpers
):
    X, y = table()
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    reg = TabularRegressor(max_iter=3, batch_size=64, random_state=0, callbacks=[Pickles()])
    blobs = reg.fit(X, y).callbacks_[0].blobs  # the fit's copy of the callback
    assert counted_helpers["helpers"] == 1 and len(blobs) >= 2
    last = pickle.loads(blobs[-1])
    assert not any(isinstance(v, deferred.HelperThread) for v in vars(last).values())
    assert np.isfinite(last.predict(X)).all()

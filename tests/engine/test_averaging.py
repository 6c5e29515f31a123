"""The weights' moving average (``weight_averaging`` of the tabular estimators).

The optimizer keeps it step by step; between epochs the trainer validates it,
early stopping keeps it, callbacks see it, the fit returns it, and training
goes on from the stepped weights.
"""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sknet import TabularClassifier, TabularRegressor
from sknet.backend import get_backend
from sknet.callbacks import Callback
from sknet.engine._averaging import averaging_decay
from sknet.engine._optimizers import SGD, Adam, AdamW
from sknet.utils import estimate_memory
from tests.engine.test_memory import _assert_same_model


def table(n=600, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.uniform(size=n),
            "c": rng.choice(["x", "y", "z"], n),
        }
    )
    signal = X["a"] * 2 + np.where(X["c"] == "y", 1.0, -1.0) + 0.3 * rng.normal(size=n)
    return X, signal.to_numpy()


SMALL = dict(
    hidden_layer_sizes=(16,),
    n_members=2,
    d_embedding=4,
    n_bins=8,
    batch_size=64,
    random_state=0,
    device="cpu",
)


class Recorder(Callback):
    """At each batch's end, a moving average of the stepped weights kept as the
    optimizer keeps it; at each epoch's end, the network's weights."""

    def __init__(self, decay=None):
        self.decay = decay

    def on_train_begin(self, state):
        self.average = [w.copy() for w in state.network.weights()]
        self.at_epoch_end = []

    def on_batch_end(self, state, batch, size):
        share = 1.0 - self.decay
        for w, average in zip(state.network.weights(), self.average):
            gap = np.subtract(w, average)
            gap *= share
            average += gap

    def on_epoch_end(self, state, epoch, logs):
        self.at_epoch_end.append([w.copy() for w in state.network.weights()])


@pytest.mark.parametrize(
    "span, n_batches, expected",
    [(0.5, 10, 0.8), (1.0, 4, 0.75), (2.0, 50, 0.99), (0.5, 2, 0.0), (0.1, 3, 0.0)],
)
def test_the_decay_is_one_step_of_the_span(span, n_batches, expected):
    assert averaging_decay(span, n_batches) == pytest.approx(expected)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_step_moves_the_averages_a_share_of_the_way_to_the_weights(cls, dtype):
    rng = np.random.RandomState(0)
    params = [rng.normal(size=7).astype(dtype), rng.normal(size=3).astype(dtype)]
    optimizer = cls(params, get_backend("cpu"), learning_rate_init=0.1)
    optimizer.start_averaging(0.75)
    reference = [p.copy() for p in params]
    assert all(np.array_equal(a, p) for a, p in zip(optimizer.averages, params))
    for _ in range(4):
        optimizer.step([rng.normal(size=p.shape).astype(dtype) for p in params])
        for p, r in zip(params, reference):
            r += (p - r) * dtype(0.25)
        for average, r in zip(optimizer.averages, reference):
            np.testing.assert_allclose(average, r, rtol=1e-6 if dtype is np.float32 else 1e-14)
            assert average.dtype == dtype
    optimizer.stop_averaging()
    assert "averages" not in optimizer.state_names and not hasattr(optimizer, "averages")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_a_fit_returns_the_average_of_the_steps_it_takes(dtype, dropout):
    X, y = table()
    params = dict(SMALL, dtype=dtype, dropout=dropout, early_stopping=False, max_iter=3)
    n_batches = -(-len(X) // SMALL["batch_size"])
    plain = Recorder(averaging_decay(0.5, n_batches))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = TabularRegressor(**params, weight_averaging=None, callbacks=[plain]).fit(X, y)
        averaged = TabularRegressor(**params, weight_averaging=0.5).fit(X, y)
    plain = fit.callbacks_[0]  # the fit's copy
    # the same steps (training went on from the stepped weights, not the averages),
    # and the model is their average, to the bit
    for got, expected in zip(averaged.network_.weights(), plain.average):
        assert_array_equal(got, expected)
    last_step = plain.at_epoch_end[-1]
    assert any(not np.array_equal(a, b) for a, b in zip(last_step, plain.average))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_early_stopping_scores_and_keeps_the_averaged_weights():
    X, y = table(800)
    X_val, y_val = table(300, seed=1)

    class Predictions(Callback):
        def on_train_begin(self, state):
            self.epochs = []

        def on_epoch_end(self, state, epoch, logs):
            self.epochs.append(state.predict(X_val))

    one = dict(SMALL, n_members=1)  # the loss of one member is the prediction's
    reg = TabularRegressor(**one, max_iter=30, callbacks=[Predictions()])
    reg.fit(X, y, X_val=X_val, y_val=y_val)
    seen = reg.callbacks_[0]
    best = int(np.argmax(reg.validation_scores_))
    assert reg.best_validation_score_ == reg.validation_scores_[best]
    assert_array_equal(reg.predict(X_val), seen.epochs[best])
    # the validation loss is the averaged weights' (a standardized target's squared error)
    scaled = (y_val - reg.target_mean_[0]) / reg.target_scale_[0]
    outputs = (seen.epochs[best] - reg.target_mean_[0]) / reg.target_scale_[0]
    np.testing.assert_allclose(
        -reg.best_validation_score_, np.mean((outputs - scaled) ** 2) / 2, rtol=1e-4
    )


def test_callbacks_see_the_averages_then_training_goes_on_from_the_steps():
    X, y = table()
    params = dict(SMALL, early_stopping=False, max_iter=3)
    n_batches = -(-len(X) // SMALL["batch_size"])
    plain = Recorder(averaging_decay(0.5, n_batches))
    seen = Recorder(averaging_decay(0.5, n_batches))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = TabularRegressor(**params, weight_averaging=None, callbacks=[plain]).fit(X, y)
        seen = TabularRegressor(**params, callbacks=[seen]).fit(X, y)
    plain, seen = plain.callbacks_[0], seen.callbacks_[0]
    # epoch 1's end: the averaged fit's callback sees the average of the steps so far
    # (recorded by the plain fit's callback at its batches), not the stepped weights
    for epoch, (got, stepped) in enumerate(zip(seen.at_epoch_end, plain.at_epoch_end)):
        assert any(not np.array_equal(a, b) for a, b in zip(got, stepped)), epoch
    for got, expected in zip(seen.at_epoch_end[-1], plain.average):
        assert_array_equal(got, expected)


def test_partial_fit_steps_the_weights_it_returns():
    X, y = table()
    reg = TabularRegressor(**SMALL, early_stopping=False)
    reg.partial_fit(X, y)
    assert reg._optimizer.average_decay is None
    assert "averages" not in reg._optimizer.state_names


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_warm_fit_averages_from_its_own_weights_and_none_switches_it_off():
    X, y = table()
    reg = TabularClassifier(**SMALL, max_iter=2, early_stopping=False).fit(X, y > 0)
    start = [p.copy() for p in reg._optimizer.params]  # the returned (averaged) weights
    seen = []

    class FirstStep(Callback):
        def on_batch_end(self, state, batch, size):
            if not seen:
                optimizer = state.optimizer
                averages = [a.copy() for a in optimizer.averages]
                seen.append(([p.copy() for p in optimizer.params], averages))

    reg.set_params(warm_start=True, max_iter=1, callbacks=[FirstStep()]).fit(X, y > 0)
    decay = reg._optimizer.average_decay
    assert decay == averaging_decay(0.5, -(-len(X) // SMALL["batch_size"]))
    stepped, averages = seen[0]
    for begin, step, average in zip(start, stepped, averages):
        np.testing.assert_allclose(average, begin + (1 - decay) * (step - begin), atol=1e-6)
    reg.set_params(weight_averaging=None, callbacks=None).fit(X, y > 0)
    assert reg._optimizer.average_decay is None


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_fit_that_averages_pickles_and_trains_on_after_loading():
    X, y = table()
    reg = TabularClassifier(**SMALL, max_iter=4).fit(X, y > 0)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(loaded.predict_proba(X), reg.predict_proba(X))
    for a, b in zip(loaded._optimizer.averages, reg._optimizer.averages):
        assert_array_equal(a, b)
    loaded.set_params(warm_start=True, max_iter=1).fit(X, y > 0)
    assert loaded.n_iter_ == 1


def test_a_new_layout_starts_the_averages_again_at_the_weights():
    backend = get_backend("cpu")
    params = [np.arange(4.0), np.arange(3.0)]
    optimizer = Adam(params, backend, learning_rate_init=0.1)
    optimizer.layout = [(("first", "W", 4),), (("second", "W", 3),)]
    optimizer.start_averaging(0.5)
    optimizer.step([np.ones(4), np.ones(3)])
    assert not np.array_equal(optimizer.averages[0], params[0])
    moved = [np.arange(7.0)]  # both parameters in one array now (lr_scale regrouped)
    optimizer.rebind(moved, backend, layout=[(("first", "W", 4), ("second", "W", 3))])
    assert len(optimizer.averages) == 1
    assert_array_equal(optimizer.averages[0], moved[0])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_streamed_fit_that_averages_is_the_in_memory_fit():
    X, y = table(8000)
    numbers = X[["a", "b"]].to_numpy()
    make = lambda **kw: TabularRegressor(**SMALL, max_iter=4, early_stopping=True, **kw)  # noqa: E731
    estimate = estimate_memory(make(), numbers, y)
    limit = int(estimate.total - estimate["data"] + estimate["data"] // 3)  # a third fits
    in_memory = make().fit(numbers, y)
    streamed = make(max_device_memory=limit).fit(numbers, y)
    assert in_memory.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert in_memory._optimizer.average_decay is not None
    _assert_same_model(in_memory, streamed)


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), "half"])
def test_a_bad_span_is_refused_by_name(bad):
    X, y = table(100)
    with pytest.raises((ValueError, TypeError), match="weight_averaging"):
        TabularRegressor(**SMALL, weight_averaging=bad).fit(X, y)


def test_the_span_clones_and_none_is_the_plain_fit():
    assert clone(TabularRegressor(weight_averaging=None)).weight_averaging is None
    assert TabularClassifier().get_params()["weight_averaging"] == 0.5


def test_the_memory_estimate_counts_the_averages_as_optimizer_state():
    X, y = table(500)
    averaged = estimate_memory(TabularRegressor(**SMALL), X, y)
    plain = estimate_memory(TabularRegressor(**SMALL, weight_averaging=None), X, y)
    fitted = TabularRegressor(**SMALL, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(X, y)
    trained = sum(a.nbytes for a in fitted._optimizer.averages)  # a copy of the trained weights
    extra = averaged["optimizer_state"] - plain["optimizer_state"]
    assert extra == trained > 0
    assert averaged.total - plain.total == extra

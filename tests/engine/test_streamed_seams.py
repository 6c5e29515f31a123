"""Seams between a streamed fit and an in-memory one (``max_device_memory``).

The docs (``docs/user_guide/devices.md``) promise that streamed batches are
the batches of the in-memory fit, "so the same ``random_state`` gives the same
model". On the CPU data already in the fit's dtype are used in place, so these
tests give float64 data to float32 fits and float32 data to float64 fits: the
copy is what streams. A limit of the estimate's total less half its data
forces the stream (as the other streaming tests do).
"""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from sknet import (
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    TabularClassifier,
    TabularRegressor,
)
from sknet.callbacks import Callback
from sknet.layers import Dense, Dropout, Residual, Sequential
from sknet.utils import estimate_memory

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning", "ignore::UserWarning"
)

SEEDS = range(6)


def _data(seed, n=157, d=48, dtype=np.float64, task="clf", strings=False):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    if task == "reg":
        return X, X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    if strings:
        y = np.array(["cat", "dog", "emu"])[y]
    return X, y


def _limit(est, X, y, **fit_kw):
    """A limit that holds the model and half the data: the data must stream."""
    estimate = estimate_memory(est, X, y, **fit_kw)
    return int(estimate.total - estimate["data"] // 2)


def _tol(est):
    return 1e-12 if str(est.dtype) == "float64" else 1e-6


def _assert_same(a, b, X, rtol):
    assert len(a.loss_curve_) == len(b.loss_curve_)
    assert_allclose(b.loss_curve_, a.loss_curve_, rtol=rtol)
    if getattr(a, "validation_scores_", None) is not None:
        assert_allclose(b.validation_scores_, a.validation_scores_, rtol=rtol)
    assert a.n_iter_ == b.n_iter_ and a.t_ == b.t_
    wa, wb = list(a.network_.weights()), list(b.network_.weights())
    assert len(wa) == len(wb)
    for x, z in zip(wa, wb):
        assert_allclose(z, x, rtol=rtol, atol=rtol)
    assert_array_equal(b.predict(X), a.predict(X))


def _pair(make, X, y, **fit_kw):
    """An in-memory fit and a streamed fit of the same estimator."""
    limit = _limit(make(), X, y, **fit_kw)
    in_memory = make().fit(X, y, **fit_kw)
    streamed = make(max_device_memory=limit).fit(X, y, **fit_kw)
    assert in_memory.data_placement_ == "device"
    assert streamed.data_placement_ == "streamed"
    return in_memory, streamed


def _random_config(seed):
    """An estimator maker, the data and the fit's keyword arguments."""
    rng = np.random.RandomState(seed)
    kind = ["mlp-clf", "mlp-reg", "net-clf-seq", "net-reg-res", "net-frozen", "mlp-clf"][seed]
    dtype = ["float32", "float64"][rng.randint(2)]
    data_dtype = np.float64 if dtype == "float32" else np.float32
    params = dict(
        max_iter=3,
        batch_size=int(rng.choice([7, 13, 32])),  # none divides 157 (or its splits)
        shuffle=bool(rng.randint(2)),
        early_stopping=bool(rng.randint(2)),
        n_iter_no_change=100,
        random_state=seed,
        dtype=dtype,
        device="cpu",
    )
    task = "reg" if kind.endswith("reg") or kind == "net-reg-res" else "clf"
    X, y = _data(seed, dtype=data_dtype, task=task, strings=task == "clf" and seed % 2 == 0)
    fit_kw = {}
    if rng.randint(2):
        fit_kw["sample_weight"] = rng.uniform(0.5, 2.0, len(y))
    if task == "clf" and rng.randint(2):
        params["class_weight"] = "balanced"
    if kind.startswith("mlp"):
        cls = MLPClassifier if task == "clf" else MLPRegressor
        params["hidden_layer_sizes"] = (int(rng.randint(3, 12)),)
        if seed == 5:
            params.update(solver="sgd", dropout=0.1)
        params.pop("class_weight", None) if task == "reg" else None

        def make(**kw):
            return cls(**{**params, **kw})

    else:
        cls = NeuralNetClassifier if task == "clf" else NeuralNetRegressor
        params.pop("class_weight", None) if task == "reg" else None

        def layers():
            if kind == "net-clf-seq":
                return [Sequential([Dense(8, activation="relu"), Dropout(0.1)]), Dense(5)]
            if kind == "net-reg-res":
                return [Dense(6), Residual([Dense(6, activation="tanh")]), Dense(4)]
            return [Dense(8, activation="relu", trainable=False), Dense(6, activation="relu")]

        def make(**kw):
            return cls(layers=layers(), **{**params, **kw})

    return make, X, y, fit_kw


@pytest.mark.parametrize("seed", SEEDS)
def test_random_configuration_streams_to_the_same_model(seed):
    make, X, y, fit_kw = _random_config(seed)
    in_memory, streamed = _pair(make, X, y, **fit_kw)
    _assert_same(in_memory, streamed, X, _tol(in_memory))
    if hasattr(in_memory, "classes_"):
        assert_array_equal(streamed.classes_, in_memory.classes_)


@pytest.mark.parametrize("shuffle", [False, True])
def test_warm_start_second_fit_streams_to_the_same_model(shuffle):
    X, y = _data(1, strings=True)

    def make(**kw):
        return MLPClassifier(
            hidden_layer_sizes=(7,),
            max_iter=2,
            batch_size=13,
            shuffle=shuffle,
            early_stopping=True,
            n_iter_no_change=100,
            warm_start=True,
            random_state=0,
            device="cpu",
            **kw,
        )

    in_memory, streamed = _pair(make, X, y)
    in_memory.fit(X, y)
    streamed.fit(X, y)
    assert streamed.data_placement_ == "streamed" and in_memory.data_placement_ == "device"
    _assert_same(in_memory, streamed, X, 1e-6)


def test_partial_fit_with_string_labels_and_weights_streams_to_the_same_model():
    X, y = _data(2, strings=True)
    w = np.random.RandomState(0).uniform(0.5, 2, len(y))
    params = dict(hidden_layer_sizes=(9,), batch_size=11, random_state=0, device="cpu")
    limit = _limit(MLPClassifier(**params), X, y, sample_weight=w)
    a = MLPClassifier(**params)
    b = MLPClassifier(**params, max_device_memory=limit)
    for _ in range(2):  # all the rows: they stream
        for est in (a, b):
            est.partial_fit(X, y, classes=np.unique(y), sample_weight=w)
        assert a.data_placement_ == "device" and b.data_placement_ == "streamed"
    half = slice(0, len(y) // 3)  # a third of the rows fits on the device again
    for est in (a, b):
        est.partial_fit(X[half], y[half], sample_weight=w[half])
    assert b.data_placement_ == "device"
    _assert_same(a, b, X, 1e-6)


class BatchLog(Callback):
    """Records every (epoch, batch index, batch size) on_batch_end sees."""

    def on_train_begin(self, state):
        self.seen = []

    def on_batch_end(self, state, batch, size):
        self.seen.append((len(state.history), batch, size))


class FewRows(Callback):
    """Trains each epoch on its first rows only (``state.epoch_rows``)."""

    def on_epoch_begin(self, state, epoch):
        state.epoch_rows = 50 + 20 * epoch


@pytest.mark.parametrize("shuffle", [False, True])
def test_callbacks_see_the_same_batches(shuffle):
    X, y = _data(3)

    def make(**kw):
        return MLPClassifier(
            hidden_layer_sizes=(5,),
            max_iter=3,
            batch_size=9,
            shuffle=shuffle,
            random_state=0,
            callbacks=[BatchLog(), FewRows()],
            device="cpu",
            **kw,
        )

    in_memory, streamed = _pair(make, X, y)
    seen = in_memory.callbacks_[0].seen
    assert seen == streamed.callbacks_[0].seen
    assert [size for epoch, _, size in seen if epoch == 0] == [9] * 7 + [7]  # 70 rows
    _assert_same(in_memory, streamed, X, 1e-6)


def test_validation_set_given_to_fit_streams_to_the_same_scores():
    X, y = _data(4, strings=True)
    X_val, y_val = _data(5, n=61, strings=True)

    def make(**kw):
        return MLPClassifier(
            hidden_layer_sizes=(6,), max_iter=3, batch_size=10, random_state=0, device="cpu", **kw
        )

    limit = _limit(make(), X, y)
    in_memory = make().fit(X, y, X_val=X_val, y_val=y_val)
    streamed = make(max_device_memory=limit).fit(X, y, X_val=X_val, y_val=y_val)
    assert streamed.data_placement_ == "streamed"
    _assert_same(in_memory, streamed, X, 1e-6)
    for key in ("valid_loss", "valid_score"):
        a = [row[key] for row in in_memory.history_]
        b = [row[key] for row in streamed.history_]
        assert_allclose(b, a, rtol=1e-6)


def _table(n=160, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {
            "float": x,
            "int": rng.randint(0, 5, n),
            "category": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "object": rng.choice(["u", "v", None], n).astype(object),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "float"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "category"] = np.nan
    signal = np.nan_to_num(frame["float"].to_numpy()) + (frame["category"] == "a") - 0.3
    return frame, np.asarray(signal, dtype=float)


@pytest.mark.parametrize("make", [TabularClassifier, TabularRegressor])
def test_tabular_frame_under_a_limit_gives_the_same_model(make):
    # On the CPU the encoded table is in the fit's dtype and used in place: the
    # limit keeps it on the device (documented), with the same model.
    X, signal = _table()
    y = np.where(signal > 0, "hi", "lo") if make is TabularClassifier else signal
    params = dict(
        hidden_layer_sizes=(8,),
        n_members=2,
        d_embedding=4,
        n_bins=6,
        max_iter=2,
        batch_size=23,
        early_stopping=True,
        n_iter_no_change=100,
        random_state=0,
        device="cpu",
    )
    est = make(**params)
    estimate = estimate_memory(est, X, y)
    limit = int(estimate.total - estimate["data"] // 2)
    in_memory = clone(est).fit(X, y)
    limited = clone(est).set_params(max_device_memory=limit).fit(X, y)
    assert in_memory.data_placement_ == "device"
    assert limited.data_placement_ in ("device", "streamed")
    assert_allclose(limited.loss_curve_, in_memory.loss_curve_, rtol=1e-6)
    assert_allclose(limited.validation_scores_, in_memory.validation_scores_, rtol=1e-6)
    assert_array_equal(limited.predict(X), in_memory.predict(X))


@pytest.mark.parametrize(
    "value, error",
    [
        (0, ValueError),
        (-5, ValueError),
        (float("nan"), (ValueError, TypeError)),
        (float("inf"), (ValueError, TypeError)),
        ("nan", ValueError),
        ("-3MB", ValueError),
        ("plenty", ValueError),
        ([1024], (ValueError, TypeError)),
        (True, (ValueError, TypeError)),
    ],
    ids=[
        "zero",
        "negative",
        "nan",
        "inf",
        "nan-string",
        "negative-string",
        "word",
        "list",
        "bool",
    ],
)
def test_bad_limits_name_the_parameter(value, error):
    X, y = _data(0)
    with pytest.raises(error, match="max_device_memory"):
        MLPClassifier(hidden_layer_sizes=(4,), max_iter=1, max_device_memory=value).fit(X, y)


def test_a_limit_smaller_than_one_batch_says_so():
    X, y = _data(0)
    est = MLPClassifier(hidden_layer_sizes=(4,), max_iter=1, batch_size=32, device="cpu")
    estimate = estimate_memory(est, X, y)
    small = int(estimate["parameters"])  # not even the model fits
    with pytest.raises(MemoryError, match="max_device_memory"):
        clone(est).set_params(max_device_memory=small).fit(X, y)


@pytest.mark.parametrize("shuffle", [False, True])
def test_warmup_schedule_and_zero_weight_batches_stream_to_the_same_model(shuffle):
    from sknet.callbacks import LRScheduler

    X, y = _data(6, strings=True)
    w = np.random.RandomState(1).uniform(0.5, 2, len(y))
    w[20:40] = 0.0  # without shuffling, whole batches weigh nothing and are skipped

    def make(**kw):
        return MLPClassifier(
            hidden_layer_sizes=(6,),
            solver="sgd",
            learning_rate_init=0.05,
            max_iter=3,
            batch_size=10,
            shuffle=shuffle,
            random_state=0,
            callbacks=[LRScheduler(policy="step", step_size=1, gamma=0.5, warmup=1)],
            device="cpu",
            **kw,
        )

    in_memory, streamed = _pair(make, X, y, sample_weight=w)
    rates = [row["learning_rate"] for row in in_memory.history_]
    assert rates == [row["learning_rate"] for row in streamed.history_]
    _assert_same(in_memory, streamed, X, 1e-6)

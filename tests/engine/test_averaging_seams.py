"""The weights' moving average (``weight_averaging``) where it meets the rest of sknet.

Each test puts an averaging tabular fit next to another part of the product:
class and sample weights, string labels, float64, the stock callbacks
(EarlyStopping, LRScheduler, Checkpoint, TerminateOnNaN), a user callback that
freezes a layer or replaces the weights, the anneal, ``partial_fit`` and warm
fits (switching the average on and off, casting to float64), the fit
transaction, pickle, joblib and skops, data streamed from host memory,
DataParallel, a Pipeline in a grid search and the ONNX export. The reference
for "the average" is a plain fit (``weight_averaging=None``) whose callback
keeps the optimizer's moving average of the stepped weights, batch by batch
(``tests/engine/test_averaging.py`` checks the basic fit that way).
"""

import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline

from sknet import TabularClassifier, TabularRegressor
from sknet.callbacks import Callback, Checkpoint, EarlyStopping, LRScheduler, TerminateOnNaN
from sknet.engine._averaging import averaging_decay
from sknet.utils import estimate_memory

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SMALL = dict(
    hidden_layer_sizes=(16,),
    n_members=2,
    d_embedding=4,
    n_bins=8,
    batch_size=64,
    random_state=0,
    device="cpu",
)


def table(n=300, seed=0):
    """A frame with a categorical column and a missing number, and a signal."""
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.uniform(size=n),
            "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
        }
    )
    X.loc[3, "a"] = np.nan
    signal = X["a"].fillna(0.0) * 2 + np.where(X["c"] == "y", 1.0, -1.0)
    return X, (signal + 0.3 * rng.normal(size=n)).to_numpy()


def weights(model):
    return [np.array(w, copy=True) for w in model.network_.weights()]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def n_batches(n_rows, batch_size=SMALL["batch_size"]):
    return -(-n_rows // batch_size)


class Recorder(Callback):
    """The moving average of the stepped weights, kept batch by batch as the optimizer
    keeps it (started again at the weights at the beginning of epoch ``restart``)."""

    def __init__(self, decay=None, restart=None):
        self.decay = decay
        self.restart = restart

    def on_train_begin(self, state):
        self.average = [w.copy() for w in state.network.weights()]

    def on_epoch_begin(self, state, epoch):
        if epoch == self.restart:
            self.average = [w.copy() for w in state.network.weights()]

    def on_batch_end(self, state, batch, size):
        share = 1.0 - self.decay
        for w, average in zip(state.network.weights(), self.average):
            gap = np.subtract(w, average)
            gap *= share
            average += gap


class Seen(Callback):
    """The weights at each epoch's beginning, after its last batch, and at its end."""

    observes_batches = True  # reads only (DataParallel calls it after the epoch's batches)

    def on_train_begin(self, state):
        self.begins, self.last_batch, self.ends = {}, {}, {}

    def on_epoch_begin(self, state, epoch):
        self.begins[epoch] = [w.copy() for w in state.weights()]

    def on_batch_end(self, state, batch, size):
        self.last_batch[state.epoch] = [w.copy() for w in state.weights()]

    def on_epoch_end(self, state, epoch, logs):
        self.ends[epoch] = [w.copy() for w in state.weights()]


class Boom(Callback):
    """Fails the fit at the end of its first epoch."""

    def on_epoch_end(self, state, epoch, logs):
        raise RuntimeError("boom")


# -- weights, labels, dtypes, stopping rules ---------------------------------------------------
X_, SIGNAL_ = table()
LABELS_ = np.where(SIGNAL_ > 0.5, "high", np.where(SIGNAL_ < -0.5, "low", "mid"))
WEIGHTS_ = np.random.RandomState(1).uniform(0.2, 2.0, len(X_))


@pytest.mark.parametrize(
    "cls, target, fit_params, params",
    [
        (TabularClassifier, "labels", False, dict(max_iter=3, class_weight="balanced")),
        (TabularClassifier, "labels", True, dict(max_iter=2)),
        (TabularRegressor, "signal", True, dict(max_iter=1)),
        (TabularRegressor, "signal", False, dict(max_iter=20, tol=10.0, n_iter_no_change=1)),
    ],
    ids=["class-weight", "sample-weight", "one-epoch", "n-iter-no-change"],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_fit_returns_the_average_of_its_steps_with_weights_labels_and_stops(
    cls, target, fit_params, params, dtype
):
    y = LABELS_ if target == "labels" else SIGNAL_
    fit_kw = dict(sample_weight=WEIGHTS_) if fit_params else {}
    params = dict(SMALL, dtype=dtype, early_stopping=False, **params)
    recorder = Recorder(averaging_decay(0.5, n_batches(len(X_))))
    plain = cls(**params, weight_averaging=None, callbacks=[recorder]).fit(X_, y, **fit_kw)
    averaged = cls(**params).fit(X_, y, **fit_kw)
    assert averaged.n_iter_ == plain.n_iter_
    if "n_iter_no_change" in params:
        assert averaged.n_iter_ < params["max_iter"]  # the convergence rule stopped it
    # the same steps, and the model is their average, to the bit
    assert averaged.loss_curve_ == plain.loss_curve_
    assert same(weights(averaged), plain.callbacks_[0].average)
    assert not same(weights(averaged), weights(plain))
    expected = np.dtype(dtype)
    assert {w.dtype for w in averaged.network_.weights()} == {expected}
    assert {a.dtype for a in averaged._optimizer.averages} == {expected}
    out = averaged.predict_proba(X_) if cls is TabularClassifier else averaged.predict(X_)
    assert out.dtype == expected and np.all(np.isfinite(out))
    if cls is TabularClassifier:
        assert set(averaged.predict(X_)) <= {"high", "low", "mid"}


# -- callbacks --------------------------------------------------------------------------------
def test_an_early_stopping_callback_restores_the_averaged_weights_of_its_best_epoch():
    X, y = table()
    stop = EarlyStopping("train_loss", patience=1, min_delta=0.05)
    clf = TabularClassifier(
        **SMALL, max_iter=10, early_stopping=False, callbacks=[Seen(), stop]
    ).fit(X, y > 0)
    seen, fitted = clf.callbacks_
    assert fitted.stopped_epoch_ is not None and fitted.best_epoch_ < clf.n_iter_
    # what the callback saw at its best epoch's end: that epoch's average
    assert same(weights(clf), seen.ends[fitted.best_epoch_])
    assert not same(weights(clf), seen.last_batch[fitted.best_epoch_])


@pytest.mark.parametrize(
    "schedule",
    [LRScheduler("step", step_size=1, gamma=0.5), LRScheduler("cosine", warmup=1)],
    ids=["step", "cosine-warmup"],
)
def test_a_learning_rate_schedule_steps_the_same_weights_with_the_average(schedule):
    # the warm-up sets the rate batch by batch; the average never feeds back into the steps
    X, y = table()
    params = dict(SMALL, max_iter=4, early_stopping=False)
    recorder = Recorder(averaging_decay(0.5, n_batches(len(X))))
    plain = TabularRegressor(**params, weight_averaging=None, callbacks=[schedule, recorder])
    averaged = TabularRegressor(**params, callbacks=[schedule]).fit(X, y)
    plain.fit(X, y)
    rates = [row["learning_rate"] for row in averaged.history_]
    assert rates == [row["learning_rate"] for row in plain.history_]
    assert len(set(rates)) > 1
    assert averaged.loss_curve_ == plain.loss_curve_
    assert same(weights(averaged), plain.callbacks_[1].average)


def test_a_checkpoint_saves_the_model_the_fit_returns(tmp_path):
    X, y = table()
    best, last = tmp_path / "best.joblib", tmp_path / "last.joblib"
    # the best validation epoch: the one early stopping puts back
    reg = TabularRegressor(**SMALL, max_iter=4, tol=0.0, callbacks=[Checkpoint(best)])
    reg.fit(X, y)
    assert reg.callbacks_[0].saved_epochs_[-1] == np.argmax(reg.validation_scores_) + 1
    assert_array_equal(joblib.load(best).predict(X), reg.predict(X))
    # every epoch: the last one is what the fit returns, and trains on as it does
    reg = TabularRegressor(
        **SMALL, max_iter=3, early_stopping=False, callbacks=[Checkpoint(last, monitor=None)]
    ).fit(X, y)
    loaded = joblib.load(last)
    assert same(weights(loaded), weights(reg))
    for model in (reg, loaded):
        model.set_params(warm_start=True, max_iter=2, callbacks=None).fit(X, y)
    assert same(weights(loaded), weights(reg))


class ExplodeAt(Callback):
    """Sets a learning rate that makes the loss non-finite in epoch ``epoch``."""

    def __init__(self, epoch=3):
        self.epoch = epoch

    def on_epoch_begin(self, state, epoch):
        if epoch == self.epoch:
            state.learning_rate = 1e38


@pytest.mark.parametrize(
    "span",
    [None, 0.5],
    ids=["plain", "averaged"],
)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow and NaN in the exploding epoch
def test_terminate_on_nan_keeps_the_model_of_the_last_finite_epoch(span):
    X, y = table()
    params = dict(SMALL, early_stopping=False, weight_averaging=span)
    callbacks = [Seen(), ExplodeAt(3), TerminateOnNaN()]
    with pytest.warns(UserWarning, match="non-finite at epoch 3"):
        reg = TabularRegressor(**params, max_iter=5, callbacks=callbacks).fit(X, y)
    assert reg.n_iter_ == 2
    two = TabularRegressor(**params, max_iter=2, callbacks=callbacks).fit(X, y)
    # the model of epoch 2: what a fit that ends there returns, what callbacks saw
    assert same(weights(two), reg.callbacks_[0].ends[2])
    assert same(weights(reg), weights(two))
    assert_array_equal(reg.predict(X), two.predict(X))


class FreezeAt(Callback):
    """Freezes ``network.layers[index]`` at the beginning of epoch ``epoch``."""

    def __init__(self, index, epoch=2):
        self.index = index
        self.epoch = epoch

    def on_epoch_begin(self, state, epoch):
        if epoch == self.epoch:
            layer = state.network.layers[self.index]
            layer.trainable = False
            self.frozen_ = {key: value.copy() for key, value in layer.params.items()}
            state.update_trainable()


@pytest.mark.parametrize("index", [2, 3], ids=["hidden", "head"])
def test_a_layer_frozen_mid_fit_stays_put_and_the_averages_start_again(index):
    X, y = table()
    params = dict(SMALL, max_iter=3, early_stopping=False)
    recorder = Recorder(averaging_decay(0.5, n_batches(len(X))), restart=2)
    plain = TabularRegressor(
        **params, weight_averaging=None, callbacks=[FreezeAt(index), recorder]
    ).fit(X, y)
    averaged = TabularRegressor(**params, callbacks=[FreezeAt(index)]).fit(X, y)
    layer = averaged.network_.layers[index]
    assert not layer.trainable
    for key, value in averaged.callbacks_[0].frozen_.items():
        assert_array_equal(layer.params[key], value)  # bit for bit from the freeze on
    # the new layout starts the averages again at the weights: the average of the steps since
    assert same(weights(averaged), plain.callbacks_[1].average)


class ScaleAt(Callback):
    """Replaces the weights by half of them at the end of epoch ``epoch``; records the
    optimizer's arrays at the next epoch's beginning and after its first batch."""

    def __init__(self, epoch=2):
        self.epoch = epoch

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.epoch:
            for w in state.weights():
                w *= 0.5
            self.put_ = [w.copy() for w in state.weights()]

    def on_epoch_begin(self, state, epoch):
        if epoch == self.epoch + 1:
            self.start_ = [p.copy() for p in state.optimizer.params]

    def on_batch_end(self, state, batch, size):
        if state.epoch == self.epoch + 1 and batch == 0:
            optimizer = state.optimizer
            self.first_ = [p.copy() for p in optimizer.params]
            self.averages_ = [a.copy() for a in optimizer.averages]


def test_weights_a_callback_puts_in_are_trained_on_and_averaged_from():
    X, y = table()
    reg = TabularRegressor(
        **SMALL, max_iter=3, early_stopping=False, callbacks=[Seen(), ScaleAt(2)]
    ).fit(X, y)
    seen, scale = reg.callbacks_
    assert same(seen.begins[3], scale.put_)  # not the stepped weights of epoch 2
    # their average starts again there: one step of the average from them
    decay = reg._optimizer.average_decay
    for start, step, average in zip(scale.start_, scale.first_, scale.averages_):
        assert not np.array_equal(step, start)
        assert_allclose(average, start + (1 - decay) * (step - start), rtol=1e-5, atol=1e-7)


def test_the_anneal_goes_on_from_the_best_epochs_averaged_weights():
    X, y = table()
    reg = TabularRegressor(
        **SMALL,
        max_iter=15,
        learning_rate="anneal",
        n_iter_no_change=1,
        tol=0.3,
        callbacks=[Seen()],
    ).fit(X, y)
    seen = reg.callbacks_[0]
    rates = [row["learning_rate"] for row in reg.history_]
    first = next(i for i, rate in enumerate(rates) if rate < rates[0]) + 1  # annealed epoch
    best = int(np.argmax(reg.validation_scores_[: first - 1])) + 1
    # "goes back to the best epoch's weights": the averaged ones its validation scored
    assert same(seen.begins[first], seen.ends[best])


# -- partial_fit, warm fits, refits -------------------------------------------------------------
def test_partial_fit_after_an_averaged_fit_steps_from_the_returned_weights():
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=3, early_stopping=False).fit(X, y)
    returned = weights(reg)
    reg.set_params(callbacks=[Seen()]).partial_fit(X, y)
    seen = reg.callbacks_[0]
    epoch = reg.history_[-1]["epoch"]
    assert same(seen.begins[epoch], returned)  # from the averages the fit returned
    # no average: the epoch's end and the model are the last step's weights
    assert same(seen.ends[epoch], seen.last_batch[epoch])
    assert same(weights(reg), seen.last_batch[epoch])
    # a warm fit after it averages again, from the weights partial_fit left
    left = weights(reg)
    reg.set_params(warm_start=True, max_iter=2).fit(X, y)
    seen = reg.callbacks_[0]
    first = min(seen.begins)
    assert same(seen.begins[first], left)
    last = max(seen.ends)
    assert same(weights(reg), seen.ends[last])
    assert not same(weights(reg), seen.last_batch[last])


def test_switching_the_average_off_and_on_refits_as_a_new_estimator():
    X, y = table()
    params = dict(SMALL, max_iter=3)
    reg = TabularRegressor(**params).fit(X, y)
    plain = TabularRegressor(**params, weight_averaging=None).fit(X, y)
    assert not same(weights(reg), weights(plain))
    reg.set_params(weight_averaging=None).fit(X, y)
    assert same(weights(reg), weights(plain))
    again = clone(reg).set_params(weight_averaging=0.5).fit(X, y)
    assert same(weights(reg.set_params(weight_averaging=0.5).fit(X, y)), weights(again))
    assert reg.validation_scores_ == again.validation_scores_


def test_a_warm_fit_in_float64_averages_the_cast_weights():
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=2, early_stopping=False).fit(X, y)
    twin = pickle.loads(pickle.dumps(reg))
    recorder = Recorder(averaging_decay(0.5, n_batches(len(X))))
    twin.set_params(warm_start=True, dtype="float64", weight_averaging=None, callbacks=[recorder])
    reg.set_params(warm_start=True, dtype="float64").fit(X, y)
    twin.fit(X, y)
    assert {w.dtype for w in reg.network_.weights()} == {np.dtype("float64")}
    assert {a.dtype for a in reg._optimizer.averages} == {np.dtype("float64")}
    assert reg.predict(X).dtype == np.float64
    assert reg.loss_curve_ == twin.loss_curve_
    assert same(weights(reg), twin.callbacks_[0].average)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_a_pickled_or_joblib_model_trains_on_as_the_original(tmp_path, early_stopping):
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=2, early_stopping=early_stopping).fit(X, y)
    joblib.dump(reg, tmp_path / "model.joblib")
    copies = [pickle.loads(pickle.dumps(reg)), joblib.load(tmp_path / "model.joblib")]
    for model in copies:
        assert_array_equal(model.predict(X), reg.predict(X))
    for model in [reg, *copies]:
        model.set_params(warm_start=True, max_iter=2).fit(X, y)
    for model in copies:
        assert model.loss_curve_ == reg.loss_curve_
        assert same(weights(model), weights(reg))
        assert_array_equal(model.predict(X), reg.predict(X))


def test_skops_round_trips_an_averaged_model_that_trains_on_as_the_original():
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    import sknet

    X, signal = table()
    y = np.where(signal > 0, "pos", "neg")
    clf = TabularClassifier(**SMALL, max_iter=3).fit(X, y)
    loaded = sio.loads(sio.dumps(clf), trusted=sknet.TRUSTED_TYPES)
    assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    for model in (clf, loaded):
        model.set_params(warm_start=True, max_iter=2).fit(X, y)
    assert same(weights(loaded), weights(clf))


# -- the fit transaction --------------------------------------------------------------------
def test_an_aborted_warm_fit_leaves_an_averaged_model_as_it_was():
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=2, early_stopping=False).fit(X, y)
    before = pickle.dumps(reg)
    with pytest.raises(RuntimeError, match="boom"):
        reg.set_params(warm_start=True, callbacks=[Boom()]).fit(X, y)
    reg.set_params(warm_start=False, callbacks=None)
    assert pickle.dumps(reg) == before


@pytest.mark.parametrize("call", ["partial_fit", "warm fit without the average"])
def test_a_failed_fit_that_stops_averaging_raises_its_own_error_and_rolls_back(call):
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=2, early_stopping=False).fit(X, y)
    before = pickle.dumps(reg)
    with pytest.raises(RuntimeError, match="boom"):
        if call == "partial_fit":
            reg.set_params(callbacks=[Boom()]).partial_fit(X, y)
        else:
            reg.set_params(warm_start=True, weight_averaging=None, callbacks=[Boom()]).fit(X, y)
    reg.set_params(warm_start=False, weight_averaging=0.5, callbacks=None)
    assert pickle.dumps(reg) == before


def test_an_aborted_warm_fit_that_started_averaging_leaves_no_averages_behind():
    X, y = table()
    reg = TabularRegressor(**SMALL, max_iter=2, early_stopping=False, weight_averaging=None)
    reg.fit(X, y)
    before = pickle.dumps(reg)
    with pytest.raises(RuntimeError, match="boom"):
        reg.set_params(warm_start=True, weight_averaging=0.5, callbacks=[Boom()]).fit(X, y)
    reg.set_params(warm_start=False, weight_averaging=None, callbacks=None)
    assert pickle.dumps(reg) == before


# -- data streamed from host memory ---------------------------------------------------------
def test_a_streamed_weighted_fit_and_its_warm_fit_are_the_in_memory_ones():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(4000, 3))  # float64 numbers for a float32 fit: copied, so streamable
    y = X[:, 0] * 2 + 0.3 * rng.normal(size=4000)
    w = rng.uniform(0.5, 2.0, 4000)
    make = lambda **kw: TabularRegressor(**SMALL, max_iter=2, early_stopping=False, **kw)  # noqa: E731
    estimate = estimate_memory(make(), X, y, sample_weight=w)
    limit = int(estimate.total - estimate["data"] // 2)
    in_memory = make().fit(X, y, sample_weight=w)
    streamed = make(max_device_memory=limit).fit(X, y, sample_weight=w)
    assert in_memory.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert same(weights(streamed), weights(in_memory))
    for model in (in_memory, streamed):
        model.set_params(warm_start=True).fit(X, y, sample_weight=w)
    assert streamed.data_placement_ == "streamed"
    assert streamed.loss_curve_ == in_memory.loss_curve_
    assert same(weights(streamed), weights(in_memory))


# -- DataParallel -----------------------------------------------------------------------------
def test_data_parallel_averages_as_one_process_and_steps_as_without_the_average():
    pytest.importorskip("distributed", reason="needs dask.distributed (the distributed extra)")
    from sknet.distributed import DataParallel
    from tests.distributed.helpers import cluster_client

    X, y = table(240)
    est = TabularRegressor(**SMALL, dtype="float64", max_iter=3, early_stopping=False)
    anneal = clone(est).set_params(
        max_iter=12, early_stopping=True, learning_rate="anneal", n_iter_no_change=1, tol=0.3
    )
    with cluster_client(processes=False) as client:

        def parallel(model, sync_every):
            fit = DataParallel(clone(model), client=client, sync_every=sync_every).fit(X, y)
            return fit.estimator_

        for model in (est, anneal):  # the anneal puts weights back: they travel to the replicas
            local, distributed = clone(model).fit(X, y), parallel(model, 1)
            assert distributed.n_iter_ == local.n_iter_
            if model is anneal:
                assert local.history_[-1]["learning_rate"] < local.history_[0]["learning_rate"]
            assert_allclose(distributed.loss_curve_, local.loss_curve_, rtol=1e-10)
            for a, b in zip(weights(distributed), weights(local)):
                assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        # local steps averaged once an epoch: the same steps as without the average,
        # and the model is what the callbacks saw at the last epoch's end
        seen = clone(est).set_params(callbacks=[Seen()])
        averaged = parallel(seen, "epoch")
        plain = parallel(seen.set_params(weight_averaging=None), "epoch")
    assert averaged.loss_curve_ == plain.loss_curve_
    assert same(weights(averaged), averaged.callbacks_[0].ends[3])
    assert not same(weights(averaged), weights(plain))


# -- a Pipeline in a grid search ----------------------------------------------------------
def test_a_grid_search_over_the_span_scores_each_as_its_own_fit():
    X, y = table()
    # batches of 32 (6 an epoch in a fold): a quarter of an epoch is more than one step
    pipe = make_pipeline(TabularRegressor(**{**SMALL, "batch_size": 32}, max_iter=3))
    spans = [None, 0.25, 1.0]
    cv = KFold(3)
    grid = GridSearchCV(pipe, {"tabularregressor__weight_averaging": spans}, cv=cv).fit(X, y)
    scores = grid.cv_results_["mean_test_score"]
    assert len(set(scores)) == 3  # each span a different model
    for i, span in enumerate(spans):
        manual = cross_val_score(
            clone(pipe).set_params(tabularregressor__weight_averaging=span), X, y, cv=cv
        )
        assert_array_equal(manual, [grid.cv_results_[f"split{k}_test_score"][i] for k in range(3)])
    refit = clone(pipe).set_params(**grid.best_params_).fit(X, y)
    assert_array_equal(grid.best_estimator_.predict(X), refit.predict(X))
    assert (
        grid.best_estimator_[-1].weight_averaging
        == grid.best_params_["tabularregressor__weight_averaging"]
    )


# -- the ONNX export ----------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_onnx_export_of_an_averaged_model_predicts_as_it(dtype):
    rt = pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")
    pytest.importorskip("onnx", reason="needs onnx (the onnx extra)")
    from sknet.onnx import to_onnx

    X, signal = table()
    y = np.where(signal > 0, "pos", "neg")
    clf = TabularClassifier(**SMALL, dtype=dtype, max_iter=3, early_stopping=False).fit(X, y)
    plain = clone(clf).set_params(weight_averaging=None).fit(X, y)
    assert not np.array_equal(plain.predict_proba(X), clf.predict_proba(X))
    feed = {
        "a": X[["a"]].to_numpy(np.float64),
        "b": X[["b"]].to_numpy(np.float64),
        "c": X[["c"]].astype(str).to_numpy(),
        "missingindicator_c": X[["c"]].isna().to_numpy(),
    }
    session = rt.InferenceSession(
        to_onnx(clf).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    assert [i.name for i in session.get_inputs()] == list(feed)
    labels, proba = session.run(None, feed)  # a missing number among them
    atol = 1e-5 if dtype == "float32" else 1e-10
    assert_allclose(proba, clf.predict_proba(X), atol=atol, rtol=0)
    assert_array_equal(labels, clf.predict(X))

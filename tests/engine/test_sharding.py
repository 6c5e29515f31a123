"""Batches split into row shards over CPU threads (sknet.engine._sharding).

The suite runs with one BLAS thread, where nothing is split; these tests
pretend the BLAS may use more (``cpu_threads``) and check that a split batch
trains the same model as a whole one, in float64 up to rounding.
"""

import threading

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from threadpoolctl import threadpool_info

import sknet.engine._sharding as sharding
from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor, RNNClassifier
from sknet.callbacks import Callback
from sknet.layers import (
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    Lambda,
    Layer,
    MaxPool2D,
    Residual,
    TimeDistributed,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture
def threads(monkeypatch):
    """``threads(n)``: from now on the BLAS may use ``n`` threads, as far as sknet sees."""

    def pretend(n):
        monkeypatch.setattr(sharding, "cpu_threads", lambda: n)
        monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)  # tiny networks split too

    return pretend


@pytest.fixture
def split_calls(monkeypatch):
    """How many batches ran split, and into how many shards each."""
    calls = []
    original = sharding.RowShards.loss_and_gradients

    def spy(self, X, *args):
        calls.append(sharding.shard_count(X.shape[0], self.n_shards, self.work))
        return original(self, X, *args)

    monkeypatch.setattr(sharding.RowShards, "loss_and_gradients", spy)
    return calls


def fit_both(make, X, y, threads, n=2, **fit_params):
    """The same fit with whole batches and with batches split into ``n`` shards."""
    threads(1)
    whole = make().fit(X, y, **fit_params)
    threads(n)
    split = make().fit(X, y, **fit_params)
    return whole, split


def assert_same_model(whole, split, X, rtol=1e-9):
    np.testing.assert_allclose(split.loss_curve_, whole.loss_curve_, rtol=rtol)
    for a, b in zip(whole.network_.weights(), split.network_.weights()):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(split.predict_proba(X), whole.predict_proba(X), rtol=1e-7)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_classification(300, 12, n_informative=6, n_classes=3, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def images():
    rng = np.random.RandomState(0)
    X = rng.rand(160, 2 * 8 * 8)
    y = (X[:, :64].mean(axis=1) > X[:, 64:].mean(axis=1)).astype(int)
    return X, y


def test_shard_bounds_cover_the_rows_evenly():
    assert sharding.shard_bounds(64, 2) == [0, 32, 64]
    assert sharding.shard_bounds(100, 3) == [0, 33, 66, 100]
    assert sharding.shard_bounds(7, 1) == [0, 7]


@pytest.mark.parametrize("solver", ["adam", "sgd"])
@pytest.mark.parametrize("n", [2, 3])
def test_split_batches_train_the_same_mlp(blobs, threads, split_calls, solver, n):
    X, y = blobs

    def make():
        return MLPClassifier(
            (16, 8), solver=solver, batch_size=96, max_iter=4, alpha=1e-3, dtype=np.float64,
            random_state=0,
        )  # fmt: skip

    whole, split = fit_both(make, X, y, threads, n)
    assert_same_model(whole, split, X)
    # 300 rows: three batches of 96 split n ways, and a last one of 12 rows whole
    assert split_calls == [n] * 3 * 4


def test_dropout_masks_do_not_depend_on_the_split(images, threads, split_calls):
    X, y = images

    def make():
        return ConvNetClassifier(
            input_shape=(2, 8, 8), conv_filters=(4, 6), dense_units=(12,), dropout=0.3,
            batch_size=40, max_iter=3, dtype=np.float64, random_state=0,
        )  # fmt: skip

    whole, split = fit_both(make, X, y, threads)
    assert_same_model(whole, split, X)
    assert split_calls and set(split_calls) == {2}


def test_sample_weights_and_a_short_last_shard(blobs, threads, split_calls):
    X, y = blobs
    w = np.random.RandomState(1).rand(len(y)) * 3

    def make():
        return MLPClassifier((10,), batch_size=128, max_iter=3, dtype=np.float64, random_state=0)

    whole, split = fit_both(make, X, y, threads, n=3, sample_weight=w)
    assert_same_model(whole, split, X)
    assert split_calls == [3, 3, 2] * 3  # the last batch (44 rows) has room for two shards


def test_regressor_and_lbfgs_full_batch(threads, split_calls):
    X, y = make_regression(200, 6, random_state=0)

    def make():
        return MLPRegressor(
            hidden_layer_sizes=(12,), solver="lbfgs", max_iter=15, dtype=np.float64, random_state=0
        )

    whole, split = fit_both(make, X, y, threads)
    np.testing.assert_allclose(split.loss_, whole.loss_, rtol=1e-8)
    np.testing.assert_allclose(split.predict(X), whole.predict(X), rtol=1e-6, atol=1e-8)
    assert split_calls and set(split_calls) == {2}


def test_recurrent_layers_split(threads, split_calls):
    rng = np.random.RandomState(0)
    X = rng.rand(96, 5, 3)
    y = (X[:, :, 0].sum(axis=1) > 2.5).astype(int)

    def make():
        return RNNClassifier(
            cell="gru", units=6, batch_size=48, max_iter=3, dtype=np.float64, random_state=0
        )

    whole, split = fit_both(make, X, y, threads)
    assert_same_model(whole, split, X)
    assert split_calls


def test_containers_and_time_distributed_split(images, threads, split_calls):
    X, y = images
    layers = [
        Residual([Conv2D(2, 3, padding="same", activation="relu")]),
        MaxPool2D(2),
        Flatten(),
        Dense(8, activation="relu"),
    ]

    def make():
        return ConvNetClassifier(
            input_shape=(2, 8, 8), layers=layers, batch_size=40, max_iter=3,
            dtype=np.float64, random_state=0,
        )  # fmt: skip

    whole, split = fit_both(make, X, y, threads)
    assert_same_model(whole, split, X)
    assert split_calls
    assert TimeDistributed(Dense(3)).shardable
    assert not TimeDistributed(Dropout(0.5)).shardable  # it would draw per copy


class RowMean(Layer):
    """A user's layer that does not say its rows are independent."""

    def forward(self, X, *, training):
        return X - X.mean(axis=0)


class Doubled(Layer):
    """A user's layer that says so."""

    shardable = True

    def forward(self, X, *, training):
        return X * 2.0


@pytest.mark.parametrize(
    "layer", [BatchNorm(), RowMean(), Lambda(np.tanh)], ids=["batchnorm", "user", "lambda"]
)
def test_layers_coupling_rows_keep_whole_batches(images, threads, split_calls, layer):
    X, y = images
    threads(2)
    ConvNetClassifier(
        input_shape=(2, 8, 8), layers=[Flatten(), Dense(8), layer], batch_size=64, max_iter=2
    ).fit(X, y)
    assert split_calls == []


def test_a_users_layer_can_say_it_splits(images, threads, split_calls):
    X, y = images

    def make():
        return ConvNetClassifier(
            input_shape=(2, 8, 8), layers=[Flatten(), Dense(8, activation="relu"), Doubled()],
            batch_size=64, max_iter=2, dtype=np.float64, random_state=0,
        )  # fmt: skip

    whole, split = fit_both(make, X, y, threads)
    assert_same_model(whole, split, X)
    assert split_calls


def test_small_batches_stay_whole(blobs, threads, split_calls):
    X, y = blobs
    threads(4)
    MLPClassifier((8,), batch_size=2 * sharding.MIN_SHARD_ROWS - 1, max_iter=1).fit(X, y)
    assert split_calls == []


def blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


class RecordThreads(Callback):
    def __init__(self):
        self.seen = []

    def on_batch_end(self, state, batch, size):
        self.seen.append((threading.current_thread().name, blas_threads()))


def test_blas_is_single_threaded_only_while_batches_run(blobs, threads):
    X, y = blobs
    before = blas_threads()
    threads(2)
    est = MLPClassifier((8,), batch_size=64, max_iter=2, callbacks=[RecordThreads()]).fit(X, y)
    seen = est.callbacks_[0].seen
    assert len(seen) == 10 and {name for name, _ in seen} == {"MainThread"}
    assert all(counts == [1] * len(counts) for _, counts in seen)
    assert blas_threads() == before


class FailsOnRow(Layer):
    """Raises in forward when its shard holds the row with value 999."""

    shardable = True

    def forward(self, X, *, training):
        if training and (X == 999.0).any():
            raise RuntimeError("bad shard")
        return X


def test_an_error_in_a_worker_thread_reaches_fit_and_rolls_back(images, threads):
    X, y = images
    X = X.copy()
    before = blas_threads()
    threads(2)
    est = ConvNetClassifier(
        input_shape=(2, 8, 8), layers=[FailsOnRow(), Flatten(), Dense(4)], batch_size=64,
        max_iter=2, random_state=0,
    ).fit(X, y)  # fmt: skip
    weights = [w.copy() for w in est.network_.weights()]
    X[-1, :] = 999.0  # in the second half of some batch: a worker thread's shard
    with pytest.raises(RuntimeError, match="bad shard"):
        est.set_params(warm_start=True, shuffle=False).fit(X, y)
    for a, b in zip(weights, est.network_.weights()):
        np.testing.assert_array_equal(a, b)
    assert blas_threads() == before


def test_work_per_sample_counts_weights_times_positions():
    net = ConvNetClassifier(input_shape=(1, 28, 28)).fit(np.zeros((20, 784)), np.arange(20) % 2)
    # conv 1->32 and 32->64 (3x3, 28x28 and 14x14 pixels), dense 3136->128->1 (binary)
    expected = 28 * 28 * (32 * 9 + 32) + 14 * 14 * (64 * 32 * 9 + 64) + 3137 * 128 + 129
    assert sharding.work_per_sample(net.network_) == expected


def test_small_networks_keep_whole_batches(blobs, monkeypatch, split_calls):
    # 2 threads, the real work threshold: an MLP this size is not worth splitting
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    X, y = blobs
    MLPClassifier((64,), batch_size=256, max_iter=1).fit(X, y)
    assert split_calls == []
    assert sharding.shard_count(64, 2, 15e6 / 64) == 1  # a 784-256-128 MLP's 64 rows
    assert sharding.shard_count(64, 2, 4.2e6) == 2  # the default ConvNet's


class UnfreezeAtEpoch2(Callback):
    """Unfreezes the first layer when the second epoch begins (parameters laid out again)."""

    def on_epoch_begin(self, state, epoch):
        layer = state.network.layers[0]
        if epoch == 2 and not layer.trainable:
            layer.trainable = True
            state.update_trainable()


def test_a_relayout_between_epochs_makes_new_copies(images, threads, split_calls):
    X, y = images

    def make():
        return ConvNetClassifier(
            input_shape=(2, 8, 8), layers=[Conv2D(3, 3, trainable=False), Flatten(), Dense(6)],
            batch_size=40, max_iter=3, dtype=np.float64, random_state=0,
            callbacks=[UnfreezeAtEpoch2()],
        )  # fmt: skip

    whole, split = fit_both(make, X, y, threads)
    assert whole.layers_[0].trainable and split.layers_[0].trainable
    assert_same_model(whole, split, X)
    assert split_calls

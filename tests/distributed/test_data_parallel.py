"""DataParallel: one model trained in step on the workers of a Dask cluster.

One module-scoped LocalCluster of two worker processes (loopback, no
dashboard) serves every test; the tests that kill a worker come last and wait
for its nanny to bring it back. Skipped when the ``distributed`` extra is
missing.
"""

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")

import dask.array as da  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from sknet import MLPClassifier, MLPRegressor  # noqa: E402
from sknet import autodiff as ad  # noqa: E402
from sknet.callbacks import Checkpoint  # noqa: E402
from sknet.distributed import DataParallel, WorkerLostError  # noqa: E402
from sknet.layers import Layer  # noqa: E402
from sknet.losses import LogLoss  # noqa: E402
from tests.conftest import local_dask_client  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def client():
    with local_dask_client() as client:
        yield client


def mlp(**params):
    defaults = dict(
        hidden_layer_sizes=(16,), learning_rate_init=0.01, max_iter=4, random_state=0, device="cpu"
    )
    return MLPClassifier(**{**defaults, **params})


def weights(estimator):
    return [np.asarray(w) for w in estimator.network_.weights()]


def assert_same_model(a, b, rtol=0.0):
    assert a.loss_curve_ == pytest.approx(b.loss_curve_, rel=rtol, abs=0)
    for wa, wb in zip(weights(a), weights(b)):
        np.testing.assert_allclose(wa, wb, rtol=rtol, atol=0)


# -- same start, same answer ---------------------------------------------------------
@pytest.mark.parametrize(
    "params",
    [
        {"dtype": "float64"},
        {"dtype": "float64", "solver": "sgd", "early_stopping": True, "dropout": 0.2},
        {"dtype": "float32"},
    ],
    ids=["adam-float64", "sgd-early-stopping-dropout-float64", "adam-float32"],
)
def test_one_worker_trains_the_model_fit_trains(client, digits, params):
    X, y = digits
    weight = np.random.RandomState(0).uniform(0.5, 2, len(y))
    est = mlp(**params)
    local = clone(est).fit(X, y, sample_weight=weight)
    parallel = DataParallel(est, n_workers=1).fit(X, y, sample_weight=weight)
    # Float64 identical; float32 identical here too (same BLAS threads), 1e-5 promised.
    rtol = 0.0 if params["dtype"] == "float64" else 1e-5
    assert_same_model(parallel.estimator_, local, rtol=rtol)
    assert parallel.estimator_.history_[-1]["epoch"] == local.history_[-1]["epoch"]
    np.testing.assert_array_equal(parallel.predict(X), local.predict(X))
    assert parallel.shard_rows_ == [len(X)]


# -- sync_every=1: synchronous data parallelism, the model est.fit trains -------------
EQUIVALENT_FITS = {
    "adam": ({}, None),
    "sgd-nesterov-alpha": ({"solver": "sgd", "alpha": 1e-2, "learning_rate_init": 0.05}, None),
    "adam-dropout-sample-weight": ({"dropout": 0.3}, "sample"),
    "sgd-dropout-class-weight": (
        {"solver": "sgd", "dropout": 0.2, "class_weight": "balanced", "momentum": 0.5},
        "sample",
    ),
    "adam-early-stopping-small-batches": ({"early_stopping": True, "batch_size": 64}, None),
}


@pytest.mark.parametrize("params, weighted", EQUIVALENT_FITS.values(), ids=EQUIVALENT_FITS)
def test_sync_every_batch_trains_the_model_fit_trains(client, digits, params, weighted):
    # Each batch of one process is cut over the workers by where its rows are; their
    # gradients add up to the batch's, and every replica applies the same step.
    X, y = digits
    weight = np.random.RandomState(1).uniform(0.2, 3, len(y)) if weighted else None
    est = mlp(dtype="float64", max_iter=3, **params)
    local = clone(est).fit(X, y, sample_weight=weight)
    parallel = DataParallel(est, sync_every=1).fit(X, y, sample_weight=weight)
    assert parallel.shard_rows_ == [898, 899]
    assert_same_model(parallel.estimator_, local, rtol=1e-10)
    np.testing.assert_array_equal(parallel.predict(X), local.predict(X))
    # as many optimizer steps as one process: one synchronization a batch
    n_train = len(X) - (int(np.ceil(0.1 * len(X))) if params.get("early_stopping") else 0)
    per_epoch = -(-n_train // params.get("batch_size", 200))
    assert len(parallel.sync_history_) == per_epoch * len(local.history_)


class _Swish(Layer):
    """A forward-only user layer (module level: the workers unpickle it)."""

    def forward(self, X, *, training):
        return X * ad.sigmoid(X)


def test_sync_every_batch_with_containers_frozen_and_forward_only_layers(client, digits):
    # The seams: a Residual, a Sequential with a frozen layer and a user's forward-only
    # layer train on the workers exactly as one process trains them.
    from sknet import NeuralNetClassifier
    from sknet.layers import Dense, Residual, Sequential

    X, y = digits
    layers = [
        Dense(32, activation="relu"),
        Residual([_Swish(), Dense(32)]),
        Sequential([Dense(16, activation="tanh", trainable=False), _Swish()]),
    ]
    est = NeuralNetClassifier(
        layers, dtype="float64", max_iter=2, learning_rate_init=0.01, random_state=0, device="cpu"
    )
    local = clone(est).fit(X, y)
    parallel = DataParallel(est, sync_every=1).fit(X, y)
    assert_same_model(parallel.estimator_, local, rtol=1e-10)
    frozen = parallel.estimator_.layers_[2].blocks_[0]
    assert not frozen.trainable


def test_sync_every_batch_follows_the_drivers_callbacks(client, digits):
    # Unfreeze (new flags, new optimizer layout) and LRScheduler change the model on the
    # driver between epochs: the replicas get the change and still train est.fit's model.
    from sknet import NeuralNetClassifier
    from sknet.callbacks import LRScheduler, Unfreeze
    from sknet.layers import Dense

    X, y = digits
    est = NeuralNetClassifier(
        layers=[Dense(64, activation="relu", trainable=False), Dense(64, activation="relu")],
        solver="sgd",
        learning_rate_init=0.05,
        max_iter=4,
        random_state=0,
        device="cpu",
        dtype="float64",
        callbacks=[Unfreeze(epoch=2), LRScheduler(policy="step", step_size=1, gamma=0.5)],
    )
    local = clone(est).fit(X, y)
    parallel = DataParallel(est, sync_every=1).fit(X, y)
    assert_same_model(parallel.estimator_, local, rtol=1e-10)
    sent = [row["bytes_sent"] for row in parallel.epoch_history_]
    state = sum(w.nbytes for w in weights(local))
    assert sent[0] > state and sent[1] > state  # the model, at the start and after Unfreeze
    assert sent[2] < state and sent[3] < state  # then only the epoch's plan


@pytest.mark.parametrize("sync_every", ["epoch", 3])
def test_two_workers_are_reproducible(client, digits, sync_every):
    X, y = digits
    est = mlp(dtype="float64")
    a = DataParallel(est, sync_every=sync_every).fit(X, y)
    b = DataParallel(est, sync_every=sync_every).fit(X, y)
    assert_same_model(a.estimator_, b.estimator_)
    assert a.shard_rows_ == [898, 899] and len(a.workers_) == 2
    assert a.score(X, y) > 0.5
    # 1797 rows make 9 batches of 200 an epoch: synchronized after each in the first
    # epoch (the warm-up), then once an epoch, or after batches 3, 6 and 9
    per_epoch = 1 if sync_every == "epoch" else 3
    epochs = a.epoch_history_
    assert [e["syncs"] for e in epochs] == [9] + [per_epoch] * (est.max_iter - 1)
    assert len(a.sync_history_) == 9 + per_epoch * (est.max_iter - 1)
    assert [row["batches"] for row in a.sync_history_[:9]] == [1] * 9
    row = a.sync_history_[9]
    assert row["epoch"] == 2 and row["batches"] == (9 if sync_every == "epoch" else 3)
    assert row["bytes_between_workers"] > 0 and row["retries"] == 0
    assert row["compute_seconds"] > 0 and row["seconds"] >= 0


@pytest.mark.parametrize("sync_every", [4, "epoch"])
def test_periodic_syncs_make_one_processs_steps_and_second_moments(client, digits, sync_every):
    # Each replica steps on its rows of every batch: as many Adam steps as one process.
    # Its second moment, from half batches, would overestimate the whole batches' by
    # their extra noise (1.35 times here) and shrink the steps; the correction from the
    # replicas' spread takes it back to one process's.
    X, y = digits
    est = mlp(dtype="float64", hidden_layer_sizes=(32,), learning_rate_init=0.001, max_iter=6)
    local = clone(est).fit(X, y)
    parallel = DataParallel(est, sync_every=sync_every).fit(X, y)
    assert parallel.estimator_._optimizer.t == local._optimizer.t == 6 * 9
    ratio = np.concatenate(
        [(a / b).ravel() for a, b in zip(parallel.estimator_._optimizer.vs, local._optimizer.vs)]
    )
    assert 0.9 < np.median(ratio) < 1.1


def test_no_model_goes_through_the_client_between_epochs(client, digits):
    # The replicas combine their states worker to worker: after the first epoch (the
    # model sent once), the client sends each epoch's plan and reads one model back,
    # however many synchronizations the epoch has.
    X, y = digits
    est = mlp(dtype="float64", max_iter=3, hidden_layer_sizes=(128,))
    state = None
    for sync_every in (1, 3, "epoch"):
        parallel = DataParallel(est, sync_every=sync_every).fit(X, y)
        state = state or sum(w.nbytes for w in weights(parallel.estimator_))
        later = parallel.epoch_history_[1:]
        assert all(e["bytes_sent"] < state / 2 for e in later)  # plans, no model
        # one replica's model and Adam's two moments, whatever the synchronizations
        assert all(3 * state <= e["bytes_received"] < 3.5 * state for e in later)


@pytest.fixture(scope="module")
def three_threads():
    """A Client of 3 in-process workers (threads) talking TCP: the sums over 3 replicas."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=3,
            threads_per_worker=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            cluster.close()


def test_three_replicas_by_reduce_scatter_and_by_dask_messages(three_threads, digits, monkeypatch):
    from sknet.distributed import _driver, _exchange

    X, y = digits
    est = mlp(dtype="float64", max_iter=2, dropout=0.2)
    local = clone(est).fit(X, y)
    monkeypatch.setattr(_exchange, "_ONE_ROUND_BYTES", 0)  # reduce-scatter, all-gather
    parallel = DataParallel(est, client=three_threads, sync_every=1).fit(X, y)
    assert len(parallel.shard_rows_) == 3
    assert {e["transport"] for e in parallel.epoch_history_} == {"sockets"}
    assert_same_model(parallel.estimator_, local, rtol=1e-10)
    # what a cluster whose comms are not plain TCP does: the arrays as Dask messages
    monkeypatch.setattr(_driver, "_transport", lambda client, workers: "dask")
    by_messages = DataParallel(est, client=three_threads, sync_every=1).fit(X, y)
    assert {e["transport"] for e in by_messages.epoch_history_} == {"dask"}
    assert_same_model(by_messages.estimator_, parallel.estimator_)
    averaged = DataParallel(est, client=three_threads, sync_every=2).fit(X, y)
    assert averaged.estimator_._optimizer.t == local._optimizer.t


def test_dask_blocks_stay_on_the_workers(client, digits, monkeypatch):
    X, y = digits
    X_blocks = client.persist(da.from_array(X, chunks=((898, 899), (64,))))
    distributed.wait(X_blocks)
    holders = client.who_has(X_blocks)

    def refuse(*args, **kwargs):
        raise AssertionError("a block of X came to the client")

    monkeypatch.setattr(da.Array, "__array__", refuse)
    monkeypatch.setattr(da.Array, "compute", refuse)
    est = mlp(dtype="float64")
    parallel = DataParallel(est).fit(X_blocks, y)
    monkeypatch.undo()
    keys = [key[0] for key in X_blocks.__dask_keys__()]
    assert parallel.workers_ == [holders[key][0] for key in keys]
    # blocks cut where the NumPy split cuts: the same shards, the same model
    assert_same_model(parallel.estimator_, DataParallel(est).fit(X, y).estimator_)


def test_dask_input_with_early_stopping_and_dask_targets(client, digits):
    X, y = digits
    est = mlp(early_stopping=True, max_iter=3)
    parallel = DataParallel(est).fit(da.from_array(X, chunks=400), da.from_array(y, chunks=400))
    fitted = parallel.estimator_
    assert len(fitted.validation_scores_) == 3 and fitted.best_validation_score_ > 0
    assert sum(parallel.shard_rows_) == len(X) - int(np.ceil(0.1 * len(X)))


def test_dask_blocks_are_checked_on_the_workers(client, digits):
    X, y = digits
    X = X.copy()
    X[5, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DataParallel(mlp()).fit(da.from_array(X, chunks=300), y)


# -- epoch bookkeeping once, on the driver -------------------------------------------
def test_validation_verbose_and_callbacks_run_once_on_the_driver(client, digits, capsys, tmp_path):
    X, y = digits
    path = tmp_path / "model.joblib"
    est = mlp(max_iter=3, verbose=True, callbacks=[Checkpoint(path, monitor=None)])
    parallel = DataParallel(est, sync_every=2).fit(
        X[:1500], y[:1500], X_val=X[1500:], y_val=y[1500:]
    )
    out = capsys.readouterr().out
    assert out.count("Iteration 1, loss") == 1 and out.count("Iteration 3, loss") == 1
    fitted = parallel.estimator_
    assert [row["epoch"] for row in fitted.history_] == [1, 2, 3]
    assert all(row["valid_score"] > 0 for row in fitted.history_)
    assert fitted.callbacks_[0].saved_epochs_ == [1, 2, 3]
    assert len(fitted.loss_curve_) == 3


def test_checkpoint_resumes_after_the_driver_dies(client, digits, tmp_path):
    import joblib

    X, y = digits
    path = tmp_path / "model.joblib"
    est = mlp(dtype="float64", max_iter=2, callbacks=[Checkpoint(path, monitor=None)])
    DataParallel(est).fit(X, y)
    saved = joblib.load(path)  # what a new driver finds
    assert len(saved.history_) == 2
    resumed = DataParallel(saved.set_params(warm_start=True, max_iter=3)).fit(X, y)
    assert [row["epoch"] for row in resumed.estimator_.history_] == [1, 2, 3, 4, 5]
    assert len(saved.history_) == 2  # the estimator given is not modified


def test_partial_fit_is_one_epoch_over_the_shards(client, digits):
    X, y = digits
    parallel = DataParallel(mlp())
    parallel.partial_fit(X, y, classes=np.arange(10)).partial_fit(X, y)
    assert parallel.estimator_.t_ == 2 * len(X) and len(parallel.estimator_.history_) == 2


def test_regressor(client, digits):
    X, y = digits
    parallel = DataParallel(MLPRegressor(hidden_layer_sizes=(8,), max_iter=3, device="cpu"))
    parallel.fit(X, y.astype(float), sample_weight=np.ones(len(y)))
    assert parallel.predict(X).shape == (len(X),) and not hasattr(parallel, "classes_")


# -- the result is an ordinary sknet model ------------------------------------------
def test_the_fitted_model_pickles_and_predicts_without_dask(client, digits, tmp_path):
    X, y = digits
    parallel = DataParallel(mlp()).fit(X, y)
    assert parallel.to_local() is parallel.estimator_
    assert type(parallel.estimator_) is MLPClassifier
    np.testing.assert_array_equal(parallel.classes_, np.arange(10))
    assert parallel.n_features_in_ == 64 and parallel.predict_proba(X).shape == (len(X), 10)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(parallel.estimator_))
    code = (
        "import sys, pickle, numpy as np\n"
        "sys.modules['dask'] = sys.modules['distributed'] = None  # no Dask here\n"
        f"model = pickle.loads(open({str(path)!r}, 'rb').read())\n"
        "print(model.predict(np.zeros((2, 64))).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(2,)"


def test_the_fitted_attributes_read_on_the_data_parallel_itself(client, digits):
    X, y = digits
    parallel = DataParallel(mlp(early_stopping=True, max_iter=3))
    assert not hasattr(parallel, "history_") and not hasattr(parallel, "n_iter_")
    parallel.fit(X, y)
    model = parallel.estimator_
    assert parallel.n_iter_ == model.n_iter_ == 3
    assert parallel.history_ is model.history_ and len(parallel.history_) == 3
    assert parallel.loss_curve_ == model.loss_curve_ and len(parallel.loss_curve_) == 3
    assert parallel.best_validation_score_ == model.best_validation_score_
    assert parallel.layers_ is model.layers_
    np.testing.assert_array_equal(parallel.classes_, model.classes_)
    # DataParallel's own come first; a name the model lacks is DataParallel's error
    assert parallel.workers_ and parallel.estimator is not model
    with pytest.raises(AttributeError, match="'DataParallel' object has no attribute 'nope_'"):
        getattr(parallel, "nope_")  # noqa: B009
    with pytest.raises(AttributeError, match="_private"):
        getattr(parallel, "_private")  # noqa: B009 (private names are not delegated)
    parallel.set_params(estimator__early_stopping=False, estimator__warm_start=True)
    parallel.set_params(estimator__max_iter=2).fit(X, y)  # always the model's current values
    assert parallel.estimator_.max_iter == 2 and not parallel.estimator_.early_stopping
    assert parallel.n_iter_ == parallel.estimator_.n_iter_ == 2  # per fit, as in sklearn
    assert len(parallel.history_) == 5
    clone_of = pickle.loads(pickle.dumps(parallel))
    assert clone_of.n_iter_ == 2 and clone_of.history_ == parallel.history_


def test_import_sknet_needs_no_dask():
    code = (
        "import sys\n"
        "sys.modules['dask'] = sys.modules['distributed'] = None\n"
        "import sknet, sknet.distributed\n"
        "try:\n"
        "    sknet.distributed.DataParallel(sknet.MLPClassifier()).fit([[0.0]], [0])\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 'pip install "sknet-nn[distributed]"' in out.stdout


# -- bad input ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "estimator, params, error, match",
    [
        ("ridge", {}, TypeError, "sknet estimators"),
        (None, {"solver": "lbfgs"}, ValueError, "solver='adam', 'adamw' or 'sgd'"),
        ("grouped", {}, ValueError, "set group_by_length=False"),
    ],
)
def test_bad_estimators(client, digits, estimator, params, error, match):
    from sklearn.linear_model import Ridge

    from sknet import NeuralNetClassifier
    from sknet.layers import LSTM

    X, y = digits
    est = Ridge() if estimator == "ridge" else mlp(**params)
    if estimator == "grouped":  # batches cut by length: not on the workers
        est = NeuralNetClassifier(
            layers=[LSTM(4)], input_shape=(8, 8), padding_value=0.0, group_by_length=True
        )
    with pytest.raises(error, match=match):
        DataParallel(est).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"sync_every": 0}, "sync_every"),
        ({"sync_every": "batch"}, "sync_every"),
        ({"n_workers": 3}, "n_workers=3, but the Dask cluster has 2"),
        ({"on_worker_loss": "ignore"}, "on_worker_loss"),
    ],
)
def test_bad_parameters(client, digits, params, match):
    X, y = digits
    with pytest.raises(ValueError, match=match):
        DataParallel(mlp(), **params).fit(X, y)


def test_no_client_says_how_to_make_one(digits):
    X, y = digits
    code = (
        "import numpy as np\n"
        "from sknet import MLPClassifier\n"
        "from sknet.distributed import DataParallel\n"
        "try:\n"
        "    DataParallel(MLPClassifier()).fit(np.zeros((4, 2)), [0, 1, 0, 1])\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "needs a Dask client" in out.stdout and "Client(LocalCluster())" in out.stdout


def test_a_closed_client_is_a_clear_error(client, digits):
    X, y = digits
    closed = distributed.Client(client.scheduler.address)
    closed.close()
    with pytest.raises(ValueError, match="client is not running .status 'closed'"):
        DataParallel(mlp(), client=closed).fit(X, y)


def test_dask_input_with_early_stopping_and_list_sample_weight(client, digits):
    X, y = digits
    weight = [1.0 + (i % 3) for i in range(len(y))]  # a plain list
    est = mlp(early_stopping=True, max_iter=2, dtype="float64")
    parallel = DataParallel(est).fit(da.from_array(X, chunks=600), y, sample_weight=weight)
    assert len(parallel.estimator_.validation_scores_) == 2
    assert sum(parallel.shard_rows_) == len(X) - int(np.ceil(0.1 * len(X)))


# -- scikit-learn's checks ----------------------------------------------------------
EXPECTED_FAILED_CHECKS = {
    # Repeating rows moves rows between the two shards (the split is by position),
    # so the averaged model is another one than with weights; with one worker the
    # weighted and repeated fits agree (test_one_worker_trains_the_model_fit_trains).
    "check_sample_weight_equivalence_on_dense_data": "rows move between shards",
    "check_sample_weight_equivalence_on_sparse_data": "rows move between shards",
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(
    [
        DataParallel(
            MLPClassifier(
                hidden_layer_sizes=(16,), learning_rate_init=0.05, max_iter=8, random_state=0
            )
        )
    ],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_compatible_estimator(client, estimator, check):
    check(estimator)


# -- GPUs (dask-cuda) ----------------------------------------------------------------
@pytest.mark.gpu
def test_replicas_train_on_the_workers_gpus(digits):
    dask_cuda = pytest.importorskip("dask_cuda", reason="needs dask-cuda")
    from sknet.backend import cuda_device_count

    if cuda_device_count() == 0:
        pytest.skip("needs a CUDA GPU with CuPy")
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = dask_cuda.LocalCUDACluster(host="127.0.0.1", dashboard_address=None)
        gpu_client = distributed.Client(cluster)
    try:
        parallel = DataParallel(mlp(device="cuda"), client=gpu_client).fit(X, y)
        assert set(parallel.worker_devices_) == {"cuda:0"}  # each worker's own GPU
        assert parallel.estimator_.device_ == "cpu" and parallel.score(X, y) > 0.5
        if len(parallel.shard_rows_) > 1:  # two GPUs or more: NCCL between them
            est = mlp(device="cuda", dtype="float64")
            exact = DataParallel(est, client=gpu_client, sync_every=1).fit(X, y)
            assert {e["transport"] for e in exact.epoch_history_} == {"nccl"}
            assert_same_model(exact.estimator_, clone(est).fit(X, y), rtol=1e-8)
    finally:
        gpu_client.close()
        cluster.close()


# -- faults: a worker process killed during a fit ---------------------------------------
class KillingLogLoss(LogLoss):
    """The log-loss, which ends its process at its ``after + 1``-th call in processes ``pids``."""

    def __init__(self, pids=(), after=0):
        self.pids = pids
        self.after = after

    def for_target(self, target_type):
        return clone(self)

    def __call__(self, Z, Y, sample_weight=None, sw_sum=None):
        if os.getpid() in self.pids:
            self._calls = self.__dict__.get("_calls", 0) + 1
            if self._calls > self.after:
                os._exit(1)  # as a killed process: no clean-up, no reply
        return super().__call__(Z, Y, sample_weight, sw_sum)


def worker_pids(client):
    client.wait_for_workers(2, timeout=60)
    return client.run(os.getpid)


#: 9 batches an epoch, a part of each on each shard: the 13th call is in the second epoch.
KILL_AFTER = 12


@pytest.fixture
def killable():
    """A cluster of its own for a test that kills workers: the module's keeps both of its
    workers whatever the nannies do (one restarting a worker slowly on a loaded machine)."""
    with local_dask_client() as client:
        yield client


@pytest.mark.parametrize("sync_every", [1, 2])
def test_a_killed_worker_is_replaced_and_the_model_is_the_same(killable, digits, sync_every):
    client = killable
    X, y = digits
    est = mlp(dtype="float64", max_iter=3)
    undisturbed = DataParallel(est, sync_every=sync_every, client=client).fit(X, y)
    address, pid = sorted(worker_pids(client).items())[0]
    killer = clone(est).set_params(loss=KillingLogLoss(pids=(pid,), after=KILL_AFTER))
    parallel = DataParallel(killer, sync_every=sync_every, client=client).fit(X, y)
    retried = [(row["epoch"], row["retries"]) for row in parallel.epoch_history_ if row["retries"]]
    assert retried == [(2, 1)]
    assert address not in client.nthreads() and address not in parallel.workers_
    assert_same_model(parallel.estimator_, undisturbed.estimator_)


def test_both_workers_killed_at_once_the_model_is_the_same(killable, digits):
    client = killable
    X, y = digits
    est = mlp(dtype="float64", max_iter=3)
    undisturbed = DataParallel(est, sync_every=1, client=client).fit(X, y)
    pids = worker_pids(client)
    killer = clone(est).set_params(
        loss=KillingLogLoss(pids=tuple(pids.values()), after=KILL_AFTER)
    )
    parallel = DataParallel(killer, sync_every=1, client=client).fit(X, y)
    assert [row["retries"] for row in parallel.epoch_history_] == [0, 1, 0]
    assert not set(parallel.workers_) & set(pids)  # both shards on the restarted workers
    assert_same_model(parallel.estimator_, undisturbed.estimator_)


def test_a_killed_worker_with_raise_stops_with_the_last_synchronized_model(killable, digits):
    X, y = digits
    est = mlp(dtype="float64", max_iter=3)
    one_epoch = DataParallel(clone(est).set_params(max_iter=1), n_workers=2, client=killable).fit(
        X, y
    )
    address, pid = sorted(worker_pids(killable).items())[0]
    killer = clone(est).set_params(loss=KillingLogLoss(pids=(pid,), after=KILL_AFTER))
    parallel = DataParallel(killer, on_worker_loss="raise", client=killable)
    with pytest.raises(WorkerLostError, match=address) as info:
        parallel.fit(X, y)
    assert info.value.workers == [address]
    # epoch 2 was lost: the model is the one of epoch 1, usable
    assert len(parallel.estimator_.history_) == 1
    assert_same_model(parallel.estimator_, one_epoch.estimator_)
    assert parallel.predict(X).shape == y.shape

"""The loggers and the pruning callback under DataParallel: run on the driver, once an epoch."""

import csv
import os

import pytest

from sknet.callbacks import CSVLogger, MLflowLogger, OptunaPruning, TensorBoardLogger
from tests.callbacks.helpers import allow_mlflow_model_loading, data, mlp
from tests.conftest import local_dask_client

pytest.importorskip("distributed", reason="needs dask.distributed (the distributed extra)")
from sknet.distributed import DataParallel  # noqa: E402
from tests.distributed.helpers import fit_plugins  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with local_dask_client() as client:
        yield client


def test_the_loggers_write_each_epoch_once_from_the_driver(client, tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    mlflow = pytest.importorskip("mlflow")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = mlflow.MlflowClient(uri)
    store.create_experiment("dp", artifact_location=(tmp_path / "artifacts").as_uri())
    X, y = data(400)
    est = mlp(
        [
            CSVLogger(tmp_path / "history.csv"),
            TensorBoardLogger(tmp_path / "runs" / "{run}"),
            MLflowLogger(tracking_uri=uri, experiment_name="dp"),
        ],
        tol=0.0,
        n_iter_no_change=10,
        max_iter=3,
    )
    with pytest.warns(Warning, match="Maximum iterations"):
        parallel = DataParallel(est, client=client).fit(
            X[:300], y[:300], X_val=X[300:], y_val=y[300:]
        )
    fitted = parallel.estimator_
    epochs = [row["epoch"] for row in fitted.history_]
    assert epochs == [1, 2, 3]
    with open(tmp_path / "history.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == epochs
    assert [float(r["valid_loss"]) for r in rows] == [r["valid_loss"] for r in fitted.history_]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert len(os.listdir(run_dir)) == 1  # one writer, on the driver
    reader = EventAccumulator(os.fspath(run_dir))
    reader.Reload()
    assert [s.step for s in reader.Scalars("train_loss")] == epochs
    run_id = fitted.callbacks_[2].run_id_
    assert [p.step for p in store.get_metric_history(run_id, "valid_loss")] == epochs
    assert store.get_run(run_id).info.status == "FINISHED"
    allow_mlflow_model_loading(monkeypatch)
    model = mlflow.sklearn.load_model(f"{store.get_run(run_id).info.artifact_uri}/model")
    assert (model.predict(X) == parallel.predict(X)).all()
    assert all(plugins == [] for plugins in fit_plugins(client).values())


def test_a_pruned_distributed_fit_stops_and_leaves_no_state_on_the_workers(client):
    optuna = pytest.importorskip("optuna")
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=0.0))
    trial = study.ask()
    X, y = data(400)
    est = mlp([OptunaPruning(trial, monitor="train_loss")], max_iter=5)
    parallel = DataParallel(est, client=client)
    with pytest.raises(optuna.TrialPruned, match="pruned at epoch 1"):
        parallel.fit(X, y)
    assert not hasattr(parallel, "estimator_")
    assert list(study.trials[0].intermediate_values) == [1]  # reported once, by the driver
    assert all(plugins == [] for plugins in fit_plugins(client).values())


def test_a_warm_up_batch_by_batch_trains_what_one_process_trains(client):
    from numpy.testing import assert_allclose

    from sknet.callbacks import LRScheduler

    X, y = data(300)
    schedule = [LRScheduler(policy="cosine", warmup=2)]  # the rate changes every batch
    est = mlp(schedule, max_iter=3, tol=0.0, dtype="float64", batch_size=50)
    with pytest.warns(Warning, match="Maximum iterations"):
        alone = est.fit(X, y)
    expected_rates = [row["learning_rate"] for row in alone.history_]
    with pytest.warns(Warning, match="Maximum iterations"):
        parallel = DataParallel(
            mlp(schedule, max_iter=3, tol=0.0, dtype="float64", batch_size=50),
            client=client,
            sync_every=1,
        ).fit(X, y)
    assert [row["learning_rate"] for row in parallel.estimator_.history_] == expected_rates
    assert_allclose(parallel.predict_proba(X), alone.predict_proba(X), rtol=0, atol=1e-10)


def test_an_anneal_from_the_best_epoch_trains_what_one_process_trains(client):
    # learning_rate='anneal' puts the best epoch's weights back on the driver and lowers
    # the rate between epochs: the replicas start the next epoch from both.
    from numpy.testing import assert_allclose

    X, y = data(300)
    params = dict(
        learning_rate="anneal",
        early_stopping=True,
        tol=1e-3,
        n_iter_no_change=2,
        learning_rate_init=0.05,
        dtype="float64",
        batch_size=50,
        max_iter=60,
    )
    alone = mlp([], **params).fit(X, y)
    assert alone.n_iter_ < 60 and alone.history_[-1]["learning_rate"] == 0.05 / 16
    parallel = DataParallel(mlp([], **params), client=client, sync_every=1).fit(X, y)
    assert [r["learning_rate"] for r in parallel.estimator_.history_] == [
        r["learning_rate"] for r in alone.history_
    ]
    assert_allclose(parallel.predict_proba(X), alone.predict_proba(X), rtol=0, atol=1e-10)
    assert parallel.estimator_.t_ == alone.t_ < alone.n_iter_ * 270  # the anneal's half epochs


def test_a_callback_that_changes_each_batch_is_refused_by_name(client):
    from sknet.callbacks import Callback, ProgressBar

    class ScaleEachBatch(Callback):
        def on_batch_end(self, state, batch, size):
            state.learning_rate *= 0.99

    X, y = data(100)
    with pytest.raises(ValueError, match="ScaleEachBatch.on_batch_end would run on the driver"):
        DataParallel(mlp([ScaleEachBatch()], max_iter=1), client=client).fit(X, y)
    assert all(plugins == [] for plugins in fit_plugins(client).values())
    # one that only reads the fit (a progress bar) runs after each epoch's batches
    with pytest.warns(Warning, match="Maximum iterations"):
        DataParallel(mlp([ProgressBar()], max_iter=1, tol=0.0), client=client).fit(X, y)


def test_scikit_learns_callbacks_of_the_estimator_see_each_epoch_on_the_driver(client):
    sklearn_callback = pytest.importorskip("sklearn.callback")
    X, y = data(200)
    monitor = sklearn_callback.ScoringMonitor(scoring="accuracy")
    parallel = DataParallel(mlp([], max_iter=3).set_callbacks(monitor), client=client)
    parallel.fit(X, y)  # clone keeps them: the driver's fit is their root task
    rows = monitor.get_logs().data
    assert [r["task_name"] for r in rows] == ["fit"] + ["epoch"] * parallel.estimator_.n_iter_
    assert rows[0]["accuracy"] == pytest.approx(parallel.score(X, y))

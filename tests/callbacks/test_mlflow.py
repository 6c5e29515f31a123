"""sknet/callbacks/_mlflow.py: MLflowLogger against a real MLflow SQLite tracking store."""

import multiprocessing
import os
import pickle
import re
import socket
import sys
import time

import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

from sknet.callbacks import Callback, EarlyStopping, MLflowLogger, TerminateOnNaN
from sknet.callbacks._mlflow import flat_params
from tests.callbacks.helpers import GRID, N_FITS, allow_mlflow_model_loading, data, mlp, search

mlflow = pytest.importorskip("mlflow", reason='needs mlflow: pip install "sknet-nn[mlflow]"')


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A SQLite tracking store and an experiment whose artifacts stay in tmp_path."""
    monkeypatch.chdir(tmp_path)  # the store's default artifacts, ./mlruns, land here
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    client.create_experiment("sknet", artifact_location=(tmp_path / "artifacts").as_uri())
    allow_mlflow_model_loading(monkeypatch)  # to load models back
    return uri, client


def runs(client):
    experiment = client.get_experiment_by_name("sknet").experiment_id
    return client.search_runs([experiment])


def test_a_run_per_fit_with_parameters_metrics_and_a_model_that_loads(store):
    uri, client = store
    X, y = data()
    logger = MLflowLogger(tracking_uri=uri, experiment_name="sknet", run_name="digits")
    clf = mlp([EarlyStopping(patience=1), logger], early_stopping=True).fit(X, y)
    (run,) = runs(client)
    assert run.info.run_id == clf.callbacks_[1].run_id_
    assert run.info.status == "FINISHED" and run.info.run_name == "digits"
    assert run.data.tags["sknet.estimator"] == "MLPClassifier"
    assert run.data.params == dict(flat_params(clf.get_params(), mlflow))
    assert run.data.params["hidden_layer_sizes"] == "(8,)"
    assert run.data.params["callbacks"].startswith("[EarlyStopping(patience=1), MLflowLogger(")
    for key in ("train_loss", "valid_loss", "valid_score", "learning_rate", "duration"):
        points = client.get_metric_history(run.info.run_id, key)
        assert [p.step for p in points] == [row["epoch"] for row in clf.history_]
        assert [p.value for p in points] == [row[key] for row in clf.history_]
    model = mlflow.sklearn.load_model(f"{run.info.artifact_uri}/model")
    assert type(model) is type(clf)
    np.testing.assert_array_equal(model.predict_proba(X), clf.predict_proba(X))


def test_the_model_loads_from_a_runs_uri(store, monkeypatch):
    uri, client = store
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="sknet")]).fit(X, y)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        model = mlflow.sklearn.load_model(f"runs:/{clf.callbacks_[0].run_id_}/model")
    finally:
        mlflow.set_tracking_uri(previous)
    np.testing.assert_array_equal(model.predict(X), clf.predict(X))


def test_nested_under_the_active_run(store):
    uri, client = store
    X, y = data()
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(experiment_id=client.get_experiment_by_name("sknet").experiment_id):
            parent = mlflow.active_run().info
            clf = mlp([MLflowLogger(log_model=False)]).fit(X, y)  # the global store
            assert mlflow.active_run().info.run_id == parent.run_id  # the stack untouched
    finally:
        mlflow.set_tracking_uri(previous)
    child = client.get_run(clf.callbacks_[0].run_id_)
    assert child.data.tags["mlflow.parentRunId"] == parent.run_id
    assert child.info.experiment_id == parent.experiment_id
    assert not client.list_artifacts(child.info.run_id)  # log_model=False


def test_without_an_active_run_a_run_is_not_nested(store, tmp_path):
    uri, client = store
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="new one")]).fit(X, y)
    run = client.get_run(clf.callbacks_[0].run_id_)
    assert "mlflow.parentRunId" not in run.data.tags
    assert client.get_experiment(run.info.experiment_id).name == "new one"  # created
    assert (tmp_path / "mlruns").is_dir()


def test_long_values_are_cut_to_mlflows_limit(store):
    uri, client = store
    limit = mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
    flat = dict(flat_params({"scoring": "x" * (limit + 50), "alpha": 0.5, "a__b": [1, 2]}, mlflow))
    assert len(flat["scoring"]) == limit and flat["scoring"].endswith("x...")
    assert flat["alpha"] == "0.5" and flat["a__b"] == "[1, 2]"
    # A fit whose callbacks' repr is longer than MLflow takes (a run would refuse it whole).
    X, y = data()
    logger = MLflowLogger(tracking_uri=uri, experiment_name="sknet", log_model=False)
    many = [logger] + [TerminateOnNaN() for _ in range(limit // len("TerminateOnNaN(), "))]
    clf = mlp(many, class_weight={0: 1.0, 1: 2.0}).fit(X, y)
    params = client.get_run(clf.callbacks_[0].run_id_).data.params
    assert len(repr(clf.callbacks)) > limit
    assert len(params["callbacks"]) == limit and params["callbacks"].endswith("...")
    assert params["class_weight"] == "{0: 1.0, 1: 2.0}"


class FailsAt(Callback):
    def __init__(self, epoch=2):
        self.epoch = epoch

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.epoch:
            raise RuntimeError("a callback failed")
        return False


def test_a_failed_fit_leaves_a_failed_run_without_a_model(store):
    uri, client = store
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="sknet"), FailsAt(2)])
    with pytest.raises(RuntimeError, match="a callback failed"):
        clf.fit(X, y)
    (run,) = runs(client)
    assert run.info.status == "FAILED"
    assert not client.list_artifacts(run.info.run_id)
    assert [p.step for p in client.get_metric_history(run.info.run_id, "train_loss")] == [1, 2]
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(clf)


class FailsToBegin(Callback):
    def on_train_begin(self, state):
        raise RuntimeError("a callback failed to begin")


def test_a_callback_failing_to_begin_ends_the_run_begun_before_it(store):
    uri, client = store
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="sknet"), FailsToBegin()])
    with pytest.raises(RuntimeError, match="failed to begin"):
        clf.fit(X, y)
    (run,) = runs(client)
    assert run.info.status == "FAILED"  # not RUNNING forever
    assert not client.get_metric_history(run.info.run_id, "train_loss")


def test_a_fit_inside_an_except_block_still_finishes(store):
    # sys.exc_info() holds the handled exception around fit: that is not the fit's failure.
    uri, client = store
    X, y = data()
    try:
        raise KeyError("handled by the caller")
    except KeyError:
        clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="sknet")]).fit(X, y)
    assert client.get_run(clf.callbacks_[0].run_id_).info.status == "FINISHED"


def test_a_bad_store_or_parent_is_a_value_error_naming_it(store, tmp_path):
    uri, client = store
    X, y = data()
    with pytest.raises(ValueError, match="parent_run_id='nope' is not a run of"):
        mlp([MLflowLogger(tracking_uri=uri, parent_run_id="nope")]).fit(X, y)
    with pytest.raises(ValueError, match="tracking_uri='nosuchscheme://x' cannot be used"):
        mlp([MLflowLogger(tracking_uri="nosuchscheme://x")]).fit(X, y)
    with pytest.raises(ValueError, match="experiment_name='xxx.*cannot be created"):
        mlp([MLflowLogger(tracking_uri=uri, experiment_name="x" * 1000)]).fit(X, y)
    assert not runs(client)


def test_each_fit_of_a_search_is_a_run_nested_under_the_callers(store):
    uri, client = store
    parent = client.create_run(client.get_experiment_by_name("sknet").experiment_id)
    logger = MLflowLogger(tracking_uri=uri, parent_run_id=parent.info.run_id, log_model=False)
    grid = search(mlp([logger]), n_jobs=2)  # processes: no active run there, hence the id
    children = [r for r in runs(client) if r.info.run_id != parent.info.run_id]
    assert len(children) == N_FITS
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert {r.info.status for r in children} == {"FINISHED"}
    alphas = sorted(float(r.data.params["alpha"]) for r in children)
    assert alphas == sorted(GRID["alpha"] * 2 + [grid.best_params_["alpha"]])
    assert len({r.info.run_id for r in children}) == N_FITS


def test_pickled_models_keep_the_run_id_and_no_client(store):
    uri, client = store
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri, experiment_name="sknet", log_model=False)])
    clf.fit(X, y)
    loaded = pickle.loads(pickle.dumps(clf))
    assert loaded.callbacks_[0].run_id_ == clf.callbacks_[0].run_id_
    assert "_client" not in vars(loaded.callbacks_[0])
    loaded.fit(X, y)  # a new run for the new fit
    assert loaded.callbacks_[0].run_id_ != clf.callbacks_[0].run_id_
    assert len(runs(client)) == 2


def test_without_mlflow_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    X, y = data()
    with pytest.raises(ImportError, match=r'pip install "sknet-nn\[mlflow\]"'):
        mlp([MLflowLogger()]).fit(X, y)


# -- a server that does not answer -------------------------------------------------------------
#: MLflow's HTTP settings, environment variables
HTTP_SETTINGS = (
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
)
#: what ReadsSettings saw, one dict per epoch
SEEN = []


class ReadsSettings(Callback):
    def on_epoch_end(self, state, epoch, logs):
        SEEN.append({name: os.environ.get(name) for name in HTTP_SETTINGS})
        return False


@pytest.fixture
def user_settings(monkeypatch):
    """The user's own MLflow HTTP settings: a timeout set, no retries setting."""
    SEEN.clear()
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "77")
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", raising=False)
    expected = {name: os.environ.get(name) for name in HTTP_SETTINGS}
    yield expected
    SEEN.clear()


def closed_port():
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_is_down_fails_the_fit_at_once_naming_it(user_settings, tmp_path):
    uri = f"http://127.0.0.1:{closed_port()}"
    X, y = data()
    clf = mlp([MLflowLogger(tracking_uri=uri)])
    started = time.monotonic()
    with pytest.raises(ValueError, match=re.escape(f"MLflowLogger: tracking_uri={uri!r}")):
        clf.fit(X, y)
    assert time.monotonic() - started < 60  # MLflow's own retries took 255 s
    assert {name: os.environ.get(name) for name in HTTP_SETTINGS} == user_settings
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(clf)


def test_a_server_that_never_answers_fails_the_fit_within_the_timeout(user_settings):
    with socket.socket() as silent:  # connections are accepted, nothing is ever answered
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        X, y = data()
        started = time.monotonic()
        message = r"(?s)tracking_uri=.*no answer within timeout=1\.5 seconds"
        with pytest.raises(ValueError, match=message):
            mlp([MLflowLogger(tracking_uri=uri, timeout=1.5)]).fit(X, y)
        assert time.monotonic() - started < 30
    assert {name: os.environ.get(name) for name in HTTP_SETTINGS} == user_settings


def test_mlflows_http_settings_are_bounded_while_the_fit_runs(store, user_settings):
    uri, client = store
    X, y = data()
    logger = MLflowLogger(tracking_uri=uri, experiment_name="sknet", log_model=False, timeout=4.5)
    mlp([logger, ReadsSettings()]).fit(X, y)
    bounded = {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    }
    assert SEEN and all(seen == bounded for seen in SEEN)
    assert {name: os.environ.get(name) for name in HTTP_SETTINGS} == user_settings
    SEEN.clear()
    unbounded = MLflowLogger(tracking_uri=uri, experiment_name="sknet", timeout=None)
    mlp([unbounded.set_params(log_model=False), ReadsSettings()]).fit(X, y)
    assert SEEN and all(seen == user_settings for seen in SEEN)  # MLflow's own, untouched
    assert len(runs(client)) == 2


def test_the_http_settings_of_fits_at_once_are_put_back_by_the_last(user_settings):
    from sknet.callbacks._mlflow import HTTP_LIMITS as held

    def now():
        return os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT")

    first, second = held.hold(3.0), held.hold(8.0)
    assert now() == "8"  # the longest of the fits under way
    held.release(second)
    assert now() == "3"
    held.release(first)
    assert {name: os.environ.get(name) for name in HTTP_SETTINGS} == user_settings


# -- a new SQLite store, opened by several processes at once ----------------------------------
def fit_at_the_barrier(uri, barrier):
    """One fit logging to ``uri``, started when every process has reached ``barrier``."""
    X, y = data()
    barrier.wait(120)
    mlp([MLflowLogger(tracking_uri=uri, log_model=False)]).fit(X, y)


def test_processes_fitting_at_once_on_a_new_sqlite_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the runs' default artifacts, ./mlruns
    uri = f"sqlite:///{tmp_path / 'new.db'}"
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2)
    workers = [spawn.Process(target=fit_at_the_barrier, args=(uri, barrier))]
    for worker in workers:
        worker.start()
    try:
        fit_at_the_barrier(uri, barrier)  # and this process: its MLflow is imported already
    finally:
        for worker in workers:
            worker.join(120)
    assert [worker.exitcode for worker in workers] == [0]
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("Default").experiment_id
    assert {r.info.status for r in client.search_runs([experiment])} == {"FINISHED"}
    assert len(client.search_runs([experiment])) == 2

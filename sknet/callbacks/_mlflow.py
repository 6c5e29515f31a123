"""MLflowLogger: a tracked MLflow run per fit, with parameters, metrics and the model.

Everything goes through an ``MlflowClient`` and the run's id, never MLflow's
active-run stack, so that fits in threads, in processes and nested under a
user's run do not step on one another.
"""

import contextlib
import hashlib
import itertools
import math
import os
import re
import sys
import tempfile
import threading
import time

from sknet._version import __version__
from sknet.callbacks._runs import import_extra, scalars
from sknet.engine._callbacks import Callback
from sknet.layers._constraints import Number

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

#: MLflow's limits where it does not say them (older versions): 500 characters a value
DEFAULT_VALUE_LENGTH, DEFAULT_KEY_LENGTH, PARAMS_PER_BATCH = 500, 250, 100
#: what MLflow accepts in a key; anything else becomes ``_``
_KEY_REFUSED = re.compile(r"[^\w\-. /:]")
#: MLflow's retries of a failed request while a fit with a ``timeout`` runs, and their backoff
HTTP_RETRIES, HTTP_BACKOFF = 2, 1
#: the schemes of tracking URIs whose store is a database (MLflow creates its tables)
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


class MLflowLogger(Callback):
    """Track each fit as an MLflow run: parameters, a metric point per epoch, the model.

    When the fit starts, a run is created (nested under the active MLflow run
    of this thread, if there is one, or under ``parent_run_id``) with the
    estimator's ``get_params()`` as parameters; each epoch logs the numbers of
    its ``history_`` row as metrics at step ``epoch``; when training ends the
    fitted model is logged as the run's artifact ``model`` (an MLflow
    scikit-learn model: ``mlflow.sklearn.load_model(f"runs:/{run_id}/model")``
    loads it back) and the run is marked finished. A fit that fails leaves a
    ``FAILED`` run without a model; one that Optuna prunes (see
    :class:`OptunaPruning`) a ``KILLED`` one. Needs ``pip install
    "sknet-nn[mlflow]"``.

    Put it after callbacks that restore weights when training ends
    (:class:`EarlyStopping`): the model logged is the one training ends with
    when this callback's turn comes.

    Parameters
    ----------
    tracking_uri : str or None, default=None
        Where runs are stored (``'sqlite:///mlflow.db'``, an MLflow server's
        URL); ``None``: MLflow's own choice (``mlflow.set_tracking_uri``, the
        ``MLFLOW_TRACKING_URI`` environment variable, else its default).
    experiment_name : str or None, default=None
        The experiment, created if missing; ``None``: the parent run's, else
        the experiment MLflow has active (``mlflow.set_experiment``, else
        ``Default``).
    run_name : str or None, default=None
        The run's name; ``None``: one MLflow makes up.
    parent_run_id : str or None, default=None
        Nest every run under this run. ``None``: under the run active in the
        thread that calls ``fit``. Processes do not share an active run: for
        the runs of ``GridSearchCV(n_jobs=...)`` to nest under yours, pass
        its id (``mlflow.active_run().info.run_id``) and a ``tracking_uri``.
    log_model : bool, default=True
        Log the fitted model as the artifact ``model``.
    timeout : float or None, default=10.0
        Seconds a tracking server has to answer (at most 3600). Before the
        run is created, a server at an ``http://`` or ``https://`` tracking
        URI must answer one request within ``timeout`` seconds, or the fit
        stops with a ValueError naming the URI: a server that is down or
        unreachable fails the fit within ``timeout`` seconds, not after
        MLflow's retries (about 4 minutes by default). While the fit runs,
        each of MLflow's requests waits at most ``timeout`` seconds a try
        (rounded up to whole seconds) and is retried at most twice, the
        second time after about 2 s: see Notes. ``None``: no check, and
        MLflow's own settings.

    Attributes
    ----------
    run_id_ : str
        The id of the last fit's run.

    See Also
    --------
    CSVLogger : The history in a CSV file, with no library needed.
    TensorBoardLogger : The history as TensorBoard scalars.

    Notes
    -----
    The parameters are ``get_params()``'s, nested ones under scikit-learn's
    names (``layers__0__units``); each value is its ``repr``, cut to MLflow's
    length limit (6000 characters) with a trailing ``...``. The model is saved
    with cloudpickle (so layers and callbacks defined in a script or notebook
    travel with it); MLflow 3 loads models only where
    ``MLFLOW_ALLOW_MODEL_CODE_EXECUTION=true`` (before MLflow 3.18:
    ``MLFLOW_ALLOW_PICKLE_DESERIALIZATION``). ``partial_fit`` is a fit:
    each call is a run.

    With a ``timeout``, MLflow's HTTP settings are set for the fit and put
    back when it ends: ``MLFLOW_HTTP_REQUEST_TIMEOUT`` (``timeout``),
    ``MLFLOW_HTTP_REQUEST_MAX_RETRIES=2`` and
    ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR=1``. They are environment
    variables, the process's: fits under way at once in threads share them,
    with the longest of their timeouts, and the last to end puts back what
    was there before the first.

    A new database store (a SQLite file) has its tables created by the first
    fit that opens it, while the fits of other processes of the machine wait
    (a lock file in the temporary directory): MLflow creates a store's
    tables when a process first opens it, and the processes of a parallel
    search would otherwise collide. Windows has no such lock: there, open a
    new store once before a parallel search (``mlflow.MlflowClient(uri)``).

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import MLflowLogger
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> uri = "sqlite:///" + os.path.join(tmp.name, "mlflow.db")
    >>> tracking = MLflowLogger(tracking_uri=uri, log_model=False)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[tracking])
    >>> clf = clf.fit(X, y)
    >>> import mlflow
    >>> run = mlflow.MlflowClient(uri).get_run(clf.callbacks_[0].run_id_)
    >>> run.data.params["hidden_layer_sizes"], run.info.status
    ('(16,)', 'FINISHED')
    >>> tmp.cleanup()
    """

    _parameter_constraints: dict = {
        "tracking_uri": [str, None],
        "experiment_name": [str, None],
        "run_name": [str, None],
        "parent_run_id": [str, None],
        "log_model": ["boolean"],
        "timeout": [Number(0, 3600, closed="right"), None],
    }

    def __init__(
        self,
        tracking_uri=None,
        experiment_name=None,
        run_name=None,
        parent_run_id=None,
        log_model=True,
        timeout=10.0,
    ):
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.parent_run_id = parent_run_id
        self.log_model = log_model
        self.timeout = timeout

    def on_train_begin(self, state):
        mlflow = import_extra("mlflow", "mlflow", "MLflowLogger")
        from mlflow.entities import Param
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

        self._client = self._http = None
        if self.tracking_uri is not None and not self.tracking_uri.strip():
            # MLflow reads '' as its default store, which this logger would not lock
            raise ValueError(
                f"MLflowLogger: tracking_uri={self.tracking_uri!r} names no store; pass None "
                "for MLflow's own choice (MLFLOW_TRACKING_URI, else its default), or a URI"
            )
        self._around = sys.exc_info()[1]  # an exception handled around fit is not the fit's
        uri = mlflow.get_tracking_uri() if self.tracking_uri is None else self.tracking_uri
        if self.timeout is not None:
            self._http = HTTP_LIMITS.hold(self.timeout)  # until on_train_end
            _check_answers(uri, self.timeout)
        with _store_opened_alone(uri):
            client = _client(mlflow, self.tracking_uri)
        parent = self._parent_run(mlflow, client)
        tags = {"sknet.estimator": type(state.estimator).__name__}
        if parent is not None:
            tags[MLFLOW_PARENT_RUN_ID] = parent.info.run_id
        run = client.create_run(
            self._experiment_id(mlflow, client, parent), run_name=self.run_name, tags=tags
        )
        self._client, self.run_id_ = client, run.info.run_id
        params = [Param(k, v) for k, v in flat_params(state.estimator.get_params(), mlflow)]
        for start in range(0, len(params), PARAMS_PER_BATCH):
            client.log_batch(self.run_id_, params=params[start : start + PARAMS_PER_BATCH])

    def _parent_run(self, mlflow, client):
        """The run to nest under (``parent_run_id``'s, or this thread's active run), or None."""
        if self.parent_run_id is None:
            active = mlflow.active_run()  # this thread's; its store is the global one
            if active is None or self.tracking_uri not in (None, mlflow.get_tracking_uri()):
                return None
            return active
        try:
            return client.get_run(self.parent_run_id)
        except mlflow.exceptions.MlflowException as exc:
            raise ValueError(
                f"MLflowLogger: parent_run_id={self.parent_run_id!r} is not a run of "
                f"{client.tracking_uri}: {exc}"
            ) from None

    def _experiment_id(self, mlflow, client, parent):
        if self.experiment_name is not None:
            found = client.get_experiment_by_name(self.experiment_name)
            if found is not None:
                return found.experiment_id
            try:
                return client.create_experiment(self.experiment_name)
            except mlflow.exceptions.MlflowException as exc:
                found = client.get_experiment_by_name(self.experiment_name)
                if found is None:  # not another fit's creation meanwhile: refused
                    raise ValueError(
                        f"MLflowLogger: experiment_name={self.experiment_name!r:.80} cannot "
                        f"be created: {exc}"
                    ) from None
                return found.experiment_id
        if parent is not None:
            return parent.info.experiment_id
        if self.tracking_uri is None:  # the experiment mlflow.set_experiment chose
            return mlflow.tracking.fluent._get_experiment_id()
        return client.get_experiment_by_name("Default").experiment_id

    def on_epoch_end(self, state, epoch, logs):
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, epoch) for key, value in scalars(logs).items()]
        self._client.log_batch(self.run_id_, metrics=metrics)
        return False

    def on_train_end(self, state):
        try:
            self._end_run(state)
        finally:
            token, self._http = getattr(self, "_http", None), None
            if token is not None:
                HTTP_LIMITS.release(token)

    def _end_run(self, state):
        """The run marked as the fit ended (``sys.exc_info()``), with the model if it finished."""
        client, self._client = getattr(self, "_client", None), None
        if client is None:
            return
        error = sys.exc_info()[1]
        status = "FINISHED"
        if error is not None and error is not self._around:
            status = "KILLED" if _stopped_on_purpose(error) else "FAILED"
        try:
            if status == "FINISHED" and self.log_model:
                self._log_model(client, state.estimator)
        except BaseException:
            status = "FAILED"
            raise
        finally:
            client.set_terminated(self.run_id_, status)

    def _log_model(self, client, estimator):
        import mlflow.sklearn

        requirements = [f"sknet-nn=={__version__}", *mlflow.sklearn.get_default_pip_requirements()]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model")
            mlflow.sklearn.save_model(
                estimator,
                path,
                serialization_format=mlflow.sklearn.SERIALIZATION_FORMAT_CLOUDPICKLE,
                pip_requirements=requirements,
            )
            client.log_artifacts(self.run_id_, path, artifact_path="model")


def _client(mlflow, tracking_uri):
    """An ``MlflowClient`` of ``tracking_uri`` whose store answered; a ValueError naming it."""
    try:
        client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)
    except (mlflow.exceptions.MlflowException, OSError) as exc:  # OSError: a sqlite file's
        raise ValueError(  # directory that is a file, or that this process may not write
            f"MLflowLogger: tracking_uri={tracking_uri!r} cannot be used: {exc}"
        ) from None
    return client


class HttpLimits:
    """MLflow's HTTP settings, bounded while fits with a ``timeout`` run.

    MLflow reads them from the environment at every request; the environment
    is the process's, so the fits under way share one setting (the longest
    of their timeouts), and the last to end puts back what was there before
    the first.
    """

    NAMES = (
        "MLFLOW_HTTP_REQUEST_TIMEOUT",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    )

    def __init__(self):
        self._lock = threading.Lock()
        self._timeouts = {}  # token -> timeout, for each fit under way
        self._tokens = itertools.count()
        self._saved = {}

    def hold(self, timeout):
        """Bound the settings for a fit with ``timeout``; a token to :meth:`release`."""
        with self._lock:
            if not self._timeouts:
                self._saved = {name: os.environ.get(name) for name in self.NAMES}
            token = next(self._tokens)
            self._timeouts[token] = timeout
            self._apply()
        return token

    def release(self, token):
        """The fit of ``token`` ended: the settings of the others, or those before the first."""
        with self._lock:
            if self._timeouts.pop(token, None) is None:
                return
            if self._timeouts:
                self._apply()
                return
            for name, value in self._saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def _apply(self):
        seconds = max(1, math.ceil(max(self._timeouts.values())))  # MLflow takes an int
        values = (seconds, HTTP_RETRIES, HTTP_BACKOFF)
        os.environ.update({name: str(value) for name, value in zip(self.NAMES, values)})


#: the one HttpLimits of the process
HTTP_LIMITS = HttpLimits()


def _check_answers(uri, timeout):
    """A ValueError naming ``uri`` if the server of an http(s) ``uri`` does not answer in time."""
    if not uri.lower().startswith(("http://", "https://")):
        return
    import requests  # MLflow's own dependency, for its own requests

    try:
        requests.get(uri, timeout=timeout, allow_redirects=False).close()  # any answer will do
    except requests.RequestException as exc:
        raise ValueError(
            f"MLflowLogger: tracking_uri={uri!r} gave no answer within timeout={timeout!r} "
            f"seconds: {type(exc).__name__}: {exc}. Start the tracking server, check its "
            "address, or allow it longer with timeout."
        ) from None


@contextlib.contextmanager
def _store_opened_alone(uri):
    """Within the block, no other process of this machine opens the database store ``uri``.

    MLflow creates a new database store's tables when a process first opens
    it; two processes doing so at once collide (a parallel search on a new
    SQLite file). Systems without ``fcntl`` (Windows) have no lock.
    """
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    lock = None
    if fcntl is not None and scheme in DATABASE_SCHEMES:
        digest = hashlib.sha256(uri.encode("utf-8")).hexdigest()[:16]
        with contextlib.suppress(OSError):  # another user's lock file: no lock, as MLflow does
            lock = open(os.path.join(tempfile.gettempdir(), f"sknet-mlflow-{digest}.lock"), "a")
    if lock is None:
        yield
        return
    with lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # the lock goes with the file's closing
        yield


def _stopped_on_purpose(error):
    """Whether ``error`` ends a fit someone meant to end (Optuna's pruning, Ctrl-C)."""
    optuna = sys.modules.get("optuna")
    pruned = optuna is not None and isinstance(error, optuna.TrialPruned)
    return pruned or isinstance(error, KeyboardInterrupt)


def flat_params(params, mlflow=None):
    """``(key, value)`` strings of ``get_params()`` as MLflow takes them.

    The keys are scikit-learn's (nested ones with ``__``: ``layers__0__units``),
    with only the characters MLflow accepts; the values are their ``repr``
    (strings as they are), cut to MLflow's length with a trailing ``...``.
    """
    validation = getattr(getattr(mlflow, "utils", None), "validation", None)
    value_length = getattr(validation, "MAX_PARAM_VAL_LENGTH", DEFAULT_VALUE_LENGTH)
    key_length = getattr(validation, "MAX_ENTITY_KEY_LENGTH", DEFAULT_KEY_LENGTH)
    flat = []
    for key, value in params.items():
        text = value if isinstance(value, str) else repr(value)
        if len(text) > value_length:
            text = text[: value_length - 3] + "..."
        flat.append((_KEY_REFUSED.sub("_", key)[:key_length], text))
    return flat

"""DataParallel: one sknet model trained on data spread over a Dask cluster.

Synchronous data parallelism. The data is cut into one shard per worker, and
each shard stays on its worker. The driver (the process that calls ``fit``)
runs the wrapped estimator's own fit (validation, initialization, the
per-epoch shuffling, callbacks, history, stopping) with one difference: the
batches of each epoch run on the workers, each on the rows of its shard in
the order of the driver's permutation. Every ``sync_every`` batches (or once
per epoch) each worker returns its parameters, running statistics and
optimizer moments; the driver averages them, weighted by rows, and the next
period starts every replica from the average.

Needs ``pip install "sknet-nn[distributed]"`` (dask and distributed), which is
imported only here and only when used.
"""

import copy
import itertools
import math
import time
import types
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import train_test_split
from sklearn.utils import check_array
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from sknet.engine._trainer import batches_run_by
from sknet.engine._types import StopTraining

__all__ = ["DataParallel", "WorkerLostError"]

#: Seconds between checks that the workers of a running period are alive.
_POLL_SECONDS = 0.25
#: How long to wait for a worker to run a lost shard on, in seconds.
_WAIT_FOR_WORKER_SECONDS = 60.0
#: States larger than this are scattered to the workers before a period (not sent per task).
_SCATTER_BYTES = 4 << 20
#: Times one period may lose a worker before the fit gives up.
_MAX_RETRIES = 3
#: The estimator's parameters the workers need to make its optimizer.
_OPTIMIZER_PARAMETERS = (
    "solver",
    "learning_rate_init",
    "learning_rate",
    "momentum",
    "nesterovs_momentum",
    "power_t",
    "beta_1",
    "beta_2",
    "epsilon",
)


class WorkerLostError(RuntimeError):
    """A Dask worker died during a fit and its shard could not be trained elsewhere.

    Attributes
    ----------
    workers : list of str
        The addresses of the workers that were lost.
    """

    def __init__(self, message, workers):
        super().__init__(message)
        self.workers = list(workers)


def _import_distributed():
    try:
        import dask.array
        import distributed
    except ImportError as exc:
        raise ImportError(
            'DataParallel needs Dask: pip install "sknet-nn[distributed]" '
            f"(dask and distributed). {exc}"
        ) from None
    return dask.array, distributed


def _estimator_has(name):
    def check(self):
        fitted = self.__dict__.get("estimator_")
        return hasattr(fitted if fitted is not None else self.estimator, name)

    return check


class DataParallel(MetaEstimatorMixin, BaseEstimator):
    """Train one sknet estimator on the workers of a Dask cluster, in step.

    ``fit`` cuts the data into one shard per worker and leaves each shard on
    its worker: the blocks of a Dask array are not pulled through the client,
    and NumPy input is scattered once. Each worker trains a replica of
    ``estimator`` on its shard with sknet's trainer; every ``sync_every``
    batches, or once per pass over the shards, the replicas' parameters and
    optimizer moments are averaged (weighted by rows) and every replica
    continues from the average. Everything between epochs (``loss_curve_``,
    ``history_``, validation, early stopping, callbacks, verbose output)
    happens once, on the driver, on the averaged model.

    Parameters
    ----------
    estimator : sknet estimator
        An ``MLPClassifier``, ``MLPRegressor``, ``ConvNetClassifier``,
        ``RNNClassifier`` or ``RNNRegressor`` with ``solver='adam'`` or
        ``'sgd'``. Not modified: ``fit`` trains a clone (with
        ``warm_start=True``, it continues ``estimator_``, or the given
        estimator when that one is fitted: resuming from a
        :class:`~sknet.callbacks.Checkpoint`). The replicas train on its
        ``device`` as each worker resolves it; with dask-cuda every worker
        sees its own GPU as ``'cuda:0'``.
    client : distributed.Client or None, default=None
        The Dask client; ``None`` is the current one
        (``distributed.get_client()``).
    sync_every : int or 'epoch', default='epoch'
        Average the replicas every this many batches of each worker, or once
        per epoch (one pass over every shard).
    n_workers : int or None, default=None
        How many workers to use (the first ones by address); ``None`` uses
        all the workers the cluster has when ``fit`` starts.
    on_worker_loss : {'retry', 'raise'}, default='retry'
        When a worker dies during a fit: ``'retry'`` trains its shard again,
        from the last averaged parameters, on another worker (the shard is
        scattered again from the driver's copy, or recomputed by Dask from
        the array's graph), so the model is the one an undisturbed fit gives;
        ``'raise'`` (or a retry that fails) stops the fit with a
        :class:`WorkerLostError` naming the worker, and ``estimator_`` holds
        the model of the last synchronization.

    Attributes
    ----------
    estimator_ : sknet estimator
        The fitted model: an ordinary sknet estimator that pickles, predicts
        and loads without Dask (also returned by :meth:`to_local`). It lives
        on the driver's CPU.
    classes_ : ndarray of shape (n_classes,)
        The classes (classifiers only).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when ``X`` had string column names.
    workers_ : list of str
        The address of the worker each shard was last trained on (a lost
        worker's shard moves to another).
    shard_rows_ : list of int
        Rows in each shard.
    worker_devices_ : list of str
        The device each shard's replica trained on.
    sync_history_ : list of dict
        One row per synchronization: ``epoch``, ``batches`` (per worker, at
        most), ``rows``, ``bytes_sent`` and ``bytes_received`` (the averaged
        state out to the workers and their states back, arrays only),
        ``seconds`` (wall-clock time of the period on the driver),
        ``compute_seconds`` (the slowest worker's training time) and
        ``retries``.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : with joblib's Dask backend, many
        independent fits on the cluster.
    dask_ml.wrappers.Incremental : one model, ``partial_fit`` block by block.

    Notes
    -----
    With one worker, ``DataParallel(est).fit(X, y)`` trains the same model as
    ``est.fit(X, y)``: the same initial weights, the same permutations, the
    same batches in the same order (identical in float64 when the worker and
    the driver use the same number of BLAS threads; in float32, within
    ``rtol=1e-5``). With several workers and ``random_state`` set, two fits
    give the same model whatever the workers are. A replica rebuilt on
    another worker after a loss draws new dropout masks.

    The targets (one value a row), the sample weights and the validation rows
    (``X_val``, or ``validation_fraction`` of the rows with
    ``early_stopping=True``) are gathered on the driver, which scores the
    averaged model. With Dask input and ``early_stopping=True`` the
    validation rows are drawn by DataParallel from ``estimator.random_state``.

    Examples
    --------
    >>> from dask.distributed import Client, LocalCluster
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.distributed import DataParallel
    >>> cluster = LocalCluster(n_workers=2, processes=False,  # doctest: +SKIP
    ...                        dashboard_address=None)
    >>> client = Client(cluster)  # doctest: +SKIP
    >>> X, y = load_digits(return_X_y=True)
    >>> model = DataParallel(MLPClassifier(max_iter=20, random_state=0),
    ...                      sync_every=4)
    >>> model.fit(X / 16, y).score(X / 16, y)  # doctest: +SKIP
    0.99...
    >>> local = model.to_local()  # an MLPClassifier: no Dask needed  # doctest: +SKIP
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "client": [None, HasMethods(["submit", "scatter"])],
        "sync_every": [StrOptions({"epoch"}), Interval(Integral, 1, None, closed="left")],
        "n_workers": [None, Interval(Integral, 1, None, closed="left")],
        "on_worker_loss": [StrOptions({"retry", "raise"})],
    }

    def __init__(
        self, estimator, *, client=None, sync_every="epoch", n_workers=None, on_worker_loss="retry"
    ):
        self.estimator = estimator
        self.client = client
        self.sync_every = sync_every
        self.n_workers = n_workers
        self.on_worker_loss = on_worker_loss

    # -- fit ----------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Train the replicas on the workers' shards, in step.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask.array.Array of shape (n_samples, n_features)
            The input; a Dask array stays on the workers.
        y : array-like or dask.array.Array of shape (n_samples,) or (n_samples, n_outputs)
            The targets (gathered on the driver).
        sample_weight : array-like or dask.array.Array of shape (n_samples,), default=None
            Sample weights.
        **fit_params : dict
            ``X_val``, ``y_val``, ``sample_weight_val``: a validation set,
            scored on the driver after every epoch.

        Returns
        -------
        self : object
        """
        estimator = self._start_fit(warm=True)
        return self._run(estimator, "fit", X, y, sample_weight, fit_params)

    @available_if(_estimator_has("partial_fit"))
    def partial_fit(self, X, y, sample_weight=None, **fit_params):
        """One epoch over the shards of ``X``, continuing the previous model.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask.array.Array of shape (n_samples, n_features)
        y : array-like or dask.array.Array of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
        **fit_params : dict
            ``classes`` (classifiers, first call), ``X_val``, ``y_val``,
            ``sample_weight_val``.

        Returns
        -------
        self : object
        """
        estimator = self._start_fit(warm=False)
        return self._run(estimator, "partial_fit", X, y, sample_weight, fit_params)

    def _start_fit(self, warm):
        """The estimator this call trains: a clone, or the model to continue."""
        self._validate_params()
        _check_sknet_estimator(self.estimator)
        previous = self.__dict__.get("estimator_")
        if not warm:  # partial_fit continues estimator_ if there is one
            return previous if previous is not None else clone(self.estimator)
        if self.estimator.warm_start:
            if previous is not None:
                return previous
            if self.estimator.__sklearn_is_fitted__():
                return copy.deepcopy(self.estimator)
        return clone(self.estimator)

    def _run(self, estimator, method, X, y, sample_weight, fit_params):
        da, distributed = _import_distributed()
        client = self._get_client(distributed)
        workers = self._pick_workers(client)
        device = estimator.device
        inputs = _Inputs.prepare(estimator, X, y, sample_weight, fit_params, da, distributed)
        driver = _Driver(client, distributed, estimator, inputs, workers, self)
        estimator.set_params(device="cpu")  # the driver averages and scores on its CPU
        try:
            with batches_run_by(estimator, driver):
                getattr(estimator, method)(
                    inputs.X, inputs.y, sample_weight=inputs.sample_weight, **inputs.fit_params
                )
        finally:
            estimator.set_params(device=device)
            driver.close()
        self.estimator_ = estimator
        self.workers_ = [shard.worker for shard in driver.shards]
        self.shard_rows_ = [shard.n_rows for shard in driver.shards]
        self.worker_devices_ = list(driver.devices)
        self.sync_history_ = list(driver.history)
        self.n_features_in_ = estimator.n_features_in_
        for name in ("classes_", "feature_names_in_"):
            if hasattr(estimator, name):
                setattr(self, name, getattr(estimator, name))
            else:
                self.__dict__.pop(name, None)
        if driver.failure is not None:
            raise driver.failure
        return self

    def _get_client(self, distributed):
        if self.client is not None:
            return self.client
        try:
            return distributed.get_client()
        except ValueError:
            raise ValueError(
                "DataParallel needs a Dask client and none is running: create one "
                "first, e.g. `from dask.distributed import Client, LocalCluster; "
                "client = Client(LocalCluster())` on this machine or "
                '`client = Client("tcp://scheduler-address:8786")` for a cluster, '
                "or pass client=."
            ) from None

    def _pick_workers(self, client):
        workers = sorted(client.nthreads())
        if not workers:
            raise ValueError("The Dask cluster has no workers")
        if self.n_workers is not None:
            if self.n_workers > len(workers):
                raise ValueError(
                    f"n_workers={self.n_workers}, but the Dask cluster has {len(workers)} "
                    "worker(s)"
                )
            workers = workers[: self.n_workers]
        return workers

    # -- the fitted model ---------------------------------------------------------
    def to_local(self):
        """The fitted sknet estimator (``estimator_``): no Dask needed to use it.

        Returns
        -------
        estimator : sknet estimator
        """
        check_is_fitted(self)
        return self.estimator_

    def predict(self, X):
        """Predict with the averaged model, in this process.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray
        """
        check_is_fitted(self)
        return self.estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities from the averaged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_prob : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log of the class probabilities from the averaged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_y_prob : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.estimator_.predict_log_proba(X)

    def score(self, X, y, sample_weight=None):
        """The estimator's score (accuracy, or R² for regressors) on ``X, y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        return self.estimator_.score(X, y, sample_weight=sample_weight)

    def __sklearn_is_fitted__(self):
        return "estimator_" in self.__dict__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags


def _check_sknet_estimator(estimator):
    from sknet.estimators._base import BaseNeuralNetwork

    if not isinstance(estimator, BaseNeuralNetwork):
        raise TypeError(
            "DataParallel trains sknet estimators (MLPClassifier, MLPRegressor, "
            f"ConvNetClassifier, RNNClassifier, RNNRegressor), got {type(estimator).__name__}"
        )
    if estimator.solver not in ("adam", "sgd"):
        raise ValueError(
            f"DataParallel needs solver='adam' or 'sgd' (mini-batches to run on the "
            f"workers), got solver={estimator.solver!r}"
        )


# -- the inputs, as the driver's estimator and the shards take them --------------------
class _Inputs:
    """What the driver's estimator fits on, and where the rows of ``X`` are.

    NumPy (or sparse) ``X`` goes to the estimator as it is: its own validation
    runs on the driver, and the driver scatters the validated rows. A Dask
    ``X`` stays on the workers: the estimator gets a stand-in of the same
    shape that takes no memory (every row the same zero row), the workers
    check their blocks, and ``rows`` maps the estimator's rows to the array's
    (the early-stopping validation rows are taken out and gathered).
    """

    def __init__(self, X, y, sample_weight, fit_params, dask_X=None, rows=None):
        self.X, self.y, self.sample_weight = X, y, sample_weight
        self.fit_params = fit_params
        self.dask_X = dask_X
        self.rows = rows

    @classmethod
    def prepare(cls, estimator, X, y, sample_weight, fit_params, da, distributed):
        y, sample_weight = (_gather(a, da) for a in (y, sample_weight))
        fit_params = {k: _gather(v, da) for k, v in fit_params.items()}
        if not isinstance(X, da.Array):
            return cls(X, y, sample_weight, fit_params)
        if X.ndim != 2:
            raise ValueError(f"A Dask array X must be 2-D, got {X.ndim} dimension(s)")
        if any(math.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
        if y is None or len(y) != X.shape[0]:
            raise ValueError(
                f"X and y have inconsistent numbers of samples: {X.shape[0]} and "
                f"{None if y is None else len(y)}"
            )
        rows = np.arange(X.shape[0])
        if estimator.early_stopping and fit_params.get("X_val") is None:
            rows, val = _validation_rows(estimator, y)
            fit_params = {**fit_params, "X_val": X[val].compute(), "y_val": _take(y, val)}
            if sample_weight is not None:
                fit_params["sample_weight_val"] = sample_weight[val]
            y = _take(y, rows)
            sample_weight = None if sample_weight is None else sample_weight[rows]
        dtype = np.dtype(estimator.dtype)
        stand_in = np.lib.stride_tricks.as_strided(
            np.zeros(X.shape[1], dtype), (rows.shape[0], X.shape[1]), (0, dtype.itemsize)
        )
        stand_in.flags.writeable = False
        return cls(stand_in, y, sample_weight, fit_params, dask_X=X, rows=rows)


def _gather(a, da):
    return a.compute() if isinstance(a, da.Array) else a


def _take(y, rows):
    return y.iloc[rows] if hasattr(y, "iloc") else np.asarray(y)[rows]


def _validation_rows(estimator, y):
    """The early-stopping split of a Dask fit: rows to train on and to validate on."""
    y_array = np.asarray(y)
    stratify = y_array if is_classifier(estimator) and y_array.ndim == 1 else None
    train, val = train_test_split(
        np.arange(y_array.shape[0]),
        test_size=estimator.validation_fraction,
        stratify=stratify,
        random_state=estimator.random_state,
    )
    if val.shape[0] < 2:
        raise ValueError(
            "The validation set is too small. Increase 'validation_fraction' "
            "or the size of your dataset."
        )
    return np.sort(train), np.sort(val)


# -- the driver -----------------------------------------------------------------
class _Shard:
    """Rows ``[start, stop)`` of the driver's estimator, on one worker."""

    def __init__(self, index, start, stop, worker):
        self.index, self.start, self.stop = index, start, stop
        self.worker = worker
        self.data = self.template = None  # futures on the worker
        self.dask_blocks = self.keep = None  # Dask input: which blocks, which of their rows

    @property
    def n_rows(self):
        return self.stop - self.start


class _Driver:
    """Runs each epoch's batches on the workers: the epoch runner of ``batches_run_by``."""

    _ids = itertools.count()

    def __init__(self, client, distributed, estimator, inputs, workers, meta):
        self.client, self.distributed = client, distributed
        self.estimator, self.inputs = estimator, inputs
        self.workers = workers
        self.sync_every = meta.sync_every
        self.retry = meta.on_worker_loss == "retry"
        self.device = estimator.device
        self.fit_id = f"sknet-dataparallel-{time.time_ns()}-{next(self._ids)}"
        self.shards, self.devices, self.history = [], [], []
        self.failure = None
        self._epoch = 0

    # -- the epoch runner ---------------------------------------------------------
    def __call__(self, trainer, data, optimizer, *, batch_size, rows, w, sw_sums, on_batch):
        if not self.shards:
            self._place(trainer, data)
        self._epoch += 1
        plans = self._plan_epoch(rows, w, batch_size)
        n_batches = max((len(p[1]) for p in plans.values()), default=0)
        period = n_batches if self.sync_every == "epoch" else self.sync_every
        total, done = 0.0, 0
        for first in range(0, max(n_batches, 1), max(period, 1)):
            tasks = {
                k: (
                    order[first * batch_size : (first + period) * batch_size],
                    sums[first : first + period],
                )
                for k, (order, sums) in plans.items()
                if first < len(sums)
            }
            if not tasks:
                break
            total += self._run_period(trainer, optimizer, tasks, batch_size, period)
            if on_batch is not None:
                for order, _ in tasks.values():
                    for start in range(0, len(order), batch_size):
                        on_batch(done, min(batch_size, len(order) - start))
                        done += 1
        return total

    def _plan_epoch(self, rows, w, batch_size):
        """Each shard's rows in the driver's order (local indices) and its batches' weight sums."""
        bounds = np.array([shard.start for shard in self.shards])
        owner = np.searchsorted(bounds, rows, side="right") - 1
        plans = {}
        for shard in self.shards:
            mine = rows[owner == shard.index]
            starts = np.arange(0, mine.shape[0], batch_size)
            if w is None:
                sums = np.minimum(batch_size, mine.shape[0] - starts).astype(np.float64)
            else:
                sums = np.add.reduceat(w[mine], starts) if mine.shape[0] else np.zeros(0)
            plans[shard.index] = ((mine - shard.start).astype(np.int64), sums)
        return plans

    # -- placing the shards -------------------------------------------------------
    def _place(self, trainer, data):
        n = data.X.shape[0]
        k = min(len(self.workers), n)
        if self.inputs.dask_X is not None:
            self._place_dask_blocks(data, k)
        else:
            bounds = [round(i * n / k) for i in range(k + 1)]
            self.shards = [_Shard(i, bounds[i], bounds[i + 1], self.workers[i]) for i in range(k)]
        self._template = _template(self.estimator, trainer, self.device, len(self.shards))
        self._data = data
        for shard in self.shards:
            self._put(shard, shard.worker)

    def _place_dask_blocks(self, data, k):
        """Contiguous groups of blocks, one a shard, each built where most of it lives."""
        X = self.inputs.dask_X
        if X.numblocks[1] > 1:
            X = X.rechunk({1: -1})
        if X.numblocks[0] < k:
            X = X.rechunk({0: -(-X.shape[0] // k)})
        X = self.client.persist(X)
        keys = [key[0] for key in X.__dask_keys__()]
        futures = {f.key: f for f in self.distributed.futures_of(X)}
        self.distributed.wait(list(futures.values()))
        who_has = self.client.who_has(list(futures.values()))
        edges = np.concatenate([[0], np.cumsum(X.chunks[0])])
        n_global = int(edges[-1])
        cuts = [int(np.argmin(np.abs(edges - i * n_global / k))) for i in range(k + 1)]
        cuts = sorted(set(cuts))
        rows = self.inputs.rows
        free = list(self.workers)
        for i in range(len(cuts) - 1):
            lo, hi = int(edges[cuts[i]]), int(edges[cuts[i + 1]])
            start, stop = np.searchsorted(rows, [lo, hi])
            blocks = [futures[key] for key in keys[cuts[i] : cuts[i + 1]]]
            held = {}
            for block in blocks:
                for worker in who_has.get(block.key, ()):
                    held[worker] = held.get(worker, 0) + 1
            worker = max(free, key=lambda w: (held.get(w, 0), -free.index(w)))
            free.remove(worker)
            shard = _Shard(len(self.shards), int(start), int(stop), worker)
            shard.dask_blocks, shard.keep = blocks, rows[start:stop] - lo
            self.shards.append(shard)
        self._dask_X = X  # keeps the blocks (and their graph) alive

    def _put(self, shard, worker):
        """The shard's rows and the replica's template, on ``worker``."""
        client, data = self.client, self._data
        sl = slice(shard.start, shard.stop)
        Y = np.asarray(data.Y[sl])
        w = None if data.w is None else np.asarray(data.w[sl])
        if shard.dask_blocks is None:
            shard.data = client.scatter((data.X[sl], Y, w), workers=[worker], hash=False)
        else:
            shard.data = client.submit(
                _dask_shard,
                shard.keep,
                Y,
                w,
                self._template.dtype,
                *shard.dask_blocks,
                workers=[worker],
                allow_other_workers=False,
                pure=False,
            )
        shard.template = client.scatter(self._template, workers=[worker], hash=False)
        shard.worker = worker

    # -- one period ------------------------------------------------------------------
    def _run_period(self, trainer, optimizer, tasks, batch_size, period):
        started = time.perf_counter()
        state = _driver_state(trainer, optimizer)
        payload = state
        if _nbytes(state) > _SCATTER_BYTES:  # large models: one copy a worker, not a task
            (payload,) = self.client.scatter(
                [state],  # one object (a dict would be scattered item by item)
                workers=[self.shards[k].worker for k in tasks],
                broadcast=True,
                hash=False,
                direct=True,
            )
        results, retries, lost = {}, 0, []
        pending = {k: self._submit(k, payload, tasks[k], batch_size) for k in tasks}
        while pending:
            finished, gone = self._wait(pending)
            results.update(finished)
            for k in finished:
                del pending[k]
            if not gone:
                continue
            lost += [self.shards[k].worker for k in gone]
            if not self.retry or retries >= _MAX_RETRIES:
                self._give_up(lost, pending)
            retries += 1
            for k in gone:
                self._put(self.shards[k], self._replacement(self.shards[k].worker))
                pending[k] = self._submit(k, state, tasks[k], batch_size)  # not the scattered
        self._average(trainer, optimizer, [results[k] for k in sorted(results)])
        self.history.append(
            {
                "epoch": self._epoch,
                "batches": min(period, max(-(-len(o) // batch_size) for o, _ in tasks.values())),
                "rows": sum(r["rows"] for r in results.values()),
                "bytes_sent": _nbytes(state) * len(tasks),
                "bytes_received": sum(_nbytes(r["state"]) for r in results.values()),
                "seconds": time.perf_counter() - started,
                "compute_seconds": max(r["seconds"] for r in results.values()),
                "retries": retries,
            }
        )
        return sum(r["loss"] for r in results.values())

    def _submit(self, k, state, task, batch_size):
        shard = self.shards[k]
        order, sums = task
        return self.client.submit(
            _train_period,
            shard.data,
            shard.template,
            self.fit_id,
            k,
            state,
            order,
            sums,
            batch_size,
            workers=[shard.worker],
            allow_other_workers=False,
            pure=False,
        )

    def _wait(self, pending):
        """Results that came back, and shards whose worker died, since the last call."""
        from distributed.client import FuturesCancelledError

        distributed = self.distributed
        try:
            distributed.wait(list(pending.values()), timeout=_POLL_SECONDS)
        except (TimeoutError, distributed.TimeoutError, FuturesCancelledError):
            pass  # a worker died or the period is not over: see below
        alive = set(self.client.nthreads())
        finished, gone = {}, []
        for k, future in pending.items():
            if future.status == "finished":
                finished[k] = future.result()
            elif future.status == "error" and not _is_worker_loss(future.exception()):
                future.result()  # a real error (bad data, a bug): raise it here
            elif future.status in ("error", "cancelled", "lost") or (
                self.shards[k].worker not in alive
            ):
                future.cancel()
                gone.append(k)
        return finished, gone

    def _replacement(self, dead):
        """A live worker for a lost shard: one holding no shard if possible."""
        deadline = time.monotonic() + _WAIT_FOR_WORKER_SECONDS
        while True:
            alive = sorted(set(self.client.nthreads()) - {dead})
            if alive:
                load = {w: sum(s.worker == w for s in self.shards) for w in alive}
                return min(alive, key=lambda w: (load[w], alive.index(w)))
            if time.monotonic() > deadline:
                self._give_up([dead], {})
            time.sleep(_POLL_SECONDS)

    def _give_up(self, lost, pending):
        for future in pending.values():
            future.cancel()
        names = ", ".join(sorted(set(lost)))
        self.failure = WorkerLostError(
            f"Dask worker(s) {names} died during epoch {self._epoch} of "
            f"DataParallel.fit; estimator_ holds the model of the last synchronization "
            f"(history_ has {len(self.estimator.history_)} epoch(s)). "
            + (
                "on_worker_loss='raise': the shard was not retrained elsewhere."
                if not self.retry
                else f"Retrying on another worker failed {_MAX_RETRIES} times."
            ),
            sorted(set(lost)),
        )
        raise StopTraining

    def _average(self, trainer, optimizer, results):
        """Load the rows-weighted average of the replicas' states into the driver's model."""
        weights = np.array([r["rows"] for r in results], dtype=np.float64)
        weights /= weights.sum()
        states = [r["state"] for r in results]
        backend = trainer.backend
        mean = (
            _mean([s["params"] for s in states], weights)
            if len(states) > 1
            else states[0]["params"]
        )
        trainer.parameters.flat_params[...] = backend.asarray(mean)
        for i, target in enumerate(_layer_states(trainer.network)):
            target[...] = backend.asarray(_mean([s["layer_states"][i] for s in states], weights))
        arrays = {
            name: [
                _mean([s["optimizer"][0][name][j] for s in states], weights)
                for j in range(len(states[0]["optimizer"][0][name]))
            ]
            for name in states[0]["optimizer"][0]
        }
        most = max(range(len(results)), key=lambda i: (results[i]["batches"], -i))
        optimizer.restore((arrays, states[most]["optimizer"][1]))
        for r in results:
            if r["device"] not in self.devices:
                self.devices.append(r["device"])

    def close(self):
        """Forget the shards and the replicas (the workers free their memory)."""
        futures = [f for s in self.shards for f in (s.data, s.template) if f is not None]
        if futures:
            try:
                self.client.cancel(futures)
                self.client.run(_forget, self.fit_id, workers=list(self.client.nthreads()))
            except Exception:  # noqa: BLE001 (a closing cluster: nothing left to free)
                pass
        self._data = self._dask_X = None


def _mean(arrays, weights):
    if len(arrays) == 1:
        return arrays[0]
    total = np.zeros(arrays[0].shape, dtype=np.float64)
    for array, weight in zip(arrays, weights):
        total += weight * array
    return total.astype(arrays[0].dtype)


def _nbytes(obj):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def _is_worker_loss(exc):
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    return isinstance(exc, (KilledWorker, CommClosedError))


def _layer_states(network):
    """The network's non-trained arrays (running statistics), live."""
    return network.weights()[len(network.params()) :]


def _training_flags(network):
    return [
        (getattr(layer, "trainable", True), getattr(layer, "lr_scale", 1.0))
        for _, layer in network.leaves()
    ]


def _driver_state(trainer, optimizer):
    """What every replica starts a period from, as NumPy arrays."""
    backend = trainer.backend
    arrays, scalars = optimizer.snapshot()
    return {  # copies: no live views
        "params": np.array(backend.to_numpy(trainer.parameters.flat_params)),
        "layer_states": [np.array(backend.to_numpy(s)) for s in _layer_states(trainer.network)],
        "optimizer": (
            {name: [backend.to_numpy(a) for a in values] for name, values in arrays.items()},
            scalars,
        ),
        "flags": _training_flags(trainer.network),
    }


def _template(estimator, trainer, device, n_shards):
    """What a worker builds its replica from (the network travels with its weights)."""
    return types.SimpleNamespace(
        network=trainer.network,
        loss=estimator._loss,
        alpha=trainer.alpha,
        clip_norm=trainer.clip_norm,
        hyper={name: getattr(estimator, name) for name in _OPTIMIZER_PARAMETERS},
        device=device,
        dtype=np.dtype(estimator.dtype),
        seed_offset=(estimator.t_, n_shards),
    )


# -- on the workers ------------------------------------------------------------------
#: The replicas of the fits running on this worker, by (fit id, shard).
_REPLICAS = {}


class _Replica:
    """One shard's network, trainer and optimizer, on a worker's device."""

    def __init__(self, shard, template, index):
        from sknet.backend import get_backend
        from sknet.engine._optimizers import make_optimizer
        from sknet.engine._trainer import Trainer
        from sknet.engine._types import BackendData

        backend = get_backend(template.device)
        self.backend = backend
        with backend.device_context():
            # copies: a threaded (in-process) worker gets the driver's own objects
            network = copy.deepcopy(template.network).to_backend(backend).astype(template.dtype)
            t0, n_shards = template.seed_offset
            if n_shards > 1:
                network.reseed(t0 * n_shards + index)  # one dropout stream a shard
            self.trainer = Trainer(
                network,
                copy.deepcopy(template.loss),
                alpha=template.alpha,
                clip_norm=template.clip_norm,
            )
            self.optimizer = make_optimizer(types.SimpleNamespace(**template.hyper), self.trainer)
            X, Y, w = shard
            dtype = template.dtype
            self.data = BackendData(
                backend.asarray(X, dtype),
                backend.asarray(Y, dtype),
                None if w is None else backend.asarray(w, dtype),
            )

    def load(self, state):
        trainer, backend = self.trainer, self.backend
        network = trainer.network
        if _training_flags(network) != state["flags"]:  # changed by a callback (Unfreeze)
            for (_, layer), (trainable, lr_scale) in zip(network.leaves(), state["flags"]):
                layer.trainable, layer.lr_scale = trainable, lr_scale
            trainer.relayout(self.optimizer)
        trainer.parameters.flat_params[...] = backend.asarray(state["params"])
        for target, value in zip(_layer_states(network), state["layer_states"]):
            target[...] = backend.asarray(value)
        self.optimizer.restore(state["optimizer"])

    def train(self, order, sw_sums, batch_size):
        total = self.trainer.run_batches(
            self.data,
            self.optimizer,
            batch_size=batch_size,
            order=self.backend.asarray(order),
            sw_sums=sw_sums,
        )
        return float(total)

    def dump(self):
        state = _driver_state(self.trainer, self.optimizer)
        del state["flags"]
        return state


def _train_period(shard, template, fit_id, index, state, order, sw_sums, batch_size):
    """On a worker: load the averaged state, run this period's batches, return the new state."""
    key = (fit_id, index)
    replica = _REPLICAS.get(key)
    if replica is None:
        replica = _REPLICAS[key] = _Replica(shard, template, index)
    with replica.backend.device_context():
        replica.load(state)
        started = time.perf_counter()
        loss = replica.train(order, sw_sums, batch_size)
        seconds = time.perf_counter() - started
        return {
            "state": replica.dump(),
            "loss": loss,
            "rows": int(order.shape[0]),
            "batches": -(-int(order.shape[0]) // batch_size),
            "seconds": seconds,
            "device": replica.backend.name,
        }


def _dask_shard(keep, Y, w, dtype, *blocks):
    """On a worker: a shard from its Dask blocks, checked as the estimator checks X."""
    X = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    X = check_array(X[keep], dtype=[dtype.type, np.float64, np.float32], input_name="X")
    return X, Y, w


def _forget(fit_id):
    for key in [key for key in _REPLICAS if key[0] == fit_id]:
        del _REPLICAS[key]

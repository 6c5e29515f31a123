"""DataParallel: one sknet model trained on data spread over a Dask cluster.

Synchronous data parallelism. The data is cut into one shard per worker, and
each shard stays on its worker. The driver (the process that calls ``fit``)
runs the wrapped estimator's own fit (validation, initialization, the
per-epoch shuffling, callbacks, history, stopping) with one difference: the
batches of each epoch run on the workers, each worker on its rows of every
batch. With ``sync_every=1`` the replicas add up their gradients after each
batch and take the same step (the model one process trains); otherwise each
replica steps on its rows of each batch and every ``sync_every`` batches (or
once per epoch) the replicas average their parameters, running statistics
and optimizer moments. The replicas combine worker to worker; the driver
sends each epoch's plan and reads the model back once per epoch.

Needs ``pip install "sknet-nn[distributed]"`` (dask and distributed), which is
imported only when a fit runs. This module is the public estimator; the
driver (:mod:`~sknet.distributed._driver`), the inputs
(:mod:`~sknet.distributed._inputs`), what runs on the workers
(:mod:`~sknet.distributed._worker`), the fit's state there
(:mod:`~sknet.distributed._state`) and how the replicas combine
(:mod:`~sknet.distributed._exchange`, :mod:`~sknet.distributed._channel`)
live apart.
"""

import copy
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from sknet.distributed._driver import _Driver, check_batch_callbacks
from sknet.distributed._frame_checks import is_dask_collection
from sknet.distributed._inputs import _Inputs
from sknet.distributed._tables import predict_collection, score_collection
from sknet.engine._trainer import batches_run_by
from sknet.estimators._base import BaseNeuralNetwork
from sknet.estimators._training import STOCHASTIC_SOLVERS

__all__ = ["DataParallel"]


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


class _LocalModel:
    """What a fitted DataParallel answers: its local model's, in this process."""

    def __getattr__(self, name):
        # A fitted attribute of the model (history_, n_iter_, loss_curve_, best_loss_,
        # layers_, ...) reads on the DataParallel itself, always the model's current one.
        # Only called for names not found otherwise: parameters and DataParallel's own
        # attributes come first; __dict__ is read directly (unpickling calls this early).
        fitted = self.__dict__.get("estimator_")
        if name.endswith("_") and not name.startswith("_") and fitted is not None:
            try:
                return getattr(fitted, name)
            except AttributeError:
                pass
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_local(self):
        """The fitted sknet estimator (``estimator_``): no Dask needed to use it.

        Returns
        -------
        estimator : sknet estimator
        """
        check_is_fitted(self)
        return self.estimator_

    def _answer(self, method, X):
        check_is_fitted(self)
        if is_dask_collection(X):  # computed on the workers, partition by partition
            return predict_collection(self.estimator_, method, X)
        return getattr(self.estimator_, method)(X)

    def predict(self, X):
        """Predict with the fitted model: in this process, or on the workers for Dask ``X``.

        Parameters
        ----------
        X : array-like, dask DataFrame or dask array of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray, or a Dask Series (a Dask DataFrame for several outputs) with the
            index of a Dask DataFrame ``X``, or a Dask array of a Dask array's rows
        """
        return self._answer("predict", X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities from the fitted model.

        Parameters
        ----------
        X : array-like, dask DataFrame or dask array of shape (n_samples, n_features)

        Returns
        -------
        y_prob : ndarray of shape (n_samples, n_classes), or a Dask DataFrame (a column
            a class) or a Dask array for Dask ``X``, computed on the workers
        """
        return self._answer("predict_proba", X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log of the class probabilities from the fitted model.

        Parameters
        ----------
        X : array-like, dask DataFrame or dask array of shape (n_samples, n_features)

        Returns
        -------
        log_y_prob : ndarray of shape (n_samples, n_classes), or a Dask collection
            for Dask ``X``, computed on the workers
        """
        return self._answer("predict_log_proba", X)

    def score(self, X, y, sample_weight=None):
        """The estimator's score (accuracy, or R² for regressors) on ``X, y``.

        Parameters
        ----------
        X : array-like, dask DataFrame or dask array of shape (n_samples, n_features)
            Dask ``X`` is predicted on the workers; the predictions and ``y`` (Dask
            collections too) come to this process, one value a row, to be scored.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            client = _get_client(getattr(self, "client", None), _import_distributed()[1])
            return score_collection(self.estimator_, X, y, sample_weight, client)
        return self.estimator_.score(X, y, sample_weight=sample_weight)

    def __sklearn_is_fitted__(self):
        return "estimator_" in self.__dict__


class DataParallel(_LocalModel, MetaEstimatorMixin, BaseEstimator):
    """Train one sknet estimator on the workers of a Dask cluster, in step.

    ``fit`` cuts the data into one shard per worker and leaves each shard on
    its worker: the blocks of a Dask array and the partitions of a Dask
    DataFrame are not pulled through the client (a tabular estimator's column
    plan is learned on the workers, from summaries of the partitions, and
    each worker encodes its own rows), and NumPy input is scattered once.
    Each worker trains a replica of
    ``estimator`` with sknet's trainer. The epochs are the ones ``estimator``
    trains on its own: the same shuffling, the same batches of
    ``batch_size`` rows, as many optimizer steps; each batch is cut over the
    workers by where its rows are, and each worker trains on its part.
    Everything between epochs (``loss_curve_``, ``history_``, validation,
    early stopping, callbacks, verbose output) happens once, on the driver.

    Parameters
    ----------
    estimator : sknet estimator
        An ``MLPClassifier``, ``MLPRegressor``, ``ConvNetClassifier``,
        ``RNNClassifier``, ``RNNRegressor`` or ``NeuralNetClassifier``/
        ``NeuralNetRegressor``, ``TabularClassifier``/``TabularRegressor``,
        with ``solver='adam'``, ``'adamw'`` or ``'sgd'``. Not
        modified: ``fit`` trains a clone (with ``warm_start=True``, it
        continues ``estimator_``, or the given estimator when that one is
        fitted: resuming from a :class:`~sknet.callbacks.Checkpoint`). Its
        ``batch_size`` is the size of the whole batch, cut over the workers.
        The replicas train on its ``device`` as each worker resolves it; with
        dask-cuda every worker sees its own GPU as ``'cuda:0'``.
    client : distributed.Client or None, default=None
        The Dask client; ``None`` is the current one
        (``distributed.get_client()``). A handle, not a setting: ``clone``
        gives the clone the same client, and a pickled ``DataParallel`` leaves
        it out (unpickled, it uses the current client, or the one set with
        ``set_params(client=...)``).
    sync_every : int or 'epoch', default='epoch'
        ``1``: after every batch the replicas add up their gradients and all
        take the same step, so the model is the one ``estimator.fit`` trains
        (within float rounding). ``k > 1`` or ``'epoch'``: each replica takes
        its own step on its rows of each batch, and every ``k`` batches (or
        once per epoch) the replicas' parameters, running statistics and
        optimizer moments are replaced by their average, weighted by the
        sample weight each learned from (Adam's second moment corrected for
        the replicas' smaller batches); the model's first epoch synchronizes
        every batch, as with ``1``. Fewer synchronizations cost less time
        and, measured, up to a few tenths of a point of accuracy: see the
        user guide's table.
    n_workers : int or None, default=None
        How many workers to use (the first ones by address); ``None`` uses
        all the workers the cluster has when ``fit`` starts.
    on_worker_loss : {'retry', 'raise'}, default='retry'
        When a worker dies during a fit: ``'retry'`` stops the epoch on every
        worker, moves the lost shard to another worker (scattered again from
        the driver's copy, or recomputed by Dask from the array's graph) and
        runs the epoch again from the driver's model, so the model is the one
        an undisturbed fit gives; ``'raise'`` (or a retry that fails) stops
        the fit with a :class:`WorkerLostError` naming the worker, and
        ``estimator_`` holds the model of the last complete epoch.

    Attributes
    ----------
    estimator_ : sknet estimator
        The fitted model: an ordinary sknet estimator that pickles, predicts
        and loads without Dask (also returned by :meth:`to_local`). It lives
        on the driver's CPU. Its fitted attributes read on the DataParallel
        itself: ``model.history_``, ``model.n_iter_``, ``model.loss_curve_``,
        ``model.best_loss_``, ``model.layers_`` are ``model.estimator_``'s.
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
        One row per synchronization, as the replicas measured it: ``epoch``,
        ``batches`` (since the last one), ``rows`` (all replicas'),
        ``bytes_between_workers`` (what one replica sent to the others),
        ``seconds`` (from the moment the last replica was ready to the moment
        all had the result: the synchronization's own cost, on one clock, so
        meaningful on one machine), ``compute_seconds`` (the slowest
        replica's training since the last one) and ``retries`` (of its
        epoch).
    epoch_history_ : list of dict
        One row per epoch, as the driver saw it: ``epoch``, ``syncs``,
        ``bytes_sent`` (through the client to the workers: the epoch's plan,
        and the model when it changed on the driver or a replica is new),
        ``bytes_received`` (the model and the optimizer's moments, read back
        from one replica, and the replicas' records), ``seconds`` (wall
        clock), ``compute_seconds`` (the slowest replica's epoch),
        ``retries`` and ``transport`` (how the replicas' arrays travelled:
        ``'sockets'`` between the workers, authenticated, on a plain TCP
        cluster; ``'dask'`` messages on a TLS, in-process or other cluster;
        ``'nccl'`` between GPUs; ``'none'`` with one worker).
    plan_rank_error_ : ndarray of shape (n_numeric_columns,)
        A tabular estimator's plan learned from a Dask DataFrame: for each
        numeric column, the bound on the rank error of its quantiles (median,
        reference quantiles, bins) as a fraction of its training weight; 0
        where the merged summaries were exact (see the user guide).

    See Also
    --------
    sklearn.model_selection.GridSearchCV : with joblib's Dask backend, many
        independent fits on the cluster.
    dask_ml.wrappers.Incremental : one model, ``partial_fit`` block by block.

    Notes
    -----
    With ``sync_every=1``, or with one worker, ``DataParallel(est).fit(X, y)``
    trains the model ``est.fit(X, y)`` trains: the same initial weights, the
    same permutations, the same batches, the same steps. The gradients of a
    batch's parts add up to the batch's gradient up to float rounding
    (identical in float64 within ``rtol=1e-10``); dropout masks are drawn for
    the whole batch on every replica, each taking its rows'. What differs:
    ``BatchNorm`` normalizes each worker's part of a batch by that part's
    statistics (the running statistics are averaged after each epoch).
    With several workers and ``random_state`` set, two fits give the same
    model whatever the workers are, on any kind of cluster (processes,
    threads, IPv6, TLS). An epoch run again after a worker loss
    gives the undisturbed model bit for bit, except that dropout draws new
    masks from there on.

    The targets (one value a row), the sample weights and the validation rows
    (``X_val``, or ``validation_fraction`` of the rows with
    ``early_stopping=True``) are gathered on the driver, which scores the
    synchronized model. With Dask input and ``early_stopping=True`` the
    validation rows are drawn by DataParallel from ``estimator.random_state``
    (for a Dask DataFrame, by each partition: ``validation_fraction`` of its
    rows, stratified for a classifier, from the seed and its number). A Dask
    DataFrame's ``y`` and ``sample_weight`` are Dask collections holding its
    rows partition by partition (``y = ddf['target']``); bad partitions (their
    dtypes, categories, columns, rows) are refused by number before training.
    A callback's ``on_batch_end`` that only reads the fit (``observes_batches``,
    :class:`~sknet.callbacks.ProgressBar`) runs on the driver after each
    epoch's batches; a per-batch learning-rate schedule
    (:class:`~sknet.callbacks.LRScheduler`'s warm-up) reaches the workers as
    one rate a batch; any other ``on_batch_end`` is refused by name.

    The replicas' arrays go worker to worker. On a plain TCP cluster each
    worker opens one port for the fit (the other workers must be able to
    connect to it), and a connection counts only once both ends proved they
    hold the fit's secret (sent through Dask); on a TLS cluster the arrays
    keep to Dask's comms. Replicas that cannot reach each other end the fit,
    after three more tries, with a ``ConnectionError`` naming the address.
    The user guide's Dask page says what each setting trusts.

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
    ...                      sync_every=1)
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
        X : ndarray, sparse matrix, dask.array.Array or dask.dataframe.DataFrame \
of shape (n_samples, n_features)
            The input; a Dask array or DataFrame stays on the workers.
        y : array-like, dask.array.Array or dask Series of shape (n_samples,) or \
(n_samples, n_outputs)
            The targets (gathered on the driver); with a Dask DataFrame ``X``, a
            Dask collection partitioned like it (``y = ddf['target']``).
        sample_weight : array-like, dask.array.Array or dask Series of shape \
(n_samples,), default=None
            Sample weights (partitioned like a Dask DataFrame ``X``).
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
            if previous is not None:  # continued under the settings given now, as fit does
                params = self.estimator.get_params(deep=False)
                return previous.set_params(**{k: clone(v, safe=False) for k, v in params.items()})
            if self.estimator.__sklearn_is_fitted__():
                return copy.deepcopy(self.estimator)
        return clone(self.estimator)

    def _run(self, estimator, method, X, y, sample_weight, fit_params):
        check_batch_callbacks(estimator.callbacks)  # before any work on the cluster
        da, distributed = _import_distributed()
        client = _get_client(self.client, distributed)
        workers = _pick_workers(client, self.n_workers)
        device = estimator.device
        inputs = _Inputs.prepare(
            estimator, X, y, sample_weight, fit_params, da, distributed, client, method
        )
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
        self.epoch_history_ = list(driver.epochs)
        _record_frame(self, estimator, inputs.frame)
        self.n_features_in_ = estimator.n_features_in_
        for name in ("classes_", "feature_names_in_"):
            if hasattr(estimator, name):
                setattr(self, name, getattr(estimator, name))
            else:
                self.__dict__.pop(name, None)
        if driver.failure is not None:
            raise driver.failure
        return self

    def __sklearn_clone__(self):
        # The client is shared, not copied (a Client cannot be deep-copied): a clone,
        # in cross_val_score or GridSearchCV, trains on the same cluster.
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(client=client, **{k: clone(v, safe=False) for k, v in params.items()})

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["client"] = None  # a connection, not a part of the model (see `client`)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags


def _record_frame(model, estimator, frame):
    """What a fit on a Dask DataFrame adds: its column names, its plan's rank errors."""
    if frame is None:
        model.__dict__.pop("plan_rank_error_", None)
        return
    if frame.names is not None and "encoder_" not in estimator.__dict__:
        estimator.feature_names_in_ = np.asarray(frame.names, dtype=object)  # a network's
    if frame.rank_errors is not None:  # a plan learned on the cluster
        model.plan_rank_error_ = frame.rank_errors


def _check_sknet_estimator(estimator):
    if not isinstance(estimator, BaseNeuralNetwork):
        raise TypeError(
            "DataParallel trains sknet estimators (MLPClassifier, MLPRegressor, "
            "ConvNetClassifier, RNNClassifier, RNNRegressor, NeuralNet*, Tabular*), "
            f"got {type(estimator).__name__}"
        )
    if estimator.solver not in STOCHASTIC_SOLVERS:
        raise ValueError(
            f"DataParallel needs solver='adam', 'adamw' or 'sgd' (mini-batches to run on "
            f"the workers; L-BFGS steps on the whole data), got solver={estimator.solver!r}"
        )
    if getattr(estimator, "group_by_length", False):
        raise ValueError(
            "DataParallel runs every batch at the fitted number of steps (each worker "
            "takes its rows of a batch): set group_by_length=False on the estimator"
        )


def _get_client(client, distributed):
    """``client``, or the current one; a ValueError unless it is running."""
    if client is None:
        client = _current_client(distributed)
    status = getattr(client, "status", "running")
    if status != "running":
        raise ValueError(
            f"The Dask client is not running (status {status!r}): DataParallel needs an "
            "open client. Make a new one, e.g. `Client(LocalCluster())`, or pass client=."
        )
    return client


def _current_client(distributed):
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


def _pick_workers(client, n_workers):
    """The first ``n_workers`` workers by address (all with None)."""
    workers = sorted(client.nthreads())
    if not workers:
        raise ValueError("The Dask cluster has no workers")
    if n_workers is not None:
        if n_workers > len(workers):
            raise ValueError(
                f"n_workers={n_workers}, but the Dask cluster has {len(workers)} worker(s)"
            )
        workers = workers[:n_workers]
    return workers

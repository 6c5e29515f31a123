"""BaseNeuralNetwork: the one training loop every sknet estimator shares.

The estimator validates on the host, resolves a backend, builds its layers,
moves the data to the backend once, and runs epochs of forward, loss, backward
and update there. Per batch nothing is read back; per epoch the loss is read
once, recorded, and checked (finite, improving). Subclasses say which layers to
build, how targets are encoded and how a validation set is scored.
"""

import copy
import importlib.util
import time
import warnings
from abc import abstractmethod
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, Options, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from sknet._losses import make_loss
from sknet._optimizers import SGD, Adam, minimize_lbfgs
from sknet.backend import get_array_module, get_backend, is_device_array

_STOCHASTIC_SOLVERS = ("sgd", "adam")
# Private attributes that live only while fit runs.
_TRAINING_ONLY = (
    "_best_params",
    "_flat_params",
    "_flat_grads",
    "_grad_views",
    "_n_regularized",
    "_Xbatch",
    "_random_state",
    "_batch_callbacks",
    "_n_train_rows",
)
# Rows per chunk when predicting: large enough for efficient matrix products,
# small enough that the largest intermediate array of a chunk stays about
# _PREDICT_CHUNK_BYTES (a few MB: cache-sized work for convolutions).
_PREDICT_CHUNK = 8192
_PREDICT_CHUNK_BYTES = 4 << 20


TRAINING_PARAMETERS_DOC = """
    solver : {'lbfgs', 'sgd', 'adam'}, default='adam'
        ``'adam'`` and ``'sgd'`` train by mini-batches on the backend;
        ``'lbfgs'`` (full batch, SciPy) often suits small datasets.

    alpha : float, default=0.0001
        Strength of the L2 penalty, divided by the (weighted) batch size.

    batch_size : int or 'auto', default='auto'
        Mini-batch size for the stochastic solvers; ``'auto'`` is
        ``min(200, n_samples)``.

    learning_rate : {'constant', 'invscaling', 'adaptive'}, default='constant'
        Learning-rate schedule, for ``solver='sgd'`` only.

    learning_rate_init : float, default=0.001
        Initial learning rate (``'sgd'`` and ``'adam'``).

    power_t : float, default=0.5
        Exponent of ``'invscaling'``.

    max_iter : int, default=200
        Maximum number of epochs (stochastic solvers) or iterations (lbfgs).

    shuffle : bool, default=True
        Whether to shuffle samples in each epoch (stochastic solvers).

    random_state : int, RandomState instance or None, default=None
        Seeds the weight initialization, the shuffling, the dropout masks and
        the early-stopping split. Pass an int for reproducible results.

    tol : float, default=1e-4
        Tolerance: training stops when the loss (or validation score) does not
        improve by ``tol`` for ``n_iter_no_change`` epochs.

    verbose : bool or int, default=False
        ``1`` (or True) prints scikit-learn's lines after every epoch; ``2``
        prints a table (epoch, train loss, validation loss and score, learning
        rate, seconds) and, with tqdm installed, a progress bar over batches.

    warm_start : bool, default=False
        Reuse the weights, and the optimizer's state, of the previous fit.

    momentum : float, default=0.9
        Momentum of ``solver='sgd'``.

    nesterovs_momentum : bool, default=True
        Whether ``'sgd'`` uses Nesterov's momentum.

    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the data (stratified for
        classification) and stop when its score stops improving; the weights of
        the best epoch are restored.

    validation_fraction : float, default=0.1
        Size of the early-stopping validation set.

    beta_1, beta_2 : float, default=0.9, 0.999
        Decay rates of Adam's moment estimates.

    epsilon : float, default=1e-8
        Adam's numerical-stability constant.

    n_iter_no_change : int, default=10
        Epochs without ``tol`` improvement before stopping.

    max_fun : int, default=15000
        Maximum number of loss evaluations, ``solver='lbfgs'`` only.

    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, default='auto'
        Where to train: ``'auto'`` is the ``SKNET_DEVICE`` environment variable
        if set, else the GPU when CuPy sees one, else the CPU.

    dtype : {'float32', 'float64'}, default='float32'
        Floating type of the weights and of the computation.

    callbacks : list of Callback, default=None
        Objects from :mod:`sknet.callbacks` (or your own) called during
        training; ``fit`` works on copies, stored in ``callbacks_``.
"""

FITTED_ATTRIBUTES_DOC = """
    loss_ : float
        The loss at the end of training (with the L2 penalty).

    best_loss_ : float or None
        The minimum loss reached; ``None`` with ``early_stopping=True``.

    loss_curve_ : list of float
        The loss after each epoch (stochastic solvers only).

    validation_scores_ : list of float or None
        The validation score after each epoch with ``early_stopping=True``.

    best_validation_score_ : float or None
        The best validation score with ``early_stopping=True``.

    t_ : int
        Number of training samples seen by the solver.

    n_features_in_ : int
        Number of features seen during fit.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` had string column names.

    n_iter_ : int
        Number of epochs (or lbfgs iterations) run by the last call to fit.

    n_outputs_ : int
        Number of outputs.

    out_activation_ : str
        Name of the output activation.

    layers_ : list of Layer
        The built layers (sknet only).

    device_ : str
        The device the model was trained on, e.g. ``'cpu'`` or ``'cuda:0'``.

    history_ : list of dict
        One row per epoch (per iteration with lbfgs), across warm starts:
        ``epoch``, ``train_loss``, ``valid_loss`` and ``valid_score`` (with a
        validation set; the loss without the L2 term), ``learning_rate``,
        ``duration`` in seconds.

    callbacks_ : list of Callback
        The copies of ``callbacks`` used by the last fit.
"""


def fill_doc(cls, **sections):
    """Put the shared parameter and attribute lists into ``cls``'s docstring."""
    if cls.__doc__:  # None under python -OO
        for name, text in sections.items():
            cls.__doc__ = cls.__doc__.replace(f"    %({name})s", text.strip("\n") + "\n")


_TABLE_HEADER = (
    f"{'epoch':>5}  {'train_loss':>10}  {'valid_loss':>10}  {'valid_score':>11}  "
    f"{'lr':>9}  {'seconds':>7}"
)


def _table_row(logs):
    def cell(value, width, spec):
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"

    return "  ".join([
        cell(logs["epoch"], 5, "d"),
        cell(logs["train_loss"], 10, ".5f"),
        cell(logs["valid_loss"], 10, ".5f"),
        cell(logs["valid_score"], 11, ".5f"),
        cell(logs["learning_rate"], 9, ".3g"),
        cell(logs["duration"], 7, ".3f"),
    ])


def _callback_base():
    from sknet.callbacks import Callback

    return Callback


class SknetVersionWarning(UserWarning):
    """A model pickled by one sknet version was loaded by another."""


def _check_sample_weight(sample_weight, n_samples, dtype):
    """Validate ``sample_weight`` into a 1-D float array of ``n_samples`` (host)."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real):
        sample_weight = np.full(n_samples, sample_weight, dtype=dtype)
    else:
        sample_weight = check_array(
            sample_weight,
            accept_sparse=False,
            ensure_2d=False,
            dtype=[dtype, np.float64, np.float32],
            order="C",
            input_name="sample_weight",
        )
        if sample_weight.ndim != 1:
            raise ValueError(
                f"Sample weights must be 1D array or scalar, got an array of "
                f"shape {sample_weight.shape}"
            )
        if sample_weight.shape != (n_samples,):
            raise ValueError(
                f"sample_weight.shape == {sample_weight.shape}, expected "
                f"{(n_samples,)}!"
            )
    if np.any(sample_weight < 0):
        raise ValueError("Negative values in data passed to sample_weight")
    if not np.any(sample_weight > 0):
        raise ValueError("sample_weight must have a positive sum, got all zeros")
    return sample_weight


class BaseNeuralNetwork(BaseEstimator):
    """Base class of sknet's estimators; not meant to be used directly.

    Subclasses implement ``_build_layers``, ``_loss_name``,
    ``_validate_input`` and ``_validation_score``.
    """

    _parameter_constraints: dict = {
        "solver": [StrOptions({"lbfgs", "sgd", "adam"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "batch_size": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "learning_rate": [StrOptions({"constant", "invscaling", "adaptive"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "power_t": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "momentum": [Interval(Real, 0, 1, closed="both")],
        "nesterovs_momentum": ["boolean"],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "beta_1": [Interval(Real, 0, 1, closed="left")],
        "beta_2": [Interval(Real, 0, 1, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_iter_no_change": [
            Interval(Integral, 1, None, closed="left"),
            Options(Real, {np.inf}),
        ],
        "max_fun": [Interval(Integral, 1, None, closed="left")],
        "device": [str],
        "callbacks": [list, tuple, None],
        "dtype": [
            StrOptions({"float32", "float64"}),
            Options(type, {np.float32, np.float64}),
        ],
    }

    #: the sparse formats X may come in (``False``: dense only)
    _accept_sparse = ["csr", "csc"]

    # -- what subclasses provide --------------------------------------------
    @abstractmethod
    def _build_layers(self):
        """Return the unbuilt layers; the last must output ``n_outputs_`` values."""

    @abstractmethod
    def _loss_name(self):
        """scikit-learn's name of the loss to train with."""

    @abstractmethod
    def _validate_input(self, X, y, incremental, reset):
        """Validate ``X`` and encode ``y`` as a 2-D float target (host arrays)."""

    @abstractmethod
    def _validation_score(self, Y_true, P, sample_weight):
        """Score outputs ``P`` against encoded targets (early stopping)."""

    def _check_params(self):
        """Checks beyond ``_parameter_constraints`` (subclasses extend)."""

    def _network_input_shape(self, n_features):
        """Shape of one sample as the first layer sees it (images override)."""
        return (n_features,)

    def _network_input(self, X):
        """A batch of validated rows as the first layer takes it (images override)."""
        return X

    def _output_layers(self, shape):
        """Layers appended after ``_build_layers`` given its output shape."""
        return []

    def _input_mask(self, X):
        """Which steps of a batch of sequences are real (sequence models override)."""
        return None

    def _export_fitted(self):
        """Set NumPy fitted attributes from the layers (subclasses extend)."""

    # -- validation and the public fit ------------------------------------------
    def _validate_X_predict(self, X):
        check_is_fitted(self)
        if is_device_array(X):
            return self._check_device_X(X)
        return validate_data(
            self,
            X,
            accept_sparse=self._accept_sparse,
            dtype=[self._np_dtype.type, np.float64, np.float32],
            reset=False,
        )

    def _validate_Xy(self, X, y, reset, **kwargs):
        return validate_data(
            self,
            X,
            y,
            accept_sparse=self._accept_sparse,
            multi_output=True,
            dtype=[self._np_dtype.type, np.float64, np.float32],
            reset=reset,
            **kwargs,
        )

    def _check_device_X(self, X):
        """scikit-learn's prediction checks for a CuPy ``X``, kept on the device."""
        name = type(self).__name__
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        if X.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a "
                             f"minimum of 1 is required by {name}.")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {name} is expecting "
                             f"{self.n_features_in_} features as input.")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
        if not bool(get_array_module(X).isfinite(X).all()):
            raise ValueError("Input X contains NaN or infinity.")
        return X

    def fit(self, X, y, sample_weight=None, validation_data=None):
        """Fit the model to data matrix X and target(s) y.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The targets (class labels in classification, real numbers in
            regression).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.
        validation_data : tuple (X_val, y_val) or (X_val, y_val, sample_weight_val), \
default=None
            A validation set scored after every epoch (``valid_loss`` and
            ``valid_score`` in ``history_``) and, with ``early_stopping=True``,
            used instead of holding out ``validation_fraction`` of ``X``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(
            X, y, sample_weight=sample_weight, incremental=False,
            validation_data=validation_data,
        )

    def _check_solver(self):
        if self.solver not in ("sgd", "adam"):
            raise AttributeError(
                "partial_fit is only available for stochastic optimizers. "
                f"{self.solver} is not stochastic."
            )
        return True

    # -- fitted state helpers --------------------------------------------------
    def __sklearn_is_fitted__(self):
        return hasattr(self, "layers_")

    @property
    def _np_dtype(self):
        return np.dtype(self.dtype)

    def _params(self):
        return [value for layer in self.layers_ for value in layer.params.values()]

    def _weights(self):
        """Parameters and non-trained state (running statistics): the model."""
        return self._params() + [
            value for layer in self.layers_ for value in getattr(layer, "state", {}).values()
        ]

    def _move_to(self, backend):
        """Put every layer on ``backend`` (the optimizer follows when training)."""
        for layer in self.layers_:
            layer.to_backend(backend)
        self._backend = backend
        self.device_ = backend.name

    def _prepare_training(self, backend):
        """Lay all parameters and gradients out in two flat arrays on ``backend``.

        Layers keep their ``params``/``grads`` dicts, whose entries become views
        of the flat arrays; the optimizer then updates every parameter with a
        few whole-array operations (one fused kernel on a GPU) per step.
        """
        self._move_to(backend)
        xp, dtype = backend.xp, self._np_dtype
        # Regularized parameters first: the L2 term is then one slice operation.
        entries = [(layer, key) for layer in self.layers_ for key in layer.params]
        entries.sort(key=lambda entry: entry[1] not in entry[0].regularized)
        total = sum(int(layer.params[key].size) for layer, key in entries)
        flat_params = xp.empty(total, dtype=dtype)
        flat_grads = xp.zeros(total, dtype=dtype)
        self._grad_views = []
        self._n_regularized = 0
        offset = 0
        for layer, key in entries:
            param = layer.params[key]
            stop = offset + int(param.size)
            flat_params[offset:stop] = param.reshape(-1)
            layer.params[key] = flat_params[offset:stop].reshape(param.shape)
            layer.grads[key] = flat_grads[offset:stop].reshape(param.shape)
            self._grad_views.append((layer, key, layer.grads[key]))
            if key in layer.regularized:
                self._n_regularized = stop
            offset = stop
        self._flat_params, self._flat_grads = flat_params, flat_grads

    def _check_grad_views(self):
        """Fail clearly if a (custom) layer replaced a gradient array."""
        for layer, key, view in self._grad_views:
            if layer.grads[key] is not view:
                raise TypeError(
                    f"{type(layer).__name__}.backward replaced grads[{key!r}] with a "
                    "new array; write gradients in place instead, e.g. "
                    f"self.grads[{key!r}][...] = value"
                )

    def _prediction_backend(self):
        """The backend to predict on, resolved once after fit or unpickling."""
        backend = getattr(self, "_backend", None)
        if backend is None:
            try:
                backend = get_backend(self.device_)
            except ValueError:
                warnings.warn(
                    f"This {type(self).__name__} was fitted on {self.device_!r}, "
                    "which is not available here; it runs on the CPU instead.",
                    UserWarning,
                )
                backend = get_backend("cpu")
            self._move_to(backend)
        return backend

    # -- fit ------------------------------------------------------------------
    def _fit(self, X, y, sample_weight=None, incremental=False, validation_data=None):
        # scikit-learn validates on the host: CuPy inputs make one round trip.
        X, y, sample_weight = (
            a.get() if is_device_array(a) else a for a in (X, y, sample_weight)
        )
        self._validate_params()
        self._check_params()
        first_pass = not self.__sklearn_is_fitted__() or (
            not self.warm_start and not incremental
        )
        X, Y = self._validate_input(X, y, incremental, reset=first_pass)
        sample_weight = _check_sample_weight(sample_weight, X.shape[0], X.dtype)
        class_weight = self._class_sample_weight(Y, incremental)
        if class_weight is not None:
            sample_weight = class_weight if sample_weight is None else sample_weight * class_weight
        if not first_pass and Y.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {Y.shape[1]} output(s) but this {type(self).__name__} "
                f"was fitted with {self.n_outputs_}; refit without warm_start."
            )
        validation = None
        if validation_data is not None:
            validation = self._validate_validation_data(validation_data)
        backend = get_backend(self.device)
        self._random_state = check_random_state(self.random_state)
        snapshot = None if first_pass else self._snapshot()
        try:
            with backend.device_context():
                if first_pass:
                    self._initialize(X.shape[1], Y.shape[1], backend)
                self._prepare_training(backend)
                self.callbacks_ = self._copy_callbacks()
                if self.solver == "lbfgs":
                    self._fit_lbfgs(X, Y, sample_weight, backend, validation)
                else:
                    self._fit_stochastic(
                        X, Y, sample_weight, backend, incremental, validation
                    )
                self._check_finite_weights(backend)
        except backend.out_of_memory_errors() as exc:
            batch_size = getattr(self, "_batch_size_in_use", self.batch_size)
            self._abort(snapshot)
            raise MemoryError(
                f"{backend.name} ran out of memory while training with "
                f"batch_size={batch_size}: {exc}. Use a smaller batch_size, or "
                "device='cpu'."
            ) from None
        except _Diverged as exc:
            self._abort(snapshot)
            raise ValueError(str(exc)) from None
        except Exception:
            # Whatever failed, leave no half-trained model behind.
            self._abort(snapshot)
            raise
        finally:
            self._release(backend)
        self._export_fitted()
        return self

    def _class_sample_weight(self, Y, incremental):
        """Per-sample weights from ``class_weight`` (classifiers override)."""
        return None

    def _validate_validation_data(self, validation_data):
        """Check ``(X_val, y_val[, sample_weight_val])`` like the training data."""
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError(
                "validation_data must be a tuple (X_val, y_val) or (X_val, y_val, "
                f"sample_weight_val), got {type(validation_data).__name__}"
            )
        X_val, y_val = (a.get() if is_device_array(a) else a for a in validation_data[:2])
        X_val, Y_val = self._validate_input(X_val, y_val, incremental=True, reset=False)
        sw_val = validation_data[2] if len(validation_data) == 3 else None
        return X_val, Y_val, _check_sample_weight(sw_val, X_val.shape[0], X_val.dtype)

    def _copy_callbacks(self):
        """Working copies of the callbacks: the objects passed are never modified."""
        from sknet.callbacks import Callback

        callbacks = [] if self.callbacks is None else list(self.callbacks)
        for callback in callbacks:
            if not isinstance(callback, Callback):
                raise TypeError(
                    "callbacks must be sknet.callbacks.Callback objects, got "
                    f"{type(callback).__name__}"
                )
        callbacks = [copy.deepcopy(callback) for callback in callbacks]
        if self.verbose >= 2 and importlib.util.find_spec("tqdm") is not None:
            from sknet.callbacks import ProgressBar

            callbacks.append(ProgressBar())
        return callbacks

    def _notify(self, hook, *args):
        """Call ``hook`` on every callback; True if any asked to stop."""
        stop = False
        for callback in self.callbacks_:
            stop = bool(getattr(callback, hook)(self, *args)) or stop
        return stop

    def _initialize(self, n_features, n_outputs, backend):
        """Build the layers and reset every piece of fitted state (first fit)."""
        # Forget fitted state of an earlier fit (warm_start=False refit).
        for name in (
            "_optimizer",
            "loss_",
            "best_loss_",
            "loss_curve_",
            "validation_scores_",
            "best_validation_score_",
            "history_",
        ):
            self.__dict__.pop(name, None)
        self.n_iter_ = 0
        self.t_ = 0
        self.n_outputs_ = n_outputs
        dtype, rng = self._np_dtype, self._random_state
        layers = [copy.deepcopy(layer) for layer in self._build_layers()]
        shape = tuple(self._network_input_shape(n_features))
        for layer in layers:
            shape = tuple(layer.build(shape, backend=backend, dtype=dtype, rng=rng))
        for layer in self._output_layers(shape):
            shape = tuple(layer.build(shape, backend=backend, dtype=dtype, rng=rng))
            layers.append(layer)
        if shape != (n_outputs,):
            raise ValueError(
                f"The last layer outputs samples of shape {shape}, but the "
                f"targets need ({n_outputs},)."
            )
        layers[0].skip_input_grad = True
        self.layers_ = layers
        self._loss = make_loss(self._loss_name())
        self.out_activation_ = self._loss.out_activation
        self._backend = backend
        self.device_ = backend.name
        self.history_ = []
        if self.solver in _STOCHASTIC_SOLVERS:
            self.loss_curve_ = []
            self._no_improvement_count = 0
            if self.early_stopping:
                self.validation_scores_ = []
                self.best_validation_score_ = -np.inf
                self.best_loss_ = None
            else:
                self.best_loss_ = np.inf
                self.validation_scores_ = None
                self.best_validation_score_ = None

    def _make_optimizer(self, params, backend):
        if self.solver == "sgd":
            hyper = dict(
                learning_rate_init=self.learning_rate_init,
                lr_schedule=self.learning_rate,
                momentum=self.momentum,
                nesterov=self.nesterovs_momentum,
                power_t=self.power_t,
            )
            cls = SGD
        else:
            hyper = dict(
                learning_rate_init=self.learning_rate_init,
                beta_1=self.beta_1,
                beta_2=self.beta_2,
                epsilon=self.epsilon,
            )
            cls = Adam
        optimizer = getattr(self, "_optimizer", None)
        if type(optimizer) is cls:
            # warm_start / partial_fit: keep moments and velocities.
            optimizer.rebind(params, backend)
            optimizer.set_hyperparameters(**hyper)
            return optimizer
        return cls(params, backend, **hyper)

    # -- one batch, one epoch -------------------------------------------------
    def _forward(self, X, training):
        backend = self._backend
        if backend.is_sparse(X) and not self.layers_[0].accepts_sparse:
            X = X.toarray()
        X = self._network_input(X)
        mask = self._input_mask(X)
        for layer in self.layers_:
            if mask is not None and getattr(layer, "supports_mask", False):
                X = layer.forward(X, training=training, mask=mask)
            else:
                X = layer.forward(X, training=training)
        return X

    def _backward(self, dY):
        for layer in reversed(self.layers_):
            dY = layer.backward(dY)

    def _loss_and_gradients(self, X, Y, sample_weight, sw_sum):
        """Forward, loss, backward and L2 for one batch; returns the loss (on device)."""
        Z = self._forward(X, training=True)
        loss, dZ = self._loss(Z, Y, sample_weight, sw_sum)
        self._backward(dZ)
        if self.alpha > 0 and self._n_regularized:
            W = self._flat_params[: self._n_regularized]
            gW = self._flat_grads[: self._n_regularized]
            self._backend.add_scaled(gW, W, self.alpha / sw_sum)
            loss = loss + (0.5 * self.alpha / sw_sum) * self._backend.xp.vdot(W, W)
        return loss

    def _run_epoch(self, X, Y, sample_weight, order, batch_size, sw_sums):
        """One pass over the training rows in ``order``; returns the summed loss."""
        backend = self._backend
        xp = backend.xp
        grads = [self._flat_grads]
        clip_norm = getattr(self, "clip_norm", None)
        n = X.shape[0] if order is None else order.shape[0]
        total = xp.zeros((), dtype=np.float64)
        for i, start in enumerate(range(0, n, batch_size)):
            stop = min(start + batch_size, n)
            if sw_sums is not None and sw_sums[i] == 0:
                continue  # nothing to learn from a batch of zero weight
            if order is None:
                Xb, Yb = X[start:stop], Y[start:stop]
                wb = None if sample_weight is None else sample_weight[start:stop]
            else:
                idx = order[start:stop]
                Xb = backend.take_rows(X, idx, out=self._batch_buffer(X, stop - start))
                Yb = xp.take(Y, idx, axis=0)
                wb = None if sample_weight is None else xp.take(sample_weight, idx)
            sw_sum = (stop - start) if sw_sums is None else float(sw_sums[i])
            loss = self._loss_and_gradients(Xb, Yb, wb, sw_sum)
            if i == 0:
                self._check_grad_views()
            if clip_norm is not None:
                backend.clip_by_norm(self._flat_grads, clip_norm)
            self._optimizer.step(grads)
            total = total + loss * (stop - start)
            for callback in self._batch_callbacks:
                callback.on_batch_end(self, i, stop - start)
        self._check_grad_views()
        return total

    def _batch_buffer(self, X, n_rows):
        if self._backend.is_sparse(X):
            return None
        buf = getattr(self, "_Xbatch", None)
        if buf is None or buf.shape[0] < n_rows:
            buf = self._Xbatch = self._backend.xp.empty((n_rows,) + X.shape[1:], X.dtype)
        return buf[:n_rows]

    # -- stochastic solvers ---------------------------------------------------
    def _fit_stochastic(self, X, Y, sample_weight, backend, incremental, validation):
        if self.early_stopping and incremental:
            raise ValueError("partial_fit does not support early_stopping=True")
        dtype, rng = self._np_dtype, self._random_state
        train_idx = None
        if self.early_stopping and validation is None:
            train_idx, val_idx = self._validation_split(Y, rng)
            validation = (
                X[val_idx],
                Y[val_idx],
                None if sample_weight is None else sample_weight[val_idx],
            )
        validation = self._validation_on_backend(validation, backend)
        n_train = X.shape[0] if train_idx is None else train_idx.shape[0]
        batch_size = self._resolve_batch_size(n_train)

        # The data moves to the backend once; batches are gathered there.
        X_dev = backend.asarray(X, dtype)
        Y_dev = backend.asarray(Y, dtype)
        w_dev = None if sample_weight is None else backend.asarray(sample_weight, dtype)
        self._optimizer = self._make_optimizer([self._flat_params], backend)
        if self.early_stopping:
            self._best_params = [w.copy() for w in self._weights()]
        self._n_train_rows = n_train
        self._batch_callbacks = [
            cb for cb in self.callbacks_ if type(cb).on_batch_end is not _callback_base().on_batch_end
        ]

        sample_idx = np.arange(n_train)
        starts = np.arange(0, n_train, batch_size)
        self._notify("on_train_begin")
        self._print_table_header()
        try:
            self.n_iter_ = 0
            for _ in range(self.max_iter):
                epoch = len(self.history_) + 1
                self._notify("on_epoch_begin", epoch)
                started = time.perf_counter()
                if self.shuffle:  # the same draws as scikit-learn's MLP
                    perm = np.arange(n_train)
                    rng.shuffle(perm)
                    sample_idx = sample_idx[perm]
                rows = sample_idx if train_idx is None else train_idx[sample_idx]
                ordered = self.shuffle or train_idx is not None
                order = backend.asarray(rows) if ordered else None
                sw_sums = None
                if sample_weight is not None:
                    sw_sums = np.add.reduceat(sample_weight[rows], starts)
                total = self._run_epoch(X_dev, Y_dev, w_dev, order, batch_size, sw_sums)
                loss = float(total) / n_train
                if self._end_epoch(epoch, loss, n_train, validation, incremental, started):
                    break
        except KeyboardInterrupt:
            warnings.warn("Training interrupted by user.")
        finally:
            self._notify("on_train_end")

        if self.early_stopping:
            for weight, best in zip(self._weights(), self._best_params):
                weight[...] = best

    def _resolve_batch_size(self, n_train):
        if self.batch_size == "auto":
            batch_size = min(200, n_train)
        else:
            if self.batch_size > n_train:
                warnings.warn(
                    "Got `batch_size` less than 1 or larger than "
                    "sample size. It is going to be clipped"
                )
            batch_size = int(np.clip(self.batch_size, 1, n_train))
        self._batch_size_in_use = batch_size
        return batch_size

    def _end_epoch(self, epoch, loss, n_train, validation, incremental, started):
        """Record the epoch, check it, run the callbacks, and decide whether to stop."""
        if not np.isfinite(loss):
            if self._notify("on_nan", epoch):
                return True
            raise _Diverged(
                f"Training diverged: the loss became {loss} at iteration "
                f"{self.n_iter_ + 1}. Lower learning_rate_init (currently "
                f"{self.learning_rate_init}), scale the input features (e.g. with "
                "StandardScaler), or increase alpha."
            )
        self.n_iter_ += 1
        self.loss_ = loss
        self.t_ += n_train
        self.loss_curve_.append(loss)
        valid_loss, valid_score = self._evaluate(validation)
        if self.verbose == 1:
            print("Iteration %d, loss = %.8f" % (self.n_iter_, loss))
        logs = self._record_history(epoch, loss, valid_loss, valid_score, started)
        self._update_no_improvement_count(valid_score)
        self._optimizer.iteration_ends(self.t_)
        stop = self._notify("on_epoch_end", epoch, logs)  # progress bars close here
        if self.verbose >= 2:
            print(_table_row(logs))

        if self._no_improvement_count > self.n_iter_no_change:
            what = "Validation score" if self.early_stopping else "Training loss"
            msg = "%s did not improve more than tol=%f for %d consecutive epochs." % (
                what,
                self.tol,
                self.n_iter_no_change,
            )
            if self._optimizer.trigger_stopping(msg, self.verbose):
                return True
            self._no_improvement_count = 0
        if stop or incremental:
            return True
        if self.n_iter_ == self.max_iter:
            warnings.warn(
                "Stochastic Optimizer: Maximum iterations (%d) reached and the "
                "optimization hasn't converged yet." % self.max_iter,
                ConvergenceWarning,
            )
        return False

    def _record_history(self, epoch, loss, valid_loss, valid_score, started):
        optimizer = getattr(self, "_optimizer", None)
        logs = {
            "epoch": epoch,
            "train_loss": loss,
            "valid_loss": valid_loss,
            "valid_score": valid_score,
            "learning_rate": None if optimizer is None else optimizer.base_learning_rate,
            "duration": time.perf_counter() - started,
        }
        self.history_.append(logs)
        return logs

    def _print_table_header(self):
        if self.verbose >= 2:
            print(_TABLE_HEADER)

    def _update_no_improvement_count(self, valid_score):
        """scikit-learn's rule, on the validation score or the training loss."""
        if self.early_stopping:
            score = valid_score
            self.validation_scores_.append(score)
            if self.verbose == 1:
                print("Validation score: %f" % self.validation_scores_[-1])
            if score < (self.best_validation_score_ + self.tol):
                self._no_improvement_count += 1
            else:
                self._no_improvement_count = 0
            if score > self.best_validation_score_:
                self.best_validation_score_ = score
                for best, weight in zip(self._best_params, self._weights()):
                    best[...] = weight
        else:
            if self.loss_curve_[-1] > self.best_loss_ - self.tol:
                self._no_improvement_count += 1
            else:
                self._no_improvement_count = 0
            if self.loss_curve_[-1] < self.best_loss_:
                self.best_loss_ = self.loss_curve_[-1]

    def _validation_split(self, Y, rng):
        """Indices of a (stratified, for single-label classification) split."""
        stratify = self._stratify_labels(Y)
        train_idx, val_idx = train_test_split(
            np.arange(Y.shape[0]),
            random_state=rng,
            test_size=self.validation_fraction,
            stratify=stratify,
        )
        if val_idx.shape[0] < 2:
            raise ValueError(
                "The validation set is too small. Increase 'validation_fraction' "
                "or the size of your dataset."
            )
        return train_idx, val_idx

    def _stratify_labels(self, Y):
        return None

    def _validation_on_backend(self, validation, backend):
        """(X, Y, w) on the host -> what _evaluate needs, moved to the backend once."""
        if validation is None:
            return None
        X_val, Y_val, sw_val = validation
        dtype = self._np_dtype
        return (
            backend.asarray(X_val, dtype),
            backend.asarray(Y_val, dtype),
            None if sw_val is None else backend.asarray(sw_val, dtype),
            Y_val,
            sw_val,
        )

    def _evaluate(self, validation):
        """Validation loss (without the L2 term) and score; (None, None) without data."""
        if validation is None:
            return None, None
        X_val, Y_dev, w_dev, Y_val, sw_val = validation
        total, chunks = 0.0, []
        chunk = self._predict_chunk_rows()
        for i in range(0, X_val.shape[0], chunk):
            part = slice(i, i + chunk)
            Z = self._forward(X_val[part], training=False)
            w = None if w_dev is None else w_dev[part]
            loss, _ = self._loss(Z, Y_dev[part], w)
            weight = Z.shape[0] if w is None else w.sum()
            total = total + loss * weight
            chunks.append(self._backend.to_numpy(self._loss.output(Z)))
        weight_sum = X_val.shape[0] if sw_val is None else float(sw_val.sum())
        valid_loss = float(total) / weight_sum
        P = np.concatenate(chunks)
        if not np.isfinite(P).all():
            return valid_loss, np.nan
        return valid_loss, float(self._validation_score(Y_val, P, sw_val))

    # -- L-BFGS ---------------------------------------------------------------
    def _fit_lbfgs(self, X, Y, sample_weight, backend, validation):
        dtype = self._np_dtype
        X_dev = backend.asarray(X, dtype)
        Y_dev = backend.asarray(Y, dtype)
        w_dev = None if sample_weight is None else backend.asarray(sample_weight, dtype)
        sw_sum = X.shape[0] if sample_weight is None else float(sample_weight.sum())
        self._batch_size_in_use = X.shape[0]
        validation = self._validation_on_backend(validation, backend)
        flat_params, flat_grads = self._flat_params, self._flat_grads

        def unpack(x):
            flat_params[...] = backend.asarray(x, dtype)

        def loss_and_grad(x):
            unpack(x)
            loss = self._loss_and_gradients(X_dev, Y_dev, w_dev, sw_sum)
            return float(loss), backend.to_numpy(flat_grads).astype(np.float64)

        started = [time.perf_counter()]

        def end_iteration(iteration, x, loss):
            """After each L-BFGS iteration: history, callbacks; True stops."""
            unpack(x)
            valid_loss, valid_score = self._evaluate(validation)
            epoch = len(self.history_) + 1
            logs = self._record_history(epoch, loss, valid_loss, valid_score, started[0])
            started[0] = time.perf_counter()
            stop = self._notify("on_epoch_end", epoch, logs)
            if self.verbose >= 2:
                print(_table_row(logs))
            return stop

        self._notify("on_train_begin")
        self._print_table_header()
        try:
            x0 = backend.to_numpy(flat_params)
            x, self.loss_, self.n_iter_ = minimize_lbfgs(
                loss_and_grad,
                x0,
                max_iter=self.max_iter,
                max_fun=self.max_fun,
                tol=self.tol,
                verbose=self.verbose == 1,
                callback=end_iteration,
            )
            unpack(x)
        finally:
            self._notify("on_train_end")
        if not np.isfinite(self.loss_):
            raise _Diverged(
                f"L-BFGS diverged: the loss became {self.loss_}. Scale the input "
                "features (e.g. with StandardScaler) or increase alpha."
            )

    # -- end of fit -------------------------------------------------------------
    def _check_finite_weights(self, backend):
        xp = backend.xp
        params = self._params()
        if not all(bool(xp.isfinite(p).all()) for p in params):
            raise _Diverged(
                "Solver produced non-finite parameter weights. The input data may "
                "contain large values and need to be preprocessed, or "
                f"learning_rate_init (currently {self.learning_rate_init}) is too "
                "large."
            )

    def _snapshot(self):
        """Copy the fitted state, to restore a model a failed fit would corrupt."""
        state = {k: list(v) if isinstance(v, list) else v for k, v in vars(self).items()}
        params = [w.copy() for w in self._weights()]
        optimizer = getattr(self, "_optimizer", None)
        return state, params, None if optimizer is None else optimizer.snapshot()

    def _abort(self, snapshot):
        """Undo a failed fit: restore the earlier model, or leave none at all."""
        if snapshot is None:
            for name in list(vars(self)):
                if name.endswith("_") and not name.startswith("__"):
                    delattr(self, name)
            for name in ("_optimizer", "_loss", "_backend"):
                self.__dict__.pop(name, None)
            return
        state, params, optimizer_state = snapshot
        self.__dict__.clear()
        self.__dict__.update(state)
        backend = state.get("_backend") or get_backend("cpu")
        self._move_to(backend)
        for p, saved in zip(self._weights(), params):
            p[...] = backend.asarray(saved)
        if optimizer_state is not None:
            self._optimizer.restore(optimizer_state)

    def _release(self, backend):
        """Free everything a fit allocated except the fitted model itself."""
        for layer in getattr(self, "layers_", ()):
            layer.release()
        loss = getattr(self, "_loss", None)
        if loss is not None:
            loss.release()
        for name in _TRAINING_ONLY:
            self.__dict__.pop(name, None)
        backend.release_memory()

    # -- prediction -------------------------------------------------------------
    def _forward_output(self, X):
        """Network outputs after the output activation, on the backend."""
        Z = self._forward(X, training=False)
        if Z is X:
            Z = Z.copy()
        return self._loss.output(Z)

    def _predict_chunk_rows(self):
        """Rows per prediction chunk (see ``_PREDICT_CHUNK_BYTES``)."""
        per_row = max(layer.values_per_sample() for layer in self.layers_)
        per_row *= np.dtype(self._np_dtype).itemsize
        return int(min(_PREDICT_CHUNK, max(64, _PREDICT_CHUNK_BYTES // per_row)))

    def _predict_outputs(self, X):
        """Outputs for validated data ``X``, in chunks.

        NumPy (or sparse) ``X`` gives NumPy outputs; CuPy ``X`` gives CuPy
        outputs, without leaving the device when the model is on the GPU.
        Outputs have the model's dtype: a float32 model computes, and so
        returns, float32 whatever the input's dtype.
        """
        backend = self._prediction_backend()
        dtype = self._np_dtype
        on_device = is_device_array(X)
        keep = backend.xp if on_device and backend.name.startswith("cuda") else None
        chunks = []
        with backend.device_context():
            chunk = self._predict_chunk_rows()
            for start in range(0, X.shape[0], chunk):
                Xb = backend.asarray(X[start : start + chunk], dtype)
                P = self._forward_output(Xb)
                chunks.append(P if keep is not None else backend.to_numpy(P))
            xp = keep if keep is not None else np
            P = chunks[0] if len(chunks) == 1 else xp.concatenate(chunks)
        if on_device and keep is None:  # a CPU model given CuPy data
            P = get_array_module(X).asarray(P)
        return P

    # -- persistence ------------------------------------------------------------
    def __getstate__(self):
        from sknet import __version__

        state = dict(super().__getstate__())
        for name in ("_backend",) + _TRAINING_ONLY:
            state.pop(name, None)
        state["_sknet_version"] = __version__
        return state

    def __setstate__(self, state):
        from sknet import __version__

        version = state.pop("_sknet_version", None)
        if version is not None and version != __version__:
            warnings.warn(
                f"This {type(self).__name__} was saved with sknet {version} and is "
                f"loaded with sknet {__version__}; it may not work as before. "
                "Refit it with this version to be sure.",
                SknetVersionWarning,
            )
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _Diverged(Exception):
    """Internal: training produced a non-finite loss or weights."""

"""BaseNeuralNetwork: the scikit-learn face every sknet estimator shares.

The estimator validates parameters and data on the host (scikit-learn's
rules and messages), resolves the backend and, inside a fit transaction
(:mod:`sknet.engine._transaction`) so a failed or interrupted fit leaves the
previous model, runs the steps of :mod:`sknet.estimators._training`: build
the network, place the data, train. What stays here: parameters, input and
target validation, the warm-start contract, fitted attributes, prediction
and persistence.
Subclasses say which layers to build, how targets are encoded and how a
validation set is scored.
"""

import copy
from abc import abstractmethod
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.metrics import check_scoring
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, Options, StrOptions

from sknet.backend import get_backend, is_device_array
from sknet.callbacks._sklearn_bridge import SklearnCallbacksMixin, fit_task
from sknet.engine._bytes import parse_bytes
from sknet.engine._convergence import ScikitLearnConvergence
from sknet.engine._network import Network
from sknet.engine._transaction import FitTransaction
from sknet.engine._validation import (
    check_sample_weight,
    validation_set,
    validation_split,
    warn_non_finite_outputs,
)
from sknet.engine._warm_start import check_same_network, network_signature
from sknet.estimators._input import InputValidationMixin
from sknet.estimators._persistence import PersistenceMixin
from sknet.estimators._training import (
    STOCHASTIC_SOLVERS,
    check_callbacks,
    train,
    training_errors,
)
from sknet.layers._tree import check_tree
from sknet.losses import EnsembleLoss


class BaseNeuralNetwork(
    InputValidationMixin, PersistenceMixin, SklearnCallbacksMixin, BaseEstimator
):
    """Base class of sknet's estimators; not meant to be used directly.

    Subclasses implement ``_build_layers``, ``_loss_name``,
    ``_validate_input`` and ``_validation_score``, and list in
    ``_network_parameters`` the parameters that define the network.
    """

    _parameter_constraints: dict = {
        "solver": [StrOptions({"lbfgs", "sgd", "adam", "adamw"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "batch_size": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "learning_rate": [StrOptions({"constant", "invscaling", "adaptive", "anneal"})],
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
        "scoring": [str, callable, None],
        "beta_1": [Interval(Real, 0, 1, closed="left")],
        "beta_2": [Interval(Real, 0, 1, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [
            Interval(Integral, 1, None, closed="left"),
            Options(Real, {np.inf}),
        ],
        "max_fun": [Interval(Integral, 1, None, closed="left")],
        "device": [str],
        "max_device_memory": [Interval(Integral, 1, None, closed="left"), str, None],
        "callbacks": [list, tuple, None],
        "dtype": [
            StrOptions({"float32", "float64"}),
            Options(type, {np.float32, np.float64}),
        ],
    }

    #: private attributes a fit sets, which the fit transaction restores with
    #: the fitted ones (names ending in ``_``)
    _fit_state = (
        "_optimizer",
        "_loss",
        "_network_spec",
        "_no_improvement_count",
        "_label_binarizer",
        "_run_name",
    )
    #: parameters that define the network: a warm fit refuses to change them
    _network_parameters = ()
    #: whether the batches train on one thread, the BLAS single-threaded (the tabular
    #: estimators: see :meth:`sknet.engine._trainer.Trainer.split_batches`)
    _single_threaded_batches = False

    # -- what subclasses provide --------------------------------------------
    @abstractmethod
    def _build_layers(self):
        """Return the unbuilt layers; the last must output ``n_outputs_`` values."""

    @abstractmethod
    def _make_loss(self):
        """The loss to train with: ``loss`` resolved for the fitted targets."""

    @abstractmethod
    def _validate_input(self, X, y, incremental, reset, names=("X", "y")):
        """Validate ``X`` and encode ``y`` as a 2-D float target (host arrays).

        ``names`` are the arrays' names in error messages (``X_val``, ``y_val``
        for a validation set).
        """

    @abstractmethod
    def _validation_score(self, Y_true, P, sample_weight):
        """Score outputs ``P`` against encoded targets (``scoring=None``)."""

    @abstractmethod
    def _decode_targets(self, Y):
        """Targets as the user gives them (labels) from their 2-D encoding."""

    def _check_params(self):
        """Checks beyond ``_parameter_constraints`` (subclasses extend)."""

    def _initial_learning_rate(self, n_batches):
        """The starting rate for epochs of ``n_batches`` batches (tabular: ``'auto'``)."""
        return self.learning_rate_init

    def _auto_batch_size(self, n_train):
        """The batch size of ``batch_size='auto'`` for ``n_train`` training rows: 200,
        scikit-learn's, for every estimator (a tabular epoch of batches twice as large
        took the same time: the tables guide's measurements); a subclass may override it."""
        return 200

    def _network_input_shape(self, n_features):
        """Shape of one sample as the first layer sees it (images override)."""
        return (n_features,)

    def _output_layers(self, shape):
        """Layers appended after ``_build_layers`` given its output shape."""
        return []

    def _padding_value(self):
        """Feature value marking padded sequence steps (sequence models override)."""
        return None

    # -- validation (of X, y and the weights: InputValidationMixin) -----------------
    def _check_solver(self):
        if self.solver not in STOCHASTIC_SOLVERS:
            raise AttributeError(
                "partial_fit is only available for stochastic optimizers. "
                f"{self.solver} is not stochastic."
            )
        return True

    # -- fitted state -------------------------------------------------------------
    def __sklearn_is_fitted__(self):
        return "network_" in self.__dict__

    @property
    def layers_(self):
        """The built layers (``network_.layers``)."""
        try:
            return self.__dict__["network_"].layers
        except KeyError:
            raise AttributeError(
                f"This {type(self).__name__} has no layers_ until it is fitted"
            ) from None

    @property
    def _np_dtype(self):
        return np.dtype(self.dtype)

    # -- fit ----------------------------------------------------------------------
    def fit(
        self,
        X,
        y,
        sample_weight=None,
        *,
        X_val=None,
        y_val=None,
        sample_weight_val=None,
        validation_data=None,
    ):
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
        X_val, y_val : array-like, default=None
            A validation set scored after every epoch (``valid_loss`` and
            ``valid_score`` in ``history_``) and, with ``early_stopping=True``,
            used instead of holding out ``validation_fraction`` of ``X``. In a
            ``Pipeline``, ``transform_input=['X_val']`` sends ``X_val`` through
            the preceding steps (metadata routing must be enabled).
        sample_weight_val : array-like of shape (n_val_samples,), default=None
            Weights of the validation samples.
        validation_data : tuple, default=None
            Deprecated: ``(X_val, y_val[, sample_weight_val])``; use ``X_val``
            and ``y_val``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(
            X, y, sample_weight, False, (X_val, y_val, sample_weight_val, validation_data)
        )

    @fit_task  # the root task of scikit-learn's callbacks, when set (set_callbacks)
    def _fit(self, X, y, sample_weight, incremental, validation_args):
        # scikit-learn validates on the host: CuPy inputs make one round trip.
        X, y, sample_weight = (a.get() if is_device_array(a) else a for a in (X, y, sample_weight))
        self._validate_params()
        self._check_params()
        check_callbacks(self.callbacks)
        if self.max_device_memory is not None:
            parse_bytes(self.max_device_memory)  # a clear error before any work
        first_pass = not self.__sklearn_is_fitted__() or (not self.warm_start and not incremental)
        if not first_pass:
            check_same_network(self)
        backend = get_backend(self.device)
        used = {"batch_size": self.batch_size}  # the resolved size, for error messages
        with FitTransaction(
            self, release_memory=not incremental, continues=not first_pass
        ) as transaction:
            transaction.backend = backend
            X, Y = self._validate_input(X, y, incremental, reset=first_pass)
            n_rows = Y.shape[0]
            row_weights = check_sample_weight(sample_weight, n_rows, self._np_dtype)
            sample_weight = self._fit_sample_weight(row_weights, n_rows, Y, incremental)
            if not first_pass and Y.shape[1] != self.n_outputs_:
                raise ValueError(
                    f"y has {Y.shape[1]} output(s) but this {type(self).__name__} "
                    f"was fitted with {self.n_outputs_}; refit without warm_start."
                )
            if self.scoring not in (None, "loss"):
                check_scoring(self, scoring=self.scoring)  # unknown names fail up front
            if self.early_stopping and incremental:
                raise ValueError("partial_fit does not support early_stopping=True")
            rng = check_random_state(self.random_state)
            # The plan (a table's columns, a target's scale) is learned from the training
            # rows only: the early-stopping rows are split off first, where it has one.
            split = None
            if first_pass:
                split = self._split_before_plan(Y, rng, validation_args, incremental)
                rows = slice(None) if split is None else split[0]
                self._learn_plan(X, Y, row_weights, rows)
            X, Y = self._apply_plan(X, Y)
            validation = validation_set(self, *validation_args)
            with (
                training_errors(self, backend, used, X, y, sample_weight),
                backend.device_context(),
            ):
                train(
                    self,
                    X,
                    Y,
                    sample_weight,
                    validation,
                    backend,
                    rng,
                    first_pass,
                    incremental,
                    used,
                    split=split,
                )
        return self

    def _initialize(self, n_features, n_outputs, backend, rng):
        """Build the network and reset every piece of fitted state (first fit)."""
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
        layers = [copy.deepcopy(layer) for layer in check_tree(self._build_layers())]
        network = Network.build(
            layers,
            self._network_input_shape(n_features),
            backend=backend,
            dtype=self._np_dtype,
            rng=rng,
            head=self._output_layers,
            padding_value=self._padding_value(),
        )
        members = getattr(network.layers[-1], "n_members_", None)  # an ensemble's head
        expected = (n_outputs,) if members is None else (members, n_outputs)
        if network.output_shape != expected:
            raise ValueError(
                f"The last layer outputs samples of shape {network.output_shape}, but "
                f"the targets need {expected}."
            )
        self.network_ = network
        self._network_spec = network_signature(self)
        self._loss = self._network_loss()
        self.out_activation_ = self._loss.out_activation
        self.history_ = []
        if self.solver in STOCHASTIC_SOLVERS:
            ScikitLearnConvergence.reset(self)

    def _network_loss(self):
        """``_make_loss()``, averaged over the members of an ensemble's outputs.

        A network whose outputs carry a member axis (it ends with an
        :class:`~sknet.layers.EnsembleHead`) trains on the mean of the
        members' losses and predicts the mean of their predictions
        (:class:`~sknet.losses.EnsembleLoss`).
        """
        loss = self._make_loss()
        if getattr(self.network_.layers[-1], "n_members_", None) is not None:
            return EnsembleLoss(loss)
        return loss

    def _validation_split(self, Y, rng):
        return validation_split(self, Y, rng)

    def _stratify_labels(self, Y):
        return None

    # -- prediction -------------------------------------------------------------------
    def _predict_outputs(self, X):
        """Outputs (after the output activation) for validated ``X``, in chunks.

        Outputs that are not finite come with a warning naming the layer
        that made them (:func:`~sknet.engine._validation.warn_non_finite_outputs`).
        """
        P = self.network_.predict(X, output=self._loss.output)
        warn_non_finite_outputs(self.network_, X, P, "The outputs", output=self._loss.output)
        return P

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

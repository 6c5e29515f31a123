"""TabularClassifier and TabularRegressor: a DataFrame in as it is, a network that rivals boosting.

Named for the data they take, as scikit-learn names its estimators for what
they do: a table (numbers, categories and missing values in a DataFrame or
an array). A name such as TabM or MLP would name one architecture; these
make several (numeric embeddings or none, an ensemble of members or one).

``fit`` first learns, from the rows it is given only, how each column enters
the network (:class:`~sknet.tabular.TabularEncoder`, in ``encoder_``), so
the estimator drops into ``cross_val_score`` and ``GridSearchCV`` without
leakage; then it builds the layer list of
:mod:`sknet.estimators._tabular_network` from that plan and trains it like
any network estimator (it is a preset of
:class:`~sknet.estimators._neural_net.NeuralNetClassifier`: the data placed
on the device or streamed, callbacks, persistence). ``predict`` applies the
same plan.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import check_array, check_consistent_length
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from sknet.backend import ACTIVATIONS, is_device_array
from sknet.engine._trainer import resolve_batch_size
from sknet.estimators._layer_list import positive_ints
from sknet.estimators._neural_net import _NeuralNet
from sknet.estimators._tabular_network import NUMERIC_EMBEDDINGS, tabular_layers
from sknet.tabular import TabularEncoder
from sknet.tabular._table import RemoteTable, as_table, check_columns

_NAME_WARNINGS = ("X has feature names", "X does not have valid feature names")


class TabularMixin:
    """What TabularClassifier and TabularRegressor add to the network estimator.

    List it first in the bases, before the network estimator (and after the
    classifier or regressor face).
    """

    _tabular_constraints: dict = {
        # the column plan's, as its encoder takes them (one definition)
        **{
            name: TabularEncoder._parameter_constraints[name]
            for name in (
                "categorical_features",
                "numeric_scaling",
                "min_frequency",
                "numeric_codes",
            )
        },
        "numeric_embedding": [StrOptions(set(NUMERIC_EMBEDDINGS)), None],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "d_embedding": [Interval(Integral, 1, None, closed="left")],
        "categorical_dims": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "n_members": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "weight_averaging": [Interval(Real, 0, None, closed="neither"), None],
    }
    _network_parameters = (
        "categorical_features",
        "numeric_scaling",
        "numeric_embedding",
        "n_bins",
        "d_embedding",
        "categorical_dims",
        "min_frequency",
        "numeric_codes",
        "hidden_layer_sizes",
        "activation",
        "dropout",
        "n_members",
    )
    _accept_sparse = False
    # Small products with Python between them: OpenBLAS's threads collapse under load.
    _single_threaded_batches = True

    # -- the column plan -------------------------------------------------------------
    def _make_encoder(self):
        return TabularEncoder(
            categorical_features=self.categorical_features,
            numeric_scaling=self.numeric_scaling,
            n_bins=self.n_bins if self.numeric_embedding == "piecewise_linear" else None,
            min_frequency=self.min_frequency,
            numeric_codes=self.numeric_codes,
            missing_indicators=True,
            dtype=self._np_dtype.name,
        )

    def _table(self, X, reset, name):
        """``X`` as a table (:func:`~sknet.tabular._table.as_table`), its columns checked."""
        table = as_table(X.get() if is_device_array(X) else X, name)
        check_columns(self, table, reset)
        return table

    def _encode(self, table):
        """The table encoded by the fitted plan: one float matrix."""
        if isinstance(table, RemoteTable):  # rows on a cluster: each worker encodes its own
            width = int(self.encoder_.output_groups_["categorical"].stop)
            return table.stand_in(width, self._np_dtype)
        # The estimator has checked the columns already (and warned of their names).
        return self.encoder_._encode_table(table)

    def _validate_Xy(self, X, y, reset, names=("X", "y"), **kwargs):
        # The table is checked here and encoded by _apply_plan, once the plan is learned
        # from the training rows (after the early-stopping split).
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        table = self._table(X, reset, names[0])
        y = check_array(y, ensure_2d=False, dtype=None, input_name=names[1], estimator=self)
        if kwargs.get("y_numeric") and y.dtype.kind == "O":
            y = y.astype(np.float64)
        check_consistent_length(np.empty((table.shape[0], 0)), y)
        return table, y

    def _split_before_plan(self, Y, rng, validation_args, incremental):
        X_val, y_val, _, validation_data = validation_args
        given = X_val is not None or y_val is not None or validation_data is not None
        if not self.early_stopping or given or incremental or self.solver == "lbfgs":
            return None
        return self._validation_split(Y, rng)

    def _learn_plan(self, X, Y, sample_weight, rows):
        # The column plan weighs the rows as the loss does (a row of weight 2 counts
        # twice in its quantiles and category frequencies).
        # A RemoteTable's plan was learned where its rows are, from their merged summaries
        # (DataParallel on a Dask DataFrame: sknet.distributed._tables).
        self._size_network(X.shape[0] if isinstance(rows, slice) else len(rows))
        if isinstance(X, RemoteTable):
            self.encoder_ = X.plan
            return super()._learn_plan(X, Y, sample_weight, rows)
        weights = None if sample_weight is None else sample_weight[rows]
        with warnings.catch_warnings():
            for message in _NAME_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
            self.encoder_ = self._make_encoder().fit(X.take(rows), sample_weight=weights)
        super()._learn_plan(X, Y, sample_weight, rows)

    def _apply_plan(self, X, Y):
        X, Y = super()._apply_plan(X, Y)
        return self._encode(X), Y

    def _validate_X_predict(self, X):
        check_is_fitted(self)
        encoded = self._encode(self._table(X, False, "X"))
        if is_device_array(X):  # the outputs come back on the device, as X came
            return self.network_.backend.asarray(encoded, self._np_dtype)
        return encoded

    def _network_input_shape(self, n_features):
        # The network reads the encoded columns, not the table's (n_features_in_).
        return (int(self.encoder_.output_groups_["categorical"].stop),)

    # -- early stopping ------------------------------------------------------------------
    def _validation_split(self, Y, rng):
        """The held-out rows of ``early_stopping``, on by default: small data too.

        ``validation_fraction`` of the rows, but at least two (and one per
        class), stratified when every class has two rows or more; an error
        naming the number of samples when fewer than three are given.
        """
        n = Y.shape[0]
        labels = self._stratify_labels(Y)
        counts = np.array([n]) if labels is None else np.unique(labels, return_counts=True)[1]
        classes = counts.size
        size = max(math.ceil(self.validation_fraction * n), 2, classes)
        if n - size < 1:
            raise ValueError(
                f"early_stopping=True holds out validation rows, and {n} sample(s) are too "
                "few to hold any out and train on the rest; give more rows, or set "
                "early_stopping=False."
            )
        stratify = labels if labels is not None and counts.min() >= 2 else None
        if stratify is not None and n - size < classes:
            stratify = None  # too few rows left to train on every class
        return train_test_split(np.arange(n), test_size=size, random_state=rng, stratify=stratify)

    def _check_solver(self):
        # partial_fit trains one epoch on the rows it is given: no held-out split.
        if self.early_stopping:
            raise AttributeError(
                f"partial_fit is not available with early_stopping=True (the default of "
                f"{type(self).__name__}, which holds out rows of each fit); set "
                "early_stopping=False to train by partial_fit."
            )
        return super()._check_solver()

    # -- training ----------------------------------------------------------------------
    #: A large table, for the ``'auto'`` settings: an epoch of at least this many
    #: batches (20,000 training rows at the default batch size).
    LARGE_TABLE_BATCHES = 100
    #: ``learning_rate_init='auto'``: the rate of smaller tables, and of large ones.
    AUTO_RATES = (0.008, 0.004)
    #: ``n_members='auto'``: the members of smaller tables, and of large ones.
    AUTO_MEMBERS = (4, 3)

    def _initial_learning_rate(self, n_batches):
        if not isinstance(self.learning_rate_init, str):
            return self.learning_rate_init
        few, many = self.AUTO_RATES
        return few if n_batches is not None and n_batches < self.LARGE_TABLE_BATCHES else many

    def _size_network(self, n_train):
        """``n_members_``: ``n_members``, or what ``'auto'`` gives ``n_train`` training rows."""
        if not isinstance(self.n_members, str):
            self.n_members_ = int(self.n_members)
            return
        batch_size = resolve_batch_size(self.batch_size, n_train, auto=self._auto_batch_size)
        smaller, large = self.AUTO_MEMBERS
        large_table = math.ceil(n_train / batch_size) >= self.LARGE_TABLE_BATCHES
        self.n_members_ = large if large_table else smaller

    # -- the network -------------------------------------------------------------------
    def _check_params(self):
        positive_ints(self.hidden_layer_sizes, "hidden_layer_sizes", allow_empty=False)
        if self.dropout > 0 and self.solver == "lbfgs":
            raise ValueError(
                "dropout is not supported with solver='lbfgs', whose line search needs a "
                "deterministic loss; use solver='adam' or 'sgd', or dropout=0."
            )

    def _preset_layers(self):
        return tabular_layers(
            self.encoder_,
            numeric_embedding=self.numeric_embedding,
            d_embedding=self.d_embedding,
            categorical_dims=self.categorical_dims,
            hidden_layer_sizes=positive_ints(self.hidden_layer_sizes, "hidden_layer_sizes"),
            activation=self.activation,
            dropout=self.dropout,
            # (a model pickled before n_members_ was an attribute had an int n_members)
            n_members=getattr(self, "n_members_", self.n_members),
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        # 'string' stays False: see TabularEncoder (every category is checked, and
        # one that is neither a string nor a number is refused with a TypeError).
        return tags


class TargetScaling:
    """A regressor's targets standardized for training, predictions mapped back.

    List it before the regressor face. ``target_mean_`` and ``target_scale_``
    (weighted by ``sample_weight``) are learned on a first fit (the first
    ``partial_fit``); the network learns ``(y - mean) / scale`` and
    ``predict`` returns ``outputs * scale + mean``.
    """

    def _learn_plan(self, X, Y, sample_weight, rows):
        super()._learn_plan(X, Y, sample_weight, rows)
        Y = Y[rows]
        if not self.standardize_target:
            self.target_mean_, self.target_scale_ = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
            return
        if self._make_loss().out_activation != "identity":
            raise ValueError(
                "standardize_target=True needs a loss with an identity output; "
                f"loss={self.loss!r} predicts through "
                f"{self._make_loss().out_activation!r}. Set standardize_target=False."
            )
        weights = None if sample_weight is None else sample_weight[rows]  # as the rows count
        mean = np.average(Y, axis=0, weights=weights)
        scale = np.sqrt(np.average((Y - mean) ** 2, axis=0, weights=weights))
        scale[~(scale > 0)] = 1.0
        self.target_mean_, self.target_scale_ = mean, scale

    def _apply_plan(self, X, Y):
        X, Y = super()._apply_plan(X, Y)
        return X, (Y - self.target_mean_) / self.target_scale_

    def _predict_outputs(self, X):
        P = super()._predict_outputs(X)
        xp = self.network_.backend.xp if is_device_array(P) else np
        P *= xp.asarray(self.target_scale_, dtype=P.dtype)
        P += xp.asarray(self.target_mean_, dtype=P.dtype)
        return P

    def _decode_targets(self, Y):
        return super()._decode_targets(Y * self.target_scale_ + self.target_mean_)


def tabular_constraints(face):
    """The constraints of a tabular estimator with ``face`` (classifier or regressor)."""
    return {
        **_NeuralNet._parameter_constraints,
        **face._parameter_constraints,
        **TabularMixin._tabular_constraints,
    }

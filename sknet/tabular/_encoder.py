"""TabularEncoder: what a table's columns become, learned from its training rows.

One scikit-learn transformer holds a table's column plan: which columns are
numeric and which categorical, each numeric column's scaling and median (and
bins), which ones carry a missing-value indicator, each categorical column's
categories. ``transform`` turns a table into one float matrix,
``[scaled numbers | indicators | category codes]``, that a network's first
layers split again (``output_groups_`` says where each group is).
"""

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from sknet.tabular._categorical import encode_categories, learn_categories
from sknet.tabular._columns import (
    as_table,
    categorical_mask,
    column_names,
    column_values,
    numeric_values,
)
from sknet.tabular._numeric import NumericScaler, bin_edges


class TabularEncoder(TransformerMixin, BaseEstimator):
    """Numbers scaled, missing values flagged, categories coded: a table as one matrix.

    Everything is learned in ``fit`` from the rows it is given, and only
    applied by ``transform``, so the encoder inside a cross-validated
    estimator never sees the rows it is scored on. Plain NumPy (pandas only
    to read a DataFrame): it trains no network and can be used alone, in a
    ``Pipeline`` before any estimator that takes integer codes.

    Parameters
    ----------
    categorical_features : 'from_dtype', None or array-like of {bool, int, str}, \
default='from_dtype'
        Which columns are categorical, as
        :class:`~sklearn.ensemble.HistGradientBoostingClassifier` takes it:
        ``None`` (none), a boolean mask, column indices or column names, or
        ``'from_dtype'``: a DataFrame's ``category``, ``object``, string and
        ``bool`` columns (scikit-learn's takes ``category`` only), the
        boolean columns of an array and the columns of an object array that
        hold strings or booleans. The others are numeric.

    numeric_scaling : {'quantile', 'robust', 'standard'} or None, default='quantile'
        How numeric columns are scaled: ``'quantile'`` maps each value to the
        normal quantile of its rank among the training values (ties to the
        middle of their ranks; outliers end at about +-5.2), ``'robust'``
        subtracts the median and divides by the interquartile range,
        ``'standard'`` subtracts the mean and divides by the standard
        deviation, ``None`` leaves the values.

    n_bins : int or None, default=None
        When given, ``bins_`` holds the edges of up to ``n_bins`` quantile
        bins of each scaled numeric column (for
        :class:`~sknet.layers.PiecewiseLinearEncoding`).

    min_frequency : int or None, default=None
        Categories seen in fewer training rows are coded as unknown, so the
        unknown code is trained on rare values and stands for unseen ones.

    missing_indicators : bool, default=True
        Add a 0/1 column for each numeric column that has missing values in
        the training rows (a missing value is also put at the column's
        median). Missing values at ``transform`` in a column that had none
        are put at the median.

    dtype : {'float32', 'float64'}, default='float32'
        The dtype of the matrix ``transform`` returns.

    Attributes
    ----------
    n_features_in_ : int
        Number of columns seen in ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names seen in ``fit``, when the table had string names.

    is_categorical_ : ndarray of shape (`n_features_in_`,), dtype=bool
        Which columns are categorical.

    numeric_features_, categorical_features_ : ndarray of int
        The indices of the numeric and of the categorical columns.

    indicator_features_ : ndarray of int
        The indices of the numeric columns that have a missing-value indicator.

    categories_ : list of ndarray
        The categories of each categorical column, sorted: code 0 is a
        missing value, category ``categories_[i][c]`` has code ``c + 1``, and
        code ``len(categories_[i]) + 1`` is a value not among them (the codes
        :class:`~sknet.layers.CategoricalEmbedding` reads).

    cardinalities_ : ndarray of int
        The number of categories of each categorical column, ``K`` (missing
        and unknown not counted).

    medians_ : ndarray of shape (n_numeric,)
        The training median of each numeric column, where missing values go.

    bins_ : list of ndarray or None
        Bin edges of each scaled numeric column, with ``n_bins``.

    output_groups_ : dict of slice
        Where ``'numeric'``, ``'indicators'`` and ``'categorical'`` are among
        the columns ``transform`` returns.

    See Also
    --------
    sknet.TabularClassifier : A network that learns this encoding in its fit.
    sklearn.preprocessing.OrdinalEncoder : Codes for categories alone.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.tabular import TabularEncoder
    >>> X = np.array([[1.0, "red"], [np.nan, "blue"], [3.0, None]], dtype=object)
    >>> encoder = TabularEncoder(numeric_scaling=None).fit(X)
    >>> encoder.is_categorical_
    array([False,  True])
    >>> encoder.categories_
    [array(['blue', 'red'], dtype=object)]
    >>> encoder.transform([[np.nan, "green"], [3.0, None], [1.0, "red"]])
    array([[2., 1., 3.],
           [3., 0., 0.],
           [1., 0., 2.]], dtype=float32)
    >>> encoder.get_feature_names_out()
    array(['x0', 'missingindicator_x0', 'x1'], dtype=object)
    """

    _parameter_constraints: dict = {
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
        "numeric_scaling": [StrOptions({"quantile", "robust", "standard"}), None],
        "n_bins": [Interval(Integral, 1, None, closed="left"), None],
        "min_frequency": [Interval(Integral, 1, None, closed="left"), None],
        "missing_indicators": ["boolean"],
        "dtype": [StrOptions({"float32", "float64"}), type],
    }

    def __init__(
        self,
        *,
        categorical_features="from_dtype",
        numeric_scaling="quantile",
        n_bins=None,
        min_frequency=None,
        missing_indicators=True,
        dtype="float32",
    ):
        self.categorical_features = categorical_features
        self.numeric_scaling = numeric_scaling
        self.n_bins = n_bins
        self.min_frequency = min_frequency
        self.missing_indicators = missing_indicators
        self.dtype = dtype

    def _table(self, X, reset):
        X = as_table(X)
        validate_data(self, X, skip_check_array=True, reset=reset)
        if X.shape[0] < 1 or X.shape[1] < 1:
            what = "sample" if X.shape[0] < 1 else "feature"
            raise ValueError(
                f"Found array with 0 {what}(s) (shape={X.shape}) while a minimum of 1 "
                f"is required by {type(self).__name__}."
            )
        return X

    def fit(self, X, y=None, sample_weight=None):
        """Learn the column plan from the rows of ``X``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            The training table: numbers, categories, missing values.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the rows: a row of weight 2 counts as two
            in every quantile, median and category frequency, a row of
            weight 0 as none.

        Returns
        -------
        self : TabularEncoder
        """
        self._validate_params()
        X = self._table(X, reset=True)
        weights = _check_weights(sample_weight, X.shape[0])
        self.is_categorical_ = categorical_mask(X, self.categorical_features)
        self.numeric_features_ = np.flatnonzero(~self.is_categorical_)
        self.categorical_features_ = np.flatnonzero(self.is_categorical_)
        rows = None if weights is None else weights > 0  # weight 0: as if not there
        numbers = numeric_values(X, self.numeric_features_)
        if rows is not None:
            numbers, weights = numbers[rows], weights[rows]
        has_missing = np.isnan(numbers).any(axis=0)
        self.indicator_features_ = (
            self.numeric_features_[has_missing]
            if self.missing_indicators
            else np.array([], dtype=np.intp)
        )
        self._indicator_positions = np.flatnonzero(has_missing) if self.missing_indicators else []
        self._scaler = NumericScaler(self.numeric_scaling).fit(numbers, weights)
        self.medians_ = self._scaler.medians_
        labels = column_names(X) or [str(j) for j in range(X.shape[1])]
        self.categories_ = []
        for j in self.categorical_features_:
            values = column_values(X, j)
            self.categories_.append(
                learn_categories(
                    values if rows is None else values[rows],
                    self.min_frequency,
                    label=repr(labels[j]),
                    sample_weight=weights,
                )
            )
        self.cardinalities_ = np.array([len(c) for c in self.categories_], dtype=np.intp)
        n_num, n_ind = len(self.numeric_features_), len(self._indicator_positions)
        self.output_groups_ = {
            "numeric": slice(0, n_num),
            "indicators": slice(n_num, n_num + n_ind),
            "categorical": slice(n_num + n_ind, n_num + n_ind + len(self.categorical_features_)),
        }
        self.bins_ = None
        if self.n_bins is not None:
            scaled = self._scaler.transform(numbers, np.empty_like(numbers))
            scaled[np.isnan(numbers)] = np.nan  # bins of the values seen, not of the medians
            self.bins_ = bin_edges(scaled, self.n_bins, weights)
        return self

    def transform(self, X):
        """The table as one float matrix: scaled numbers, indicators, category codes.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A table with the columns seen in ``fit``.

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_output_features)
            ``[numbers | indicators | codes]``, see ``output_groups_``.
        """
        check_is_fitted(self)
        X = self._table(X, reset=False)
        dtype = np.dtype(self.dtype)
        out = np.empty((X.shape[0], self.output_groups_["categorical"].stop), dtype=dtype)
        numbers = numeric_values(X, self.numeric_features_)
        self._scaler.transform(numbers, out[:, self.output_groups_["numeric"]])
        if len(self._indicator_positions):
            indicators = np.isnan(numbers[:, self._indicator_positions])
            out[:, self.output_groups_["indicators"]] = indicators
        start = self.output_groups_["categorical"].start
        for i, (j, categories) in enumerate(zip(self.categorical_features_, self.categories_)):
            out[:, start + i] = encode_categories(column_values(X, j), categories, dtype)
        return out

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: numeric names, indicators, categorical names.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            The input column names; ``None``: ``feature_names_in_`` or
            ``x0, x1, ...``.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self)
        if input_features is None:
            input_features = getattr(self, "feature_names_in_", None)
        if input_features is None:
            input_features = [f"x{j}" for j in range(self.n_features_in_)]
        names = np.asarray(input_features, dtype=object)
        if names.shape != (self.n_features_in_,):
            raise ValueError(
                f"input_features should have length equal to the number of features "
                f"({self.n_features_in_}), got {len(names)}"
            )
        out = list(names[self.numeric_features_])
        out += [f"missingindicator_{name}" for name in names[self.indicator_features_]]
        out += list(names[self.categorical_features_])
        return np.asarray(out, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.transformer_tags.preserves_dtype = [np.dtype(self.dtype).name]
        # The 'string' tag stays False: scikit-learn reads it as "object arrays are
        # not looked at"; this encoder looks at every category and refuses one that
        # is neither a string nor a number with a TypeError, which the checks of a
        # False tag assert.
        return tags


def _check_weights(sample_weight, n_samples):
    """``sample_weight`` as a float64 array of ``n_samples`` non-negative values, or None."""
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.ndim == 0:
        weights = np.full(n_samples, float(weights))
    if weights.shape != (n_samples,):
        raise ValueError(f"sample_weight.shape == {weights.shape}, expected {(n_samples,)}!")
    if not np.isfinite(weights).all():
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if (weights < 0).any():
        raise ValueError("Negative values in data passed to sample_weight")
    if not (weights > 0).any():
        raise ValueError("sample_weight must have a positive sum, got all zeros")
    return weights

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
from sklearn.utils.validation import check_is_fitted

from sknet.tabular._categorical import (
    category_lookup,
    encode_categories,
    encode_few_categories,
    learn_categories,
)
from sknet.tabular._codes import numeric_codes
from sknet.tabular._columns import categorical_mask
from sknet.tabular._numeric import NumericScaler, bin_edges
from sknet.tabular._table import FEW_ROWS, as_table, check_columns

#: The parameters of the column plan, documented once: the encoder's and the
#: tabular estimators' docstrings both show them.
PLAN_COLUMNS_DOC = """
    categorical_features : 'from_dtype', None or array-like of {bool, int, str}, \
default='from_dtype'
        Which columns are categorical, as
        :class:`~sklearn.ensemble.HistGradientBoostingClassifier` takes it:
        ``None`` (none), a boolean mask, column indices or column names, or
        ``'from_dtype'``: a dataframe's (pandas, polars, pyarrow) ``category``,
        ``object``, string and ``bool`` columns (scikit-learn's takes
        ``category`` only), the boolean columns of an array and the columns
        of an object array that hold strings or booleans. The others are
        numeric; a column of strings among them is refused by name.

    numeric_scaling : {'quantile', 'robust', 'standard'} or None, default='quantile'
        How numeric columns are scaled: ``'quantile'`` maps each value to the
        normal quantile of its rank among the training values (ties to the
        middle of their ranks; outliers end at about +-5.2), ``'robust'``
        subtracts the median and divides by the interquartile range,
        ``'standard'`` subtracts the mean and divides by the standard
        deviation, ``None`` leaves the values.
"""

PLAN_CODES_DOC = """
    numeric_codes : bool, default=${numeric_codes}
        Also code as a category each numeric column whose training values
        look like a code: whole numbers, 5 to 31 of them, none more than
        about twice as frequent as their mean (a month, a day of the month,
        an hour; not a count of children or of nights, where small values
        dominate). The column stays a number as well
        (:mod:`sknet.tabular._codes`).
"""

PLAN_FREQUENCY_DOC = """
    min_frequency : int or None, default=None
        Categories seen in fewer training rows are coded as unknown, so the
        unknown code is trained on rare values and stands for unseen ones.
"""


def _category_codes(encoder, X, lookups, dtype):
    """The codes of table ``X``'s categorical columns (not the numbers coded too)."""
    features = encoder.categorical_features_
    codes = np.empty((X.shape[0], len(features)), dtype=dtype)
    columns = block = None
    if X.shape[0] <= FEW_ROWS:  # a predict: a dict lookup a value
        block = X.block_of(features)
        if block is None:
            columns = X.values_of(features)
            if all(c.dtype.kind in "Ob" for c in columns):
                block = np.empty(codes.shape, dtype=object)
                for i, column in enumerate(columns):
                    block[:, i] = column
        if block is not None:
            label = lambda i: X.label(features[i])  # noqa: E731 (named only on an error)
            return encode_few_categories(block, encoder.categories_, lookups, label, codes)
    for i, column in enumerate(X.values_of(features) if columns is None else columns):
        codes[:, i] = encode_categories(
            column, encoder.categories_[i], dtype, X.label(features[i]), lookups[i]
        )
    return codes


def _number_codes(encoder, X, numbers, lookups, out):
    """The codes of the numbers coded too (``code_features_``), into ``out``'s columns."""
    categories = encoder.categories_[len(encoder.categorical_features_) :]
    if len(encoder.code_features_) and X.shape[0] <= FEW_ROWS:  # a predict: a dict lookup
        block = numbers[:, encoder._code_positions].astype(object)
        label = lambda i: X.label(encoder.code_features_[i])  # noqa: E731
        encode_few_categories(block, categories, lookups, label, out)
        return
    for i, (j, position) in enumerate(zip(encoder.code_features_, encoder._code_positions)):
        values = numbers[:, position]
        out[:, i] = encode_categories(values, categories[i], out.dtype, X.label(j), lookups[i])


def _refuse_empty(encoder, X):
    if X.shape[0] < 1 or X.shape[1] < 1:
        what = "sample" if X.shape[0] < 1 else "feature"
        raise ValueError(
            f"Found array with 0 {what}(s) (shape={X.shape}) while a minimum of 1 "
            f"is required by {type(encoder).__name__}."
        )


class TabularEncoder(TransformerMixin, BaseEstimator):
    """Numbers scaled, missing values flagged, categories coded: a table as one matrix.

    Everything is learned in ``fit`` from the rows it is given, and only
    applied by ``transform``, so the encoder inside a cross-validated
    estimator never sees the rows it is scored on. Plain NumPy (any dataframe
    is read through one adapter, :mod:`sknet.tabular._table`): it trains no
    network and can be used alone, in a ``Pipeline`` before any estimator
    that takes integer codes.

    Parameters
    ----------
    %(plan_columns)s
    n_bins : int or None, default=None
        When given, ``bins_`` holds the edges of up to ``n_bins`` quantile
        bins of each scaled numeric column (for
        :class:`~sknet.layers.PiecewiseLinearEncoding`), at most 65536.

    %(plan_frequency)s
    %(plan_codes)s
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

    code_features_ : ndarray of int
        The indices of the numeric columns also coded as categories
        (``numeric_codes``), after the categorical columns' codes.

    categories_ : list of ndarray
        The categories of each categorical column, then of each column of
        ``code_features_`` (its values), sorted: code 0 is a
        missing value, category ``categories_[i][c]`` has code ``c + 1``, and
        code ``len(categories_[i]) + 1`` is a value not among them (the codes
        :class:`~sknet.layers.CategoricalEmbedding` reads).

    cardinalities_ : ndarray of int
        The number of categories of each column of ``categories_``, ``K``
        (missing and unknown not counted).

    medians_ : ndarray of shape (n_numeric,)
        The training median of each numeric column, where missing values go.

    quantiles_ : list of ndarray or None
        With ``numeric_scaling='quantile'``, the reference quantiles of each
        numeric column, increasing, at levels ``linspace(0, 1, len(q))``: a
        value ``v`` maps to ``ndtri(clip(r, 1e-7, 1 - 1e-7))``, its rank ``r``
        ``(interp(v, q, levels) - interp(-v, -q[::-1], -levels[::-1])) / 2``
        (ties in the middle); a column of fewer than two distinct quantiles
        maps to 0. ``None`` for the other scalings.

    offsets_, scales_ : ndarray of shape (n_numeric,) or None
        With ``numeric_scaling='robust'`` (the median and the interquartile
        range) or ``'standard'`` (the mean and the standard deviation), each
        numeric column maps to ``(v - offsets_) / scales_``. ``None`` for the
        other scalings (``numeric_scaling=None`` leaves the values).

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
        "numeric_codes": ["boolean"],
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
        numeric_codes=False,
        missing_indicators=True,
        dtype="float32",
    ):
        self.categorical_features = categorical_features
        self.numeric_scaling = numeric_scaling
        self.n_bins = n_bins
        self.min_frequency = min_frequency
        self.numeric_codes = numeric_codes
        self.missing_indicators = missing_indicators
        self.dtype = dtype

    def _table(self, X, reset):
        X = as_table(X)
        check_columns(self, X, reset)
        _refuse_empty(self, X)
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
        self.__dict__.pop("_lookups", None)  # of the categories of a previous fit
        X = self._table(X, reset=True)
        weights = _check_weights(sample_weight, X.shape[0])
        self.is_categorical_ = categorical_mask(X, self.categorical_features)
        self.numeric_features_ = np.flatnonzero(~self.is_categorical_)
        self.categorical_features_ = np.flatnonzero(self.is_categorical_)
        rows = None if weights is None else weights > 0  # weight 0: as if not there
        numbers = X.numbers(self.numeric_features_, why=why_numeric(self))
        if rows is not None:
            numbers, weights = numbers[rows], weights[rows]
        categories = []
        for j in self.categorical_features_:
            values = X.values(j)
            categories.append(
                learn_categories(
                    values if rows is None else values[rows],
                    self.min_frequency,
                    label=X.label(j),
                    sample_weight=weights,
                )
            )
        scaler = NumericScaler(self.numeric_scaling).fit(numbers, weights)
        codes = numeric_codes(numbers, weights) if self.numeric_codes else []
        self._set_plan(np.isnan(numbers).any(axis=0), scaler, categories, codes)
        if self.n_bins is not None:
            scaled = self._scaler.transform(numbers, np.empty_like(numbers))
            scaled[np.isnan(numbers)] = np.nan  # bins of the values seen, not of the medians
            self.bins_ = bin_edges(scaled, self.n_bins, weights)
        return self

    def _set_plan(self, has_missing, scaler, categories, codes=()):
        """The fitted attributes of what was learned, from rows or merged summaries
        (:func:`~sknet.tabular._summaries.encoder_from_summary`); ``bins_`` left None.

        ``has_missing`` says which numeric columns had missing values, ``scaler`` is the
        fitted :class:`NumericScaler`, ``categories`` each categorical column's and
        ``codes`` the ``(position among the numeric columns, categories)`` of each
        numeric column also coded.
        """
        self._code_positions = np.array([i for i, _ in codes], dtype=np.intp)
        self.code_features_ = self.numeric_features_[self._code_positions]
        categories = [*categories, *(found for _, found in codes)]
        self.indicator_features_ = (
            self.numeric_features_[has_missing]
            if self.missing_indicators
            else np.array([], dtype=np.intp)
        )
        self._indicator_positions = np.flatnonzero(has_missing) if self.missing_indicators else []
        self._scaler = scaler
        self.medians_ = scaler.medians_
        self.quantiles_, self.offsets_, self.scales_ = _public_scaling(scaler)
        self.categories_ = list(categories)
        self.cardinalities_ = np.array([len(c) for c in self.categories_], dtype=np.intp)
        self._lookups = [category_lookup(c) for c in self.categories_]
        n_num, n_ind = len(self.numeric_features_), len(self._indicator_positions)
        self.output_groups_ = {
            "numeric": slice(0, n_num),
            "indicators": slice(n_num, n_num + n_ind),
            "categorical": slice(n_num + n_ind, n_num + n_ind + len(self.categories_)),
        }
        self.bins_ = None

    def _category_lookups(self):
        """Each categorical column's ``{category: code}``: made by ``fit`` (and when a
        pickle from before them loads), so ``transform`` changes nothing of the encoder."""
        lookups = self.__dict__.get("_lookups")
        if lookups is None or len(lookups) != len(self.categories_):  # a plan set by hand
            return [category_lookup(c) for c in self.categories_]
        return lookups

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
        return self._encode_table(self._table(X, reset=False))

    def _encode_table(self, X):
        """:meth:`transform` of a table whose columns are checked already.

        For the tabular estimators, which read and check ``X`` themselves
        (:func:`~sknet.tabular._table.as_table`, :func:`~sknet.tabular._table.check_columns`):
        a NumPy array whatever ``set_output`` says, no second check of the
        columns (a one-row predict's time).
        """
        _refuse_empty(self, X)
        dtype = np.dtype(self.dtype)
        out = np.empty((X.shape[0], self.output_groups_["categorical"].stop), dtype=dtype)
        numbers = X.numbers(self.numeric_features_)
        with np.errstate(over="ignore"):  # refused below, naming the column
            self._scaler.transform(numbers, out[:, self.output_groups_["numeric"]])
        _check_scaled(self, X, numbers, out[:, self.output_groups_["numeric"]])
        if len(self._indicator_positions):
            indicators = np.isnan(numbers[:, self._indicator_positions])
            out[:, self.output_groups_["indicators"]] = indicators
        start = self.output_groups_["categorical"].start
        lookups = self._category_lookups()
        n_cat = len(self.categorical_features_)
        out[:, start : start + n_cat] = _category_codes(self, X, lookups, dtype)
        _number_codes(self, X, numbers, lookups[n_cat:], out[:, start + n_cat :])
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
        return _names_out(self, input_features)

    def __getstate__(self):
        state = dict(super().__getstate__())  # a copy: pickling leaves the encoder as it was
        state.pop("_lookups", None)  # made again from categories_ when loaded
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "categories_" in state:
            self._lookups = [category_lookup(c) for c in self.categories_]
        if "numeric_features_" in state and "code_features_" not in state:  # before the codes
            self.code_features_ = np.array([], dtype=np.intp)
            self._code_positions = np.array([], dtype=np.intp)
        if "_scaler" in state and "quantiles_" not in state:  # pickled before the public plan
            self.quantiles_, self.offsets_, self.scales_ = _public_scaling(self._scaler)

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


def why_numeric(encoder):
    """What made the columns numeric, for the error of a column of strings among them."""
    features = encoder.categorical_features
    if isinstance(features, str):
        return ""
    why = f" (categorical_features={features!r})"
    values = np.asarray(features if features is not None else [])
    if values.dtype.kind in "iu" and values.size and set(values.tolist()) <= {0, 1}:
        why += (
            f"; a list of 0 and 1 is read as column indices, here "
            f"{sorted(set(values.tolist()))}: a mask must have dtype bool"
        )
    return why


def _names_out(encoder, input_features):
    """The output columns' names (see :meth:`TabularEncoder.get_feature_names_out`)."""
    if input_features is None:
        input_features = getattr(encoder, "feature_names_in_", None)
    if input_features is None:
        input_features = [f"x{j}" for j in range(encoder.n_features_in_)]
    names = np.asarray(input_features, dtype=object)
    if names.shape != (encoder.n_features_in_,):
        raise ValueError(
            f"input_features should have length equal to the number of features "
            f"({encoder.n_features_in_}), got {len(names)}"
        )
    out = list(names[encoder.numeric_features_])
    out += [f"missingindicator_{name}" for name in names[encoder.indicator_features_]]
    out += list(names[encoder.categorical_features_])
    out += [f"code_{name}" for name in names[encoder.code_features_]]
    return np.asarray(out, dtype=object)


def _public_scaling(scaler):
    """``quantiles_``, ``offsets_`` and ``scales_`` of a fitted scaler (None where unused)."""
    if scaler.scaling == "quantile":
        return scaler.quantiles_, None, None
    if scaler.scaling in ("robust", "standard"):
        return None, scaler.offsets_, scaler.scales_
    return None, None, None


def _check_scaled(encoder, X, numbers, scaled):
    """A ValueError naming the column of a finite value its scaling took beyond the dtype."""
    overflow = np.isinf(scaled)
    if not overflow.any():
        return
    i, k = np.argwhere(overflow.T)[0]
    dtype = np.dtype(encoder.dtype)
    raise ValueError(
        f"Column {X.label(encoder.numeric_features_[i])} holds {numbers[k, i]!r}, which "
        f"numeric_scaling={encoder.numeric_scaling!r} maps beyond the largest {dtype} "
        f"({np.finfo(dtype).max:.6g}); scale the column, or use "
        "numeric_scaling='quantile'" + (", or dtype='float64'" if dtype.itemsize < 8 else "")
    )


def _check_weights(sample_weight, n_samples):
    """``sample_weight`` as a float64 array of ``n_samples`` non-negative values, or None."""
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.dtype.kind == "c":  # float64 would drop the imaginary parts, with a warning
        raise ValueError(f"Complex data not supported: sample_weight has dtype {weights.dtype}")
    try:
        weights = weights.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must hold numbers: {exc}") from None
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


TabularEncoder.__doc__ = (
    TabularEncoder.__doc__.replace("    %(plan_columns)s\n", PLAN_COLUMNS_DOC.strip("\n") + "\n\n")
    .replace("    %(plan_frequency)s\n", PLAN_FREQUENCY_DOC.strip("\n") + "\n\n")
    .replace(
        "    %(plan_codes)s\n",
        PLAN_CODES_DOC.replace("${numeric_codes}", "False").strip("\n") + "\n\n",
    )
    if TabularEncoder.__doc__
    else None
)

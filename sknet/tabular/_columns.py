"""A table's columns: what kind each is, and its values as NumPy arrays.

A table is a pandas DataFrame (pandas is optional: it is imported only when a
DataFrame comes) or anything :func:`numpy.asarray` makes a 2-D array of,
numbers or objects. :func:`categorical_mask` says which columns are
categorical, taking ``categorical_features`` in every form
:class:`~sklearn.ensemble.HistGradientBoostingClassifier` takes it;
:func:`column_values` and :func:`numeric_values` read one column, with
missing values found whatever their spelling (``None``, ``NaN``, ``pd.NA``,
``pd.NaT``).
"""

from numbers import Real

import numpy as np
import scipy.sparse as sp


def is_dataframe(X):
    """Whether ``X`` is a pandas DataFrame (without importing pandas)."""
    return hasattr(X, "iloc") and hasattr(X, "dtypes") and hasattr(X, "columns")


def as_table(X, name="X"):
    """``X`` itself when a DataFrame, else a 2-D NumPy array of it; sparse is refused."""
    if is_dataframe(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got {X.ndim} dimension(s)")
        return X
    if sp.issparse(X):
        raise TypeError(
            f"{name} is a sparse matrix; a table takes dense data (a DataFrame or an "
            "array). Densify it with X.toarray(), or use MLPClassifier/MLPRegressor, "
            "which take sparse input."
        )
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {'scalar' if array.ndim == 0 else f'{array.ndim}D'} "
            f"array instead: {name} must be a table of shape (n_samples, n_features). "
            "Reshape your data either using array.reshape(-1, 1) if your data has a "
            "single feature or array.reshape(1, -1) if it contains a single sample."
        )
    if array.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {array.dtype}")
    if array.dtype.kind not in "biufOUSb":
        raise TypeError(f"{name} must hold numbers, strings or booleans, got dtype {array.dtype}")
    return array


def column_names(X):
    """The column names of a DataFrame, as strings (``None`` for arrays)."""
    return [str(c) for c in X.columns] if is_dataframe(X) else None


def _dataframe_kinds(X):
    """``'categorical'``, ``'numeric'`` or the refused dtype, for each DataFrame column."""
    import pandas as pd  # a DataFrame came, so pandas is there

    types = pd.api.types
    kinds = []
    for dtype in X.dtypes:
        if (
            isinstance(dtype, pd.CategoricalDtype)
            or types.is_bool_dtype(dtype)
            or types.is_object_dtype(dtype)
            or types.is_string_dtype(dtype)
        ):
            kinds.append("categorical")
        elif types.is_numeric_dtype(dtype) and not types.is_complex_dtype(dtype):
            kinds.append("numeric")
        else:
            kinds.append(str(dtype))
    return kinds


def _is_number(value):
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


def _array_kinds(X):
    """Kinds of an array's columns under ``'from_dtype'``.

    Numbers are numeric and booleans categorical; in an array of objects a
    column is categorical when it holds strings or booleans, numeric
    otherwise (its values are then converted to floats, which fails with
    NumPy's own ``TypeError`` on anything that is not a number).
    """
    if X.dtype.kind in "iuf":
        return ["numeric"] * X.shape[1]
    if X.dtype.kind in "bUS":
        return ["categorical"] * X.shape[1]
    kinds = []
    for j in range(X.shape[1]):
        present = X[~missing_mask(X[:, j]), j]
        textual = any(isinstance(v, (str, bytes, bool, np.bool_, np.str_)) for v in present)
        kinds.append("categorical" if textual else "numeric")
    return kinds


def categorical_mask(X, categorical_features="from_dtype"):
    """Which columns of the table ``X`` are categorical: a boolean array.

    Parameters
    ----------
    X : DataFrame or ndarray of shape (n_samples, n_features)
        The table (see :func:`as_table`).
    categorical_features : 'from_dtype', None, or array-like of bool, int or str
        As :class:`~sklearn.ensemble.HistGradientBoostingClassifier` takes it:
        ``None`` (no column), a boolean mask, integer indices, column names,
        or ``'from_dtype'``: a DataFrame's ``category``, ``object``, string
        and ``bool`` columns (scikit-learn's estimator takes ``category``
        only, having no use for strings), an array's boolean columns and the
        columns of an object array that hold strings or booleans.

    Returns
    -------
    mask : ndarray of shape (n_features,), dtype=bool
    """
    n_features = X.shape[1]
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                "categorical_features must be 'from_dtype', None, or an array-like of "
                f"bool, int or str, got {categorical_features!r}"
            )
        kinds = _dataframe_kinds(X) if is_dataframe(X) else _array_kinds(X)
        known = ("numeric", "categorical")
        refused = [(j, kind) for j, kind in enumerate(kinds) if kind not in known]
        if refused:
            j, kind = refused[0]
            raise TypeError(
                f"Column {_label(X, j)} has dtype {kind}, which is neither numeric nor "
                "categorical; convert it to numbers (e.g. a date to days) or to a category."
            )
        return np.array([kind == "categorical" for kind in kinds], dtype=bool)
    if categorical_features is None:
        return np.zeros(n_features, dtype=bool)
    features = np.asarray(categorical_features)
    if features.size == 0:
        return np.zeros(n_features, dtype=bool)
    if features.ndim != 1 or features.dtype.kind not in "iubUO":
        raise ValueError(
            "categorical_features must be an array-like of bool, int or str, got "
            f"{categorical_features!r}"
        )
    if features.dtype.kind == "O" and {type(f) for f in features} != {str}:
        raise ValueError(
            "categorical_features must be an array-like of bool, int or str, got: "
            + ", ".join(sorted({type(f).__name__ for f in features}))
        )
    if features.dtype.kind == "b":
        if features.shape[0] != n_features:
            raise ValueError(
                "categorical_features set as a boolean mask must have shape "
                f"(n_features,) = ({n_features},), got: {features.shape}"
            )
        return features.copy()
    mask = np.zeros(n_features, dtype=bool)
    if features.dtype.kind in "UO":
        names = column_names(X)
        if names is None:
            raise ValueError(
                "categorical_features should be passed as an array of integers or as a "
                "boolean mask when the model is fitted on data without feature names."
            )
        for feature in features:
            if feature not in names:
                raise ValueError(
                    f"categorical_features has an item value '{feature}' which is not a "
                    f"valid feature name of the training data. Observed feature names: {names}"
                )
            mask[names.index(feature)] = True
        return mask
    if features.max() >= n_features or features.min() < 0:
        raise ValueError(
            "categorical_features set as integer indices must be in "
            f"[0, n_features - 1] = [0, {n_features - 1}], got {features.tolist()}"
        )
    mask[features] = True
    return mask


def _label(X, j):
    names = column_names(X)
    return repr(names[j]) if names is not None else str(j)


def missing_mask(values):
    """Where a 1-D array of any dtype holds a missing value (None, NaN, NA, NaT)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "biuUS":
        return np.zeros(values.shape, dtype=bool)
    try:
        import pandas as pd
    except ImportError:  # plain arrays: None and float NaN
        return np.fromiter(
            (v is None or (isinstance(v, float) and v != v) for v in values),
            dtype=bool,
            count=len(values),
        )
    return np.asarray(pd.isna(values), dtype=bool)


def column_values(X, j):
    """Column ``j`` of the table as a 1-D NumPy array (objects for a DataFrame's).

    A DataFrame's categorical column gives its values, not its codes; its
    missing values stay whatever pandas holds (found by :func:`missing_mask`).
    """
    if is_dataframe(X):
        column = X.iloc[:, j]
        if column.dtype.kind in "biuf":
            return column.to_numpy()
        return column.to_numpy(dtype=object)
    return X[:, j]


def numeric_values(X, columns, dtype=np.float64):
    """Columns ``columns`` of the table as a float array, missing values as NaN.

    Raises a ``ValueError`` naming the column for infinite values, and NumPy's
    ``TypeError`` for values that are not numbers.
    """
    n = X.shape[0]
    out = np.empty((n, len(columns)), dtype=dtype)
    for i, j in enumerate(columns):
        if is_dataframe(X):  # nullable dtypes too: pd.NA becomes NaN
            out[:, i] = X.iloc[:, j].to_numpy(dtype=np.float64, na_value=np.nan)
            _check_finite(X, j, out[:, i])
            continue
        values = column_values(X, j)
        if values.dtype.kind == "O":
            missing = missing_mask(values)
            if missing.any():
                values = values.copy()
                values[missing] = np.nan
        out[:, i] = values
        _check_finite(X, j, out[:, i])
    return out


def _check_finite(X, j, values):
    if np.isinf(values).any():
        raise ValueError(
            f"Input X contains infinity in column {_label(X, j)}: a numeric column may "
            "hold missing values (NaN), not infinite ones."
        )

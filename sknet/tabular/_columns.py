"""A table's columns: which are categorical, and where values are missing.

:func:`categorical_mask` says which columns of a table
(:class:`~sknet.tabular._table.Table`: any dataframe or array) are
categorical, taking ``categorical_features`` in every form
:class:`~sklearn.ensemble.HistGradientBoostingClassifier` takes it;
:func:`~sknet.tabular._table.missing_mask` (read here) finds missing values whatever their spelling
(``None``, ``NaN``, ``pd.NA``, ``pd.NaT``).
"""

import numpy as np

from sknet.tabular._table import as_table, missing_mask


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
    X = as_table(X)
    n_features = X.shape[1]
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                "categorical_features must be 'from_dtype', None, or an array-like of "
                f"bool, int or str, got {categorical_features!r}"
            )
        kinds = X.dtype_kinds() if X.is_frame else _array_kinds(X.native)
        known = ("numeric", "categorical")
        refused = [(j, kind) for j, kind in enumerate(kinds) if kind not in known]
        if refused:
            j, kind = refused[0]
            raise TypeError(
                f"Column {X.label(j)} has dtype {kind}, which is neither numeric nor "
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
        names = X.names
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

"""Category codes: each categorical column's categories, learned from training rows.

A column's categories are the distinct values of its training rows (those
seen fewer than ``min_frequency`` times excepted). Code 0 is a missing
value, codes ``1 .. K`` are the categories in sorted order and code
``K + 1`` any value not among them (unseen in training, or rare): the codes
:class:`~sknet.layers.CategoricalEmbedding` reads, for ``K`` categories.
"""

import numpy as np

from sknet.tabular._table import missing_mask

#: The code of a missing value; categories are 1..K, and K + 1 is unknown.
MISSING_CODE = 0


def _type_error(label, value):
    return TypeError(
        f"Column {label} is categorical: each argument must be a string or a number "
        f"(or missing), got a value of type {type(value).__name__}: {value!r}"
    )


def _check_values(values, label):
    """Refuse values that cannot be categories (unhashable, or neither text nor number)."""
    for value in values:
        if not isinstance(value, (str, bytes, bool, np.bool_, int, float, np.number)):
            raise _type_error(label, value)


def learn_categories(values, min_frequency=None, label="0", sample_weight=None):
    """The sorted categories of a column's training values (a 1-D array).

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
        The column's training values, any dtype; missing values are skipped.
    min_frequency : int or None, default=None
        Categories seen fewer times are left out (coded as unknown).
    label : str, default="0"
        The column's name or index, for error messages.
    sample_weight : ndarray of shape (n_samples,), default=None
        Weights of the rows: a category's frequency is the sum of its rows'.

    Returns
    -------
    categories : ndarray
        The categories, sorted (by type name, then value, when types mix).
    """
    seen = ~missing_mask(values)
    present = values[seen]
    if present.dtype.kind == "O":
        try:
            index = {}
            codes = np.array([index.setdefault(v, len(index)) for v in present.tolist()], np.intp)
        except TypeError:  # unhashable: find which
            for value in present:
                try:
                    hash(value)
                except TypeError:
                    raise _type_error(label, value) from None
            raise
        _check_values(index, label)
        keys = list(index)
        try:
            keys.sort()
        except TypeError:  # mixed types: grouped by type, then sorted within
            keys.sort(key=lambda v: (type(v).__name__, str(v)))
        categories = np.empty(len(keys), dtype=object)
        categories[:] = keys
        rank = {key: i for i, key in enumerate(keys)}  # a value's place among the sorted
        sorted_code = np.array([rank[key] for key in index], dtype=np.intp)
        position = sorted_code[codes] if codes.size else codes
    else:
        categories, position = np.unique(present, return_inverse=True)
    weights = None if sample_weight is None else sample_weight[seen]
    frequencies = np.bincount(position, weights=weights, minlength=len(categories))
    if min_frequency is not None:
        categories = categories[frequencies >= min_frequency]
    return categories


def encode_categories(values, categories, dtype=np.float64):
    """Codes of a column's values: 0 missing, ``1 .. K`` categories, ``K + 1`` unknown.

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
        The column's values, any dtype.
    categories : ndarray of shape (K,)
        The column's categories, from :func:`learn_categories`.
    dtype : dtype, default=np.float64
        The dtype of the codes (whole numbers in it).

    Returns
    -------
    codes : ndarray of shape (n_samples,)
    """
    K = len(categories)
    missing = missing_mask(values)
    codes = np.full(values.shape[0], K + 1, dtype=dtype)
    codes[missing] = MISSING_CODE
    present = ~missing
    if K == 0:
        return codes
    if values.dtype.kind != "O" and categories.dtype.kind != "O":
        # Sorted categories of one kind: a binary search, no Python loop.
        try:
            where = np.searchsorted(categories, values[present])
        except TypeError:  # e.g. numbers against strings: nothing matches
            return codes
        where = np.minimum(where, K - 1)
        found = categories[where] == values[present]
        codes[np.flatnonzero(present)[found]] = where[found] + 1
        return codes
    lookup = {value: code for code, value in enumerate(categories.tolist(), start=1)}
    unknown = K + 1
    try:
        codes[present] = [lookup.get(v, unknown) for v in values[present].tolist()]
    except TypeError:  # an unhashable value is no category: unknown
        codes[present] = [
            lookup.get(v, unknown) if _hashable(v) else unknown for v in values[present].tolist()
        ]
    return codes


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True

"""Category codes: each categorical column's categories, learned from training rows.

A column's categories are the distinct values of its training rows (those
seen fewer than ``min_frequency`` times excepted). Code 0 is a missing
value, codes ``1 .. K`` are the categories in sorted order and code
``K + 1`` any value not among them (unseen in training, or rare): the codes
:class:`~sknet.layers.CategoricalEmbedding` reads, for ``K`` categories.
"""

from decimal import Decimal
from numbers import Real

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
        if not isinstance(value, (str, bytes, np.bool_, Real, Decimal, np.number)):
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
    categories, frequencies = count_categories(values, label, sample_weight)
    return frequent_categories(categories, frequencies, min_frequency)


def frequent_categories(categories, frequencies, min_frequency):
    """The categories seen at least ``min_frequency`` times (all with None)."""
    if min_frequency is None:
        return categories
    return categories[np.asarray(frequencies) >= min_frequency]


def sorted_categories(keys):
    """Distinct values (a list) as a sorted array of objects: by type name, then value,
    when types mix."""
    keys = list(keys)
    try:
        keys.sort()
    except TypeError:  # mixed types: grouped by type, then sorted within
        keys.sort(key=lambda v: (type(v).__name__, str(v)))
    categories = np.empty(len(keys), dtype=object)
    categories[:] = keys
    return categories


def count_categories(values, label="0", sample_weight=None):
    """A column's distinct training values, sorted, and the weight of each.

    What :func:`learn_categories` counts before it leaves out the rare ones;
    a summary of a partition's rows keeps it whole, to merge
    (:mod:`sknet.tabular._summaries`).

    Returns
    -------
    categories : ndarray
        The distinct values that are not missing, sorted as
        :func:`learn_categories` sorts them.
    frequencies : ndarray of float or int
        The number of rows (the sum of their weights) of each.
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
        categories = sorted_categories(index)
        rank = {key: i for i, key in enumerate(categories.tolist())}  # place among the sorted
        sorted_code = np.array([rank[key] for key in index], dtype=np.intp)
        position = sorted_code[codes] if codes.size else codes
    else:
        categories, position = np.unique(present, return_inverse=True)
    weights = None if sample_weight is None else sample_weight[seen]
    frequencies = np.bincount(position, weights=weights, minlength=len(categories))
    return categories, frequencies


def category_lookup(categories):
    """``{category: code}`` of a column's sorted categories (codes from 1), for
    :func:`encode_categories` (made once a fitted plan, not once a call)."""
    return {value: code for code, value in enumerate(categories.tolist(), start=1)}


def encode_categories(values, categories, dtype=np.float64, label="0", lookup=None):
    """Codes of a column's values: 0 missing, ``1 .. K`` categories, ``K + 1`` unknown.

    A value that could not be a category (a list, a dict, a tuple: neither
    text nor a number) is refused as :func:`learn_categories` refuses it,
    a TypeError naming the column ``label``, never coded as unknown.

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
        The column's values, any dtype.
    categories : ndarray of shape (K,)
        The column's categories, from :func:`learn_categories`.
    dtype : dtype, default=np.float64
        The dtype of the codes (whole numbers in it).
    label : str, default="0"
        The column's name or index, for error messages.
    lookup : dict or None, default=None
        :func:`category_lookup` of ``categories``, when the caller keeps it.

    Returns
    -------
    codes : ndarray of shape (n_samples,)
    """
    K = len(categories)
    missing = missing_mask(values)
    codes = np.full(values.shape[0], K + 1, dtype=dtype)
    codes[missing] = MISSING_CODE
    present = ~missing
    if values.dtype.kind != "O" and (K == 0 or categories.dtype.kind != "O"):
        if K == 0:
            return codes
        # Sorted categories of one kind: a binary search, no Python loop.
        try:
            where = np.searchsorted(categories, values[present])
        except TypeError:  # e.g. numbers against strings: nothing matches
            return codes
        where = np.minimum(where, K - 1)
        found = _equal(categories[where], values[present])
        codes[np.flatnonzero(present)[found]] = where[found] + 1
        return codes
    found = _hashed_codes(categories, values[present])
    if found is not None:  # many values of a column of text: pandas' hash table
        _check_values(values[present][found == K + 1].tolist(), label)
        codes[present] = found
        return codes
    lookup = category_lookup(categories) if lookup is None else lookup
    unknown, given = K + 1, values[present].tolist()
    try:
        found = [lookup.get(v, unknown) for v in given]
    except TypeError:  # an unhashable value: refused below
        found = [lookup.get(v, unknown) if _hashable(v) else unknown for v in given]
    _check_values((v for v, code in zip(given, found) if code == unknown), label)
    codes[present] = found
    return codes


def encode_few_categories(block, categories, lookups, label, out):
    """:func:`encode_categories` of a few rows' categorical columns, into ``out``.

    What a prediction of a row or two needs: one missing mask for the whole
    block, then a dict lookup a value, without the array passes that
    :func:`encode_categories` makes a column (tens of microseconds a column of
    one value). The same codes, and the same TypeError for a value that
    could not be a category.

    Parameters
    ----------
    block : ndarray of shape (n_samples, n_columns)
        The columns' values, as objects.
    categories, lookups : list
        Each column's categories and :func:`category_lookup`.
    label : callable
        ``label(i)``: column ``i``'s name, for the error of a value refused.
    out : ndarray of shape (n_samples, n_columns)
        Where the codes go.
    """
    if block.shape[1] == 0:
        return out
    flat = block.T.ravel()  # column by column: a refused value is the one the large path names
    missing = missing_mask(flat).tolist()
    unknown = [len(c) + 1 for c in categories]
    codes = []
    for i, (value, absent) in enumerate(zip(flat.tolist(), missing)):
        if absent:
            codes.append(MISSING_CODE)
            continue
        j = i // block.shape[0]
        try:
            code = lookups[j].get(value, unknown[j])
        except TypeError:  # unhashable: refused below
            code = unknown[j]
        if code == unknown[j]:
            _check_values((value,), label(j))
        codes.append(code)
    out[...] = np.reshape(codes, block.shape[::-1]).T
    return out


def _equal(categories, values):
    """``categories == values``, elementwise; integers against floats compared exactly, as
    Python and a dict compare them (NumPy's ``==`` rounds int64 to float64 first, so
    ``2**53 + 1`` would equal ``2.0**53``)."""
    equal = categories == values
    kinds = categories.dtype.kind + values.dtype.kind
    if sorted(kinds) not in (["f", "i"], ["f", "u"]):
        return equal
    ints, floats = (categories, values) if kinds[0] in "iu" else (values, categories)
    matched = np.flatnonzero(equal)
    if ints.dtype.itemsize < 8 or not matched.size:
        return equal  # (every integer of 32 bits or fewer is a float64 exactly)
    # where the float equals the rounded integer: equal if it is that integer exactly
    info = np.iinfo(ints.dtype)
    candidates = floats[matched]
    inside = (candidates >= info.min) & (candidates < float(info.max))
    exact = np.zeros(matched.size, dtype=bool)
    exact[inside] = candidates[inside].astype(ints.dtype) == ints[matched][inside]
    equal[matched] = exact
    return equal


#: Fewer values than this are coded by a dict (a row at predict: no table to build).
_HASHED_FROM = 256


def _hashed_codes(categories, values):
    """Codes ``1..K`` of ``values`` among string ``categories`` (``K + 1``: not among them),
    by pandas' hash table: what the dict of :func:`category_lookup` gives, in C.

    None where it does not apply (few values, categories not all strings, no pandas, a
    value that cannot be hashed): the caller codes by the dict.
    """
    if values.shape[0] < _HASHED_FROM or not all(isinstance(c, str) for c in categories):
        return None
    try:
        import pandas as pd
    except ImportError:
        return None
    try:
        where = pd.Index(categories, dtype=object).get_indexer(values)
    except (TypeError, NotImplementedError):  # unhashable values (the dict path names
        return None  # them), or a dtype pandas does not index (float16)
    return np.where(where < 0, len(categories), where) + 1


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True

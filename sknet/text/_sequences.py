"""Sequences of different lengths as one padded array, and which of its steps are real.

:func:`pad_sequences` is Keras's function of that name, with the padding and
the truncation at the end by default (as Keras's ``TextVectorization`` pads):
a list of 1-D arrays (token ids) or 2-D arrays ``(steps, features)`` becomes
one array ``(n, maxlen)`` or ``(n, maxlen, features)``. :func:`padding_mask`
says which steps of a padded array are real, with the convention of sknet's
masked layers (``True`` for a real step): a token id is padding when it equals
the padding value; a step of features when all its features do.
:func:`sequence_lengths` gives each row's steps up to its last real one, which
is what a padded array can be cut to without losing a real step.

The functions on padded arrays use array methods only, so NumPy and CuPy
arrays give arrays of their own kind.
"""

from numbers import Real

import numpy as np

_SIDES = ("post", "pre")


def _check_side(name, value):
    if not isinstance(value, str) or value not in _SIDES:
        raise ValueError(f"{name} must be 'post' or 'pre', got {value!r}")


def _as_sequences(sequences):
    """The sequences as NumPy arrays of one number of dimensions (1 or 2), or a ValueError."""
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__len__"):
        raise ValueError(
            "sequences must be a list of arrays (one per sequence), got "
            f"{type(sequences).__name__}"
        )
    arrays = [np.asarray(s) for s in sequences]
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "biuf":
            raise ValueError(f"sequences must hold numbers, got dtype {a.dtype} in sequence {i}")
    dims = {a.ndim for a in arrays}
    if not dims <= {1, 2} or len(dims) > 1:
        found = sorted(dims)
        raise ValueError(
            "sequences must all be 1-D (steps,) or all 2-D (steps, features), got "
            f"arrays of {found} dimensions"
        )
    features = {a.shape[1:] for a in arrays}
    if len(features) > 1:
        raise ValueError(
            "the sequences' steps must all have the same number of features, got "
            f"{sorted(f[0] for f in features)}"
        )
    return arrays


def _padded_dtype(arrays, dtype, value):
    if dtype is not None:
        return np.dtype(dtype)
    found = np.result_type(*[a.dtype for a in arrays]) if arrays else np.dtype(np.int64)
    if found.kind == "b":
        found = np.dtype(np.int64)
    if found.kind in "iu" and not float(value).is_integer():
        return np.dtype(np.float64)  # a padding value that is not an id
    return found


def pad_sequences(
    sequences, maxlen=None, *, dtype=None, padding="post", truncating="post", value=0
):
    """Sequences of different lengths as one array, padded or cut to one number of steps.

    Parameters
    ----------
    sequences : list of array-like
        The sequences: all 1-D (token ids, or one number per step) or all 2-D
        ``(steps, features)`` with the same number of features.
    maxlen : int, default=None
        The number of steps of the result; ``None``: the longest sequence's.
    dtype : dtype, default=None
        The result's dtype; ``None``: the sequences' common dtype (integer ids
        stay integers, unless ``value`` is not a whole number).
    padding : {'post', 'pre'}, default='post'
        Where a shorter sequence is padded: after its steps or before them.
        (Keras's ``pad_sequences`` pads before by default; its
        ``TextVectorization`` after.)
    truncating : {'post', 'pre'}, default='post'
        Which steps of a longer sequence are cut: its last ones (keeping the
        first ``maxlen``) or its first ones.
    value : float, default=0
        The padding value: give the same to an estimator's ``padding_value``.

    Returns
    -------
    padded : ndarray of shape (n_sequences, maxlen) or (n_sequences, maxlen, n_features)

    See Also
    --------
    padding_mask : Which steps of a padded array are real.
    TextVectorizer : Raw text to padded token ids.

    Examples
    --------
    >>> from sknet.text import pad_sequences
    >>> pad_sequences([[5, 3, 9], [7], [2, 4]])
    array([[5, 3, 9],
           [7, 0, 0],
           [2, 4, 0]])
    >>> pad_sequences([[5, 3, 9], [7]], maxlen=2, padding="pre", truncating="pre")
    array([[3, 9],
           [0, 7]])
    """
    _check_side("padding", padding)
    _check_side("truncating", truncating)
    if not isinstance(value, Real):
        raise ValueError(f"value must be a number, got {value!r}")
    if maxlen is not None and (
        isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)) or maxlen < 0
    ):
        raise ValueError(f"maxlen must be None or a non-negative integer, got {maxlen!r}")
    arrays = _as_sequences(sequences)
    width = max((len(a) for a in arrays), default=0) if maxlen is None else int(maxlen)
    features = arrays[0].shape[1:] if arrays else ()
    padded = np.full(
        (len(arrays), width) + features, value, dtype=_padded_dtype(arrays, dtype, value)
    )
    for row, a in zip(padded, arrays):
        if len(a) > width:
            a = a[:width] if truncating == "post" else a[len(a) - width :]
        if len(a):
            if padding == "post":
                row[: len(a)] = a
            else:
                row[width - len(a) :] = a
    return padded


def padding_mask(X, padding_value=0):
    """Which steps of padded sequences are real: ``True`` for a real step, ``False`` for padding.

    Parameters
    ----------
    X : array of shape (n_sequences, steps) or (n_sequences, steps, n_features)
        Padded sequences: token ids, or steps of features (NumPy or CuPy).
    padding_value : float, default=0
        A token id equal to it is padding; a step is padding when all its
        features equal it.

    Returns
    -------
    mask : array of bool of shape (n_sequences, steps)
        The convention of sknet's masked layers, and what an estimator with
        ``padding_value`` derives from its input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.text import padding_mask
    >>> padding_mask(np.array([[5, 3, 0], [7, 0, 0]]))
    array([[ True,  True, False],
           [ True, False, False]])
    """
    if X.ndim == 2:
        return X != padding_value
    if X.ndim == 3:
        return ~(X == padding_value).all(axis=-1)
    raise ValueError(
        "X must hold padded sequences, (n, steps) or (n, steps, features), got an array "
        f"of shape {tuple(X.shape)}"
    )


def sequence_lengths(X, padding_value=0):
    """Each row's number of steps up to its last real one (``0`` for a row of padding only).

    What a padded array can be cut to without losing a real step: padding
    between or before real steps counts, padding after the last does not.
    """
    real = padding_mask(X, padding_value)
    steps = real.shape[1]
    if steps == 0:
        return real.sum(axis=1)
    last = steps - real[:, ::-1].argmax(axis=1)  # argmax: the first real step from the end
    return last * real.any(axis=1)

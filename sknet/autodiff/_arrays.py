"""Whole-array primitives: matrix products, reductions, shapes, indexing, joins."""

import warnings

import numpy as np

from sknet.autodiff._elementwise import _xp, multiply, square, subtract
from sknet.autodiff._variable import Variable, is_sparse, record, unbroadcast, value


# -- matrix product --------------------------------------------------------------
def matmul(a, b):
    """``a @ b`` with NumPy's rules (1-D operands, stacks of matrices broadcast).

    A sparse matrix on the left (a first layer's sparse input) is data: the
    gradient goes to ``b`` only.
    """
    da, db = value(a), value(b)
    y = da @ db
    if is_sparse(da):
        return record(y, (a, b), lambda g, needs: (None, da.T @ g if needs[1] else None))

    def vjp(g, needs):
        # A 1-D operand is a matrix of one row (left) or one column (right), as
        # NumPy treats it; the output gradient gets the axes its product dropped.
        A = da.reshape(1, -1) if da.ndim == 1 else da
        B = db.reshape(-1, 1) if db.ndim == 1 else db
        stacks = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        G = g.reshape(stacks + (A.shape[-2], B.shape[-1]))
        ga = gb = None
        if needs[0]:
            ga = unbroadcast(G @ B.swapaxes(-1, -2), A.shape).reshape(da.shape)
        if needs[1]:
            gb = unbroadcast(A.swapaxes(-1, -2) @ G, B.shape).reshape(db.shape)
        return ga, gb

    return record(y, (a, b), vjp)


# -- reductions ------------------------------------------------------------------
def _axes(axis, ndim):
    """``axis`` (None, an int or a tuple of ints) as a tuple of axes in ``[0, ndim)``."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    for ax in axes:
        if not -ndim <= int(ax) < ndim:
            raise ValueError(f"axis {axis!r} is out of bounds for an array of dimension {ndim}")
    normalized = tuple(int(ax) % ndim for ax in axes)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"axis {axis!r} names an axis twice")
    return normalized


def _expand(g, shape, axes, keepdims):
    """``g`` of a reduction over ``axes`` reshaped to broadcast against ``shape``."""
    if keepdims:
        return g
    return g.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))


def sum(a, axis=None, keepdims=False):  # noqa: A001 (the array function's name)
    """Sum over ``axis`` (all axes by default)."""
    xp, da = _xp(a), value(a)
    axes = _axes(axis, da.ndim)

    def vjp(g, needs):
        return (xp.broadcast_to(_expand(g, da.shape, axes, keepdims), da.shape),)

    return record(da.sum(axis=axes, keepdims=keepdims), (a,), vjp)


def mean(a, axis=None, keepdims=False):
    """Mean over ``axis`` (all axes by default).

    Over no elements it is NaN, with NumPy's RuntimeWarning ("Mean of empty slice").
    """
    da = value(a)
    axes = _axes(axis, da.ndim)
    count = _count(da.shape, axes)
    if not count:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
    return multiply(sum(a, axes, keepdims), 1.0 / count if count else np.nan)


def var(a, axis=None, keepdims=False):
    """Variance over ``axis`` (all axes by default), dividing by the count (``ddof=0``).

    Over no elements it is NaN, with NumPy's RuntimeWarning ("Degrees of
    freedom <= 0 for slice").
    """
    da = value(a)
    axes = _axes(axis, da.ndim)
    if not _count(da.shape, axes):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        return multiply(sum(a, axes, keepdims), np.nan)
    centered = subtract(a, mean(a, axes, keepdims=True))
    return mean(square(centered), axes, keepdims)


def _count(shape, axes):
    """How many elements a reduction over ``axes`` of ``shape`` takes each time."""
    return int(np.prod([shape[ax] for ax in axes]))


def max(a, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; tied maxima share the gradient equally.

    NaN wins, as in :func:`numpy.max`; the NaN elements then share the gradient.
    """
    return _extreme(a, axis, keepdims, "max")


def min(a, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``; tied minima share the gradient equally.

    NaN wins, as in :func:`numpy.min`; the NaN elements then share the gradient.
    """
    return _extreme(a, axis, keepdims, "min")


def _extreme(a, axis, keepdims, which):
    da = value(a)
    axes = _axes(axis, da.ndim)
    y = getattr(da, which)(axis=axes, keepdims=True)

    def vjp(g, needs):
        # The elements equal to the result; where that is NaN (as in NumPy, a NaN
        # wins), the NaN elements.
        hits = (da == y) | ((da != da) & (y != y))
        ties = hits.sum(axis=axes, keepdims=True, dtype=g.dtype)
        share = _expand(g, da.shape, axes, keepdims) / ties
        return (hits * share,)

    return record(y if keepdims else y.reshape(_reduced(da.shape, axes)), (a,), vjp)


def _reduced(shape, axes):
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def logsumexp(a, axis=None, keepdims=False):
    """``log(sum(exp(a)))`` over ``axis``, computed stably.

    With infinities it gives the limits, as SciPy's: ``inf`` where an element is
    ``inf``, ``-inf`` where all are ``-inf``; its gradient (the softmax of ``a``)
    is NaN there.
    """
    xp, da = _xp(a), value(a)
    axes = _axes(axis, da.ndim)
    top = da.max(axis=axes, keepdims=True)
    top = xp.where(xp.isfinite(top), top, 0)  # an infinite maximum would give inf - inf
    shifted = xp.exp(da - top)
    total = shifted.sum(axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):  # log(0): every element is -inf
        y = xp.log(total) + top

    def vjp(g, needs):
        return (_expand(g, da.shape, axes, keepdims) * (shifted / total),)

    return record(y if keepdims else y.reshape(_reduced(da.shape, axes)), (a,), vjp)


def softmax(a, axis=-1):
    """``exp(a) / sum(exp(a))`` along ``axis``."""
    xp, da = _xp(a), value(a)
    y = xp.exp(da - da.max(axis=axis, keepdims=True))
    y /= y.sum(axis=axis, keepdims=True)

    def vjp(g, needs):
        gy = g * y
        return (gy - y * gy.sum(axis=axis, keepdims=True),)

    return record(y, (a,), vjp)


def log_softmax(a, axis=-1):
    """``a - logsumexp(a)`` along ``axis``."""
    return subtract(a, logsumexp(a, axis=axis, keepdims=True))


# -- shapes ----------------------------------------------------------------------
def reshape(a, shape):
    """The same values in a new shape."""
    da = value(a)
    return record(da.reshape(shape), (a,), lambda g, needs: (g.reshape(da.shape),))


def transpose(a, axes=None):
    """Axes permuted (reversed by default)."""
    da = value(a)
    axes = tuple(reversed(range(da.ndim))) if axes is None else tuple(axes)
    y = da.transpose(axes)  # NumPy's own checks of ``axes``
    # The inverse of the permutation of the normalized axes (-1 is the last one).
    inverse = tuple(int(i) for i in np.argsort([int(ax) % da.ndim for ax in axes]))
    return record(y, (a,), lambda g, needs: (g.transpose(inverse),))


def swapaxes(a, axis1, axis2):
    """Two axes exchanged."""
    value(a).swapaxes(axis1, axis2)  # NumPy's own checks of the axes (a view: no copy)
    axes = list(range(value(a).ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, axes)


def broadcast_to(a, shape):
    """``a`` repeated along broadcast axes to ``shape``."""
    xp, da = _xp(a), value(a)
    return record(xp.broadcast_to(da, shape), (a,), lambda g, needs: (unbroadcast(g, da.shape),))


def expand_dims(a, axis):
    """A new axis of length 1 at ``axis``."""
    return reshape(a, _xp(a).expand_dims(value(a), axis).shape)


def squeeze(a, axis=None):
    """Axes of length 1 removed."""
    return reshape(a, _xp(a).squeeze(value(a), axis).shape)


# -- indexing and joins ------------------------------------------------------------
def getitem(a, key):
    """``a[key]``: slices, integers, ``None``, ``...``, integer or boolean arrays.

    Integer arrays may repeat an index; the gradient then adds up at that index.
    """
    xp, da = _xp(a), value(a)
    parts = key if isinstance(key, tuple) else (key,)
    if any(type(part) is Variable for part in parts):
        raise TypeError("Indices must be plain integer or boolean arrays, not recorded ones")
    basic = all(
        part is None or part is Ellipsis or isinstance(part, (int, slice)) for part in parts
    )

    def vjp(g, needs):
        grad = xp.zeros(da.shape, dtype=g.dtype)
        if basic:  # each element of a is picked at most once
            grad[key] = g
        else:  # repeated indices: scatter with add
            xp.add.at(grad, key, g)
        return (grad,)

    return record(da[key], (a,), vjp)


def concatenate(arrays, axis=0):
    """Arrays joined along an existing ``axis`` (``None``: flattened first, as NumPy does)."""
    if axis is None:
        arrays, axis = [reshape(x, (-1,)) for x in arrays], 0
    xp = _xp(*arrays)
    datas = [value(x) for x in arrays]
    y = xp.concatenate(datas, axis=axis)  # NumPy's own checks of the shapes and axis
    bounds = np.cumsum([d.shape[axis] for d in datas])[:-1].tolist()

    def vjp(g, needs):
        return tuple(xp.split(g, bounds, axis=axis))

    return record(y, tuple(arrays), vjp)


def stack(arrays, axis=0):
    """Arrays of one shape joined along a new ``axis``."""
    return concatenate([expand_dims(x, axis) for x in arrays], axis=axis)

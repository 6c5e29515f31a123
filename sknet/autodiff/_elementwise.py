"""Element-wise primitives: arithmetic, math, comparisons, choices, activations.

Binary primitives broadcast like NumPy; their VJPs sum the gradient back over
the broadcast axes. Comparisons return plain boolean arrays (they have no
gradient) for :func:`where`.
"""

import math

from sknet.autodiff._variable import record, shape_of, unbroadcast, value
from sknet.backend import ACTIVATIONS, get_array_module


def _xp(*inputs):
    for x in inputs:
        x = value(x)
        if hasattr(x, "__array_namespace__") or hasattr(x, "shape"):
            return get_array_module(x)
    return get_array_module(None)


# -- arithmetic --------------------------------------------------------------
def add(a, b):
    """``a + b``."""
    sa, sb = shape_of(a), shape_of(b)
    return record(
        value(a) + value(b),
        (a, b),
        lambda g, needs: (unbroadcast(g, sa), unbroadcast(g, sb)),
    )


def subtract(a, b):
    """``a - b``."""
    sa, sb = shape_of(a), shape_of(b)
    return record(
        value(a) - value(b),
        (a, b),
        lambda g, needs: (unbroadcast(g, sa), unbroadcast(-g, sb) if needs[1] else None),
    )


def multiply(a, b):
    """``a * b``."""
    da, db = value(a), value(b)

    def vjp(g, needs):
        return (
            unbroadcast(g * db, shape_of(a)) if needs[0] else None,
            unbroadcast(g * da, shape_of(b)) if needs[1] else None,
        )

    return record(da * db, (a, b), vjp)


def divide(a, b):
    """``a / b``."""
    da, db = value(a), value(b)
    y = da / db

    def vjp(g, needs):
        ga = g / db
        return (
            unbroadcast(ga, shape_of(a)) if needs[0] else None,
            unbroadcast(-ga * y, shape_of(b)) if needs[1] else None,
        )

    return record(y, (a, b), vjp)


def power(a, b):
    """``a ** b``.

    A recorded exponent needs a base ``a >= 0``: its gradient is
    ``a ** b * log(a)``, taken as 0 where ``a == 0`` (its limit for ``b > 0``)
    and NaN where ``a < 0``.
    """
    da, db = value(a), value(b)
    y = da**db

    def vjp(g, needs):
        ga = gb = None
        if needs[0]:
            ga = unbroadcast(g * db * da ** (db - 1), shape_of(a))
        if needs[1]:
            gb = unbroadcast(g * y * _log_base(da), shape_of(b))
        return ga, gb

    return record(y, (a, b), vjp)


def _log_base(a):
    """``log(a)`` of a power's base, but 0 where ``a == 0`` (``a ** b * log(a)`` tends to 0)."""
    if not hasattr(a, "dtype"):  # a Python number: no array (nor its dtype) to promote
        return math.log(a) if a > 0 else 0.0 if a == 0 else math.nan
    xp = _xp(a)
    return xp.log(xp.where(a == 0, 1, a))


def negative(a):
    """``-a``."""
    return record(-value(a), (a,), lambda g, needs: (-g,))


# -- math ----------------------------------------------------------------------
def exp(a):
    """``e ** a``."""
    y = _xp(a).exp(value(a))
    return record(y, (a,), lambda g, needs: (g * y,))


def log(a):
    """Natural logarithm."""
    da = value(a)
    return record(_xp(a).log(da), (a,), lambda g, needs: (g / da,))


def log1p(a):
    """``log(1 + a)``, accurate for small ``a``."""
    da = value(a)
    return record(_xp(a).log1p(da), (a,), lambda g, needs: (g / (1 + da),))


def sqrt(a):
    """Square root."""
    y = _xp(a).sqrt(value(a))
    return record(y, (a,), lambda g, needs: (g / (2 * y),))


def square(a):
    """``a * a``."""
    da = value(a)
    return record(da * da, (a,), lambda g, needs: (2 * da * g,))


def absolute(a):
    """``|a|`` (gradient 0 at 0)."""
    xp, da = _xp(a), value(a)
    return record(xp.abs(da), (a,), lambda g, needs: (g * xp.sign(da),))


def sin(a):
    """Sine."""
    xp, da = _xp(a), value(a)
    return record(xp.sin(da), (a,), lambda g, needs: (g * xp.cos(da),))


def cos(a):
    """Cosine."""
    xp, da = _xp(a), value(a)
    return record(xp.cos(da), (a,), lambda g, needs: (-g * xp.sin(da),))


def softplus(a):
    """``log(1 + e ** a)``, without overflow."""
    xp, da = _xp(a), value(a)
    y = xp.logaddexp(0, da).astype(da.dtype, copy=False)
    return record(y, (a,), lambda g, needs: (g * _logistic(xp, da),))


def clip(a, a_min, a_max):
    """``a`` limited to ``[a_min, a_max]``, as :func:`numpy.clip` (``None``: no bound).

    It is ``minimum(maximum(a, a_min), a_max)``: the bounds broadcast against
    ``a`` and may be recorded too; the gradient goes to ``a`` where it lies
    within the bounds (or on one), and to the bound it crossed elsewhere.
    """
    y = a if a_min is None else maximum(a, a_min)
    return y if a_max is None else minimum(y, a_max)


# -- choices -------------------------------------------------------------------
def maximum(a, b):
    """Element-wise maximum, NaN where either operand is NaN (as :func:`numpy.maximum`).

    The gradient goes to the operand the maximum picked: to ``a`` where
    ``a >= b``, to the NaN operand where one is NaN, and to ``a`` on ties and
    where both are NaN.
    """
    da, db = value(a), value(b)
    return _choose((da >= db) | (da != da), a, b, _xp(a, b).maximum(da, db))


def minimum(a, b):
    """Element-wise minimum, NaN where either operand is NaN (as :func:`numpy.minimum`).

    The gradient goes to the operand the minimum picked: to ``a`` where
    ``a <= b``, to the NaN operand where one is NaN, and to ``a`` on ties and
    where both are NaN.
    """
    da, db = value(a), value(b)
    return _choose((da <= db) | (da != da), a, b, _xp(a, b).minimum(da, db))


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (``condition`` has no gradient)."""
    return _choose(value(condition), a, b)


def _choose(mask, a, b, y=None):
    """Record ``y`` (by default ``where(mask, a, b)``), whose gradient goes where ``mask`` says."""
    xp = _xp(a, b, mask)
    if y is None:
        y = xp.where(mask, value(a), value(b))

    def vjp(g, needs):
        zero = xp.zeros((), dtype=g.dtype)
        return (
            unbroadcast(xp.where(mask, g, zero), shape_of(a)) if needs[0] else None,
            unbroadcast(xp.where(mask, zero, g), shape_of(b)) if needs[1] else None,
        )

    return record(y, (a, b), vjp)


# -- comparisons: plain boolean arrays -----------------------------------------
def greater(a, b):
    """``a > b`` as a boolean array (no gradient)."""
    return value(a) > value(b)


def greater_equal(a, b):
    """``a >= b`` as a boolean array (no gradient)."""
    return value(a) >= value(b)


def less(a, b):
    """``a < b`` as a boolean array (no gradient)."""
    return value(a) < value(b)


def less_equal(a, b):
    """``a <= b`` as a boolean array (no gradient)."""
    return value(a) <= value(b)


def equal(a, b):
    """``a == b`` as a boolean array (no gradient)."""
    return value(a) == value(b)


def not_equal(a, b):
    """``a != b`` as a boolean array (no gradient)."""
    return value(a) != value(b)


def sign(a):
    """-1, 0 or 1 per element (no gradient)."""
    return _xp(a).sign(value(a))


# -- activations: the kernels of the built-in layers ---------------------------
def activation(name, a):
    """The built-in activation ``name`` (``'relu'``, ``'tanh'``, ``'logistic'``,
    ``'identity'``, ``'leaky_relu'``, ``'elu'``, ``'gelu'``, ``'silu'``), with the
    same kernels as :class:`~sknet.layers.Dense` and :class:`~sknet.layers.Activation`."""
    try:
        kernels = ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}"
        ) from None
    xp, da = _xp(a), value(a)
    z = _kernel_operand(xp, da)
    yz = kernels.forward(xp, z, xp.empty_like(z))

    def vjp(g, needs):
        gz = xp.asarray(g).reshape(z.shape)
        return (kernels.backward(xp, gz, yz, z, xp.empty_like(gz)).reshape(shape_of(da)),)

    return record(yz.reshape(shape_of(da)), (a,), vjp)


def relu(a):
    """``max(a, 0)``."""
    return activation("relu", a)


def tanh(a):
    """Hyperbolic tangent."""
    return activation("tanh", a)


def sigmoid(a):
    """The logistic function ``1 / (1 + e ** -a)``, without overflow."""
    return activation("logistic", a)


def _logistic(xp, a):
    z = _kernel_operand(xp, a)
    return ACTIVATIONS["logistic"].forward(xp, z, xp.empty_like(z)).reshape(shape_of(a))


def _kernel_operand(xp, a):
    """``a`` as an array the in-place activation kernels can write: 0-d values become 1-D.

    (NumPy's ufuncs turn 0-d arrays into scalars, which ``out=`` cannot take.)
    """
    a = xp.asarray(a)
    return a.reshape(1) if a.ndim == 0 else a

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
    """``a ** b`` (a variable exponent needs a positive base)."""
    da, db = value(a), value(b)
    y = da**db

    def vjp(g, needs):
        ga = gb = None
        if needs[0]:
            ga = unbroadcast(g * db * da ** (db - 1), shape_of(a))
        if needs[1]:
            log_a = _xp(da).log(da) if hasattr(da, "dtype") else math.log(da)
            gb = unbroadcast(g * y * log_a, shape_of(b))
        return ga, gb

    return record(y, (a, b), vjp)


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
    """``a`` limited to ``[a_min, a_max]`` (constant bounds; gradient 0 outside)."""
    xp, da = _xp(a), value(a)
    y = xp.clip(da, a_min, a_max)
    return record(y, (a,), lambda g, needs: (g * (y == da),))


# -- choices -------------------------------------------------------------------
def maximum(a, b):
    """Element-wise maximum (ties send the gradient to ``a``)."""
    return _choose(value(a) >= value(b), a, b)


def minimum(a, b):
    """Element-wise minimum (ties send the gradient to ``a``)."""
    return _choose(value(a) <= value(b), a, b)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (``condition`` has no gradient)."""
    return _choose(value(condition), a, b)


def _choose(mask, a, b):
    xp = _xp(a, b, mask)
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
    y = kernels.forward(xp, da, xp.empty_like(da))
    return record(y, (a,), lambda g, needs: (kernels.backward(xp, g, y, da, xp.empty_like(g)),))


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
    return ACTIVATIONS["logistic"].forward(xp, a, xp.empty_like(a))

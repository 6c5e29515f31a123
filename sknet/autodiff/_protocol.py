"""Operators and NumPy's dispatch protocols for :class:`Variable`.

Operators (``+``, ``@``, ``x[i]``, ``x.T``, ``x.sum()``...) call the
primitives. NumPy functions and ufuncs applied to a variable dispatch to them
too (``np.exp(x)`` is :func:`sknet.autodiff.exp`); any other NumPy function
raises a TypeError naming it, so an unsupported operation can never produce a
wrong gradient. (CuPy's functions do not dispatch: with CuPy arrays, call the
functions of :mod:`sknet.autodiff`.)
"""

import numpy as np

from sknet.autodiff import _arrays as arr
from sknet.autodiff import _elementwise as ew
from sknet.autodiff import _kernels  # noqa: F401 (listed in the docs)
from sknet.autodiff._variable import Variable, record

UFUNCS = {
    np.add: ew.add,
    np.subtract: ew.subtract,
    np.multiply: ew.multiply,
    np.true_divide: ew.divide,
    np.power: ew.power,
    np.negative: ew.negative,
    np.exp: ew.exp,
    np.log: ew.log,
    np.log1p: ew.log1p,
    np.sqrt: ew.sqrt,
    np.square: ew.square,
    np.absolute: ew.absolute,
    np.sin: ew.sin,
    np.cos: ew.cos,
    np.tanh: ew.tanh,
    np.maximum: ew.maximum,
    np.minimum: ew.minimum,
    np.matmul: arr.matmul,
    np.greater: ew.greater,
    np.greater_equal: ew.greater_equal,
    np.less: ew.less,
    np.less_equal: ew.less_equal,
    np.equal: ew.equal,
    np.not_equal: ew.not_equal,
    np.sign: ew.sign,
}

FUNCTIONS = {
    np.sum: arr.sum,
    np.mean: arr.mean,
    np.max: arr.max,
    np.amax: arr.max,
    np.min: arr.min,
    np.amin: arr.min,
    np.reshape: arr.reshape,
    np.transpose: arr.transpose,
    np.swapaxes: arr.swapaxes,
    np.broadcast_to: arr.broadcast_to,
    np.expand_dims: arr.expand_dims,
    np.squeeze: arr.squeeze,
    np.concatenate: arr.concatenate,
    np.stack: arr.stack,
    np.where: ew.where,
    np.clip: ew.clip,
    np.matmul: arr.matmul,
}


def _unsupported(name):
    return TypeError(
        f"{name} is not differentiable by sknet.autodiff; write the computation with "
        "the functions listed in sknet.autodiff (or give the layer a backward method)"
    )


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    primitive = UFUNCS.get(ufunc)
    if primitive is None or method != "__call__" or kwargs:
        detail = f".{method}" if method != "__call__" else ""
        extra = f" with {sorted(kwargs)}" if kwargs and primitive is not None else ""
        raise _unsupported(f"numpy.{ufunc.__name__}{detail}{extra}")
    return primitive(*inputs)


def _array_function(self, func, types, args, kwargs):
    primitive = FUNCTIONS.get(func)
    if primitive is None:
        raise _unsupported(f"{func.__module__}.{func.__name__}")
    return primitive(*args, **kwargs)


def _reflected(primitive):
    return lambda self, other: primitive(other, self)


def install():
    """Give :class:`Variable` its operators, methods and NumPy protocols."""
    V = Variable
    V.__array_ufunc__ = _array_ufunc
    V.__array_function__ = _array_function
    V.__add__, V.__radd__ = ew.add, _reflected(ew.add)
    V.__sub__, V.__rsub__ = ew.subtract, _reflected(ew.subtract)
    V.__mul__, V.__rmul__ = ew.multiply, _reflected(ew.multiply)
    V.__truediv__, V.__rtruediv__ = ew.divide, _reflected(ew.divide)
    V.__pow__, V.__rpow__ = ew.power, _reflected(ew.power)
    V.__matmul__, V.__rmatmul__ = arr.matmul, _reflected(arr.matmul)
    V.__neg__ = ew.negative
    V.__abs__ = ew.absolute
    V.__pos__ = lambda self: self
    V.__gt__, V.__ge__ = ew.greater, ew.greater_equal
    V.__lt__, V.__le__ = ew.less, ew.less_equal
    V.__eq__, V.__ne__ = ew.equal, ew.not_equal
    V.__getitem__ = arr.getitem
    V.T = property(lambda self: arr.transpose(self))
    V.reshape = lambda self, *shape: arr.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
    )
    V.transpose = lambda self, *axes: arr.transpose(
        self, (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes) or None
    )
    V.sum = lambda self, axis=None, keepdims=False: arr.sum(self, axis, keepdims)
    V.mean = lambda self, axis=None, keepdims=False: arr.mean(self, axis, keepdims)
    V.max = lambda self, axis=None, keepdims=False: arr.max(self, axis, keepdims)
    V.min = lambda self, axis=None, keepdims=False: arr.min(self, axis, keepdims)
    V.__setitem__ = _no_setitem
    _install_methods(V)


def _astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    """A cast: to another floating dtype with its gradient cast back; else a plain array."""
    dtype = np.dtype(dtype)
    source = self.data.dtype
    if dtype == source:
        return self
    if dtype.kind != "f":  # integers, booleans: values without a gradient, as comparisons
        return self.data.astype(dtype)
    return record(self.data.astype(dtype), (self,), lambda g, needs: (g.astype(source),))


def _dot(self, other):
    if max(self.ndim, getattr(other, "ndim", 0)) > 2:
        raise TypeError(
            "Variable.dot of arrays of more than 2 dimensions is not supported (numpy.dot's "
            "rules differ from matmul's there); use the @ operator (sknet.autodiff.matmul)"
        )
    return arr.matmul(self, other)


def _plain(name):
    """A method whose result has no gradient (indices, booleans): the values of ``.data``."""
    return lambda self, *args, **kwargs: getattr(self.data, name)(*args, **kwargs)


def _install_methods(V):
    """The common NumPy array methods, recorded (or plain where they have no gradient)."""
    V.astype = _astype
    V.copy = lambda self, order="C": record(self.data.copy(), (self,), lambda g, needs: (g,))
    V.ravel = V.flatten = lambda self, order="C": arr.reshape(self, (-1,))
    V.squeeze = lambda self, axis=None: arr.squeeze(self, axis)
    V.swapaxes = arr.swapaxes
    V.clip = lambda self, min=None, max=None: ew.clip(self, min, max)
    V.var = lambda self, axis=None, keepdims=False: arr.var(self, axis, keepdims)
    V.std = lambda self, axis=None, keepdims=False: ew.sqrt(arr.var(self, axis, keepdims))
    V.dot = _dot
    V.itemsize = property(lambda self: self.data.itemsize)
    V.nbytes = property(lambda self: self.data.nbytes)
    for name in ("argmax", "argmin", "argsort", "nonzero", "any", "all"):
        setattr(V, name, _plain(name))
    V.__getattr__ = _missing_attribute


class UnsupportedArrayMethod(TypeError, AttributeError):
    """A NumPy array method a recorded array lacks: a TypeError (and for hasattr, False)."""


#: Array methods a recorded array lacks, by why, with what to do instead.
_IN_PLACE = {"fill", "sort", "put", "resize", "itemset", "setfield", "partition", "setflags"}
_DROPS_GRADIENT = {"tolist", "item", "tobytes", "tofile", "dump", "dumps", "view", "getfield"}
_MEMORY = {"flags", "strides", "base", "ctypes", "flat"}


def _missing_attribute(self, name):
    if name.startswith("__") or not hasattr(np.ndarray, name):
        raise AttributeError(f"'Variable' object has no attribute {name!r}")
    if name in _IN_PLACE:
        why = (
            "it would write in place, and the record would be wrong; build a new array "
            "(sknet.autodiff.where, concatenate)"
        )
    elif name in _DROPS_GRADIENT:
        why = "it would drop the gradient; use .data for a value that needs no gradient"
    elif name in _MEMORY:
        why = "it is about the memory of the array inside, which is X.data"
    else:
        why = (
            "it is not differentiable by sknet.autodiff; write it with the operators and "
            "the functions listed in sknet.autodiff, or give the layer a backward method"
        )
    raise UnsupportedArrayMethod(
        f"X.{name} is not available on a recorded array (a layer's input or parameters "
        f"while it trains, or a loss's Z): {why}. The methods a recorded array has: "
        f"{', '.join(SUPPORTED_METHODS)}"
    )


#: The NumPy array methods and attributes a recorded array has.
SUPPORTED_METHODS = (
    "T", "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "copy", "dot",
    "dtype", "flatten", "itemsize", "max", "mean", "min", "nbytes", "ndim", "nonzero",
    "ravel", "reshape", "shape", "size", "squeeze", "std", "sum", "swapaxes", "transpose",
    "var",
)  # fmt: skip


def _no_setitem(self, key, item):
    raise TypeError(
        "A recorded array cannot be written in place (the record would be wrong); "
        "build a new one, e.g. with sknet.autodiff.where or concatenate"
    )

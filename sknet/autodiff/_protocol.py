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
from sknet.autodiff._variable import Variable

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


def _no_setitem(self, key, item):
    raise TypeError(
        "A recorded array cannot be written in place (the record would be wrong); "
        "build a new one, e.g. with sknet.autodiff.where or concatenate"
    )

"""Automatic differentiation over sknet's arrays (NumPy or CuPy).

What it holds: recorded variables, the differentiable primitives and their
vector-Jacobian products. What it may import: :mod:`sknet.backend` only.

Write a layer's forward pass (or a loss's per-sample value) with these
functions and the usual operators, and sknet derives the backward pass: while
a layer trains, its input and parameters are recorded :class:`Variable`
objects, every function below records what it did, and the layer's backward
runs the recorded vector-Jacobian products newest first. Outside training the
same code runs on plain arrays, unrecorded.

See :class:`sknet.layers.Layer` (a layer without ``backward``),
:class:`sknet.layers.Lambda` and :class:`sknet.losses.Loss` (a loss with only
``value``).

============================  =====================================================
kind                          functions (operators in parentheses)
============================  =====================================================
arithmetic                    ``add`` (+), ``subtract`` (-), ``multiply`` (*),
                              ``divide`` (/), ``power`` (**), ``negative``
math                          ``exp``, ``log``, ``log1p``, ``sqrt``, ``square``,
                              ``absolute`` (abs), ``sin``, ``cos``, ``softplus``,
                              ``clip``
choices                       ``where``, ``maximum``, ``minimum``
comparisons (no gradient)     ``greater`` (>), ``greater_equal`` (>=), ``less`` (<),
                              ``less_equal`` (<=), ``equal`` (==), ``not_equal``
                              (!=), ``sign``
activations                   ``activation(name, x)``, ``relu``, ``tanh``,
                              ``sigmoid``, ``softmax``, ``log_softmax``
matrix product                ``matmul`` (@)
reductions                    ``sum``, ``mean``, ``max``, ``min``, ``logsumexp``
                              (also as methods), ``var``
shapes                        ``reshape``, ``transpose`` (.T), ``swapaxes``,
                              ``broadcast_to``, ``expand_dims``, ``squeeze``
indexing and joins            ``x[...]`` (slices, integers, integer and boolean
                              arrays; repeated indices add up), ``concatenate``,
                              ``stack``
images (channels first)       ``conv2d``, ``max_pool2d``, ``avg_pool2d``
array methods                 ``x.astype``, ``copy``, ``ravel``, ``flatten``,
                              ``squeeze``, ``swapaxes``, ``clip``, ``dot``,
                              ``var``, ``std`` (and ``argmax``, ``any``... as plain
                              arrays); any other is a TypeError naming it
============================  =====================================================

Binary functions broadcast like NumPy. On NumPy arrays the NumPy functions of
the same names dispatch here too (``np.exp(x)``); anything else raises a
TypeError naming the operation, so no gradient is ever silently wrong.

Examples
--------
>>> import numpy as np
>>> from sknet import autodiff as ad
>>> x = ad.Variable(np.array([1.0, 2.0, 3.0]))
>>> y = ad.sum(ad.square(x) * 0.5)
>>> ad.gradients(y, np.array(1.0), [x])[0]
array([1., 2., 3.])
"""

from sknet.autodiff import _protocol
from sknet.autodiff._arrays import (
    broadcast_to,
    concatenate,
    expand_dims,
    getitem,
    log_softmax,
    logsumexp,
    matmul,
    max,
    mean,
    min,
    reshape,
    softmax,
    squeeze,
    stack,
    sum,
    swapaxes,
    transpose,
    var,
)
from sknet.autodiff._elementwise import (
    absolute,
    activation,
    add,
    clip,
    cos,
    divide,
    equal,
    exp,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    relu,
    sigmoid,
    sign,
    sin,
    softplus,
    sqrt,
    square,
    subtract,
    tanh,
    where,
)
from sknet.autodiff._kernels import avg_pool2d, conv2d, max_pool2d
from sknet.autodiff._variable import Variable, gradients, is_variable, value

_protocol.install()


__all__ = [
    "Variable",
    "absolute",
    "activation",
    "add",
    "avg_pool2d",
    "broadcast_to",
    "clip",
    "concatenate",
    "conv2d",
    "cos",
    "divide",
    "equal",
    "exp",
    "expand_dims",
    "getitem",
    "gradients",
    "greater",
    "greater_equal",
    "is_variable",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log_softmax",
    "logsumexp",
    "matmul",
    "max",
    "max_pool2d",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "not_equal",
    "power",
    "relu",
    "reshape",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "softplus",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "subtract",
    "sum",
    "swapaxes",
    "tanh",
    "transpose",
    "value",
    "var",
    "where",
]

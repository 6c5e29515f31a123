"""Recorded arrays, and the backward pass over what they recorded.

A :class:`Variable` wraps a backend array (NumPy or CuPy) and remembers the
primitive that made it: its parent variables and the vector-Jacobian product
(VJP) of that primitive. :func:`gradients` walks the record backward, newest
first, and sums each variable's gradient contributions.

Only variables are recorded: an operation whose inputs are all plain arrays
returns a plain array, so the same forward code runs unrecorded (and at full
speed) for prediction.
"""

import itertools

import numpy as np

# Creation order: a variable is always made after its parents, so visiting
# variables newest first is a valid order for the backward pass.
_creation = itertools.count()


class Variable:
    """A backend array whose operations are recorded for differentiation.

    Variables are made by sknet (for a layer's input and parameters while it
    trains, for a loss's raw outputs) and by the functions of
    :mod:`sknet.autodiff` applied to them; user code never needs to make one.
    They support the arithmetic operators, ``@``, comparisons, indexing,
    ``.T``, ``.shape``, ``.dtype``, ``.ndim``, ``.size``, ``.itemsize`` and
    ``.nbytes``, and the methods ``reshape``, ``transpose``, ``swapaxes``,
    ``squeeze``, ``ravel``, ``flatten``, ``copy``, ``astype`` (to another
    floating dtype, its gradient cast back; to integers or booleans, plain
    values), ``clip``, ``dot`` (up to 2-D), ``sum``, ``mean``, ``max``,
    ``min``, ``var`` and ``std``; ``argmax``, ``argmin``, ``argsort``,
    ``nonzero``, ``any`` and ``all`` give plain arrays (no gradient). Any
    other NumPy array method is a TypeError naming it and what to use instead.

    Attributes
    ----------
    data : array
        The value: a NumPy or CuPy array.
    """

    __slots__ = ("data", "parents", "vjp", "order")
    # Above NumPy's and CuPy's arrays: ``array + variable`` defers to the variable.
    __array_priority__ = 1000.0

    def __init__(self, data, parents=(), vjp=None):
        self.data = data
        self.parents = parents
        self.vjp = vjp
        self.order = next(_creation)

    # -- array attributes -----------------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"Variable(shape={self.shape}, dtype={self.dtype})"

    # -- conversions that would silently drop the gradient -------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "A recorded sknet.autodiff.Variable cannot become a plain array: its "
            "gradient would be lost. Use the functions of sknet.autodiff on it, "
            "or .data for a value that needs no gradient."
        )

    def __bool__(self):
        raise TypeError(
            "The truth value of a recorded array is not defined while the forward "
            "pass is recorded; use sknet.autodiff.where for a choice per element."
        )

    def __float__(self):
        raise TypeError("float() of a recorded array would drop its gradient; use .data")

    __int__ = __float__
    __hash__ = object.__hash__


def is_variable(x):
    """Whether ``x`` is a recorded :class:`Variable`."""
    return type(x) is Variable


def is_sparse(x):
    """Whether ``x`` is a SciPy or CuPy sparse matrix."""
    return type(x).__module__.startswith(("scipy.sparse", "cupyx.scipy.sparse"))


def value(x):
    """The array inside a :class:`Variable` (``x`` itself for anything else)."""
    return x.data if type(x) is Variable else x


def read_only(x):
    """``x`` as user code gets it, so that writing into it cannot change what others hold.

    A NumPy array becomes a read-only view (no copy: writing into it raises
    NumPy's "read-only" ValueError); a CuPy array, which cannot be read-only,
    a copy. Variables (never written in place) and sparse matrices come back
    as they are.
    """
    if isinstance(x, np.ndarray):
        if x.flags.writeable:
            x = x.view()
            x.flags.writeable = False
        return x
    if type(x) is Variable or is_sparse(x) or not hasattr(x, "copy"):
        return x
    return x.copy()  # a device array


def writable_again(y, source):
    """``y`` writable when it is a read-only view of the writable array ``source``.

    What user code returned from a :func:`read_only` input (``X`` itself, or
    ``X.reshape(...)``) goes on as writable as its input was: the code after
    it may work in place on what a layer returns.
    """
    if (
        isinstance(y, np.ndarray)
        and isinstance(source, np.ndarray)
        and not y.flags.writeable
        and source.flags.writeable
        and np.may_share_memory(y, source)
    ):
        try:
            y.flags.writeable = True  # allowed when the memory's owner is writable
        except ValueError:
            pass
    return y


def record(data, inputs, vjp):
    """``data`` as the output of a primitive applied to ``inputs``.

    ``vjp(g, needs)`` returns one gradient per input given the output's
    gradient ``g``; ``needs[i]`` says whether input ``i`` is a variable (the
    others' gradients may be ``None``). Without variable inputs nothing is
    recorded and ``data`` comes back as it is.
    """
    parents = tuple(x if type(x) is Variable else None for x in inputs)
    if all(p is None for p in parents):
        return data
    return Variable(data, parents, vjp)


def gradients(output, seed, wrt):
    """The gradients of ``output`` (weighted by ``seed``) with respect to ``wrt``.

    Parameters
    ----------
    output : Variable or array
        What the recorded forward pass returned.
    seed : array
        The gradient of the final scalar with respect to ``output`` (same shape).
    wrt : sequence of Variable
        The variables whose gradients are wanted.

    Returns
    -------
    grads : list of array or None
        One per ``wrt`` entry; ``None`` where the output does not depend on it.

    Raises
    ------
    ValueError
        If ``seed`` does not have the shape of ``output``.
    """
    if type(output) is not Variable:
        return [None] * len(wrt)
    if tuple(shape_of(seed)) != tuple(output.shape):  # it would broadcast into every gradient
        raise ValueError(
            f"seed must have the output's shape {tuple(output.shape)}, got {shape_of(seed)}"
        )
    reached, stack = {}, [output]
    while stack:
        var = stack.pop()
        if id(var) not in reached:
            reached[id(var)] = var
            stack.extend(p for p in var.parents if p is not None)
    keep = {id(w) for w in wrt}
    grads = {id(output): seed}
    for var in sorted(reached.values(), key=_creation_order, reverse=True):
        if var.vjp is None:
            continue
        g = grads.get(id(var)) if id(var) in keep else grads.pop(id(var), None)
        if g is None:
            continue
        needs = tuple(p is not None for p in var.parents)
        for parent, g_parent in zip(var.parents, var.vjp(g, needs)):
            if parent is None or g_parent is None:
                continue
            if g_parent.shape != parent.data.shape:  # a defect of that primitive, never silent
                raise RuntimeError(
                    f"The vector-Jacobian product of a primitive returned a gradient of shape "
                    f"{g_parent.shape} for an input of shape {parent.data.shape}"
                )
            if g_parent.dtype != parent.data.dtype:  # e.g. a NumPy float64 scalar factor
                g_parent = g_parent.astype(parent.data.dtype)
            previous = grads.get(id(parent))
            # Never in place: a VJP may hand the same array to several parents.
            grads[id(parent)] = g_parent if previous is None else previous + g_parent
    return [grads.get(id(w)) for w in wrt]


def _creation_order(var):
    return var.order


def unbroadcast(g, shape):
    """Sum ``g`` over the axes that broadcasting added to an input of ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    if axes:
        g = g.sum(axis=axes)
    return g.reshape(shape)


def shape_of(x):
    """The shape of an array, variable or Python number."""
    return x.shape if hasattr(x, "shape") else np.shape(x)

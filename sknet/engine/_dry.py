"""A network built without its arrays: what the memory estimate counts on.

:func:`~sknet.engine._memory.estimate_memory` must answer for a network too
large to allocate, so it never builds one. It builds a *dry* one: the layers'
``build`` runs as in a fit, but on :data:`DRY_BACKEND`, whose array module
makes every new array a :class:`DryArray` (the shape and dtype of the array
asked for, over one element: zero strides), and with a :class:`DryRandomState`
whose draws are dry arrays too. Parameters, gradients, the flat layout and the
optimizer's state then have their real shapes and ``nbytes`` and take no
memory. What a layer computes from its draws in ``build`` is computed (an
orthogonal initialization takes its square matrix); what a user's ``build``
allocates on the host with NumPy itself, it allocates.

A dry array is for counting and for being written to (the writes go to its
one element); it is never run: :func:`~sknet.engine._probe.probe_network`
gives the measurement a network of real (shared, zero) arrays.
"""

import numpy as np

from sknet.backend._numpy import NumpyBackend


class DryArray(np.ndarray):
    """An array of any shape over one element (zero strides): counted, not allocated.

    ``nbytes`` is the size of the array it stands for; copies and casts are
    dry too, and writes land on its one element.
    """

    def copy(self, order="C"):
        return dry_array(self.shape, self.dtype)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        return dry_array(self.shape, dtype)

    def __deepcopy__(self, memo):
        return dry_array(self.shape, self.dtype)

    def __reduce__(self):
        raise TypeError("a dry array (of the memory estimate) is not pickled")

    def __setitem__(self, key, value):
        # Every element is the one element: write it once (not once per element).
        value = value.view(np.ndarray) if isinstance(value, DryArray) else np.asarray(value)
        if self.size and value.size:
            self.view(np.ndarray).flat[0] = value.flat[0]

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """Elementwise ufuncs and the reductions of equal elements, on the one element.

        Every element of a dry array is the same, so ``np.isfinite(W).all()``
        or ``W * 2`` is computed once and is dry again; anything else (a real
        array among the inputs, a generalized ufunc) is computed as NumPy does.
        """
        result = _dry_ufunc(ufunc, method, inputs, kwargs)
        if result is NotImplemented:
            plain = [x.view(np.ndarray) if isinstance(x, DryArray) else x for x in inputs]
            if out is not None:
                kwargs["out"] = tuple(
                    o.view(np.ndarray) if isinstance(o, DryArray) else o for o in out
                )
            return getattr(ufunc, method)(*plain, **kwargs)
        if out is None:
            return result
        values = result if isinstance(result, tuple) else (result,)
        for target, value in zip(out, values):
            target[...] = value  # a dry target: its one element
        return out[0] if len(out) == 1 else out


#: Reductions whose result over equal elements is the element itself.
_IDEMPOTENT = {np.logical_and, np.logical_or, np.maximum, np.minimum, np.fmax, np.fmin}


def _dry_ufunc(ufunc, method, inputs, kwargs):
    """The result of ``ufunc`` on dry (and scalar) inputs, or NotImplemented."""
    if any(
        isinstance(x, np.ndarray) and not isinstance(x, DryArray) and x.size > 1 for x in inputs
    ):
        return NotImplemented
    if kwargs.get("where", True) is not True or ufunc.signature is not None:
        return NotImplemented
    firsts = [
        x.view(np.ndarray).flat[0] if isinstance(x, DryArray) and x.size else x for x in inputs
    ]
    if method == "__call__":
        shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
        values = ufunc(*firsts, **kwargs)
        if not shape:
            return values
        if isinstance(values, tuple):
            return tuple(dry_full(shape, v) for v in values)
        return dry_full(shape, values)
    if method == "reduce" and len(inputs) == 1 and inputs[0].size:
        (a,) = inputs
        axis = kwargs.get("axis", 0)
        axes = tuple(range(a.ndim)) if axis is None else np.atleast_1d(axis).tolist()
        axes = [d % a.ndim for d in axes]
        count = int(np.prod([a.shape[d] for d in axes]))
        value = np.asarray(firsts[0], dtype=kwargs.get("dtype"))
        if ufunc is np.add:
            value = value * count
        elif ufunc is np.multiply:
            value = value**count
        elif ufunc not in _IDEMPOTENT:
            return NotImplemented
        keep = kwargs.get("keepdims", False)
        shape = tuple(
            1 if d in axes else n for d, n in enumerate(a.shape) if keep or d not in axes
        )
        return value[()] if not shape else dry_full(shape, value[()])
    return NotImplemented


def dry_array(shape, dtype=np.float64):
    """A :class:`DryArray` of ``shape`` and ``dtype`` (its element 0)."""
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    one = np.zeros(1, dtype=np.float64 if dtype is None else dtype)
    view = np.lib.stride_tricks.as_strided(one, shape, (0,) * len(shape), writeable=True)
    return view.view(DryArray)


def dry_full(shape, value):
    """A :class:`DryArray` of ``shape`` whose element is ``value`` (in its dtype)."""
    value = np.asarray(value)
    array = dry_array(shape, value.dtype)
    if array.size:
        array.view(np.ndarray).flat[0] = value
    return array


def is_dry(a):
    return isinstance(a, DryArray)


class _DryNumpy:
    """NumPy, except that the functions making new arrays make dry ones."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=np.float64, order="C", **_):
        return dry_array(shape, dtype)

    zeros = ones = empty

    @staticmethod
    def full(shape, fill_value, dtype=None, order="C", **_):
        return dry_array(shape, np.result_type(fill_value) if dtype is None else dtype)

    @staticmethod
    def empty_like(a, dtype=None, order="K", subok=True, shape=None, **_):
        a = np.asanyarray(a)
        return dry_array(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)

    zeros_like = ones_like = empty_like

    @staticmethod
    def full_like(a, fill_value, dtype=None, **kwargs):
        return _DryNumpy.empty_like(a, dtype)

    @staticmethod
    def asarray(a, dtype=None, order=None, **_):
        """``a`` itself when it is an array of ``dtype`` already; else a dry array of its
        shape (a list or a scalar, small: a real array)."""
        if isinstance(a, np.ndarray):
            if dtype is None or np.dtype(dtype) == a.dtype:
                return a
            return dry_array(a.shape, dtype)
        if hasattr(a, "shape") and hasattr(a, "dtype"):  # a device array: not read
            return dry_array(a.shape, a.dtype if dtype is None else dtype)
        return np.asarray(a, dtype=dtype)

    @staticmethod
    def array(a, dtype=None, copy=True, **_):
        a = np.asanyarray(a)
        return dry_array(a.shape, a.dtype if dtype is None else dtype)


class DryBackend(NumpyBackend):
    """The backend of a dry build: NumPy's kernels, :class:`DryArray` arrays."""

    def __init__(self):
        super(NumpyBackend, self).__init__("dry", _DryNumpy())
        self.kernels = None

    def asarray(self, x, dtype=None):
        return self.xp.asarray(x, dtype=dtype)

    def to_numpy(self, x):
        return x


#: The one dry backend.
DRY_BACKEND = DryBackend()


class DryRandomState(np.random.RandomState):
    """A RandomState whose draws of arrays are dry (float64, or int64 for ``randint``).

    Scalars are drawn as usual (seeds of dropout layers, say).
    """

    def _dry(self, draw, size, args, dtype=np.float64):
        if size is None:
            shapes = [np.shape(a) for a in args]
            if all(s == () for s in shapes):
                return draw()
            size = np.broadcast_shapes(*shapes)
        return dry_array(size, dtype)

    def uniform(self, low=0.0, high=1.0, size=None):
        return self._dry(lambda: super(DryRandomState, self).uniform(low, high), size, (low, high))

    def normal(self, loc=0.0, scale=1.0, size=None):
        return self._dry(
            lambda: super(DryRandomState, self).normal(loc, scale), size, (loc, scale)
        )

    def standard_normal(self, size=None):
        return self._dry(lambda: super(DryRandomState, self).standard_normal(), size, ())

    def random_sample(self, size=None):
        return self._dry(lambda: super(DryRandomState, self).random_sample(), size, ())

    random = random_sample

    def rand(self, *shape):
        return self.random_sample(shape or None)

    def randn(self, *shape):
        return self.standard_normal(shape or None)

    def randint(self, low, high=None, size=None, dtype=int):
        draw = super().randint
        return self._dry(lambda: draw(low, high, dtype=dtype), size, (low, high), np.dtype(dtype))

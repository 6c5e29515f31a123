"""What a layer holds: its parameters, gradients, state and work buffers, on a backend.

:class:`LayerArrays` is a mixin of :class:`~sknet.layers.Layer`: declaring
parameters and state (:meth:`~LayerArrays.add_param`,
:meth:`~LayerArrays.add_state`), reusable buffers, moving and casting every
array, releasing what training allocated, and pickling as NumPy. A layer's
sublayers follow it (``sublayers()``).
"""

import numpy as np

from sknet.backend import get_backend


class LayerArrays:
    """The arrays of a layer (a mixin of Layer; the methods are documented there)."""

    # -- declaring parameters ---------------------------------------------------
    def add_param(self, name, value, *, regularized=False):
        """Declare a trained parameter (in :meth:`build`), with a zero gradient.

        Parameters
        ----------
        name : str
            Its key in ``params`` and ``grads``.
        value : array-like
            Its initial value, on the host (draw it from ``build``'s ``rng``);
            moved to the layer's backend in its dtype.
        regularized : bool, default=False
            Whether the L2 penalty ``alpha`` applies to it (weights, not biases).

        Returns
        -------
        param : backend array
            The parameter, ``self.params[name]``.
        """
        with np.errstate(over="ignore", invalid="ignore"):  # refused below, by name
            param = self.backend_.asarray(value, self.dtype_)
        if param.dtype.kind == "f" and not bool(self.xp.isfinite(param).all()):
            raise ValueError(
                f"{type(self).__name__}: the initial value of the parameter {name!r} is not "
                f"finite in {param.dtype} (NaN, inf, or beyond what {param.dtype} holds)"
            )
        self.params[name] = param
        self.grads[name] = self.xp.zeros_like(param)
        if regularized and name not in self.regularized:
            self.regularized = (*self.regularized, name)
        return self.params[name]

    def add_state(self, name, value):
        """Declare an array the layer updates itself (running statistics), in :meth:`build`.

        It is not trained; it moves, casts, pickles and transfers with the
        parameters, and a frozen layer keeps it unchanged.
        """
        self.state[name] = self.backend_.asarray(value, self.dtype_)
        return self.state[name]

    def _add_params(self, **arrays):
        """Several :meth:`add_param` at once (kept for layers written before it)."""
        for name, value in arrays.items():
            self.add_param(name, value)

    @property
    def xp(self):
        """The array module of the backend the layer was built on."""
        return self.backend_.xp

    def _buffer(self, key, shape, *, batch_first=True, dtype=None):
        """A reusable array of ``shape`` (batch axis first) for training.

        Buffers are sized for the largest batch seen and sliced for smaller
        ones, so a training epoch allocates nothing after its first batch.
        With ``batch_first=False`` (time-major arrays, which a slice would make
        non-contiguous) the buffer is reused only for the same shape. Reused
        buffers also spare the page faults that fresh arrays of a few MB cost.
        """
        buf, shape = self._buffers.get(key), tuple(shape)
        dtype = self.dtype_ if dtype is None else dtype
        if batch_first:
            if buf is None or buf.shape[1:] != shape[1:] or buf.shape[0] < shape[0]:
                buf = self._buffers[key] = self.xp.empty(shape, dtype=dtype)
            return buf[: shape[0]]
        if buf is None or buf.shape != shape:
            buf = self._buffers[key] = self.xp.empty(shape, dtype=dtype)
        return buf

    def release(self):
        """Drop training caches, buffers and gradients; keep parameters (end of ``fit``)."""
        self._buffers = {}
        self._cache = {}
        self.grads = {}
        for layer in self.sublayers():
            layer.release()

    def astype(self, dtype):
        """Cast parameters, gradients and state to the floating ``dtype``."""
        dtype = np.dtype(dtype)
        for name in ("params", "grads", "state"):
            arrays = getattr(self, name, {})
            setattr(
                self,
                name,
                {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in arrays.items()},
            )
        self.dtype_ = dtype
        self._buffers = {}
        self._cache = {}
        for layer in self.sublayers():
            layer.astype(dtype)
        return self

    def reseed(self, offset):
        """Start a fresh random stream for training (layers that draw numbers).

        Called at the start of every call to ``fit``/``partial_fit`` with the
        number of samples trained on so far, so consecutive calls draw
        different numbers while a fresh fit with the same ``random_state``
        repeats itself. The default reseeds the layers inside this one.
        """
        for layer in self.sublayers():
            layer.reseed(offset)

    def to_backend(self, backend):
        """Move the parameters (and gradients) of a built layer to ``backend``."""
        self.backend_ = backend
        for name in ("params", "grads", "state"):
            arrays = getattr(self, name, {})
            setattr(self, name, {k: backend.asarray(v) for k, v in arrays.items()})
        self._buffers = {}
        self._cache = {}
        for layer in self.sublayers():
            layer.to_backend(backend)
        return self

    # -- pickling: NumPy state only -------------------------------------------
    def __getstate__(self):
        state = dict(super().__getstate__())
        backend = state.pop("backend_", None)
        state.pop("_buffers", None)
        state.pop("_cache", None)
        if "dtype_" in state:  # a plain string: loads without trusting numpy.dtype
            state["dtype_"] = str(state["dtype_"])
        if backend is not None:
            state["_backend_name"] = backend.name
            for key in ("params", "grads", "state"):
                if key in state:
                    state[key] = {k: backend.to_numpy(v) for k, v in state[key].items()}
        return state

    def __setstate__(self, state):
        # Arrays come back as NumPy; the estimator moves them to its backend.
        backend_name = state.pop("_backend_name", None)
        if "dtype_" in state:
            state["dtype_"] = np.dtype(state["dtype_"])
        super().__setstate__(state)
        if backend_name is not None:
            self.backend_ = get_backend("cpu")
            self._buffers = {}
            self._cache = {}

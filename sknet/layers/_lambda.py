"""A parameter-free layer from a function, differentiated automatically."""

import contextlib
import copy
import types

import numpy as np

from sknet.autodiff import Variable, is_variable
from sknet.layers._base import Layer
from sknet.layers._contract import call_with_read_only_input, check_build_output


class Lambda(Layer):
    """Apply ``func(X, **kw_args)`` to each batch; its gradient follows automatically.

    ``func`` is written with the operators and the functions of
    :mod:`sknet.autodiff` (``ad.tanh``, ``ad.concatenate``, ``x[:, ::2]``...), so
    that training can record it; sknet derives the backward pass. It must keep
    the batch axis first and the input's dtype.

    Parameters
    ----------
    func : callable
        ``func(X, **kw_args) -> Y`` for a batch ``X``. To save the layer
        (pickle, joblib, skops) or train it on Dask workers, define it at
        module level: saving a layer whose function is a lambda or a nested
        function is refused with a TypeError (a file naming it could never
        be loaded).
    kw_args : dict, default=None
        Keyword arguments of ``func``; searchable as ``kw_args`` like any parameter.

    Notes
    -----
    Input shape: any. Output shape: what ``func`` returns, found when the layer
    is built by calling ``func`` on a small recorded batch, so an operation
    that cannot be differentiated fails then, naming it.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet import autodiff as ad
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Lambda
    >>> def swish(X, beta=1.0):
    ...     return X * ad.sigmoid(beta * X)
    >>> layer = Lambda(swish, kw_args={"beta": 2.0})
    >>> layer.build((3,), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))
    (3,)
    >>> layer.forward(np.array([[-1.0, 0.0, 2.0]], np.float32), training=False).round(3)
    array([[-0.119,  0.   ,  1.964]], dtype=float32)
    """

    def __init__(self, func, *, kw_args=None):
        self.func = func
        self.kw_args = kw_args

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if not callable(self.func):
            raise TypeError(f"Lambda: func must be callable, got {type(self.func).__name__}")
        if self.kw_args is not None and not isinstance(self.kw_args, dict):
            raise TypeError(f"Lambda: kw_args must be a dict, got {type(self.kw_args).__name__}")
        xp = backend.xp
        probe = Variable(xp.full((2, *self.input_shape_), 0.5, dtype=self.dtype_))
        quiet = np.errstate(all="ignore") if xp is np else contextlib.nullcontext()
        with quiet:
            Y = self.func(probe, **(self.kw_args or {}))
        self.output_shape_ = _checked_probe(self.func, Y, probe)
        return self.output_shape_

    def forward(self, X, *, training):
        owner = f"{self._boundary_name()}, called by Lambda.forward,"
        return call_with_read_only_input(owner, self.func, X, **(self.kw_args or {}))

    def _boundary_name(self):
        """How errors about what ``func`` returns name the layer."""
        return f"Lambda({_name(self.func)})"

    def __deepcopy__(self, memo):
        # The function is shared, not copied (copies made while fitting need no pickling).
        other = type(self).__new__(type(self))
        memo[id(self)] = other
        for key, value in self.__dict__.items():
            other.__dict__[key] = value if key == "func" else copy.deepcopy(value, memo)
        return other

    def __getstate__(self):
        func = self.func
        if isinstance(func, types.FunctionType) and (
            "<lambda>" in func.__qualname__ or "<locals>" in func.__qualname__
        ):
            raise TypeError(
                f"Lambda({_name(func)}) cannot be saved: its function is a lambda or is "
                "defined inside another function, so a saved file could not find it "
                "again. Define the function at module level (def swish(X): ...)."
            )
        return super().__getstate__()


def _name(func):
    return getattr(func, "__qualname__", type(func).__name__)


def _checked_probe(func, Y, probe):
    """The per-sample output shape of ``func``, from what it returned for the recorded ``probe``.

    It must be a recorded array of the probe's dtype with the batch axis
    first: anything else is an error naming the function, before a network
    uses it.
    """
    owner = f"Lambda({_name(func)})"
    if not is_variable(Y):
        if not hasattr(Y, "shape") or not hasattr(Y, "dtype"):
            raise TypeError(f"{owner} must return an array, got {type(Y).__name__} {Y!r:.60}")
        raise TypeError(
            f"{owner} returned a plain {type(Y).__name__}, not an array computed from its "
            "input X: its gradient would be lost. Compute it from X with the operators "
            "and the functions of sknet.autodiff (not X.data, nor NumPy's or CuPy's "
            "functions outside those sknet.autodiff dispatches)"
        )
    if Y.dtype != probe.dtype:
        raise TypeError(
            f"{owner} returned {Y.dtype} values for {probe.dtype} inputs; keep the input's "
            "dtype (constants as Python numbers or arrays of X.dtype)"
        )
    shape = tuple(Y.shape)
    if len(shape) < 1 or shape[0] != probe.shape[0]:
        raise ValueError(
            f"{owner} returned shape {shape} for a batch of {probe.shape[0]} samples; the "
            "first axis must stay the batch"
        )
    return check_build_output(owner, shape[1:])

"""A parameter-free layer from a function, differentiated automatically."""

import contextlib
import copy
import types

import numpy as np

from sknet.autodiff import Variable
from sknet.layers._base import Layer


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
        shape = tuple(Y.shape)
        if len(shape) < 1 or shape[0] != 2:
            raise ValueError(
                f"Lambda({_name(self.func)}) returned shape {shape} for a batch of 2 "
                "samples; the first axis must stay the batch"
            )
        self.output_shape_ = shape[1:]
        return self.output_shape_

    def forward(self, X, *, training):
        return self.func(X, **(self.kw_args or {}))

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

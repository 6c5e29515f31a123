"""Positions of sequence steps, added to their features: learned or sinusoidal."""

from numbers import Real

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import TRAINING_CONSTRAINTS, Number
from sknet.layers._steps import check_sequence_shape


def sinusoids(steps, features, max_wavelength=10000.0):
    """The sinusoidal position table (steps, features) of "Attention is all you need".

    ``P[t, 2i] = sin(t / max_wavelength ** (2i / features))`` and
    ``P[t, 2i + 1]`` the cosine of the same angle, in float64 on the host.
    """
    t = np.arange(steps)[:, None]
    rate = max_wavelength ** (-(np.arange(features) // 2 * 2) / features)
    angle = t * rate[None, :]
    return np.where(np.arange(features) % 2 == 0, np.sin(angle), np.cos(angle))


class PositionEmbedding(Layer):
    """A learned vector per step position, added to the step's features.

    Parameters
    ----------
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'P'``, the ``(timesteps, features)`` table: ``Y[n, t] = X[n, t] + P[t]``.

    See Also
    --------
    SinusoidalPositionEmbedding : Fixed positions, nothing learned.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)`` (after an
    :class:`Embedding`, say). Output shape: same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import PositionEmbedding
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = PositionEmbedding()
    >>> layer.build((5, 4), backend=backend, dtype=np.float32, rng=rng)
    (5, 4)
    >>> layer.params["P"].shape
    (5, 4)
    >>> Y = layer.forward(np.zeros((2, 5, 4), np.float32), training=False)
    >>> bool((Y[0] == layer.params["P"]).all())
    True
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = dict(TRAINING_CONSTRAINTS)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        check_sequence_shape(self, self.input_shape_)
        self.add_param("P", rng.uniform(-0.05, 0.05, self.input_shape_))
        return self.input_shape_

    def forward(self, X, *, training):
        out = self._buffer("Y", X.shape) if training else self.xp.empty(X.shape, X.dtype)
        return self.xp.add(X, self.params["P"], out=out)

    def backward(self, dY):
        if self.trainable:
            dY.sum(axis=0, out=self.grads["P"])
        return dY


class SinusoidalPositionEmbedding(Layer):
    """Fixed sines and cosines of each step's position, added to its features.

    The encoding of Vaswani et al. (2017): feature ``2i`` of step ``t`` gets
    ``sin(t / max_wavelength ** (2i / features))`` added, feature ``2i + 1``
    the cosine. Nothing is learned.

    Parameters
    ----------
    max_wavelength : float, default=10000.0
        The longest wavelength, in steps.

    See Also
    --------
    PositionEmbedding : Learned positions.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``. Output shape: same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import SinusoidalPositionEmbedding
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = SinusoidalPositionEmbedding()
    >>> layer.build((3, 2), backend=backend, dtype=np.float32, rng=rng)
    (3, 2)
    >>> layer.forward(np.zeros((1, 3, 2), np.float32), training=False).round(3)
    array([[[ 0.   ,  1.   ],
            [ 0.841,  0.54 ],
            [ 0.909, -0.416]]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {
        "max_wavelength": [Number(0, None)],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, max_wavelength=10000.0):
        self.max_wavelength = max_wavelength

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        T, F = check_sequence_shape(self, self.input_shape_)
        wavelength = self.max_wavelength
        if not isinstance(wavelength, Real) or isinstance(wavelength, bool) or not wavelength > 0:
            raise ValueError(f"max_wavelength must be a positive number, got {wavelength!r}")
        self._table = backend.asarray(sinusoids(T, F, float(wavelength)), dtype)
        return self.input_shape_

    def forward(self, X, *, training):
        out = self._buffer("Y", X.shape) if training else self.xp.empty(X.shape, X.dtype)
        return self.xp.add(X, self._table, out=out)

    def backward(self, dY):
        return dY

    def _table_for(self, backend, dtype):
        return backend.asarray(sinusoids(*self.input_shape_, float(self.max_wavelength)), dtype)

    def to_backend(self, backend):
        super().to_backend(backend)
        if "input_shape_" in self.__dict__:
            self._table = self._table_for(backend, self.dtype_)
        return self

    def astype(self, dtype):
        super().astype(dtype)
        if "input_shape_" in self.__dict__:
            self._table = self._table_for(self.backend_, self.dtype_)
        return self

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_table", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "input_shape_" in state:
            self._table = self._table_for(self.backend_, self.dtype_)

"""Reshaping layers."""

import math

from sknet.layers._base import Layer
from sknet.layers._constraints import TRAINING_CONSTRAINTS


class Flatten(Layer):
    """Flatten each sample to one axis, e.g. images before a :class:`Dense`.

    Notes
    -----
    Input shape: ``(batch, d1, d2, ...)``. Output shape: ``(batch, d1 * d2 * ...)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Flatten
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Flatten()
    >>> layer.build((2, 3, 3), backend=backend, dtype=np.float32, rng=rng)
    (18,)
    >>> layer.forward(np.ones((5, 2, 3, 3), np.float32), training=False).shape
    (5, 18)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = dict(TRAINING_CONSTRAINTS)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.output_shape_ = (math.prod(self.input_shape_),)
        return self.output_shape_

    def forward(self, X, *, training):
        return X.reshape(X.shape[0], -1)

    def backward(self, dY):
        return dY.reshape((dY.shape[0],) + self.input_shape_)

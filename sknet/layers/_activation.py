"""Element-wise activation layer."""

from sknet.layers._base import Layer
from sknet.layers._constraints import ACTIVATION, TRAINING_CONSTRAINTS


class Activation(Layer):
    """Apply an element-wise activation function.

    Prefer ``Dense(units, activation=...)``, which applies the activation in
    place; this layer is for activations after layers that have none.

    Parameters
    ----------
    activation : str, default='relu'
        One of :data:`sknet.backend.ACTIVATIONS`: ``'identity'``, ``'logistic'``,
        ``'tanh'``, ``'relu'``, ``'leaky_relu'`` (slope 0.01), ``'elu'``
        (alpha 1), ``'gelu'`` (tanh approximation), ``'silu'``.

    Notes
    -----
    Input shape: any. Output shape: same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Activation
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Activation("relu")
    >>> layer.build((3,), backend=backend, dtype=np.float32, rng=rng)
    (3,)
    >>> layer.forward(np.array([[-1.0, 0.0, 2.0]], np.float32), training=False)
    array([[0., 0., 2.]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {"activation": [ACTIVATION], **TRAINING_CONSTRAINTS}

    def __init__(self, activation="relu"):
        self.activation = activation

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.output_shape_ = self.input_shape_
        return self.output_shape_

    def forward(self, X, *, training):
        Y = self._buffer("Y", X.shape) if training else self.xp.empty_like(X)
        self.backend_.activation_forward(self.activation, X, Y)
        if training:
            self._cache = {"X": X, "Y": Y}
        return Y

    def backward(self, dY):
        cache = self._cache
        return self.backend_.activation_backward(self.activation, dY, cache["Y"], cache["X"], dY)

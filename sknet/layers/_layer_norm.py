"""Layer normalization over the last axis, and the row kernels the transformer block shares."""

from numbers import Real

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import TRAINING_CONSTRAINTS, Number


class LayerNorm(Layer):
    """Layer normalization: each sample's features standardized, then scaled and shifted.

    Every vector along the last axis (a row's features, a sequence step's
    features) is normalized with its own mean and (biased) variance, then
    multiplied by ``gamma`` and shifted by ``beta``, as
    ``torch.nn.LayerNorm`` over the last dimension does. Rows are
    independent, so the layer behaves the same in training and prediction and
    has no running statistics.

    Parameters
    ----------
    epsilon : float, default=1e-5
        Added to the variance before the square root.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'gamma'`` and ``'beta'``, one per feature (the last axis).

    See Also
    --------
    BatchNorm : Statistics over the batch instead of over the features.

    Notes
    -----
    Input shape: ``(batch, ..., features)``, e.g. ``(batch, features)`` or
    ``(batch, timesteps, features)``. Output shape: same as input. On the CPU
    with Numba, forward and backward are each one pass over the rows.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import LayerNorm
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = LayerNorm()
    >>> layer.build((3, 2), backend=backend, dtype=np.float32, rng=rng)
    (3, 2)
    >>> X = np.array([[[0.0, 2.0], [1.0, 5.0], [4.0, 4.0]]], np.float32)
    >>> layer.forward(X, training=False).round(3)  # each step: mean 0, variance 1
    array([[[-1.,  1.],
            [-1.,  1.],
            [ 0.,  0.]]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {"epsilon": [Number(0, None)], **TRAINING_CONSTRAINTS}

    def __init__(self, epsilon=1e-5, *, trainable=True, lr_scale=1.0, weights=None):
        self.epsilon = epsilon
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if not self.input_shape_:
            raise ValueError("LayerNorm expects samples with a feature axis, got shape ()")
        n = self.input_shape_[-1]
        self.add_param("gamma", np.ones(n))
        self.add_param("beta", np.zeros(n))
        return self.input_shape_

    def forward(self, X, *, training):
        rows = layer_norm_rows(self, X.reshape(-1, X.shape[-1]), "", training)
        return rows.reshape(X.shape)

    def backward(self, dY):
        dX = layer_norm_rows_backward(self, dY.reshape(-1, dY.shape[-1]), "", self.trainable)
        return dX.reshape(dY.shape)


def check_epsilon(epsilon):
    if not isinstance(epsilon, Real) or isinstance(epsilon, bool) or not epsilon > 0:
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}")


def layer_norm_rows(layer, X, suffix, training):
    """Layer norm of rows ``X`` (n, F) with ``layer.params['gamma' + suffix]`` and beta.

    What :class:`LayerNorm` and the transformer block run; while training,
    what the backward pass needs is kept in ``layer._cache`` under names
    ending in ``suffix``.
    """
    xp = layer.xp
    n, F = X.shape
    if not X.flags.c_contiguous:
        X = xp.ascontiguousarray(X)
    if training:
        xhat = layer._buffer("xhat" + suffix, (n, F))
        out = layer._buffer("norm" + suffix, (n, F))
        inv_std = layer._buffer("inv_std" + suffix, (n,))
    else:
        xhat = out = xp.empty((n, F), dtype=X.dtype)
        inv_std = xp.empty(n, dtype=X.dtype)
    gamma, beta = layer.params["gamma" + suffix], layer.params["beta" + suffix]
    layer.backend_.layer_norm_forward(X, gamma, beta, layer.epsilon, out, xhat, inv_std)
    if training:
        layer._cache["xhat" + suffix] = xhat
        layer._cache["inv_std" + suffix] = inv_std
    return out


def layer_norm_rows_backward(layer, dY, suffix, with_params):
    """The input gradient of :func:`layer_norm_rows`; the parameters' too with ``with_params``."""
    xp = layer.xp
    if not dY.flags.c_contiguous:
        dY = xp.ascontiguousarray(dY)
    cache = layer._cache
    grads = (
        (layer.grads["gamma" + suffix], layer.grads["beta" + suffix])
        if with_params
        else (None, None)
    )
    out = layer._buffer("dnorm" + suffix, dY.shape)
    return layer.backend_.layer_norm_backward(
        dY,
        cache["xhat" + suffix],
        cache["inv_std" + suffix],
        layer.params["gamma" + suffix],
        *grads,
        out,
    )


__all__ = ["LayerNorm"]

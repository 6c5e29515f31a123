"""Batch normalization."""

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import TRAINING_CONSTRAINTS, Number


class BatchNorm(Layer):
    """Batch normalization of features (1-D samples) or channels (images).

    While training, each feature (or channel, over batch, height and width) is
    normalized with the batch's mean and variance, then scaled by ``gamma`` and
    shifted by ``beta``; running averages of the statistics are kept in
    ``state`` and used instead at prediction time.

    Parameters
    ----------
    momentum : float, default=0.9
        Weight of the old value in the running averages.
    epsilon : float, default=1e-5
        Added to the variance before the square root.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'gamma'`` and ``'beta'``, one per feature or channel.
    state : dict
        ``'running_mean'`` and ``'running_var'`` (the unbiased batch variance).

    Notes
    -----
    Input shape: ``(batch, features)`` or ``(batch, C, H, W)``. Output shape:
    same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import BatchNorm
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = BatchNorm()
    >>> layer.build((2,), backend=backend, dtype=np.float32, rng=rng)
    (2,)
    >>> X = np.array([[0.0, 10.0], [2.0, 20.0]], np.float32)
    >>> layer.forward(X, training=True).round(3)  # each feature: mean 0, variance 1
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> layer.state["running_mean"]  # 0.9 * 0 + 0.1 * the batch mean
    array([0.1, 1.5], dtype=float32)
    """

    _parameter_constraints: dict = {
        "momentum": [Number(0, 1, closed="left")],
        "epsilon": [Number(0, None)],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, momentum=0.9, epsilon=1e-5, *, trainable=True, lr_scale=1.0, weights=None):
        self.momentum = momentum
        self.epsilon = epsilon
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if len(self.input_shape_) == 1:
            self._axes, self._param_shape = (0,), (1, self.input_shape_[0])
        elif len(self.input_shape_) == 3:
            self._axes, self._param_shape = (0, 2, 3), (1, self.input_shape_[0], 1, 1)
        else:
            raise ValueError(
                "BatchNorm expects samples of shape (features,) or (channels, "
                f"height, width), got {self.input_shape_}"
            )
        n = self.input_shape_[0]
        xp = backend.xp
        self._add_params(gamma=np.ones(n), beta=np.zeros(n))
        self.state = {
            "running_mean": xp.zeros(n, dtype=dtype),
            "running_var": xp.ones(n, dtype=dtype),
        }
        self.output_shape_ = self.input_shape_
        return self.output_shape_

    def forward(self, X, *, training):
        shape = self._param_shape
        gamma, beta = self.params["gamma"].reshape(shape), self.params["beta"].reshape(shape)
        if not training or not self.trainable:
            # Frozen means frozen: running statistics used, never updated.
            mean = self.state["running_mean"].reshape(shape)
            scale = gamma / self.xp.sqrt(self.state["running_var"].reshape(shape) + self.epsilon)
            if training:
                self._cache = {"scale": scale}
            return (X - mean) * scale + beta
        mean = X.mean(axis=self._axes, keepdims=True)
        centered = X - mean
        var = (centered * centered).mean(axis=self._axes, keepdims=True)
        inv_std = 1.0 / self.xp.sqrt(var + self.epsilon)
        xhat = centered
        xhat *= inv_std
        m = X.size // X.shape[1]
        running = self.state
        running["running_mean"] *= self.momentum
        running["running_mean"] += (1 - self.momentum) * mean.reshape(-1)
        running["running_var"] *= self.momentum
        running["running_var"] += (1 - self.momentum) * var.reshape(-1) * (m / max(m - 1, 1))
        self._cache = {"xhat": xhat, "inv_std": inv_std, "m": m}
        return xhat * gamma + beta

    def backward(self, dY):
        cache, axes = self._cache, self._axes
        if "scale" in cache:  # frozen: an affine map with fixed statistics
            return dY * cache["scale"]
        xhat, inv_std, m = cache["xhat"], cache["inv_std"], cache["m"]
        self.grads["gamma"][...] = (dY * xhat).sum(axis=axes)
        self.grads["beta"][...] = dY.sum(axis=axes)
        dxhat = dY * self.params["gamma"].reshape(self._param_shape)
        # dX = inv_std / m * (m dxhat - sum(dxhat) - xhat sum(dxhat xhat))
        dX = dxhat * m
        dX -= dxhat.sum(axis=axes, keepdims=True)
        dX -= xhat * (dxhat * xhat).sum(axis=axes, keepdims=True)
        dX *= inv_std / m
        return dX


__all__ = ["BatchNorm"]

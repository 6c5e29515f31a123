"""Pooling over the steps of sequences: max and average over windows, global maximum."""

from sklearn.utils._param_validation import StrOptions

from sknet.layers._base import Layer
from sknet.layers._constraints import POSITIVE_INT, TRAINING_CONSTRAINTS, Count
from sknet.layers._conv1d import positive_int, steps_out, steps_padding
from sknet.layers._steps import check_sequence_shape, checked_mask, work_arrays


class _Pool1D(Layer):
    """Windows of ``pool_size`` steps every ``stride`` steps."""

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {
        "pool_size": [POSITIVE_INT],
        "stride": [POSITIVE_INT, None],
        "padding": [StrOptions({"valid", "same"}), Count(0)],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, pool_size=2, *, stride=None, padding="valid"):
        self.pool_size = pool_size
        self.stride = stride
        self.padding = padding

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        T, C = check_sequence_shape(self, self.input_shape_)
        self._k = positive_int(self.pool_size, "pool_size")
        self._s = self._k if self.stride is None else positive_int(self.stride, "stride")
        self._padding = steps_padding(self.padding, T, self._k, self._s)
        if max(self._padding) > self._k // 2:
            raise ValueError(
                f"{type(self).__name__}: padding {self._padding} must be at most half the "
                f"pool size {self._k}, or some windows hold only padding"
            )
        OT = steps_out(self, T, self._k, self._s, self._padding, "pool_size")
        self.output_shape_ = (OT, C)
        return self.output_shape_

    def _padded(self, X, value, buffer):
        left, right = self._padding
        if not (left or right) and X.flags.c_contiguous:
            return X
        N, T, C = X.shape
        return self.backend_.pad_steps(
            X, left, right, value, buffer("padded", (N, T + left + right, C))
        )

    def _unpad(self, dXp):
        left, right = self._padding
        if not (left or right):
            return dXp
        T = self.input_shape_[0]
        dX = self._buffer("dX", (dXp.shape[0],) + self.input_shape_)
        dX[...] = dXp[:, left : left + T]
        return dX


class MaxPool1D(_Pool1D):
    """Maximum over each window of steps, per feature.

    The gradient flows to one maximum per window (the first, where several
    steps tie).

    Parameters
    ----------
    pool_size : int, default=2
        Steps in a window.
    stride : int, default=None
        Steps between windows; ``None`` means ``pool_size`` (no overlap).
    padding : {'valid', 'same'} or int, default='valid'
        Padded steps, which never win the maximum.

    See Also
    --------
    GlobalMaxPool1D : The maximum over all the steps.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``. Output shape:
    ``(batch, OT, features)``, ``OT = (timesteps + left + right - pool_size) //
    stride + 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import MaxPool1D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = MaxPool1D(pool_size=2)
    >>> layer.build((4, 1), backend=backend, dtype=np.float32, rng=rng)
    (2, 1)
    >>> X = np.array([[[1.0], [3.0], [2.0], [0.0]]], np.float32)
    >>> layer.forward(X, training=False)[..., 0]
    array([[3., 2.]], dtype=float32)
    """

    def forward(self, X, *, training):
        xp = self.xp
        buffer = work_arrays(self, training)
        Xp = self._padded(X, -xp.inf, buffer)
        shape = (X.shape[0],) + self.output_shape_
        Y, argmax = buffer("Y", shape), buffer("argmax", shape, dtype=xp.int32)
        self.backend_.max_pool_1d_forward(Xp, self._k, self._s, Y, argmax)
        if training:
            self._cache = {"argmax": argmax, "steps": Xp.shape[1]}
        return Y

    def backward(self, dY):
        N, C = dY.shape[0], dY.shape[2]
        dXp = self._buffer("dpadded", (N, self._cache["steps"], C))
        self.backend_.max_pool_1d_backward(dY, self._cache["argmax"], dXp)
        return self._unpad(dXp)


class AvgPool1D(_Pool1D):
    """Mean over each window of steps, per feature (padded steps count as zeros).

    Parameters
    ----------
    pool_size : int, default=2
        Steps in a window.
    stride : int, default=None
        Steps between windows; ``None`` means ``pool_size`` (no overlap).
    padding : {'valid', 'same'} or int, default='valid'
        Zero steps added.

    See Also
    --------
    GlobalAvgPool1D : The mean over all the (real) steps.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``. Output shape:
    ``(batch, OT, features)``, as :class:`MaxPool1D`.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import AvgPool1D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = AvgPool1D(pool_size=2)
    >>> layer.build((4, 1), backend=backend, dtype=np.float32, rng=rng)
    (2, 1)
    >>> X = np.array([[[1.0], [3.0], [2.0], [0.0]]], np.float32)
    >>> layer.forward(X, training=False)[..., 0]
    array([[2., 1.]], dtype=float32)
    """

    def forward(self, X, *, training):
        buffer = work_arrays(self, training)
        Xp = self._padded(X, 0, buffer)
        OT = self.output_shape_[0]
        Y = buffer("Y", (X.shape[0],) + self.output_shape_)
        span = self._s * (OT - 1) + 1
        Y[...] = Xp[:, 0 : span : self._s]
        for j in range(1, self._k):
            Y += Xp[:, j : j + span : self._s]
        Y *= 1.0 / self._k
        if training:
            self._cache = {"steps": Xp.shape[1]}
        return Y

    def backward(self, dY):
        N, OT, C = dY.shape
        dXp = self._buffer("dpadded", (N, self._cache["steps"], C))
        dXp[...] = 0
        share = dY * (1.0 / self._k)
        span = self._s * (OT - 1) + 1
        for j in range(self._k):
            dXp[:, j : j + span : self._s] += share
        return self._unpad(dXp)


class GlobalMaxPool1D(Layer):
    """Maximum over the (real, with a mask) steps of a sequence, per feature.

    The gradient flows to the first step holding each maximum. A sequence
    with no real step (all padding) gives zeros.

    See Also
    --------
    GlobalAvgPool1D : The mean over the steps.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask`` (the
    estimators' ``padding_value``). Output shape: ``(batch, features)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import GlobalMaxPool1D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = GlobalMaxPool1D()
    >>> layer.build((3, 2), backend=backend, dtype=np.float32, rng=rng)
    (2,)
    >>> X = np.array([[[0.0, 5.0], [4.0, 1.0], [9.0, 2.0]]], np.float32)
    >>> layer.forward(X, training=False)
    array([[9., 5.]], dtype=float32)
    >>> layer.forward(X, training=False, mask=np.array([[True, True, False]]))
    array([[4., 5.]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    supports_mask = True

    _parameter_constraints: dict = dict(TRAINING_CONSTRAINTS)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        check_sequence_shape(self, self.input_shape_)
        self.output_shape_ = (self.input_shape_[1],)
        return self.output_shape_

    def forward(self, X, *, training, mask=None):
        xp = self.xp
        mask = checked_mask(self, X, mask)
        if mask is not None:
            X = xp.where(mask[:, :, None], X, -xp.inf)
        argmax = X.argmax(axis=1)  # (N, F): the first maximum's step
        Y = xp.take_along_axis(X, argmax[:, None, :], axis=1)[:, 0]
        if mask is not None:
            empty = ~mask.any(axis=1)
            Y[empty] = 0
            argmax[empty] = -1  # no step gets a gradient
        if training:
            self._cache = {"argmax": argmax}
        return Y

    def backward(self, dY):
        xp = self.xp
        argmax = self._cache["argmax"]
        T = self.input_shape_[0]
        hit = xp.arange(T)[None, :, None] == argmax[:, None, :]
        dX = self._buffer("dX", (dY.shape[0],) + self.input_shape_)
        xp.multiply(hit, dY[:, None, :], out=dX)
        return dX

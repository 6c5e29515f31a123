"""Pooling layers: max and average over windows, and global average."""

from sknet.layers._base import Layer
from sknet.layers._constraints import INT_OR_PAIR, PADDING, TRAINING_CONSTRAINTS
from sknet.layers._conv import check_image_shape, output_size, pair, resolve_padding


class _Pool2D(Layer):
    """Windows of ``pool_size`` every ``stride`` pixels, visited as strided views."""

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {
        "pool_size": INT_OR_PAIR,
        "stride": [*INT_OR_PAIR, None],
        "padding": PADDING,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, pool_size=2, *, stride=None, padding="valid"):
        self.pool_size = pool_size
        self.stride = stride
        self.padding = padding

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        C, _, _ = check_image_shape(self, self.input_shape_)
        self._kernel = pair(self.pool_size, "pool_size")
        self._stride = self._kernel if self.stride is None else pair(self.stride, "stride")
        self._padding = resolve_padding(self.padding, self._kernel)
        if any(p > k // 2 for p, k in zip(self._padding, self._kernel)):
            raise ValueError(
                f"{type(self).__name__}: padding {self._padding} must be at most half "
                f"the pool size {self._kernel}, or some windows hold only padding"
            )
        OH, OW = output_size(
            self, self.input_shape_, self._kernel, self._stride, self._padding, "pool_size"
        )
        self.output_shape_ = (C, OH, OW)
        return self.output_shape_

    def _offsets(self):
        """Each window offset (i, j) with its strided slices of the padded image."""
        (kh, kw), (sh, sw) = self._kernel, self._stride
        _, OH, OW = self.output_shape_
        for i in range(kh):
            for j in range(kw):
                yield (slice(i, i + sh * OH, sh), slice(j, j + sw * OW, sw))

    def _pad(self, X, value):
        ph, pw = self._padding
        if ph or pw:
            X = self.xp.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)
        return X

    def _unpad(self, dXp):
        (ph, pw), (_, H, W) = self._padding, self.input_shape_
        if ph or pw:
            dXp = self.xp.ascontiguousarray(dXp[:, :, ph : ph + H, pw : pw + W])
        return dXp


class MaxPool2D(_Pool2D):
    """Maximum over each window.

    The gradient flows to one maximum per window (the first, where several
    inputs tie), so it is the exact gradient of the forward pass.

    Parameters
    ----------
    pool_size : int or (int, int), default=2
        Window height and width.
    stride : int or (int, int), default=None
        Step between windows; ``None`` means ``pool_size`` (no overlap).
    padding : {'valid', 'same'}, int or (int, int), default='valid'
        Padding; padded pixels never win the maximum.

    Notes
    -----
    Input shape: ``(batch, C, H, W)``. Output shape: ``(batch, C, OH, OW)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import MaxPool2D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = MaxPool2D(pool_size=2)
    >>> layer.build((1, 4, 4), backend=backend, dtype=np.float32, rng=rng)
    (1, 2, 2)
    >>> X = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> layer.forward(X, training=False)
    array([[[[ 5.,  7.],
             [13., 15.]]]], dtype=float32)
    """

    def forward(self, X, *, training):
        out = None
        if training:  # buffers reused across batches
            shape = (X.shape[0], *self.output_shape_)
            out = (self._buffer("Y", shape), self._buffer("argmax", shape, dtype="int32"))
        Y, argmax = self.backend_.max_pool_forward(
            X, self._kernel, self._stride, self._padding, self.output_shape_[1:], out=out
        )
        if training:
            self._cache = {"argmax": argmax}
        return Y

    def backward(self, dY):
        return self.backend_.max_pool_backward(
            dY,
            self._cache["argmax"],
            self.input_shape_[1:],
            self._kernel,
            self._stride,
            self._padding,
            out=self._buffer("dX", (dY.shape[0], *self.input_shape_)),
        )


class AvgPool2D(_Pool2D):
    """Mean over each window (padded pixels count as zeros).

    Parameters
    ----------
    pool_size : int or (int, int), default=2
        Window height and width.
    stride : int or (int, int), default=None
        Step between windows; ``None`` means ``pool_size`` (no overlap).
    padding : {'valid', 'same'}, int or (int, int), default='valid'
        Zero padding.

    Notes
    -----
    Input shape: ``(batch, C, H, W)``. Output shape: ``(batch, C, OH, OW)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import AvgPool2D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = AvgPool2D(pool_size=2)
    >>> layer.build((1, 4, 4), backend=backend, dtype=np.float32, rng=rng)
    (1, 2, 2)
    >>> X = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> layer.forward(X, training=False)
    array([[[[ 2.5,  4.5],
             [10.5, 12.5]]]], dtype=float32)
    """

    def forward(self, X, *, training):
        Xp = self._pad(X, 0)
        Y = None
        for rows, cols in self._offsets():
            view = Xp[:, :, rows, cols]
            Y = view.copy() if Y is None else Y.__iadd__(view)
        Y /= self._kernel[0] * self._kernel[1]
        return Y

    def backward(self, dY):
        ph, pw = self._padding
        C, H, W = self.input_shape_
        dXp = self.xp.zeros((dY.shape[0], C, H + 2 * ph, W + 2 * pw), dtype=dY.dtype)
        share = dY / (self._kernel[0] * self._kernel[1])
        for rows, cols in self._offsets():
            dXp[:, :, rows, cols] += share
        return self._unpad(dXp)


class GlobalAvgPool2D(Layer):
    """Mean of each channel over the whole image.

    Notes
    -----
    Input shape: ``(batch, C, H, W)``. Output shape: ``(batch, C)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import GlobalAvgPool2D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = GlobalAvgPool2D()
    >>> layer.build((2, 4, 4), backend=backend, dtype=np.float32, rng=rng)
    (2,)
    >>> X = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    >>> layer.forward(X, training=False)
    array([[ 7.5, 23.5]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = dict(TRAINING_CONSTRAINTS)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        C, _, _ = check_image_shape(self, self.input_shape_)
        self.output_shape_ = (C,)
        return self.output_shape_

    def forward(self, X, *, training):
        return X.mean(axis=(2, 3))

    def backward(self, dY):
        C, H, W = self.input_shape_
        dX = self.xp.empty((dY.shape[0], C, H, W), dtype=dY.dtype)
        dX[...] = (dY / (H * W))[:, :, None, None]
        return dX

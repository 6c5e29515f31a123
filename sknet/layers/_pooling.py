"""Pooling layers: max and average over windows, and global average."""

from sknet.layers._base import Layer
from sknet.layers._conv import check_image_shape, output_size, pair, resolve_padding


class _Pool2D(Layer):
    """Windows of ``pool_size`` every ``stride`` pixels, gathered with im2col."""

    pad_value = 0.0

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
        OH, OW = output_size(self, self.input_shape_, self._kernel, self._stride, self._padding)
        self.output_shape_ = (C, OH, OW)
        return self.output_shape_

    def _windows(self, X):
        """(C, kh * kw, N, OH, OW) view of the windows of a batch."""
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        col = self.backend_.im2col(X, kh, kw, sh, sw, ph, pw, pad_value=self.pad_value)
        C, _, _, N, OH, OW = col.shape
        return col.reshape(C, kh * kw, N, OH, OW)

    def _to_images(self, dcol):
        """Sum window gradients (C, kh * kw, N, OH, OW) back into images."""
        C, H, W = self.input_shape_
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        _, _, N, OH, OW = dcol.shape
        dcol = dcol.reshape(C, kh, kw, N, OH, OW)
        return self.backend_.col2im(dcol, H, W, sh, sw, ph, pw)


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
    """

    pad_value = float("-inf")

    def forward(self, X, *, training):
        xp = self.xp
        windows = self._windows(X)
        winner = windows.argmax(axis=1)  # (C, N, OH, OW)
        Y = xp.take_along_axis(windows, winner[:, None], axis=1)[:, 0]
        if training:
            self._cache = {"winner": winner, "shape": windows.shape}
        return xp.ascontiguousarray(Y.transpose(1, 0, 2, 3))

    def backward(self, dY):
        xp, cache = self.xp, self._cache
        C, K, N, OH, OW = cache["shape"]
        hit = cache["winner"][:, None] == xp.arange(K).reshape(1, K, 1, 1, 1)
        dcol = hit * dY.transpose(1, 0, 2, 3)[:, None]
        return self._to_images(dcol.astype(dY.dtype, copy=False))


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
    """

    def forward(self, X, *, training):
        Y = self._windows(X).mean(axis=1)  # (C, N, OH, OW)
        return self.xp.ascontiguousarray(Y.transpose(1, 0, 2, 3))

    def backward(self, dY):
        C, OH, OW = self.output_shape_
        K = self._kernel[0] * self._kernel[1]
        share = dY.transpose(1, 0, 2, 3)[:, None] / K  # (C, 1, N, OH, OW)
        dcol = self.xp.broadcast_to(share, (C, K) + share.shape[2:])
        return self._to_images(dcol)


class GlobalAvgPool2D(Layer):
    """Mean of each channel over the whole image.

    Notes
    -----
    Input shape: ``(batch, C, H, W)``. Output shape: ``(batch, C)``.
    """

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

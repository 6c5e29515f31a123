"""2-D convolution by im2col and one matrix product."""

from numbers import Integral

from sknet.backend import activation_needs_input
from sknet.backend._base import conv_outsize
from sknet.layers._base import Layer
from sknet.layers._constraints import (
    ACTIVATION,
    INT_OR_PAIR,
    PADDING,
    POSITIVE_INT,
    TRAINING_CONSTRAINTS,
)
from sknet.layers._dense import INITIALIZER
from sknet.layers._init import initial_weights


def pair(value, name):
    """``value`` as a pair of positive ints (an int means the same for both)."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        value = (value, value)
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise ValueError(f"{name} must be a positive int or a pair of them, got {value!r}")
    return int(value[0]), int(value[1])


def resolve_padding(padding, kernel, name="padding"):
    """Padding as a pair of ints from ``'valid'``, ``'same'``, an int or a pair."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        if kernel[0] % 2 == 0 or kernel[1] % 2 == 0:
            raise ValueError(
                f"{name}='same' needs an odd window, got {kernel}; give the padding "
                "as an int instead"
            )
        return (kernel[0] - 1) // 2, (kernel[1] - 1) // 2
    if isinstance(padding, Integral) and not isinstance(padding, bool) and padding >= 0:
        return int(padding), int(padding)
    if (
        isinstance(padding, (tuple, list))
        and len(padding) == 2
        and all(isinstance(p, Integral) and not isinstance(p, bool) and p >= 0 for p in padding)
    ):
        return int(padding[0]), int(padding[1])
    raise ValueError(
        f"{name} must be 'valid', 'same', a non-negative int or a pair of them, got {padding!r}"
    )


def check_image_shape(layer, input_shape):
    if len(input_shape) != 3:
        raise ValueError(
            f"{type(layer).__name__} expects images of shape (channels, height, "
            f"width), got samples of shape {tuple(input_shape)}"
        )
    return input_shape


def output_size(layer, input_shape, kernel, stride, padding, name="kernel_size"):
    """``(OH, OW)``, or a ValueError naming ``name`` (the layer's window parameter) and sizes."""
    C, H, W = input_shape
    OH = conv_outsize(H, kernel[0], stride[0], padding[0])
    OW = conv_outsize(W, kernel[1], stride[1], padding[1])
    if OH < 1 or OW < 1:
        largest = (H + 2 * padding[0], W + 2 * padding[1])
        same = kernel[0] % 2 and kernel[1] % 2 and layer.padding != "same"
        raise ValueError(
            f"{type(layer).__name__}: {name}={getattr(layer, name)!r} does not fit in images "
            f"of size {(H, W)} with padding {padding} (windows of {kernel}); give a {name} "
            f"of at most {largest}" + (", or padding='same'" if same else "")
        )
    return OH, OW


class Conv2D(Layer):
    """2-D convolution, ``Y = f(W * X + b)``, on NCHW images.

    Computed as im2col and one matrix product per batch: the patches of the
    batch form a ``(C * kh * kw, N * OH * OW)`` matrix that the filters,
    ``(filters, C * kh * kw)``, multiply at once.

    Parameters
    ----------
    filters : int
        Number of output channels.
    kernel_size : int or (int, int), default=3
        Height and width of the filters.
    stride : int or (int, int), default=1
        Step between windows.
    padding : {'valid', 'same'}, int or (int, int), default='valid'
        Zero padding: none, enough to keep the size at stride 1 (odd kernels),
        or explicit rows/columns on each side.
    activation : str or None, default=None
        Activation applied in place (see :class:`Dense`).
    use_bias : bool, default=True
        Whether to add a learned bias per filter.
    init : {'he_uniform', 'glorot_uniform'} or callable, default='he_uniform'
        Initializer, with ``fan_in = C * kh * kw`` and
        ``fan_out = filters * kh * kw``.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'W'`` of shape ``(filters, C, kh, kw)`` and ``'b'`` of shape ``(filters,)``.

    Notes
    -----
    Input shape: ``(batch, C, H, W)``. Output shape: ``(batch, filters, OH, OW)``
    with ``OH = (H + 2 * ph - kh) // sh + 1`` (likewise ``OW``).

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Conv2D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Conv2D(8, kernel_size=3, padding="same", activation="relu")
    >>> layer.build((1, 6, 6), backend=backend, dtype=np.float32, rng=rng)
    (8, 6, 6)
    >>> layer.params["W"].shape
    (8, 1, 3, 3)
    >>> layer.forward(np.ones((2, 1, 6, 6), np.float32), training=False).shape
    (2, 8, 6, 6)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    regularized = ("W",)

    _parameter_constraints: dict = {
        "filters": [POSITIVE_INT],
        "kernel_size": INT_OR_PAIR,
        "stride": INT_OR_PAIR,
        "padding": PADDING,
        "activation": [ACTIVATION, None],
        "use_bias": ["boolean"],
        "init": INITIALIZER,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        filters,
        kernel_size=3,
        *,
        stride=1,
        padding="valid",
        activation=None,
        use_bias=True,
        init="he_uniform",
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.filters = filters
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.activation = activation
        self.use_bias = use_bias
        self.init = init
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        C, _, _ = check_image_shape(self, self.input_shape_)
        self._kernel = pair(self.kernel_size, "kernel_size")
        self._stride = pair(self.stride, "stride")
        self._padding = resolve_padding(self.padding, self._kernel)
        OH, OW = output_size(self, self.input_shape_, self._kernel, self._stride, self._padding)
        F, (kh, kw) = int(self.filters), self._kernel
        W, b = initial_weights(
            self.init, rng, (F, C, kh, kw), F, C * kh * kw, F * kh * kw, self.activation
        )
        self._add_params(**({"W": W, "b": b} if self.use_bias else {"W": W}))
        self.output_shape_ = (F, OH, OW)
        return self.output_shape_

    def values_per_sample(self):
        # the patch matrix: C * kh * kw values per output pixel
        F, OH, OW = self.output_shape_
        C = self.input_shape_[0]
        return max(F, C * self._kernel[0] * self._kernel[1]) * OH * OW

    def _patches(self, X, out=None):
        """The patch matrix (C * kh * kw, n * OH * OW) of images ``X``."""
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        col = self.backend_.im2col(X, kh, kw, sh, sw, ph, pw, out=out)
        return col.reshape(col.shape[0] * kh * kw, -1)

    def forward(self, X, *, training):
        if self.backend_.conv_channels_last(self.input_shape_[0]):
            return self._forward_nhwc(X, training)
        if self.backend_.conv_per_image(self.input_shape_[0]):
            return self._forward_per_image(X, training)
        backend, xp = self.backend_, self.xp
        N, C = X.shape[:2]
        F, OH, OW = self.output_shape_
        kh, kw = self._kernel
        Wm = self.params["W"].reshape(F, -1)
        bias = self.params["b"] if self.use_bias else None
        Z = self._buffer("Z", (N, F, OH, OW)) if training else xp.empty((N, F, OH, OW), X.dtype)
        # While training, the patches and the product live in buffers reused
        # across batches: fresh arrays of this size cost page faults every time.
        out = None
        if training:
            out = self._buffer("col", (C * kh * kw * N * OH * OW,)).reshape(C, kh, kw, N, OH, OW)
        col = self._patches(X, out)
        Zm = self._buffer("Zm", (F * col.shape[1],)).reshape(F, -1) if training else None
        Zm = xp.matmul(Wm, col, out=Zm)
        act = self.activation or "identity"
        if not activation_needs_input(act):
            # bias, activation (in place) and the move to NCHW in one backend call
            Y = backend.conv_output(Zm, bias, act, Z)
        else:  # keep the activation's input for backward
            backend.conv_output(Zm, bias, "identity", Z)
            Y = self._buffer("Y", Z.shape) if training else Z
            backend.activation_forward(act, Z, Y)
        if training:
            self._cache = {"col": col, "Y": Y, "Z": Z}
        return Y

    def backward(self, dY):
        backend, xp, cache = self.backend_, self.xp, self._cache
        act = self.activation or "identity"
        if activation_needs_input(act):
            dY = backend.activation_backward(act, dY, cache["Y"], cache["Z"], dY)
            act = "identity"
        if "Wk" in cache:
            return self._backward_nhwc(dY, act)
        if "images" in cache:
            return self._backward_per_image(dY, act)
        col = cache["col"]
        N = dY.shape[0]
        F, OH, OW = self.output_shape_
        dZm = self._buffer("dZm", (F * col.shape[1],)).reshape(F, -1)
        db = self.grads["b"] if self.use_bias and self.trainable else None
        backend.conv_output_grad(dY, cache["Y"], act, dZm, db)
        if self.trainable:
            xp.matmul(dZm, col.T, out=self.grads["W"].reshape(F, -1))
        if self.skip_input_grad:
            return None
        C, H, W = self.input_shape_
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        Wm = self.params["W"].reshape(F, -1)
        dcol = xp.matmul(Wm.T, dZm, out=self._buffer("dcol", (col.size,)).reshape(col.shape))
        return backend.col2im(
            dcol.reshape(C, kh, kw, N, OH, OW),
            H,
            W,
            sh,
            sw,
            ph,
            pw,
            out=self._buffer("dX", (N, C, H, W)),
        )

    # -- channels-last patches (where ``backend.conv_channels_last(C)``) --------------
    # The patch matrix is (N * OH * OW, kh * kw * C) with each patch's channels
    # innermost and the filters are reordered to (F, kh, kw, C): the products
    # are then plain row-major ones, and building or summing back the patches
    # moves C contiguous values at a time. Images stay NCHW between layers.
    def _forward_nhwc(self, X, training):
        backend, xp = self.backend_, self.xp
        N, C, H, W = X.shape
        F, OH, OW = self.output_shape_
        (kh, kw), (ph, pw) = self._kernel, self._padding
        K = kh * kw * C
        buffer = self._buffer if training else (lambda key, shape, **kw: xp.empty(shape, X.dtype))
        Wk = buffer("Wk", (F, K), batch_first=False)
        Wk.reshape(F, kh, kw, C)[...] = self.params["W"].transpose(0, 2, 3, 1)
        geometry = (*self._kernel, *self._stride, *self._padding)
        col = backend.im2col_nhwc(
            X,
            *geometry,
            out=buffer("col", (N, OH, OW, kh, kw, C)),
            padded=buffer("padded", (N, H + 2 * ph, W + 2 * pw, C)),
        ).reshape(N * OH * OW, K)
        Zm = xp.matmul(col, Wk.T, out=buffer("Zm", (N * OH * OW, F)))
        bias = self.params["b"] if self.use_bias else None
        Z = buffer("Z", (N, F, OH, OW))
        act = self.activation or "identity"
        if not activation_needs_input(act):
            Y = backend.conv_output_nhwc(Zm, bias, act, Z)
        else:  # keep the activation's input for backward
            backend.conv_output_nhwc(Zm, bias, "identity", Z)
            Y = buffer("Y", Z.shape)
            backend.activation_forward(act, Z, Y)
        if training:
            self._cache = {"col": col, "Wk": Wk, "Y": Y, "Z": Z}
        return Y

    def _backward_nhwc(self, dY, act):
        backend, xp, cache = self.backend_, self.xp, self._cache
        col, Wk = cache["col"], cache["Wk"]
        N, C, H, W = (dY.shape[0],) + self.input_shape_
        F, OH, OW = self.output_shape_
        (kh, kw), (ph, pw) = self._kernel, self._padding
        dZm = self._buffer("dZm", (N * OH * OW, F))
        db = self.grads["b"] if self.use_bias and self.trainable else None
        backend.conv_output_grad_nhwc(dY, cache["Y"], act, dZm, db)
        if self.trainable:
            dWk = xp.matmul(
                dZm.T, col, out=self._buffer("dWk", (F, Wk.shape[1]), batch_first=False)
            )
            self.grads["W"][...] = dWk.reshape(F, kh, kw, C).transpose(0, 3, 1, 2)
        if self.skip_input_grad:
            return None
        dcol = xp.matmul(dZm, Wk, out=self._buffer("dcol", col.shape))
        return backend.col2im_nhwc(
            dcol.reshape(N, OH, OW, kh, kw, C),
            H,
            W,
            *self._stride,
            *self._padding,
            out=self._buffer("dX", (N, C, H, W)),
            padded=self._buffer("dpadded", (N, H + 2 * ph, W + 2 * pw, C)),
        )

    # -- one product per image (where ``backend.conv_per_image(C)``) -----------------
    def _forward_per_image(self, X, training):
        backend, xp = self.backend_, self.xp
        N, C = X.shape[:2]
        F, OH, OW = self.output_shape_
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        buffer = self._buffer if training else (lambda key, shape: xp.empty(shape, X.dtype))
        col = backend.im2col_images(
            X, kh, kw, sh, sw, ph, pw, out=buffer("col", (N, C * kh * kw, OH * OW))
        )
        Z = buffer("Z", (N, F, OH, OW))
        xp.matmul(self.params["W"].reshape(F, -1), col, out=Z.reshape(N, F, -1))
        bias = self.params["b"] if self.use_bias else None
        act = self.activation or "identity"
        if not activation_needs_input(act):
            Y = backend.plane_output(Z, bias, act)
        else:  # keep the activation's input for backward
            backend.plane_output(Z, bias, "identity")
            Y = buffer("Y", Z.shape)
            backend.activation_forward(act, Z, Y)
        if training:
            self._cache = {"images": col, "Y": Y, "Z": Z}
        return Y

    def _backward_per_image(self, dY, act):
        backend, xp, col = self.backend_, self.xp, self._cache["images"]
        N, F = dY.shape[:2]
        db = self.grads["b"] if self.use_bias and self.trainable else None
        dZ = backend.plane_output_grad(dY, self._cache["Y"], act, db, self._buffer("dZ", dY.shape))
        dZ = dZ.reshape(N, F, -1)
        Wm = self.params["W"].reshape(F, -1)
        if self.trainable:  # one (F, K) product per image, then their sum
            per_image = xp.matmul(
                dZ, col.transpose(0, 2, 1), out=self._buffer("dWn", (N,) + Wm.shape)
            )
            per_image.sum(axis=0, out=self.grads["W"].reshape(Wm.shape))
        if self.skip_input_grad:
            return None
        C, H, W = self.input_shape_
        (kh, kw), (sh, sw), (ph, pw) = self._kernel, self._stride, self._padding
        dcol = xp.matmul(Wm.T, dZ, out=self._buffer("dcol", col.shape))
        _, OH, OW = self.output_shape_
        return backend.col2im(
            dcol.reshape(N, C, kh, kw, OH, OW).transpose(1, 2, 3, 0, 4, 5),
            H,
            W,
            sh,
            sw,
            ph,
            pw,
            out=self._buffer("dX", (N, C, H, W)),
        )

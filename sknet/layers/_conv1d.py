"""1-D convolution over the steps of sequences, by windows (im2col) and one matrix product."""

from numbers import Integral

from sklearn.utils._param_validation import StrOptions

from sknet.backend import activation_needs_input
from sknet.layers._base import Layer
from sknet.layers._constraints import (
    ACTIVATION,
    INITIALIZER,
    POSITIVE_INT,
    TRAINING_CONSTRAINTS,
    Count,
)
from sknet.layers._dense import _check_activation
from sknet.layers._init import initial_weights
from sknet.layers._steps import check_sequence_shape, work_arrays


def positive_int(value, name):
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def steps_padding(padding, steps, window, stride, name="padding"):
    """``(left, right)`` padded steps for ``'valid'``, ``'same'`` or an int on each side.

    ``window`` is the extent of a window in steps (``dilation * (kernel - 1) + 1``).
    ``'same'`` gives ``ceil(steps / stride)`` outputs (``steps`` at stride 1),
    the extra padded step, if any, on the right (as Keras and PyTorch do).
    """
    if padding == "valid":
        return 0, 0
    if padding == "same":
        outputs = -(-steps // stride)
        total = max((outputs - 1) * stride + window - steps, 0)
        return total // 2, total - total // 2
    if isinstance(padding, Integral) and not isinstance(padding, bool) and padding >= 0:
        return int(padding), int(padding)
    raise ValueError(f"{name} must be 'valid', 'same' or a non-negative int, got {padding!r}")


def steps_out(layer, steps, window, stride, padding, name="kernel_size"):
    """Number of windows, or a ValueError naming ``name`` (the window parameter) when none fits."""
    out = (steps + padding[0] + padding[1] - window) // stride + 1
    if out < 1:
        dilation = getattr(layer, "_dilation", 1)
        largest = (steps + padding[0] + padding[1] - 1) // dilation + 1
        raise ValueError(
            f"{type(layer).__name__}: {name}={getattr(layer, name)!r} does not fit in "
            f"sequences of {steps} steps with padding {padding} (windows of {window} steps); "
            f"give a {name} of at most {largest}, or padding='same'"
        )
    return out


class Conv1D(Layer):
    """1-D convolution along the steps of sequences, ``Y = f(X * W + b)``.

    Each output step sees ``kernel_size`` input steps ``dilation`` apart. The
    windows of a batch are copied once into a ``(N * OT, kernel_size * C)``
    matrix that multiplies the filters, ``(kernel_size * C, filters)``, in one
    product, whose result is already the ``(N, OT, filters)`` output.

    Parameters
    ----------
    filters : int
        Number of output features (channels) per step.
    kernel_size : int, default=3
        Steps in a window.
    stride : int, default=1
        Steps between windows.
    padding : {'valid', 'same'} or int, default='valid'
        Zero steps added: none; enough for ``ceil(timesteps / stride)``
        outputs (``timesteps`` at stride 1); or as many on each side.
    dilation : int, default=1
        Steps between the inputs of a window.
    activation : str or None, default=None
        Activation applied in place (see :class:`Dense`).
    use_bias : bool, default=True
        Whether to add a learned bias per filter.
    init : {'he_uniform', 'glorot_uniform'} or callable, default='he_uniform'
        Initializer, with ``fan_in = kernel_size * C`` and
        ``fan_out = kernel_size * filters``.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'W'`` of shape ``(kernel_size, C, filters)`` (``W[j, c, f]`` weighs
        feature ``c`` of a window's step ``j``; PyTorch's ``Conv1d.weight`` is
        ``W.transpose(2, 1, 0)``) and ``'b'`` of shape ``(filters,)``.

    See Also
    --------
    Conv2D : The convolution of images.
    MaxPool1D, AvgPool1D, GlobalMaxPool1D : Pooling over steps.

    Notes
    -----
    Input shape: ``(batch, timesteps, C)``, sknet's sequence layout (PyTorch's
    ``Conv1d`` takes ``(batch, C, timesteps)``). Output shape:
    ``(batch, OT, filters)`` with ``OT = (timesteps + left + right -
    dilation * (kernel_size - 1) - 1) // stride + 1``. It does not take a
    padding mask: padded steps enter the windows like any other.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Conv1D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Conv1D(8, kernel_size=3, padding="same", activation="relu")
    >>> layer.build((10, 4), backend=backend, dtype=np.float32, rng=rng)
    (10, 8)
    >>> layer.params["W"].shape
    (3, 4, 8)
    >>> layer.forward(np.ones((2, 10, 4), np.float32), training=False).shape
    (2, 10, 8)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    regularized = ("W",)

    _parameter_constraints: dict = {
        "filters": [POSITIVE_INT],
        "kernel_size": [POSITIVE_INT],
        "stride": [POSITIVE_INT],
        "padding": [StrOptions({"valid", "same"}), Count(0)],
        "dilation": [POSITIVE_INT],
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
        dilation=1,
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
        self.dilation = dilation
        self.activation = activation
        self.use_bias = use_bias
        self.init = init
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        F = positive_int(self.filters, "filters")
        k = positive_int(self.kernel_size, "kernel_size")
        self._stride = positive_int(self.stride, "stride")
        self._dilation = positive_int(self.dilation, "dilation")
        _check_activation(self.activation)
        T, C = check_sequence_shape(self, self.input_shape_)
        window = self._dilation * (k - 1) + 1
        self._padding = steps_padding(self.padding, T, window, self._stride)
        OT = steps_out(self, T, window, self._stride, self._padding)
        W, b = initial_weights(self.init, rng, (k, C, F), F, k * C, k * F, self.activation)
        self._add_params(**({"W": W, "b": b} if self.use_bias else {"W": W}))
        self.output_shape_ = (OT, F)
        return self.output_shape_

    def values_per_sample(self):
        OT, F = self.output_shape_
        return OT * max(F, int(self.kernel_size) * self.input_shape_[1])

    def _windows(self, X, buffer):
        """The window matrix (N * OT, k * C) of sequences ``X``."""
        N, T, C = X.shape
        k, OT = int(self.kernel_size), self.output_shape_[0]
        col = buffer("col", (N, OT, k, C))
        self.backend_.im2col_1d(X, self._stride, self._dilation, self._padding[0], col)
        return col.reshape(N * OT, k * C)

    def forward(self, X, *, training):
        backend, xp = self.backend_, self.xp
        N = X.shape[0]
        OT, F = self.output_shape_
        buffer = work_arrays(self, training)
        col = self._windows(X, buffer)
        Z = xp.matmul(col, self.params["W"].reshape(-1, F), out=buffer("Z", (N * OT, F)))
        bias = self.params["b"] if self.use_bias else None
        act = self.activation or "identity"
        if not activation_needs_input(act):  # bias and activation in place, one call
            Y = backend.bias_activation(Z, bias, act)
        else:
            backend.bias_activation(Z, bias, "identity")
            Y = buffer("Y", (N * OT, F))
            backend.activation_forward(act, Z, Y)
        if training:
            self._cache = {"col": col, "Y": Y, "Z": Z}
        return Y.reshape(N, OT, F)

    def backward(self, dY):
        backend, xp, cache = self.backend_, self.xp, self._cache
        N = dY.shape[0]
        OT, F = self.output_shape_
        dY = dY.reshape(N * OT, F)
        if not dY.flags.c_contiguous:
            dY = xp.ascontiguousarray(dY)
        act = self.activation or "identity"
        if activation_needs_input(act):
            dY = backend.activation_backward(act, dY, cache["Y"], cache["Z"], dY)
            act = "identity"
        train = self.trainable
        db = self.grads["b"] if self.use_bias and train else None
        dZ = backend.bias_activation_grad(dY, cache["Y"], act, db)
        col, W = cache["col"], self.params["W"].reshape(-1, F)
        if train:
            xp.matmul(col.T, dZ, out=self.grads["W"].reshape(-1, F))
        if self.skip_input_grad:
            return None
        T, C = self.input_shape_
        k = int(self.kernel_size)
        dcol = xp.matmul(dZ, W.T, out=self._buffer("dcol", col.shape))
        dX = self._buffer("dX", (N, T, C))
        return backend.col2im_1d(
            dcol.reshape(N, OT, k, C), self._stride, self._dilation, self._padding[0], dX
        )

"""Convolution and pooling primitives, on the kernels the built-in layers use.

Images are channels first: ``(batch, C, H, W)``; filters ``(F, C, kh, kw)``.
``stride`` and ``padding`` are an int or a pair (zero padding for the
convolution and average pooling; padded pixels never win a maximum).
"""

from sknet.autodiff._variable import record, value
from sknet.backend import get_backend, is_device_array
from sknet.backend._base import conv_outsize


def _backend_of(x):
    if is_device_array(x):
        return get_backend(f"cuda:{x.device.id}")
    return get_backend("cpu")


def _pair(v, name):
    pair = (v, v) if isinstance(v, int) else tuple(v)
    if len(pair) != 2 or not all(isinstance(n, int) and n >= 0 for n in pair):
        raise ValueError(f"{name} must be a non-negative int or a pair of them, got {v!r}")
    return pair


def _check_images(x, who):
    if value(x).ndim != 4:
        raise ValueError(f"{who} needs images of shape (batch, C, H, W), got {value(x).shape}")


def conv2d(x, W, b=None, stride=1, padding=0):
    """2-D convolution (cross-correlation, as every deep-learning library) of ``x`` by ``W``.

    Parameters
    ----------
    x : array of shape (batch, C, H, W)
    W : array of shape (F, C, kh, kw)
    b : array of shape (F,), default=None
    stride, padding : int or (int, int), default=1 and 0

    Returns
    -------
    y : array of shape (batch, F, OH, OW)

    Raises
    ------
    ValueError
        If ``x`` or ``W`` is not 4-D, their channels differ, or the kernel's
        window is larger than the padded images.
    """
    _check_images(x, "conv2d")
    dx, dW = value(x), value(W)
    if dW.ndim != 4:
        raise ValueError(
            "conv2d: the kernel W must be 4-D (out_channels, in_channels, kh, kw), got shape "
            f"{dW.shape}"
        )
    backend, xp = _backend_of(dx), _backend_of(dx).xp
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    N, C, H, Wd = dx.shape
    F, C_w, kh, kw = dW.shape
    if C_w != C:
        raise ValueError(f"conv2d: the filters have {C_w} channels, the images {C}")
    _check_window("conv2d", (kh, kw), (H, Wd), (ph, pw))
    OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(Wd, kw, sw, pw)
    col = backend.im2col(dx, kh, kw, sh, sw, ph, pw).reshape(C * kh * kw, -1)
    Wm = dW.reshape(F, -1)
    Z = xp.ascontiguousarray((Wm @ col).reshape(F, N, OH, OW).transpose(1, 0, 2, 3))
    inputs = (x, W)
    if b is not None:
        Z += value(b)[:, None, None]
        inputs = (x, W, b)

    def vjp(g, needs):
        gZ = g.transpose(1, 0, 2, 3).reshape(F, -1)
        gx = gW = None
        if needs[0]:
            gcol = (Wm.T @ gZ).reshape(C, kh, kw, N, OH, OW)
            gx = backend.col2im(gcol, H, Wd, sh, sw, ph, pw)
        if needs[1]:
            gW = (gZ @ col.T).reshape(dW.shape)
        gb = g.sum(axis=(0, 2, 3)) if len(needs) > 2 and needs[2] else None
        return gx, gW, gb

    return record(Z, inputs, vjp)


def max_pool2d(x, pool_size=2, stride=None, padding=0):
    """Maximum over windows of ``pool_size`` every ``stride`` (default: ``pool_size``).

    A window larger than the padded images is a ValueError (no window fits).
    """
    _check_images(x, "max_pool2d")
    dx = value(x)
    backend = _backend_of(dx)
    kernel, stride, padding, out_hw = _windows(dx, pool_size, stride, padding, "max_pool2d")
    Y, argmax = backend.max_pool_forward(dx, kernel, stride, padding, out_hw)

    def vjp(g, needs):
        hw = dx.shape[2:]
        return (backend.max_pool_backward(g, argmax, hw, kernel, stride, padding),)

    return record(Y, (x,), vjp)


def avg_pool2d(x, pool_size=2, stride=None, padding=0):
    """Mean over windows of ``pool_size`` every ``stride`` (padded pixels count as 0).

    A window larger than the padded images is a ValueError (no window fits).
    """
    _check_images(x, "avg_pool2d")
    dx = value(x)
    xp = _backend_of(dx).xp
    windows = _windows(dx, pool_size, stride, padding, "avg_pool2d")
    (kh, kw), (sh, sw), (ph, pw), (OH, OW) = windows
    N, C, H, W = dx.shape
    padded = xp.pad(dx, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else dx
    views = [
        (slice(i, i + sh * OH, sh), slice(j, j + sw * OW, sw))
        for i in range(kh)
        for j in range(kw)
    ]
    Y = xp.zeros((N, C, OH, OW), dtype=dx.dtype)
    for rows, cols in views:
        Y += padded[:, :, rows, cols]
    Y *= 1.0 / (kh * kw)

    def vjp(g, needs):
        grad = xp.zeros(padded.shape, dtype=g.dtype)
        share = g * (1.0 / (kh * kw))
        for rows, cols in views:
            grad[:, :, rows, cols] += share
        return (grad[:, :, ph : ph + H, pw : pw + W],)

    return record(Y, (x,), vjp)


def _check_window(who, window, hw, padding):
    """A ValueError unless ``window`` fits in images of size ``hw`` padded by ``padding``."""
    if any(k > n + 2 * p for k, n, p in zip(window, hw, padding)):
        raise ValueError(
            f"{who}: the window {tuple(window)} is larger than the images "
            f"({hw[0]}x{hw[1]}, padded by {tuple(padding)}): no window fits"
        )


def _windows(x, pool_size, stride, padding, who):
    kernel = _pair(pool_size, "pool_size")
    stride = kernel if stride is None else _pair(stride, "stride")
    padding = _pair(padding, "padding")
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(f"padding {padding} must be at most half the pool size {kernel}")
    H, W = x.shape[2:]
    _check_window(who, kernel, (H, W), padding)
    out_hw = tuple(conv_outsize(n, k, s, p) for n, k, s, p in zip((H, W), kernel, stride, padding))
    return kernel, stride, padding, out_hw

"""The NumPy backend: the shared ``xp`` kernels, a strided-view im2col, and the
fused Numba kernels of :mod:`sknet.backend._cpu_kernels` where Numba is installed
(each method falls back to the shared NumPy code without them)."""

import os

import numpy as np
import scipy.sparse as sp

from sknet.backend._base import Backend, conv_outsize
from sknet.backend._cpu_kernels import KERNELS

_NO_MASK = np.ones(0, dtype=bool)


def _contiguous(*arrays, ndim=1):
    """Whether every array is a C-contiguous NumPy array of ``ndim`` dimensions."""
    return all(type(a) is np.ndarray and a.ndim == ndim and a.flags.c_contiguous for a in arrays)


class NumpyBackend(Backend):
    """Backend running on the host with NumPy (and SciPy for sparse input)."""

    def __init__(self):
        super().__init__("cpu", np)
        self.kernels = KERNELS  # fused Numba kernels, or None: the NumPy code

    def asarray(self, x, dtype=None):
        if type(x).__module__.split(".")[0] in ("cupy", "cupyx"):
            x = x.get()  # device to host, e.g. moving a GPU-trained model to the CPU
        if sp.issparse(x):
            x = x.tocsr() if x.format != "csr" else x
            return x.astype(dtype, copy=False) if dtype is not None else x
        return np.asarray(x, dtype=dtype)

    def to_numpy(self, x):
        return np.asarray(x)

    def is_sparse(self, x):
        return sp.issparse(x)

    def out_of_memory_errors(self):
        return (MemoryError,)

    def available_memory(self):
        try:  # physical memory not in use (Linux and most Unixes)
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None

    def im2col(self, X, kh, kw, sh, sw, ph, pw, pad_value=0.0, out=None):
        # One strided view of all patches, copied once into the column layout.
        N, C, H, W = X.shape
        OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(W, kw, sw, pw)
        if ph or pw:
            X = np.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
        sN, sC, sH, sW = X.strides
        patches = np.lib.stride_tricks.as_strided(
            X,
            shape=(C, kh, kw, N, OH, OW),
            strides=(sC, sH, sW, sN, sH * sh, sW * sw),
            writeable=False,
        )
        if out is None:
            return np.ascontiguousarray(patches)
        np.copyto(out, patches)
        return out

    # -- channels-last convolution: Conv2D's layout here, from 8 input channels
    def conv_channels_last(self, channels):
        # With fewer channels, a patch's runs are too short to pay for the
        # transposes (a first layer's single channel is faster channels-first).
        return channels >= 8

    # -- few input channels: one product per image, outputs already NCHW
    def conv_per_image(self, channels):
        """Whether Conv2D computes one product per image (fewer than 8 channels).

        With a patch of only ``C * kh * kw`` values (9 for a grey first layer),
        the batch's one product is a poor matrix shape and its (F, N * pixels)
        result needs a transposing pass; per image, ``W @ patches[n]`` is
        already image ``n``'s (F, pixels) output.
        """
        return channels < 8

    def im2col_images(self, X, kh, kw, sh, sw, ph, pw, out=None):
        """Patches of NCHW ``X`` per image, (N, C * kh * kw, OH * OW)."""
        N, C, H, W = X.shape
        OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(W, kw, sw, pw)
        if ph or pw:
            X = np.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        sN, sC, sH, sW = X.strides
        patches = np.lib.stride_tricks.as_strided(
            X,
            shape=(N, C, kh, kw, OH, OW),
            strides=(sN, sC, sH, sW, sH * sh, sW * sw),
            writeable=False,
        )
        if out is None:
            out = np.empty((N, C * kh * kw, OH * OW), dtype=X.dtype)
        np.copyto(out.reshape(N, C, kh, kw, OH, OW), patches)
        return out

    def plane_output(self, Z, bias, activation):
        """Bias and activation in place on a convolution's NCHW output ``Z``."""
        N, F = Z.shape[:2]
        if self.kernels is not None and activation in ("relu", "identity"):
            planes = Z.reshape(N, F, -1)
            self._conv_output(planes, bias, activation, planes)
            return Z
        if bias is not None:
            Z += bias.reshape(1, F, *([1] * (Z.ndim - 2)))
        return self.activation_forward(activation, Z, Z)

    def plane_output_grad(self, dY, Y, activation, db, out):
        """The gradient through :meth:`plane_output` into ``out`` (shaped like ``dY``,
        which may be overwritten), and ``db``."""
        N, F = dY.shape[:2]
        if activation not in ("relu", "identity"):
            dY = self.activation_backward(activation, dY, Y, None, dY)
            activation = "identity"
        if self.kernels is not None:  # out apart from dY: an aliased pair would not vectorize
            planes = out.reshape(N, F, -1)
            self._conv_output_grad(
                dY.reshape(N, F, -1), Y.reshape(N, F, -1), activation, planes, db
            )
            return out
        out[...] = dY
        if activation == "relu":
            out[Y <= 0] = 0
        if db is not None:
            db[...] = out.reshape(N, F, -1).sum(axis=(0, 2))
        return out

    def _conv_output(self, Z, bias, activation, out):
        # the Numba epilogue on (N, F, P) views: relu or identity
        if bias is None:
            bias = np.zeros(out.shape[1], dtype=out.dtype)
        self.kernels["conv_output"](Z, bias, activation == "relu", out)

    def _conv_output_grad(self, dY, Y, activation, dZ, db):
        bias_grad = np.empty(dY.shape[1], dtype=dY.dtype) if db is None else db
        self.kernels["conv_output_grad"](dY, Y, activation == "relu", dZ, bias_grad)

    def im2col_nhwc(self, X, kh, kw, sh, sw, ph, pw, out=None, padded=None):
        """Patches ``(N, OH, OW, kh, kw, C)`` of NCHW images ``X``, channels innermost.

        Each patch copies ``C`` contiguous values at a time from the images
        moved channels-last (into ``padded``, ``(N, H + 2ph, W + 2pw, C)``),
        and the patch matrix times the filters gives outputs as (pixels,
        filters), so no product operand is ever transposed in memory.
        """
        N, C, H, W = X.shape
        OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(W, kw, sw, pw)
        if padded is None:
            padded = np.empty((N, H + 2 * ph, W + 2 * pw, C), dtype=X.dtype)
        if out is None:
            out = np.empty((N, OH, OW, kh, kw, C), dtype=X.dtype)
        if self.kernels is not None:
            self.kernels["pad_nhwc"](np.ascontiguousarray(X), ph, pw, padded)
            self.kernels["patches_nhwc"](padded, sh, sw, out)
            return out
        padded.fill(0)
        padded[:, ph : ph + H, pw : pw + W, :] = X.transpose(0, 2, 3, 1)
        sN, sH, sW, sC = padded.strides
        patches = np.lib.stride_tricks.as_strided(
            padded,
            shape=(N, OH, OW, kh, kw, C),
            strides=(sN, sH * sh, sW * sw, sH, sW, sC),
            writeable=False,
        )
        np.copyto(out, patches)
        return out

    def col2im_nhwc(self, dcol, H, W, sh, sw, ph, pw, out=None, padded=None):
        """The adjoint of :meth:`im2col_nhwc`: ``dcol`` summed back into NCHW images."""
        N, OH, OW, kh, kw, C = dcol.shape
        if padded is None:
            padded = np.empty((N, H + 2 * ph, W + 2 * pw, C), dtype=dcol.dtype)
        if out is None:
            out = np.empty((N, C, H, W), dtype=dcol.dtype)
        if self.kernels is not None:
            self.kernels["col2im_nhwc"](np.ascontiguousarray(dcol), sh, sw, ph, pw, padded, out)
            return out
        padded.fill(0)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i, i + sh * (OH - 1) + 1, sh)
                cols = slice(j, j + sw * (OW - 1) + 1, sw)
                padded[:, rows, cols, :] += dcol[:, :, :, i, j, :]
        out[...] = padded[:, ph : ph + H, pw : pw + W, :].transpose(0, 3, 1, 2)
        return out

    def conv_output_nhwc(self, Zm, bias, activation, out):
        """Bias and activation on the product ``Zm`` (N * OH * OW, F), into NCHW ``out``."""
        N, F = out.shape[:2]
        if self.kernels is not None and activation in ("relu", "identity"):
            pixels_first = Zm.reshape(N, -1, F).transpose(0, 2, 1)  # seen as (N, F, P)
            self._conv_output(pixels_first, bias, activation, out.reshape(N, F, -1))
            return out
        if bias is not None:
            Zm += bias
        self.activation_forward(activation, Zm, Zm)
        out.reshape(N, F, -1)[...] = Zm.reshape(N, -1, F).transpose(0, 2, 1)
        return out

    def conv_output_grad_nhwc(self, dY, Y, activation, dZm, db):
        """``dZm`` (N * OH * OW, F) and ``db`` from NCHW ``dY`` and the output ``Y``.

        May overwrite ``dY``.
        """
        N, F = dY.shape[:2]
        if activation not in ("relu", "identity"):
            dY = self.activation_backward(activation, dY, Y, None, dY)
            activation = "identity"
        if self.kernels is not None:
            pixels_first = dZm.reshape(N, -1, F).transpose(0, 2, 1)  # seen as (N, F, P)
            self._conv_output_grad(
                dY.reshape(N, F, -1), Y.reshape(N, F, -1), activation, pixels_first, db
            )
            return dZm
        g = dZm.reshape(N, -1, F)
        g[...] = dY.reshape(N, F, -1).transpose(0, 2, 1)
        if activation == "relu":
            g[Y.reshape(N, F, -1).transpose(0, 2, 1) <= 0] = 0
        if db is not None:
            db[...] = g.sum(axis=(0, 1))
        return dZm

    def activation_forward(self, name, Z, out):
        if name == "logistic":
            # sigmoid(z) = (1 + tanh(z / 2)) / 2: NumPy's vectorized tanh makes
            # this 3x faster than scipy's expit, and it cannot overflow.
            np.multiply(Z, 0.5, out=out)
            np.tanh(out, out=out)
            out *= 0.5
            out += 0.5
            return out
        return super().activation_forward(name, Z, out)

    def adam_update(self, param, grad, m, v, lr, beta_1, beta_2, epsilon, tmp):
        if self.kernels is None or not _contiguous(param, grad, m, v):
            return super().adam_update(param, grad, m, v, lr, beta_1, beta_2, epsilon, tmp)
        dt = param.dtype.type
        self.kernels["adam_update"](param, grad, m, v, dt(lr), dt(beta_1), dt(beta_2), dt(epsilon))

    def sgd_update(self, param, grad, velocity, lr, momentum, nesterov, tmp):
        if self.kernels is None or not _contiguous(param, grad, velocity):
            return super().sgd_update(param, grad, velocity, lr, momentum, nesterov, tmp)
        dt = param.dtype.type
        self.kernels["sgd_update"](param, grad, velocity, dt(lr), dt(momentum), bool(nesterov))

    def add_scaled(self, y, x, alpha):
        if self.kernels is None or not _contiguous(y, x):
            return super().add_scaled(y, x, alpha)
        self.kernels["add_scaled"](y, x, y.dtype.type(alpha))
        return y

    def lstm_cell_forward(self, g, c_prev, c, tc, h_prev, h, real):
        if self.kernels is None:
            return super().lstm_cell_forward(g, c_prev, c, tc, h_prev, h, real)
        has_mask = real is not None
        real = real if has_mask else _NO_MASK
        self.kernels["lstm_gates"](g, c_prev, c, real, has_mask)
        np.tanh(c, out=tc)
        self.kernels["lstm_output"](g, tc, h_prev, h, real, has_mask)

    def lstm_derivative_factors(self, G, TC):
        if self.kernels is None:
            return super().lstm_derivative_factors(G, TC)
        return None  # the fused step computes them

    def lstm_cell_backward(self, dh, dc, g, tc, c_prev, real, dz, factors):
        if self.kernels is None:
            return super().lstm_cell_backward(dh, dc, g, tc, c_prev, real, dz, factors)
        has_mask = real is not None
        self.kernels["lstm_backward_step"](
            dh, dc, g, tc, c_prev, real if has_mask else _NO_MASK, has_mask, dz
        )
        return dc

    def gru_cell_forward(self, p, hu, g, h_prev, h, real):
        if self.kernels is None:
            return super().gru_cell_forward(p, hu, g, h_prev, h, real)
        H = h.shape[1]
        zr = g[:, : 2 * H]
        np.add(p[:, : 2 * H], hu[:, : 2 * H], out=zr)
        np.tanh(zr, out=zr)
        self.kernels["gru_gates"](p, hu, g)
        np.tanh(g[:, 2 * H :], out=g[:, 2 * H :])
        has_mask = real is not None
        self.kernels["gru_output"](g, h_prev, h, real if has_mask else _NO_MASK, has_mask)

    def gru_cell_backward(self, dh, g, hu, h_prev, real, dp, dhu, dh_prev):
        if self.kernels is None:
            return super().gru_cell_backward(dh, g, hu, h_prev, real, dp, dhu, dh_prev)
        has_mask = real is not None
        self.kernels["gru_backward_step"](
            dh, g, hu, h_prev, real if has_mask else _NO_MASK, has_mask, dp, dhu, dh_prev
        )

    # -- convolution and pooling: one pass over each image, where NumPy makes several
    def col2im(self, col, H, W, sh, sw, ph, pw, out=None):
        if self.kernels is None:
            return super().col2im(col, H, W, sh, sw, ph, pw, out=out)
        C, _, _, N, _, _ = col.shape
        if out is None:
            out = np.zeros((N, C, H, W), dtype=col.dtype)
        else:
            out.fill(0)
        self.kernels["col2im"](np.ascontiguousarray(col), ph, pw, sh, sw, out)
        return out

    def max_pool_forward(self, X, kernel, stride, padding, out_hw, out=None):
        if self.kernels is None:
            return super().max_pool_forward(X, kernel, stride, padding, out_hw, out=out)
        N, C = X.shape[:2]
        if out is None:
            Y = np.empty((N, C, *out_hw), dtype=X.dtype)
            argmax = np.empty(Y.shape, dtype=np.int32)
        else:
            Y, argmax = out
        self.kernels["max_pool_forward"](
            np.ascontiguousarray(X), *kernel, *stride, *padding, Y, argmax
        )
        return Y, argmax

    def max_pool_backward(self, dY, argmax, input_hw, kernel, stride, padding, out=None):
        if self.kernels is None:
            return super().max_pool_backward(
                dY, argmax, input_hw, kernel, stride, padding, out=out
            )
        N, C = dY.shape[:2]
        H, W = input_hw
        if out is None:
            out = np.zeros((N, C, H, W), dtype=dY.dtype)
        else:
            out.fill(0)
        self.kernels["max_pool_backward"](
            np.ascontiguousarray(dY), argmax, out.reshape(N, C, H * W)
        )
        return out

    # -- dense layers: bias, ReLU and their gradients in one pass
    def bias_activation(self, Z, bias, activation):
        if (
            self.kernels is None
            or activation not in ("relu", "identity")
            or not _contiguous(Z, ndim=2)
        ):
            return super().bias_activation(Z, bias, activation)
        if bias is None:
            bias = np.zeros(Z.shape[1], dtype=Z.dtype)
        self.kernels["bias_activation"](Z, bias, activation == "relu")
        return Z

    def bias_activation_grad(self, dY, Y, activation, db):
        if (
            self.kernels is None
            or activation not in ("relu", "identity")
            or not _contiguous(dY, ndim=2)
        ):
            return super().bias_activation_grad(dY, Y, activation, db)
        sums = np.empty(dY.shape[1], dtype=dY.dtype) if db is None else db
        self.kernels["bias_activation_grad"](dY, Y, activation == "relu", sums)
        return dY

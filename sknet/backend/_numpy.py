"""The NumPy backend: the shared ``xp`` kernels, a strided-view im2col, and the
fused Numba kernels of :mod:`sknet.backend._cpu_kernels` where Numba is installed
(each method falls back to the shared NumPy code without them)."""

import os

import numpy as np
import scipy.sparse as sp

from sknet.backend._base import Backend
from sknet.backend._cpu_kernels import KERNELS, require
from sknet.backend._numpy_conv import NumpyConvolutions
from sknet.backend._numpy_sequence import NumpySequenceKernels
from sknet.backend._numpy_tabular import NumpyTabularKernels

_NO_MASK = np.ones(0, dtype=bool)


def _contiguous(*arrays, ndim=1):
    """Whether every array is a C-contiguous NumPy array of ``ndim`` dimensions."""
    return all(type(a) is np.ndarray and a.ndim == ndim and a.flags.c_contiguous for a in arrays)


class NumpyBackend(NumpySequenceKernels, NumpyTabularKernels, NumpyConvolutions, Backend):
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

    def take_rows(self, X, idx, out=None):
        if out is None or sp.issparse(X):
            return super().take_rows(X, idx, out)
        # NumPy's default mode ("raise") fills a copy of the batch, then ``out``:
        # a batch's worth of memory per batch. The fit's row order is always in range.
        return np.take(X, idx, axis=0, out=out, mode="clip")

    def out_of_memory_errors(self):
        return (MemoryError,)

    def available_memory(self):
        try:  # physical memory not in use (Linux and most Unixes)
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None

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
        fits = param.shape == grad.shape == m.shape == v.shape
        require("adam_update", fits, param, grad, m, v)
        dt = param.dtype.type
        self.kernels["adam_update"](param, grad, m, v, dt(lr), dt(beta_1), dt(beta_2), dt(epsilon))

    def sgd_update(self, param, grad, velocity, lr, momentum, nesterov, tmp):
        if self.kernels is None or not _contiguous(param, grad, velocity):
            return super().sgd_update(param, grad, velocity, lr, momentum, nesterov, tmp)
        fits = param.shape == grad.shape == velocity.shape
        require("sgd_update", fits, param, grad, velocity)
        dt = param.dtype.type
        self.kernels["sgd_update"](param, grad, velocity, dt(lr), dt(momentum), bool(nesterov))

    def add_scaled(self, y, x, alpha):
        if self.kernels is None or not _contiguous(y, x):
            return super().add_scaled(y, x, alpha)
        require("add_scaled", y.shape == x.shape, y, x)
        self.kernels["add_scaled"](y, x, y.dtype.type(alpha))
        return y

    def lstm_cell_forward(self, g, c_prev, c, tc, h_prev, h, real):
        if self.kernels is None:
            return super().lstm_cell_forward(g, c_prev, c, tc, h_prev, h, real)
        has_mask = real is not None
        real = real if has_mask else _NO_MASK
        N, H = c.shape
        fits = g.shape == (N, 4 * H) and c_prev.shape == tc.shape == h_prev.shape == h.shape
        require("lstm_cell", fits and (not has_mask or real.shape == (N,)), g, c, h, real)
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
        N, H = dh.shape
        fits = dc.shape == tc.shape == c_prev.shape == (N, H) and g.shape == dz.shape == (N, 4 * H)
        require("lstm_backward_step", fits and (not has_mask or real.shape == (N,)), dh, g, dz)
        self.kernels["lstm_backward_step"](
            dh, dc, g, tc, c_prev, real if has_mask else _NO_MASK, has_mask, dz
        )
        return dc

    def gru_cell_forward(self, p, hu, g, h_prev, h, real):
        if self.kernels is None:
            return super().gru_cell_forward(p, hu, g, h_prev, h, real)
        N, H = h.shape
        fits = p.shape == hu.shape == g.shape == (N, 3 * H) and h_prev.shape == (N, H)
        require("gru_cell", fits and (real is None or real.shape == (N,)), p, hu, g, h)
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
        N, H = dh.shape
        fits = h_prev.shape == dh_prev.shape == (N, H)
        fits = fits and g.shape == hu.shape == dp.shape == dhu.shape == (N, 3 * H)
        require("gru_backward_step", fits and (not has_mask or real.shape == (N,)), dh, g, dp)
        self.kernels["gru_backward_step"](
            dh, g, hu, h_prev, real if has_mask else _NO_MASK, has_mask, dp, dhu, dh_prev
        )

    # -- convolution and pooling: one pass over each image, where NumPy makes several
    def col2im(self, col, H, W, sh, sw, ph, pw, out=None):
        if self.kernels is None:
            return super().col2im(col, H, W, sh, sw, ph, pw, out=out)
        C, kh, kw, N, OH, OW = col.shape
        if out is None:
            out = np.zeros((N, C, H, W), dtype=col.dtype)
        else:
            out.fill(0)
        fits = out.shape == (N, C, H, W) and (OH, OW) == (
            (H + 2 * ph - kh) // sh + 1,
            (W + 2 * pw - kw) // sw + 1,
        )
        require("col2im", fits, col, out)
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
        require("max_pool_forward", Y.shape == argmax.shape == (N, C, *out_hw), X, Y, argmax)
        X = np.ascontiguousarray(X)
        if tuple(kernel) == tuple(stride) == (2, 2) and tuple(padding) == (0, 0):
            self.kernels["max_pool_2x2"](X, Y, argmax)  # the usual windows
        else:
            self.kernels["max_pool_forward"](X, *kernel, *stride, *padding, Y, argmax)
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
        fits = dY.shape == argmax.shape and out.shape == (N, C, H, W)
        require("max_pool_backward", fits, dY, argmax, out)
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
        require("bias_activation", bias.shape == (Z.shape[1],), Z, bias)
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
        fits = dY.shape == Y.shape and sums.shape == (dY.shape[1],)
        require("bias_activation_grad", fits, dY, Y, sums)
        self.kernels["bias_activation_grad"](dY, Y, activation == "relu", sums)
        return dY

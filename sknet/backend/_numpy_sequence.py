"""The NumPy backend's sequence kernels: fused Numba row passes, strided-view patches.

A mixin of :class:`~sknet.backend._numpy.NumpyBackend`, listed before
:class:`~sknet.backend.Backend`: each method runs the Numba kernels of
:mod:`sknet.backend._cpu_sequence_kernels` on C-contiguous NumPy arrays of the
right shapes, and the shared ``xp`` code of
:class:`~sknet.backend._sequence_kernels.SequenceKernels` otherwise (without
Numba, or on arrays it cannot take).
"""

import numpy as np

from sknet.backend._cpu_kernels import require

_NO_MASK = np.ones((1, 1), dtype=bool)


def _c_arrays(*arrays):
    return all(type(a) is np.ndarray and a.flags.c_contiguous for a in arrays)


class NumpySequenceKernels:
    """Layer norm, masked softmax and 1-D patches on the CPU (a mixin of NumpyBackend)."""

    def layer_norm_forward(self, X, gamma, beta, epsilon, out, xhat, inv_std):
        if self.kernels is None or not _c_arrays(X, gamma, beta, out, xhat, inv_std):
            return super().layer_norm_forward(X, gamma, beta, epsilon, out, xhat, inv_std)
        n, F = X.shape
        fits = out.shape == xhat.shape == (n, F) and gamma.shape == beta.shape == (F,)
        require("layer_norm_forward", fits and inv_std.shape == (n,), X, gamma, out, inv_std)
        self.kernels["layer_norm_forward"](X, gamma, beta, float(epsilon), out, xhat, inv_std)
        return out

    def layer_norm_backward(self, dY, xhat, inv_std, gamma, dgamma, dbeta, out):
        with_params = dgamma is not None
        if not with_params:
            dgamma = dbeta = gamma  # not written
        if self.kernels is None or not _c_arrays(dY, xhat, inv_std, gamma, dgamma, dbeta, out):
            return super().layer_norm_backward(
                dY, xhat, inv_std, gamma, dgamma if with_params else None, dbeta, out
            )
        n, F = dY.shape
        fits = xhat.shape == out.shape == (n, F) and inv_std.shape == (n,)
        fits = fits and gamma.shape == dgamma.shape == dbeta.shape == (F,)
        require("layer_norm_backward", fits, dY, xhat, inv_std, gamma, dgamma, out)
        self.kernels["layer_norm_backward"](
            dY, xhat, inv_std, gamma, with_params, dgamma, dbeta, out
        )
        return out

    def attention_softmax(self, S, key_mask, causal):
        if self.kernels is None or not _c_arrays(S):
            return super().attention_softmax(S, key_mask, causal)
        N, H, Tq, Tk = S.shape
        has_mask = key_mask is not None
        if has_mask:
            key_mask = np.ascontiguousarray(key_mask, dtype=bool)
        mask = key_mask if has_mask else _NO_MASK
        require("attention_softmax", not has_mask or mask.shape == (N, Tk), S, mask)
        self.kernels["softmax_shift"](S, mask, has_mask, bool(causal))
        np.exp(S, out=S)
        self.kernels["softmax_normalize"](S.reshape(-1, Tk))
        return S

    def attention_softmax_grad(self, dP, P):
        if self.kernels is None or not _c_arrays(dP, P):
            return super().attention_softmax_grad(dP, P)
        require("attention_softmax_grad", dP.shape == P.shape and dP.ndim == 4, dP, P)
        Tk = P.shape[-1]
        self.kernels["softmax_grad"](dP.reshape(-1, Tk), P.reshape(-1, Tk))
        return dP

    def scatter_add_rows(self, target, idx, values):
        if (
            self.kernels is None
            or target.ndim != 2
            or not _c_arrays(target, values)
            or values.shape != (idx.shape[0], target.shape[1])
            or values.dtype != target.dtype
        ):
            return super().scatter_add_rows(target, idx, values)
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        inside = idx.size == 0 or (int(idx.min()) >= 0 and int(idx.max()) < target.shape[0])
        require("scatter_add_rows", inside and idx.ndim == 1, target, idx, values)
        self.kernels["scatter_add_rows"](target, idx, values)

    def max_pool_1d_forward(self, Xp, kernel, stride, Y, argmax):
        if self.kernels is None or not _c_arrays(Xp, Y, argmax):
            return super().max_pool_1d_forward(Xp, kernel, stride, Y, argmax)
        N, Tp, C = Xp.shape
        OT = Y.shape[1]
        fits = Y.shape == argmax.shape == (N, OT, C) and argmax.dtype == np.int32
        fits = fits and OT >= 1 and (OT - 1) * stride + kernel <= Tp and kernel >= 1
        require("max_pool_1d_forward", fits, Xp, Y, argmax)
        self.kernels["max_pool_1d_forward"](Xp, kernel, stride, Y, argmax)
        return Y, argmax

    def max_pool_1d_backward(self, dY, argmax, out):
        if self.kernels is None or not _c_arrays(dY, argmax, out):
            return super().max_pool_1d_backward(dY, argmax, out)
        N, OT, C = dY.shape
        Tp = out.shape[1]
        fits = argmax.shape == dY.shape and out.shape == (N, Tp, C) and argmax.dtype == np.int32
        # argmax comes from max_pool_1d_forward; a bad one must still not write outside
        fits = fits and (argmax.size == 0 or (argmax.min() >= 0 and argmax.max() < Tp))
        require("max_pool_1d_backward", fits, dY, argmax, out)
        out.fill(0)
        self.kernels["max_pool_1d_backward"](dY, argmax, out)
        return out

    def dropout_apply(self, X, u, threshold, scale, out):
        if self.kernels is None or not _c_arrays(X, u, out):
            return super().dropout_apply(X, u, threshold, scale, out)
        fits = X.size == u.size == out.size and out.shape == X.shape and u.dtype == np.uint16
        require("dropout_apply", fits, X, u, out)
        self.kernels["dropout_apply"](
            X.reshape(-1), u.reshape(-1), int(threshold), X.dtype.type(scale), out.reshape(-1)
        )
        return out

    def random_bits(self, generator, shape):
        # the generator's raw 64-bit draws, four 16-bit numbers each
        count = int(np.prod(shape))
        raw = generator.bit_generator.random_raw(-(-count // 4))
        return raw.view(np.uint16)[:count].reshape(shape)

    def im2col_1d(self, X, stride, dilation, left, out):
        if self.kernels is None or not _c_arrays(X, out):
            return super().im2col_1d(X, stride, dilation, left, out)
        N, T, C = X.shape
        require("im2col_1d", out.ndim == 4 and out.shape[::3] == (N, C), X, out)
        self.kernels["windows_1d"](X, stride, dilation, left, out)
        return out

    def col2im_1d(self, dcol, stride, dilation, left, out):
        if self.kernels is None or not _c_arrays(dcol, out):
            return super().col2im_1d(dcol, stride, dilation, left, out)
        N, T, C = out.shape
        require("col2im_1d", dcol.ndim == 4 and dcol.shape[::3] == (N, C), dcol, out)
        self.kernels["windows_1d_adjoint"](dcol, stride, dilation, left, out)
        return out

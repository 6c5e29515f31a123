"""The NumPy backend's convolutions: strided-view im2col, channels-last patches, epilogues.

A mixin of :class:`~sknet.backend._numpy.NumpyBackend`. Below 8 input
channels a convolution computes one product per image (NCHW directly); from 8,
with channels-last patches (Numba pad/patch/col2im kernels, NumPy fallbacks);
the bias and activation epilogues are fused Numba kernels over (N, F, pixels)
views.
"""

import numpy as np

from sknet.backend._base import conv_outsize
from sknet.backend._cpu_kernels import require


class NumpyConvolutions:
    """The convolution kernels of the NumPy backend (a mixin listed before Backend)."""

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
        require("conv_output", Z.shape == out.shape and bias.shape == (out.shape[1],), Z, out)
        self.kernels["conv_output"](Z, bias, activation == "relu", out)

    def _conv_output_grad(self, dY, Y, activation, dZ, db):
        bias_grad = np.empty(dY.shape[1], dtype=dY.dtype) if db is None else db
        fits = dY.shape == Y.shape == dZ.shape and bias_grad.shape == (dY.shape[1],)
        require("conv_output_grad", fits, dY, Y, dZ, bias_grad)
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
            fits = out.shape == (N, C, H, W) and padded.shape == (N, H + 2 * ph, W + 2 * pw, C)
            require("col2im_nhwc", fits, dcol, padded, out)
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

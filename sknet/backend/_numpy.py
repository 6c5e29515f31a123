"""The NumPy backend: the shared ``xp`` kernels, plus the few that SciPy does faster."""

import numpy as np
import scipy.sparse as sp

from sknet.backend._base import Backend, conv_outsize


class NumpyBackend(Backend):
    """Backend running on the host with NumPy (and SciPy for sparse input)."""

    def __init__(self):
        super().__init__("cpu", np)

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

    def im2col(self, X, kh, kw, sh, sw, ph, pw, pad_value=0.0):
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
        return np.ascontiguousarray(patches)

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

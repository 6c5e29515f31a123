"""The NumPy backend's tabular kernels: fused Numba passes for the tabular layers.

A mixin of :class:`~sknet.backend._numpy.NumpyBackend`, listed before
:class:`~sknet.backend.Backend`: each method runs the Numba kernels of
:mod:`sknet.backend._cpu_tabular_kernels` on C-contiguous NumPy arrays of the
right shapes and dtypes, and the shared ``xp`` code of
:class:`~sknet.backend._tabular_kernels.TabularKernels` otherwise (without
Numba, or on arrays it cannot take). Both give the same numbers.
"""

import numpy as np

from sknet.backend._cpu_kernels import require

_NO_INSIDE = np.ones((1, 1, 1), dtype=bool)  # a kernel's unused output


def _contiguous(*arrays, ndim):
    return all(type(a) is np.ndarray and a.ndim == ndim and a.flags.c_contiguous for a in arrays)


def _arrays(*arrays):
    return all(type(a) is np.ndarray for a in arrays)


def _relu_or_identity(activation):
    return activation in ("relu", "identity")


class NumpyTabularKernels:
    """The encoding, category lookups and adapters on the CPU (a mixin of NumpyBackend)."""

    def piecewise_linear(self, X, left, inv_width, low, high, inside=None):
        tables = (left, inv_width, low, high)
        if self.kernels is None or not _contiguous(X, ndim=2) or not _contiguous(*tables, ndim=2):
            return super().piecewise_linear(X, left, inv_width, low, high, inside)
        n, F = X.shape
        fits = all(t.shape == left.shape and t.dtype == X.dtype for t in tables)
        fits = fits and left.shape[0] == F and (inside is None or inside.shape == (n, *left.shape))
        require("piecewise_linear", fits, X, *tables)
        V = np.empty((n, *left.shape), dtype=X.dtype)
        mask = _NO_INSIDE if inside is None else inside
        self.kernels["piecewise_linear"](
            X, left, inv_width, low, high, V, mask, inside is not None
        )
        return V

    def embedding_lookup(self, X, E, cards, offsets, dims, valid):
        if (
            self.kernels is None
            or not _contiguous(X, E, ndim=2)
            or not _contiguous(cards, offsets, dims, ndim=1)
        ):
            return super().embedding_lookup(X, E, cards, offsets, dims, valid)
        n, C = X.shape
        fits = cards.shape == offsets.shape == dims.shape == (C,) and X.dtype == E.dtype
        fits = fits and offsets.dtype == dims.dtype == np.int64 and cards.dtype == X.dtype
        # every row a code can reach lies in E, every entry read within its row
        fits = fits and (C == 0 or int((offsets + cards.astype(np.int64)).max()) + 1 < E.shape[0])
        fits = fits and (C == 0 or int(dims.max()) <= E.shape[1])
        require("embedding_lookup", fits, X, E, cards, offsets, dims)
        rows = np.empty((n, C), dtype=np.int64)
        Y = np.empty((n, int(dims.sum())), dtype=X.dtype)
        self.kernels["embedding_lookup"](X, E, cards, offsets, dims, rows, Y)
        return rows, Y

    def embedding_grad(self, dY, rows, dims, valid, gE):
        if self.kernels is None or not _contiguous(dY, rows, gE, ndim=2):
            return super().embedding_grad(dY, rows, dims, valid, gE)
        n, C = rows.shape
        fits = dims.shape == (C,) and dY.shape == (n, int(dims.sum())) and dY.dtype == gE.dtype
        fits = fits and rows.dtype == np.int64 and (C == 0 or int(dims.max()) <= gE.shape[1])
        fits = fits and (rows.size == 0 or (int(rows.min()) >= 0 and int(rows.max()) < len(gE)))
        require("embedding_grad", fits, dY, rows, dims, gE)
        self.kernels["embedding_grad"](dY, rows, dims, gE)

    def scale_bias_activation(self, U, s, b, activation, out):
        if (
            self.kernels is None
            or not _relu_or_identity(activation)
            or not _contiguous(U, out, ndim=3)
            or not _contiguous(s, b, ndim=2)
        ):
            return super().scale_bias_activation(U, s, b, activation, out)
        fits = U.shape == out.shape and s.shape == b.shape == U.shape[1:]
        require("scale_bias_activation", fits and U.dtype == s.dtype == b.dtype, U, s, b, out)
        self.kernels["scale_bias_activation"](U, s, b, activation == "relu", out)
        return out

    def scale_bias_activation_grad(self, dY, Y, activation, U, s, db, ds):
        if (
            self.kernels is None
            or not _relu_or_identity(activation)
            or not _contiguous(dY, Y, U, ndim=3)
            or not _contiguous(s, db, ds, ndim=2)
        ):
            return super().scale_bias_activation_grad(dY, Y, activation, U, s, db, ds)
        fits = dY.shape == Y.shape == U.shape and s.shape == db.shape == ds.shape == dY.shape[1:]
        fits = fits and dY.dtype == U.dtype == s.dtype == db.dtype == ds.dtype
        require("scale_bias_activation_grad", fits, dY, Y, U, s, db, ds)
        self.kernels["scale_bias_activation_grad"](dY, Y, activation == "relu", U, s, db, ds)
        return dY

    def scale_and_sum(self, dZ, U, s, total):
        if (
            self.kernels is None
            or not _contiguous(dZ, U, ndim=3)
            or not _contiguous(s, total, ndim=2)
        ):
            return super().scale_and_sum(dZ, U, s, total)
        fits = dZ.shape == U.shape and s.shape == total.shape == dZ.shape[1:]
        require("scale_and_sum", fits and dZ.dtype == U.dtype == s.dtype == total.dtype, dZ, U, s)
        self.kernels["scale_and_sum"](dZ, U, s, total)
        return dZ

    def member_sum(self, X):
        if self.kernels is None or not _contiguous(X, ndim=3):
            return super().member_sum(X)
        out = np.empty((X.shape[0], X.shape[2]), dtype=X.dtype)
        self.kernels["member_sum"](X, out)
        return out

    def member_matmul(self, A, B):
        # One product a member, each written in place: NumPy's stacked product on these
        # transposed views falls back to a loop without BLAS (20x slower for the
        # gradient of an ensemble head's input).
        out = np.empty((A.shape[0], A.shape[1], B.shape[2]), dtype=np.result_type(A, B))
        outer = B.ndim == A.ndim == 3 and B.shape[1] == A.shape[2] == 1
        if outer and self.kernels is not None and _arrays(A, B) and A.dtype == B.dtype:
            # an outer product a member: one pass (NumPy's broadcast product into the
            # strided member slices makes k slow ones)
            require("member_outer", B.shape[0] == A.shape[1], A, B)
            self.kernels["member_outer"](A, B, out)
            return out
        for i in range(A.shape[1]):
            if B.shape[1] == 1:  # an outer product: a broadcast product is faster
                np.multiply(A[:, i, :], B[i, 0], out=out[:, i, :])
            else:
                np.matmul(A[:, i, :], B[i], out=out[:, i, :])
        return out

"""The tabular layers' kernels (the piecewise-linear encoding, the category lookups, the
ensemble's adapters), written once with ``xp``.

A mixin of :class:`~sknet.backend.Backend`; the NumPy backend replaces each with
one fused Numba pass where the kernels are compiled
(:mod:`sknet.backend._numpy_tabular`).
"""


class TabularKernels:
    """Kernels of the tabular layers over ``self.xp`` (a mixin of Backend)."""

    def piecewise_linear(self, X, left, inv_width, low, high, inside=None):
        """The piecewise-linear encoding ``(n, F, T)`` of rows ``X`` ``(n, F)`` over bins
        ``(F, T)``: ``clip((X - left) * inv_width, low, high)``; ``inside`` ``(n, F, T)``
        (bool), when given, gets where a value is strictly within its clip (the
        gradient's mask)."""
        xp = self.xp
        raw = X[:, :, None] - left
        raw *= inv_width
        if inside is not None:
            xp.logical_and(raw > low, raw < high, out=inside)
        xp.maximum(raw, low, out=raw)
        xp.minimum(raw, high, out=raw)
        return raw

    def category_rows(self, X, cards, offsets):
        """The rows of a stacked embedding table that codes ``X`` ``(n, C)`` look up
        (int64, ``(n, C)``): code ``rint(x)`` of column ``c`` is row ``offsets[c] +
        code``; 0 or NaN is row ``offsets[c]`` (missing), a code outside ``1..cards[c]``
        row ``offsets[c] + cards[c] + 1`` (unknown)."""
        xp = self.xp
        codes = xp.rint(X)
        missing = (codes == 0) | (X != X)  # 0 or NaN
        unknown = ~((codes >= 1) & (codes <= cards))  # (NaN compares False)
        codes = xp.where(unknown, cards + 1, codes)
        codes = xp.where(missing, 0, codes)
        return codes.astype("int64") + offsets

    def embedding_lookup(self, X, E, cards, offsets, dims, valid):
        """``(rows, Y)``: :meth:`category_rows` of codes ``X`` ``(n, C)``, and each row's
        vectors side by side, the first ``dims[c]`` entries of ``E[rows[:, c]]`` in
        turn (``valid``: their positions in the flattened ``(C, D)`` lookups)."""
        rows = self.category_rows(X, cards, offsets)
        looked_up = E[rows]  # (n, C, D)
        return rows, self.xp.take(looked_up.reshape(X.shape[0], -1), valid, axis=1)

    def embedding_grad(self, dY, rows, dims, valid, gE):
        """The gradient of :meth:`embedding_lookup`'s vectors into ``gE`` (overwritten):
        each row of ``dY`` added to the entries of ``E`` it was read from, in order."""
        n, C = rows.shape
        full = self.xp.zeros((n, C * gE.shape[1]), dtype=dY.dtype)
        full[:, valid] = dY
        gE[...] = 0
        self.scatter_add_rows(gE, rows.reshape(-1), full.reshape(n * C, -1))

    def scale_bias_activation(self, U, s, b, activation, out):
        """``out = activation(U * s + b)`` for ``U`` ``(n, k, m)``, ``s`` and ``b``
        ``(k, m)``: a rank-1 adapter, the bias and an in-place activation (as in
        :meth:`~sknet.backend.Backend.bias_activation`). Returns ``out``."""
        self.xp.multiply(U, s, out=out)
        n, k, m = out.shape
        self.bias_activation(out.reshape(n, k * m), b.reshape(-1), activation)
        return out

    def scale_bias_activation_grad(self, dY, Y, activation, U, s, db, ds):
        """The gradient of :meth:`scale_bias_activation`, in place in ``dY`` (which
        becomes the gradient of ``U``): ``b``'s into ``db``, ``s``'s into ``ds`` (both
        ``(k, m)``). Returns ``dY``."""
        n, k, m = dY.shape
        self.bias_activation_grad(
            dY.reshape(n, k * m), Y.reshape(n, k * m), activation, db.reshape(-1)
        )
        return self.scale_and_sum(dY, U, s, ds)

    def scale_and_sum(self, dZ, U, s, total):
        """``total[...] = (dZ * U).sum(axis=0)``, then ``dZ *= s`` (``dZ``, ``U``
        ``(n, k, m)``; ``s``, ``total`` ``(k, m)``): a rank-1 adapter's gradient and the
        gradient through it. Returns ``dZ``."""
        total[...] = (dZ * U).sum(axis=0)
        dZ *= s
        return dZ

    def member_sum(self, X):
        """The sum over the members of ``X`` ``(n, k, d)``: ``(n, d)``, a new array."""
        return X.sum(axis=1)

    def member_matmul(self, A, B):
        """Each member's product, ``out[:, i] = A[:, i] @ B[i]``: ``A`` ``(n, k, d)``, ``B``
        ``(k, d, m)`` (any strides); a new C-contiguous ``(n, k, m)`` array."""
        xp = self.xp
        return xp.ascontiguousarray(xp.matmul(A.transpose(1, 0, 2), B).transpose(1, 0, 2))

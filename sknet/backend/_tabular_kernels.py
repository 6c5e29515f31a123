"""The tabular layers' kernels (the piecewise-linear encoding, the ensemble's adapters),
written once with ``xp``.

A mixin of :class:`~sknet.backend.Backend`; the NumPy backend replaces each with
one fused Numba pass where the kernels are compiled.
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

    def scale_and_sum(self, dZ, U, s, total):
        """``total[...] = (dZ * U).sum(axis=0)``, then ``dZ *= s`` (``dZ``, ``U``
        ``(n, k, m)``; ``s``, ``total`` ``(k, m)``): a rank-1 adapter's gradient and the
        gradient through it. Returns ``dZ``."""
        total[...] = (dZ * U).sum(axis=0)
        dZ *= s
        return dZ

    def member_matmul(self, A, B):
        """Each member's product, ``out[:, i] = A[:, i] @ B[i]``: ``A`` ``(n, k, d)``, ``B``
        ``(k, d, m)`` (any strides); a new C-contiguous ``(n, k, m)`` array."""
        xp = self.xp
        return xp.ascontiguousarray(xp.matmul(A.transpose(1, 0, 2), B).transpose(1, 0, 2))

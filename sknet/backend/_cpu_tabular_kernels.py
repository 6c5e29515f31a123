"""Fused Numba kernels of the tabular layers: the piecewise-linear encoding, the adapters.

Built by :mod:`sknet.backend._cpu_kernels` with the other CPU kernels (the
same ``jit`` options, the same cache). NumPy makes five passes over a batch's
``(rows, features, bins)`` encoding and two over each adapter's gradient and
product; each kernel here makes one, with the arithmetic of the shared NumPy
code, operation for operation, in the arrays' dtype (so the same numbers: the
sums run over the rows in order, as NumPy's reduction over the first axis does).
"""


def tabular_kernels(jit, reduce_jit):
    """The tabular layers' kernels, by name (compiled by ``_cpu_kernels._compile``)."""

    @jit
    def piecewise_linear(X, left, inv_width, low, high, V, inside, want_inside):
        # V[i, f, t] = clip((X[i, f] - left[f, t]) * inv_width[f, t], low, high), and where
        # the value is strictly inside its clip (the gradient's mask), for the backward pass.
        n, F = X.shape
        T = left.shape[1]
        for i in range(n):
            for f in range(F):
                x = X[i, f]
                for t in range(T):
                    r = (x - left[f, t]) * inv_width[f, t]
                    lo, hi = low[f, t], high[f, t]
                    if want_inside:
                        inside[i, f, t] = (r > lo) and (r < hi)
                    if r < lo:
                        r = lo
                    if r > hi:
                        r = hi
                    V[i, f, t] = r

    @jit
    def scale_and_sum(dZ, U, s, total):
        # total = (dZ * U).sum(axis=0), then dZ *= s, for dZ and U (n, k, m), s (k, m)
        n, k, m = dZ.shape
        for a in range(k):
            for b in range(m):
                total[a, b] = 0
        for i in range(n):
            for a in range(k):
                for b in range(m):
                    g = dZ[i, a, b]
                    total[a, b] += g * U[i, a, b]
                    dZ[i, a, b] = g * s[a, b]

    return {"piecewise_linear": piecewise_linear, "scale_and_sum": scale_and_sum}

"""Fused Numba kernels of the tabular layers: the piecewise-linear encoding, the category
lookups, the adapters.

Built by :mod:`sknet.backend._cpu_kernels` with the other CPU kernels (the
same ``jit`` options, the same cache). NumPy makes five passes over a batch's
``(rows, features, bins)`` encoding, a dozen small ones over a batch's category
codes and their vectors, and two over each adapter's gradient and product; each
kernel here makes one, with the arithmetic of the shared NumPy code, operation
for operation, in the arrays' dtype (so the same numbers: the sums run over the
rows in order, as the shared code's reductions and scatter do).
"""


def tabular_kernels(jit, reduce_jit):
    """The tabular layers' kernels, by name (compiled by ``_cpu_kernels._compile``)."""
    return {**_input_kernels(jit), **_ensemble_kernels(jit)}


def _input_kernels(jit):
    """The numbers' encoding and the categories' lookups."""
    import numpy as np

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
    def embedding_lookup(X, E, cards, offsets, dims, rows, Y):
        # rows[i, c]: the row of E that code X[i, c] reads (missing: the column's first
        # row, unknown: its last); Y[i]: the first dims[c] entries of each, in turn.
        n, C = X.shape
        for i in range(n):
            o = 0
            for c in range(C):
                x = X[i, c]
                code = np.rint(x)
                if code == 0 or x != x:
                    code = 0
                elif not (code >= 1 and code <= cards[c]):
                    code = cards[c] + 1
                r = np.int64(code) + offsets[c]
                rows[i, c] = r
                for t in range(dims[c]):
                    Y[i, o] = E[r, t]
                    o += 1

    @jit
    def embedding_grad(dY, rows, dims, gE):
        # gE = 0, then each entry of dY added to the entry of E it was read from, in order
        R, D = gE.shape
        for r in range(R):
            for t in range(D):
                gE[r, t] = 0
        n, C = rows.shape
        for i in range(n):
            o = 0
            for c in range(C):
                row = gE[rows[i, c]]
                for t in range(dims[c]):
                    row[t] += dY[i, o]
                    o += 1

    return {
        "piecewise_linear": piecewise_linear,
        "embedding_lookup": embedding_lookup,
        "embedding_grad": embedding_grad,
    }


def _ensemble_kernels(jit):
    """The ensemble's adapters, bias and activation, member sums and outer products."""
    import numpy as np

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

    @jit
    def scale_bias_activation(U, s, b, relu, Z):
        # Z = U * s + b (each product rounded, as NumPy's two passes), ReLU'd if relu
        n, k, m = U.shape
        zero = Z.dtype.type(0)
        for i in range(n):
            for a in range(k):
                for j in range(m):
                    v = U[i, a, j] * s[a, j]
                    v = v + b[a, j]
                    Z[i, a, j] = zero if relu and v <= zero else v

    @jit
    def scale_bias_activation_grad(dY, Y, relu, U, s, db, ds):
        # dY through the ReLU (Y its output), db its float64 sums over the rows, ds the
        # sums of it times U (in the dtype, in order), then dY *= s. Rows flattened to
        # (n, k * m), two loops a row: each vectorizes (one loop of the three updates
        # does not, and runs slower than two kernels).
        n, k, m = dY.shape
        F = k * m
        G, A, V = dY.reshape(n, F), Y.reshape(n, F), U.reshape(n, F)
        s1, db1, ds1 = s.reshape(F), db.reshape(F), ds.reshape(F)
        zero = dY.dtype.type(0)
        sums = np.zeros(F)
        totals = np.zeros(F, dtype=dY.dtype)
        for i in range(n):
            grad, act, u = G[i], A[i], V[i]
            for j in range(F):
                g = zero if relu and act[j] <= zero else grad[j]
                grad[j] = g
                sums[j] += g
            for j in range(F):
                g = grad[j]
                totals[j] += g * u[j]
                grad[j] = g * s1[j]
        for j in range(F):
            db1[j] = sums[j]
            ds1[j] = totals[j]

    @jit
    def member_sum(X, out):
        # out[i] = X[i, 0] + X[i, 1] + ... (in order, as NumPy sums a middle axis)
        n, k, d = X.shape
        for i in range(n):
            row, first = out[i], X[i, 0]
            for j in range(d):
                row[j] = first[j]
            for a in range(1, k):
                member = X[i, a]
                for j in range(d):
                    row[j] += member[j]

    @jit
    def member_outer(A, B, out):
        # out[i, a, j] = A[i, a, 0] * B[a, 0, j]: each member's product over an inner
        # dimension of one (A and B of any strides)
        n, k, d = out.shape
        for i in range(n):
            for a in range(k):
                c, row = A[i, a, 0], out[i, a]
                for j in range(d):
                    row[j] = c * B[a, 0, j]

    return {
        "scale_and_sum": scale_and_sum,
        "scale_bias_activation": scale_bias_activation,
        "scale_bias_activation_grad": scale_bias_activation_grad,
        "member_sum": member_sum,
        "member_outer": member_outer,
    }

"""Fused Numba kernels of the sequence layers: layer norm, the attention's softmax, embeddings.

Built by :mod:`sknet.backend._cpu_kernels` with the other CPU kernels (the
same ``jit`` options, the same cache). Each works on one row at a time, kept in
cache: NumPy makes five to eight passes over the whole array for a layer norm
or a masked softmax and reduces along short rows slowly. The exponentials stay
in NumPy, whose SIMD ``exp`` Numba cannot match without a vector math library:
the softmax is a pass here (mask, maximum, subtraction), NumPy's ``exp``, and a
pass here (sum and scale). Embedding gradients are summed row by row, where
NumPy's ``add.at`` takes an indexed pass per element.
"""


def layer_norm_kernels(jit, reduce_jit):
    """The layer norm's forward and backward passes, by name.

    Compiled by :func:`sknet.backend._cpu_kernels._compile`, as are
    :func:`softmax_kernels` and :func:`window_kernels`.
    """
    import numpy as np

    @reduce_jit
    def layer_norm_forward(X, gamma, beta, epsilon, out, xhat, inv_std):
        # Rows of X (n, F): xhat, inv_std and out = xhat * gamma + beta; out may be xhat.
        n, F = X.shape
        for i in range(n):
            row, xh, dst = X[i], xhat[i], out[i]
            total = 0.0  # float64 accumulators
            for j in range(F):
                total += row[j]
            mean = total / F
            spread = 0.0
            for j in range(F):
                c = row[j] - mean
                spread += c * c
            inv = 1.0 / np.sqrt(spread / F + epsilon)
            inv_std[i] = inv
            m, s = X.dtype.type(mean), X.dtype.type(inv)
            for j in range(F):
                v = (row[j] - m) * s
                xh[j] = v
                dst[j] = v * gamma[j] + beta[j]

    @reduce_jit
    def layer_norm_backward(dY, xhat, inv_std, gamma, with_params, dgamma, dbeta, out):
        # out (n, F) = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), out may
        # be dY; with_params: the column sums of dY * xhat and dY into dgamma, dbeta.
        n, F = dY.shape
        sums_g = np.zeros(F)
        sums_b = np.zeros(F)
        for i in range(n):
            grad, xh, dst = dY[i], xhat[i], out[i]
            first = 0.0
            second = 0.0
            for j in range(F):
                g = grad[j]
                if with_params:
                    sums_g[j] += g * xh[j]
                    sums_b[j] += g
                d = g * gamma[j]
                first += d
                second += d * xh[j]
            a, b = dY.dtype.type(first / F), dY.dtype.type(second / F)
            s = dY.dtype.type(inv_std[i])
            for j in range(F):
                dst[j] = (grad[j] * gamma[j] - a - xh[j] * b) * s
        if with_params:
            for j in range(F):
                dgamma[j] = sums_g[j]
                dbeta[j] = sums_b[j]

    return {"layer_norm_forward": layer_norm_forward, "layer_norm_backward": layer_norm_backward}


def softmax_kernels(jit, reduce_jit):
    """The attention's masked softmax (around NumPy's exp) and embedding gradients, by name."""
    import numpy as np

    @jit
    def softmax_shift(S, key_mask, has_mask, causal):
        # S (N, H, Tq, Tk): masked keys to -inf, then each row minus its maximum (a row
        # without keys becomes all -inf, whose exp is 0)
        N, H, Tq, Tk = S.shape
        minus_inf = -np.inf
        for n in range(N):
            for h in range(H):
                for q in range(Tq):
                    row = S[n, h, q]
                    last = min(q + 1, Tk) if causal else Tk
                    top = minus_inf
                    for k in range(last):
                        if has_mask and not key_mask[n, k]:
                            row[k] = minus_inf
                        elif row[k] > top:
                            top = row[k]
                    for k in range(last, Tk):
                        row[k] = minus_inf
                    if top == minus_inf:
                        continue
                    for k in range(last):
                        row[k] -= top

    @reduce_jit
    def softmax_normalize(P):
        # rows of P (R, Tk) (exponentials) divided by their sums; an all-zero row stays 0
        R, Tk = P.shape
        for r in range(R):
            row = P[r]
            total = 0.0
            for k in range(Tk):
                total += row[k]
            if total > 0:
                inv = row.dtype.type(1.0 / total)
                for k in range(Tk):
                    row[k] *= inv

    @reduce_jit
    def softmax_grad(dP, P):
        # rows (R, Tk): dP = P * (dP - sum(dP * P)), in place
        R, Tk = P.shape
        for r in range(R):
            grad, p = dP[r], P[r]
            inner = 0.0
            for k in range(Tk):
                inner += grad[k] * p[k]
            s = grad.dtype.type(inner)
            for k in range(Tk):
                grad[k] = p[k] * (grad[k] - s)

    @jit
    def scatter_add_rows(target, idx, values):
        # target[idx[k]] += values[k], rows of (R, F) (idx checked in range by the caller)
        F = target.shape[1]
        for k in range(idx.shape[0]):
            row, src = target[idx[k]], values[k]
            for j in range(F):
                row[j] += src[j]

    return {
        "scatter_add_rows": scatter_add_rows,
        "softmax_shift": softmax_shift,
        "softmax_normalize": softmax_normalize,
        "softmax_grad": softmax_grad,
    }


def window_kernels(jit, reduce_jit):
    """Kernels over steps: the windows of a 1-D convolution, dropout, 1-D max pooling."""

    @jit
    def windows_1d(X, stride, dilation, left, out):
        # out (N, OT, k, C): out[n, t, j] = X[n, t * stride + j * dilation - left], or 0
        # outside X; each copy moves C contiguous features (bounds checked here)
        N, T, C = X.shape
        OT, k = out.shape[1], out.shape[2]
        zero = out.dtype.type(0)
        for n in range(N):
            for t in range(OT):
                for j in range(k):
                    s = t * stride + j * dilation - left
                    dst = out[n, t, j]
                    if 0 <= s < T:
                        src = X[n, s]
                        for c in range(C):
                            dst[c] = src[c]
                    else:
                        for c in range(C):
                            dst[c] = zero

    @jit
    def windows_1d_adjoint(dcol, stride, dilation, left, out):
        # out (N, T, C) = the sum of the windows dcol (N, OT, k, C) back onto their steps
        N, OT, k, C = dcol.shape
        T = out.shape[1]
        for n in range(N):
            acc = out[n]
            acc[:, :] = 0
            for t in range(OT):
                for j in range(k):
                    s = t * stride + j * dilation - left
                    if 0 <= s < T:
                        dst, src = acc[s], dcol[n, t, j]
                        for c in range(C):
                            dst[c] += src[c]

    @jit
    def dropout_apply(X, u, threshold, scale, out):
        # flat views: out = X * scale where u >= threshold, else 0 (out may be X)
        zero = out.dtype.type(0)
        for i in range(X.shape[0]):
            out[i] = X[i] * scale if u[i] >= threshold else zero

    @jit
    def max_pool_1d_forward(Xp, kernel, stride, Y, argmax):
        # Y (N, OT, C): each window's maximum per feature, the first one winning ties;
        # argmax its step in Xp (N, Tp, C). Features innermost: the selects vectorize.
        N, OT, C = Y.shape
        for n in range(N):
            for t in range(OT):
                start = t * stride
                best, at, first = Y[n, t], argmax[n, t], Xp[n, start]
                for c in range(C):
                    best[c] = first[c]
                    at[c] = start
                for j in range(1, kernel):
                    row = Xp[n, start + j]
                    for c in range(C):
                        take = row[c] > best[c]
                        best[c] = row[c] if take else best[c]
                        at[c] = start + j if take else at[c]

    @jit
    def max_pool_1d_backward(dY, argmax, out):
        # out (N, Tp, C) zeroed: each window's gradient to its maximum's step
        N, OT, C = dY.shape
        for n in range(N):
            for t in range(OT):
                grad, at = dY[n, t], argmax[n, t]
                for c in range(C):
                    out[n, at[c], c] += grad[c]

    return {
        "windows_1d": windows_1d,
        "windows_1d_adjoint": windows_1d_adjoint,
        "dropout_apply": dropout_apply,
        "max_pool_1d_forward": max_pool_1d_forward,
        "max_pool_1d_backward": max_pool_1d_backward,
    }

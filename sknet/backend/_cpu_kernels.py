"""Fused CPU kernels compiled with Numba, for the work NumPy cannot fuse.

NumPy runs an Adam step as a dozen whole-array passes with a temporary, a
convolution's bias, ReLU and move to NCHW as three, max pooling as a dozen
masked passes; these loops make one pass each, in the arrays' dtype: the
optimizer updates, the dense and convolution epilogues and their gradients,
max pooling, col2im and channels-last patches, and the LSTM and GRU cells, each
group built by its own function below. Kernels are compiled on first use and
cached on disk.

Numba is a dependency of sknet wherever it has wheels (CPython on Linux
x86_64 and aarch64, Windows, macOS; ``pyproject.toml`` says which), so that
the same code and ``random_state`` give the same model whichever extras are
installed. Where it cannot install (PyPy, other machines), or with
``SKNET_NUMBA=0`` in the environment, :data:`KERNELS` is ``None`` and the
NumPy backend keeps the generic NumPy code of :class:`sknet.backend.Backend`:
the same training, whose numbers may differ in the last bits (NumPy's float32
``exp`` and ``tanh`` are SIMD approximations that a compiled loop does not
reproduce bit for bit, and sums are added in another order), and so, through
early stopping, in the epochs a fit runs and its scores.
"""

import os

from sknet.backend._cpu_sequence_kernels import (
    layer_norm_kernels,
    softmax_kernels,
    window_kernels,
)
from sknet.backend._cpu_tabular_kernels import tabular_kernels

KERNELS = None


def _compile(cache=True):
    import numba

    # error_model="numpy": x / 0 gives inf as in NumPy (no Python zero-division
    # check), which also lets LLVM vectorize the division.
    jit = numba.njit(cache=cache, nogil=True, error_model="numpy")
    # Kernels that sum: the additions may be reordered (vectorized; they
    # accumulate in float64 where precision matters).
    reduce_jit = numba.njit(
        cache=cache, nogil=True, error_model="numpy", fastmath={"reassoc", "nsz"}
    )
    kernels = {}
    for build in (
        _update_kernels,
        _lstm_kernels,
        _gru_kernels,
        _pooling_kernels,
        _conv_epilogue_kernels,
        _patch_kernels,
        _dense_kernels,
        layer_norm_kernels,
        softmax_kernels,
        window_kernels,
        tabular_kernels,
    ):
        kernels.update(build(jit, reduce_jit))
    return kernels


def _named(scope):
    """A builder's kernels by name: its compiled functions, helpers (``_...``) left out."""
    return {
        name: value
        for name, value in scope.items()
        if not name.startswith("_") and name not in ("jit", "reduce_jit") and callable(value)
    }


def _update_kernels(jit, reduce_jit):
    """The optimizers' updates, one pass over the flat arrays."""
    import numpy as np

    @jit
    def adam_update(param, grad, m, v, lr, beta_1, beta_2, epsilon):
        # The generic backend's arithmetic, element by element:
        # m += (1 - b1)(g - m); v += (1 - b2)(g^2 - v); p -= lr m / (sqrt(v) + eps)
        one = param.dtype.type(1)
        c1 = one - beta_1
        c2 = one - beta_2
        for i in range(param.shape[0]):
            g = grad[i]
            mi = m[i] + (g - m[i]) * c1
            vi = v[i] + (g * g - v[i]) * c2
            m[i] = mi
            v[i] = vi
            param[i] += mi / (np.sqrt(vi) + epsilon) * -lr

    @jit
    def sgd_update(param, grad, velocity, lr, momentum, nesterov):
        for i in range(param.shape[0]):
            step = grad[i] * lr
            vel = velocity[i] * momentum - step
            velocity[i] = vel
            if nesterov:
                param[i] += momentum * vel - step
            else:
                param[i] += vel

    @jit
    def add_scaled(y, x, alpha):
        for i in range(y.shape[0]):
            y[i] += alpha * x[i]

    return _named(locals())


def _lstm_kernels(jit, reduce_jit):
    """The LSTM cell steps."""

    # LSTM cell steps. Gates are the columns [input, forget, output, cell] of
    # g (N, 4H), already through tanh (the sigmoid gates' inputs halved, so
    # sigmoid = (tanh + 1) / 2); `real` (N,) is False on padded steps, where the
    # state is carried over. The tanh stays in NumPy, whose SIMD tanh Numba
    # cannot match without a vector math library.
    @jit
    def lstm_gates(g, c_prev, c, real, has_mask):
        N, H = c.shape
        half = g.dtype.type(0.5)
        for n in range(N):
            for j in range(3 * H):
                g[n, j] = g[n, j] * half + half
            if has_mask and not real[n]:
                for j in range(H):
                    c[n, j] = c_prev[n, j]
                continue
            for j in range(H):
                c[n, j] = g[n, H + j] * c_prev[n, j] + g[n, j] * g[n, 3 * H + j]

    @jit
    def lstm_output(g, tc, h_prev, h, real, has_mask):
        N, H = h.shape
        for n in range(N):
            if has_mask and not real[n]:
                for j in range(H):
                    h[n, j] = h_prev[n, j]
                continue
            for j in range(H):
                h[n, j] = g[n, 2 * H + j] * tc[n, j]

    @jit
    def lstm_backward_step(dh, dc, g, tc, c_prev, real, has_mask, dz):
        # dz (N, 4H): gradients of the gate inputs; dc becomes the gradient of
        # c_prev, in place (one array, so LLVM can prove no overlap and vectorize).
        N, H = dh.shape
        one = g.dtype.type(1)
        for n in range(N):
            if has_mask and not real[n]:  # padding passes the gradient through
                for j in range(4 * H):
                    dz[n, j] = 0
                continue
            for j in range(H):
                i, f = g[n, j], g[n, H + j]
                o, gg = g[n, 2 * H + j], g[n, 3 * H + j]
                t = tc[n, j]
                dct = dh[n, j] * o * (one - t * t) + dc[n, j]
                dz[n, j] = dct * gg * (i * (one - i))
                dz[n, H + j] = dct * c_prev[n, j] * (f * (one - f))
                dz[n, 2 * H + j] = dh[n, j] * t * (o * (one - o))
                dz[n, 3 * H + j] = dct * i * (one - gg * gg)
                dc[n, j] = dct * f

    return _named(locals())


def _gru_kernels(jit, reduce_jit):
    """The GRU cell steps."""

    # The GRU step: the update and reset gates from the tanh of their halved
    # inputs and the new gate's input (r times the recurrent projection), then,
    # after NumPy's tanh, the state; and one step back.
    @jit
    def gru_gates(p, hu, g):
        N, H = g.shape[0], g.shape[1] // 3
        half = g.dtype.type(0.5)
        for n in range(N):
            for j in range(2 * H):
                g[n, j] = g[n, j] * half + half
            for j in range(H):
                g[n, 2 * H + j] = p[n, 2 * H + j] + g[n, H + j] * hu[n, 2 * H + j]

    @jit
    def gru_output(g, h_prev, h, real, has_mask):
        N, H = h.shape
        for n in range(N):
            if has_mask and not real[n]:
                for j in range(H):
                    h[n, j] = h_prev[n, j]
                continue
            for j in range(H):
                new = g[n, 2 * H + j]
                h[n, j] = new + g[n, j] * (h_prev[n, j] - new)

    @jit
    def gru_backward_step(dh, g, hu, h_prev, real, has_mask, dp, dhu, dh_prev):
        N, H = dh.shape
        one = g.dtype.type(1)
        for n in range(N):
            if has_mask and not real[n]:  # padding passes the gradient through
                for j in range(3 * H):
                    dp[n, j] = 0
                    dhu[n, j] = 0
                for j in range(H):
                    dh_prev[n, j] = dh[n, j]
                continue
            for j in range(H):
                z, r, new = g[n, j], g[n, H + j], g[n, 2 * H + j]
                d = dh[n, j]
                dan = d * (one - z) * (one - new * new)
                dz = d * (h_prev[n, j] - new) * (z * (one - z))
                dr = dan * hu[n, 2 * H + j] * (r * (one - r))
                dp[n, j] = dz
                dp[n, H + j] = dr
                dp[n, 2 * H + j] = dan
                dhu[n, j] = dz
                dhu[n, H + j] = dr
                dhu[n, 2 * H + j] = dan * r
                dh_prev[n, j] = d * z

    return _named(locals())


def _pooling_kernels(jit, reduce_jit):
    """Max pooling and its gradient."""

    # Max pooling over NCHW images, one output row at a time (kept in cache):
    # the first maximum of each window wins, padding never does; argmax holds
    # the winner's index in its (H * W) image plane.
    # (No kernel calls another: Numba caches no function whose closure holds a compiled
    # one, and would compile it again in every process.)
    @jit
    def max_pool_2x2(X, Y, argmax):
        # The usual 2x2 windows at stride 2 without padding: a tournament of
        # selects (the earlier pixel wins ties), which LLVM compiles without branches.
        N, C, H, W = X.shape
        OH, OW = Y.shape[2], Y.shape[3]
        for n in range(N):
            for c in range(C):
                img, out, arg = X[n, c], Y[n, c], argmax[n, c]
                for y in range(OH):
                    r0, r1, o, a = img[2 * y], img[2 * y + 1], out[y], arg[y]
                    base = 2 * y * W
                    for x in range(OW):
                        v0, v1 = r0[2 * x], r0[2 * x + 1]
                        v2, v3 = r1[2 * x], r1[2 * x + 1]
                        t01, t23 = v1 > v0, v3 > v2
                        m01 = v1 if t01 else v0
                        m23 = v3 if t23 else v2
                        i01 = 1 if t01 else 0
                        i23 = W + 1 if t23 else W
                        t = m23 > m01
                        o[x] = m23 if t else m01
                        a[x] = base + 2 * x + (i23 if t else i01)

    @jit
    def max_pool_forward(X, kh, kw, sh, sw, ph, pw, Y, argmax):
        # One output at a time over its window's real pixels (padding is at
        # most half a window, so every window has one); windows are a few
        # pixels and output rows short, so plain loops beat vectorized passes.
        N, C, H, W = X.shape
        OH, OW = Y.shape[2], Y.shape[3]
        for n in range(N):
            for c in range(C):
                img, out, arg = X[n, c], Y[n, c], argmax[n, c]
                for y in range(OH):
                    ys = y * sh - ph
                    k_lo, k_hi = max(0, -ys), min(kh, H - ys)
                    for x in range(OW):
                        xs = x * sw - pw
                        j_lo, j_hi = max(0, -xs), min(kw, W - xs)
                        best = img[ys + k_lo, xs + j_lo]
                        at = (ys + k_lo) * W + xs + j_lo
                        for k in range(k_lo, k_hi):
                            for j in range(j_lo, j_hi):
                                v = img[ys + k, xs + j]
                                take = v > best  # selects, not a branch: no mispredictions
                                at = (ys + k) * W + xs + j if take else at
                                best = v if take else best
                        out[y, x] = best
                        arg[y, x] = at

    @jit
    def max_pool_backward(dY, argmax, dX):
        # dX (N, C, H * W) zeroed; each window's gradient to its winner
        N, C, OH, OW = dY.shape
        for n in range(N):
            for c in range(C):
                plane, grad, arg = dX[n, c], dY[n, c], argmax[n, c]
                for y in range(OH):
                    for x in range(OW):
                        plane[arg[y, x]] += grad[y, x]

    return _named(locals())


def _conv_epilogue_kernels(jit, reduce_jit):
    """Convolution epilogues: bias, ReLU, layout, and back."""
    import numpy as np

    # Convolution epilogue/prologue: the matrix product's output seen as
    # (N, F, P) (a strided view of whichever layout the product wrote, or the
    # NCHW output itself) to NCHW (N, F, P) with the bias and a ReLU (or
    # nothing), and back for the gradient with the bias gradient; one pass
    # instead of three. Either may work in place.
    @jit
    def conv_output(Z, b, relu, out):
        N, F, P = out.shape
        zero = out.dtype.type(0)
        for n in range(N):
            for f in range(F):
                bf, src, dst = b[f], Z[n, f], out[n, f]
                for p in range(P):
                    v = src[p] + bf
                    dst[p] = zero if relu and v <= zero else v

    @reduce_jit
    def conv_output_grad(dY, Y, relu, dZ, db):
        N, F, P = dY.shape
        zero = dY.dtype.type(0)
        sums = np.zeros(F)  # float64 accumulators
        for n in range(N):
            for f in range(F):
                src, act, dst = dY[n, f], Y[n, f], dZ[n, f]
                total = 0.0
                for p in range(P):
                    g = zero if relu and act[p] <= zero else src[p]
                    dst[p] = g
                    total += g
                sums[f] += total
        for f in range(F):
            db[f] = sums[f]

    return _named(locals())


def _patch_kernels(jit, reduce_jit):
    """Patch matrices summed back (col2im), and channels-last ones built and summed back."""

    @jit
    def col2im(col, ph, pw, sh, sw, out):
        # out (N, C, H, W) zeroed: the adjoint of the (C, kh, kw, N, OH, OW) patches
        C, kh, kw, N, OH, OW = col.shape
        H, W = out.shape[2], out.shape[3]
        for n in range(N):
            for c in range(C):
                img = out[n, c]
                for i in range(kh):
                    for j in range(kw):
                        x_lo = max(0, (pw - j + sw - 1) // sw)
                        x_hi = min(OW, (W - 1 + pw - j) // sw + 1)
                        patch = col[c, i, j, n]
                        for y in range(OH):
                            iy = y * sh + i - ph
                            if iy < 0 or iy >= H:
                                continue
                            row, prow = img[iy], patch[y]
                            for x in range(x_lo, x_hi):
                                row[x * sw + j - pw] += prow[x]

    # Channels-last convolution (see NumpyBackend.im2col_nhwc): patches with
    # the channels innermost, so every copy and add moves C contiguous values.
    @jit
    def pad_nhwc(X, ph, pw, out):
        # out (N, H + 2ph, W + 2pw, C): X (N, C, H, W) moved channels-last, zero-bordered
        N, C, H, W = X.shape
        Hp, Wp = out.shape[1], out.shape[2]
        zero = out.dtype.type(0)
        for n in range(N):
            img, dst = X[n], out[n]
            for y in range(Hp):
                if y < ph or y >= ph + H:
                    dst[y, :, :] = zero
                    continue
                for x in range(pw):
                    dst[y, x, :] = zero
                    dst[y, Wp - 1 - x, :] = zero
                for c in range(C):
                    row = img[c, y - ph]
                    for x in range(W):
                        dst[y, x + pw, c] = row[x]

    @jit
    def patches_nhwc(Xp, sh, sw, col):
        # col (N, OH, OW, kh, kw, C) from the padded channels-last images Xp
        N, OH, OW, kh, kw, C = col.shape
        for n in range(N):
            for y in range(OH):
                for x in range(OW):
                    for i in range(kh):
                        row = Xp[n, y * sh + i]
                        for j in range(kw):
                            dst, src = col[n, y, x, i, j], row[x * sw + j]
                            for c in range(C):
                                dst[c] = src[c]

    @jit
    def col2im_nhwc(dcol, sh, sw, ph, pw, dXp, out):
        # the adjoint of patches_nhwc into the scratch dXp (N, Hp, Wp, C), then
        # its interior to out (N, C, H, W)
        N, OH, OW, kh, kw, C = dcol.shape
        H, W = out.shape[2], out.shape[3]
        zero = dXp.dtype.type(0)
        for n in range(N):
            acc = dXp[n]
            acc[:, :, :] = zero
            for y in range(OH):
                for x in range(OW):
                    for i in range(kh):
                        row = acc[y * sh + i]
                        for j in range(kw):
                            dst, src = row[x * sw + j], dcol[n, y, x, i, j]
                            for c in range(C):
                                dst[c] += src[c]
            img = out[n]
            for c in range(C):
                for y in range(H):
                    for x in range(W):
                        img[c, y, x] = acc[y + ph, x + pw, c]

    return _named(locals())


def _dense_kernels(jit, reduce_jit):
    """Dense layers' bias, ReLU and their gradient."""
    import numpy as np

    # Dense layers: bias and ReLU (or nothing) in one pass, and back.
    @jit
    def bias_activation(Z, b, relu):
        n, F = Z.shape
        zero = Z.dtype.type(0)
        for i in range(n):
            row = Z[i]
            for j in range(F):
                v = row[j] + b[j]
                row[j] = zero if relu and v <= zero else v

    @jit
    def bias_activation_grad(dY, Y, relu, db):
        n, F = dY.shape
        zero = dY.dtype.type(0)
        sums = np.zeros(F)  # float64 column sums, one accumulator per column
        for i in range(n):
            grad, act = dY[i], Y[i]
            for j in range(F):
                g = zero if relu and act[j] <= zero else grad[j]
                grad[j] = g
                sums[j] += g
        for j in range(F):
            db[j] = sums[j]

    return _named(locals())


if os.environ.get("SKNET_NUMBA", "1") != "0":
    try:
        KERNELS = _compile()
    except ImportError:  # no Numba for this platform: the NumPy code runs instead
        KERNELS = None
    except RuntimeError:  # no writable cache directory: compile in memory each run
        KERNELS = _compile(cache=False)


def require(kernel, fits, *arrays):
    """Refuse to run a compiled kernel on arrays that do not fit together.

    Numba kernels index without bounds checks: arrays of the wrong shape
    (from a user's layer or loss, say) would make them read or write outside
    their memory. Every kernel call checks its shapes first, a few tuple
    comparisons, and raises a ValueError naming the kernel and the shapes.
    """
    if not fits:
        shapes = ", ".join(str(tuple(getattr(a, "shape", ()))) for a in arrays)
        raise ValueError(f"{kernel}: arrays of shapes {shapes} do not fit together")

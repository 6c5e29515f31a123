"""Fused CPU kernels compiled with Numba, for the updates NumPy cannot fuse.

NumPy runs an Adam step as a dozen whole-array passes with a temporary; these
loops make one pass in the parameters' dtype. Numba is optional (the
``numba`` extra): without it, or with ``SKNET_NUMBA=0`` in the environment,
:data:`KERNELS` is ``None`` and the NumPy backend keeps the generic NumPy code
of :class:`sknet.backend.Backend`. Kernels are compiled on first use and
cached on disk.
"""

import os

KERNELS = None


def _compile():
    import numba
    import numpy as np

    # error_model="numpy": x / 0 gives inf as in NumPy (no Python zero-division
    # check), which also lets LLVM vectorize the division.
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")

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

    return {
        "adam_update": adam_update,
        "sgd_update": sgd_update,
        "add_scaled": add_scaled,
        "lstm_gates": lstm_gates,
        "lstm_output": lstm_output,
        "lstm_backward_step": lstm_backward_step,
    }


if os.environ.get("SKNET_NUMBA", "1") != "0":
    try:
        KERNELS = _compile()
    except ImportError:  # numba is not installed: the NumPy code runs instead
        KERNELS = None

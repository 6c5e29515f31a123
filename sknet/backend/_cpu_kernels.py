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

    return {"adam_update": adam_update, "sgd_update": sgd_update, "add_scaled": add_scaled}


if os.environ.get("SKNET_NUMBA", "1") != "0":
    try:
        KERNELS = _compile()
    except ImportError:  # numba is not installed: the NumPy code runs instead
        KERNELS = None

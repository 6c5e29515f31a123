"""The activation functions, as pairs of in-place kernels written with ``xp``.

:data:`ACTIVATIONS` maps each name (``'relu'``, ``'tanh'``, ...) to its
forward and backward functions; the backends' fused kernels (the CuPy
``ElementwiseKernel`` s, the Numba epilogues) compute the same functions.
"""

import math

# ---------------------------------------------------------------------------
# Activations. Each is a pair of in-place functions:
#   forward(xp, Z, out)          out = f(Z)            (out may be Z)
#   backward(xp, dY, Y, Z, out)  out = dY * f'(Z)      (out may be dY)
# written in terms of the forward *output* Y where the derivative allows it
# (sklearn's habit), so the layer need not keep its input. The two that cannot
# (gelu, silu) set ``needs_input``.
# ---------------------------------------------------------------------------

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_K = 0.044715
LEAKY_RELU_SLOPE = 0.01
ELU_ALPHA = 1.0


def _identity_forward(xp, Z, out):
    if out is not Z:
        out[...] = Z
    return out


def _identity_backward(xp, dY, Y, Z, out):
    if out is not dY:
        out[...] = dY
    return out


def _logistic_forward(xp, Z, out):
    # 1 / (1 + exp(-z)) without overflow: with t = exp(-|z|) in (0, 1],
    # sigmoid(z) = 1 / (1 + t) for z >= 0 and t / (1 + t) for z < 0.
    t = xp.abs(Z)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    numerator = xp.where(Z >= 0, 1, t)
    t += 1
    return xp.divide(numerator, t, out=out)


def _logistic_backward(xp, dY, Y, Z, out):
    xp.multiply(dY, Y, out=out)
    out -= out * Y  # dY * Y * (1 - Y)
    return out


def _tanh_forward(xp, Z, out):
    return xp.tanh(Z, out=out)


def _tanh_backward(xp, dY, Y, Z, out):
    d = Y * Y
    xp.subtract(1, d, out=d)
    return xp.multiply(dY, d, out=out)


def _relu_forward(xp, Z, out):
    return xp.maximum(Z, 0, out=out)


def _relu_backward(xp, dY, Y, Z, out):
    return xp.multiply(dY, Y > 0, out=out)


def _leaky_relu_forward(xp, Z, out):
    # max(Z, slope * Z) is leaky ReLU for 0 < slope < 1.
    return xp.maximum(Z, LEAKY_RELU_SLOPE * Z, out=out)


def _leaky_relu_backward(xp, dY, Y, Z, out):
    return _copy(xp.where(Y > 0, dY, dY * LEAKY_RELU_SLOPE), out)


def _elu_forward(xp, Z, out):
    # max(z, 0) + alpha * expm1(min(z, 0)): each term vanishes on the other side.
    neg = xp.minimum(Z, 0)
    xp.expm1(neg, out=neg)
    if ELU_ALPHA != 1.0:
        neg *= ELU_ALPHA
    xp.maximum(Z, 0, out=out)
    out += neg
    return out


def _elu_backward(xp, dY, Y, Z, out):
    # f'(z) = 1 for z > 0, alpha * exp(z) = Y + alpha otherwise.
    return _copy(xp.where(Y > 0, dY, dY * (Y + ELU_ALPHA)), out)


def _gelu_forward(xp, Z, out):
    # tanh approximation: 0.5 z (1 + tanh(c (z + k z^3)))
    t = Z * Z
    t *= _GELU_K
    t += 1
    t *= Z
    t *= _GELU_C
    xp.tanh(t, out=t)
    t += 1
    t *= 0.5
    return xp.multiply(Z, t, out=out)


def _gelu_backward(xp, dY, Y, Z, out):
    z2 = Z * Z
    t = z2 * _GELU_K
    t += 1
    t *= Z
    t *= _GELU_C
    xp.tanh(t, out=t)
    # 0.5 (1 + t) + 0.5 z (1 - t^2) c (1 + 3 k z^2)
    sech2 = 1 - t * t
    z2 *= 3 * _GELU_K
    z2 += 1
    z2 *= _GELU_C
    z2 *= sech2
    z2 *= Z
    z2 += t
    z2 += 1
    z2 *= 0.5
    return xp.multiply(dY, z2, out=out)


def _silu_forward(xp, Z, out):
    s = xp.empty_like(Z)
    _logistic_forward(xp, Z, s)
    return xp.multiply(Z, s, out=out)


def _silu_backward(xp, dY, Y, Z, out):
    # f'(z) = s + y (1 - s) with s = sigmoid(z), y = z s.
    s = xp.empty_like(Z)
    _logistic_forward(xp, Z, s)
    d = 1 - s
    d *= Y
    d += s
    return xp.multiply(dY, d, out=out)


def _copy(src, out):
    out[...] = src
    return out


class _Activation:
    __slots__ = ("forward", "backward", "needs_input")

    def __init__(self, forward, backward, needs_input=False):
        self.forward = forward
        self.backward = backward
        self.needs_input = needs_input


ACTIVATIONS = {
    "identity": _Activation(_identity_forward, _identity_backward),
    "logistic": _Activation(_logistic_forward, _logistic_backward),
    "tanh": _Activation(_tanh_forward, _tanh_backward),
    "relu": _Activation(_relu_forward, _relu_backward),
    "leaky_relu": _Activation(_leaky_relu_forward, _leaky_relu_backward),
    "elu": _Activation(_elu_forward, _elu_backward),
    "gelu": _Activation(_gelu_forward, _gelu_backward, needs_input=True),
    "silu": _Activation(_silu_forward, _silu_backward, needs_input=True),
}


def activation_needs_input(name):
    """Whether the derivative of activation ``name`` needs its input, not only its output."""
    return ACTIVATIONS[name].needs_input

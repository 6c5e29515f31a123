"""The activation functions as ONNX nodes, each computing what sknet's kernels compute.

``'leaky_relu'`` and ``'elu'`` carry sknet's constants; ``'gelu'`` is the
tanh approximation and ``'silu'`` ``x * sigmoid(x)``, both written with
elementary operators (ONNX has ``Gelu`` from opset 20 only), as is
``'elu'`` (onnxruntime has no float64 ``Elu``).
"""

import math

from sknet.backend import ACTIVATIONS
from sknet.backend._activations import ELU_ALPHA, LEAKY_RELU_SLOPE

#: Hidden activations ONNX export supports: every one of sknet's.
SUPPORTED_ACTIVATIONS = tuple(sorted(ACTIVATIONS))

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_K = 0.044715


def _gelu(builder, X):
    # 0.5 x (1 + tanh(c (x + k x^3)))
    cube = builder.node("Mul", [builder.node("Mul", [X, X]), X])
    inner = builder.node("Add", [X, builder.node("Mul", [cube, builder.constant(_GELU_K)])])
    t = builder.node("Tanh", [builder.node("Mul", [inner, builder.constant(_GELU_C)])])
    half = builder.node("Mul", [X, builder.constant(0.5)])
    return builder.node("Mul", [half, builder.node("Add", [t, builder.constant(1.0)])], "gelu")


def activation(builder, name, X):
    """The output of activation ``name`` (``None``: identity) on tensor ``X``."""
    name = name or "identity"
    if name == "identity":
        return X
    if name == "logistic":
        return builder.node("Sigmoid", [X])
    if name == "tanh":
        return builder.node("Tanh", [X])
    if name == "relu":
        return builder.node("Relu", [X])
    if name == "leaky_relu":
        return builder.node("LeakyRelu", [X], alpha=float(LEAKY_RELU_SLOPE))
    if name == "elu":  # max(x, 0) + alpha (exp(min(x, 0)) - 1); no float64 Elu in onnxruntime
        zero = builder.constant(0.0)
        negative = builder.node("Exp", [builder.node("Min", [X, zero])])
        negative = builder.node("Sub", [negative, builder.constant(1.0)])
        if ELU_ALPHA != 1.0:
            negative = builder.node("Mul", [negative, builder.constant(ELU_ALPHA)])
        return builder.node("Add", [builder.node("Max", [X, zero]), negative], "elu")
    if name == "gelu":
        return _gelu(builder, X)
    if name == "silu":
        return builder.node("Mul", [X, builder.node("Sigmoid", [X])], "silu")
    raise ValueError(f"ONNX export supports the activations {SUPPORTED_ACTIVATIONS}, got {name!r}")

"""Converters of the numeric embeddings: piecewise-linear encodings and periodic embeddings."""

import math

import numpy as np

from sknet.layers import PeriodicEmbedding, PiecewiseLinearEncoding
from sknet.onnx._registry import register_converter


def feature_linear(builder, layer, V):
    """A linear layer per feature (``W`` (F, m, d), or (m, d) shared) on ``V`` (n, F, m)."""
    W, b = layer.params["W"], layer.params["b"]
    if W.ndim == 2:  # shared by every feature
        Z = builder.node("MatMul", [V, builder.constant(W, "W")])
    else:  # (F, n, m) @ (F, m, d), back to (n, F, d)
        Vt = builder.node("Transpose", [V], perm=[1, 0, 2])
        Z = builder.node("MatMul", [Vt, builder.constant(W, "W")])
        Z = builder.node("Transpose", [Z], perm=[1, 0, 2])
    Z = builder.node("Add", [Z, builder.constant(b, "b")])
    Z = builder.reshape(Z, (-1, int(np.prod(layer.output_shape_))))
    return builder.activation(layer.activation, Z)


def convert_piecewise_linear(builder, layer, X):
    tables = layer._tables
    raw = builder.node(
        "Sub", [builder.unsqueeze(X, [2]), builder.constant(tables["left"], "left")]
    )
    raw = builder.node("Mul", [raw, builder.constant(tables["inv_width"], "inv_width")])
    raw = builder.node("Max", [raw, builder.constant(tables["low"], "low")])
    V = builder.node("Min", [raw, builder.constant(tables["high"], "high")])  # (n, F, max_bins)
    if layer.d_embedding is not None:
        return feature_linear(builder, layer, V)
    flat = builder.reshape(V, (-1, int(np.prod(tables["left"].shape))))
    return builder.node("Gather", [flat, builder.constant(tables["valid"], "valid")], axis=1)


def convert_periodic(builder, layer, X):
    angle = builder.node(
        "Mul", [builder.unsqueeze(X, [2]), builder.constant(layer.params["frequencies"], "c")]
    )
    angle = builder.node("Mul", [angle, builder.constant(2 * math.pi)])
    V = builder.node(
        "Concat", [builder.node("Cos", [angle]), builder.node("Sin", [angle])], axis=2
    )
    return feature_linear(builder, layer, V)


register_converter(PiecewiseLinearEncoding, convert_piecewise_linear)
register_converter(PeriodicEmbedding, convert_periodic)

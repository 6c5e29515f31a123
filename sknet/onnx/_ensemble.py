"""Converters of the parameter-efficient ensemble: the member axis, shared and own weights."""

import numpy as np

from sknet.layers import EnsembleDense, EnsembleHead, EnsembleInput
from sknet.onnx._registry import register_converter


def convert_ensemble_input(builder, layer, X):
    repeats = builder.constant(np.array([1, layer.n_members_, 1], np.int64), "repeats")
    return builder.node("Tile", [builder.unsqueeze(X, [1]), repeats])  # (n, k, d)


def convert_ensemble_dense(builder, layer, X):
    # ((X * r) @ W) * s + b, the members folded into the batch by broadcasting
    p = layer.params
    Xr = builder.node("Mul", [X, builder.constant(p["r"], "r")])
    U = builder.node("MatMul", [Xr, builder.constant(p["W"], "W")])
    Z = builder.node("Mul", [U, builder.constant(p["s"], "s")])
    Z = builder.node("Add", [Z, builder.constant(p["b"], "b")])
    return builder.activation(layer.activation, Z)


def convert_ensemble_head(builder, layer, X):
    Xt = builder.node("Transpose", [X], perm=[1, 0, 2])  # (k, n, d) @ (k, d, units)
    Z = builder.node("MatMul", [Xt, builder.constant(layer.params["W"], "W")])
    Z = builder.node(
        "Add",
        [builder.node("Transpose", [Z], perm=[1, 0, 2]), builder.constant(layer.params["b"], "b")],
    )
    return builder.activation(layer.activation, Z)


register_converter(EnsembleInput, convert_ensemble_input)
register_converter(EnsembleDense, convert_ensemble_dense)
register_converter(EnsembleHead, convert_ensemble_head)

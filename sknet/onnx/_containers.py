"""Converters of the containers: Sequential, Residual, Concatenate, TimeDistributed.

Each converts its inner layers with ``builder.convert``, so every layer
inside (a user's with a registered converter too) is written in place, and
hands them the padding mask as the container's forward pass does.
"""

from sknet.layers import Concatenate, Residual, Sequential, TimeDistributed
from sknet.onnx._registry import register_converter


def _chain(builder, layers, X):
    for layer in layers:
        X = builder.convert(layer, X)
    return X


def convert_sequential(builder, layer, X):
    return _chain(builder, layer.blocks_, X)


def convert_residual(builder, layer, X):
    Y = _chain(builder, layer.block_, X)
    S = _chain(builder, layer.shortcut_, X) if layer.shortcut_ else X
    return builder.node("Add", [Y, S], "residual")


def convert_concatenate(builder, layer, X):
    outputs = [builder.convert(block, X) for block in layer.blocks_]
    return builder.node("Concat", outputs, "concatenated", axis=int(layer._batch_axis))


def convert_time_distributed(builder, layer, X):
    T = layer.input_shape_[0]
    steps = builder.reshape(X, (-1,) + tuple(layer.input_shape_[1:]))  # (N * T, ...)
    mask, ndim = builder.mask, builder.mask_ndim
    inner = None
    if mask is not None and ndim >= 3:  # sequences of sequences: each step its own mask
        inner = builder.reshape(mask, (-1,) + tuple(layer.input_shape_[1 : ndim - 1]))
    with builder.masked(inner, ndim - 1 if inner is not None else 2):
        Y = builder.convert(layer.layer_, steps)
    return builder.reshape(Y, (-1, T) + tuple(layer.layer_.output_shape_))


register_converter(Sequential, convert_sequential)
register_converter(Residual, convert_residual)
register_converter(Concatenate, convert_concatenate)
register_converter(TimeDistributed, convert_time_distributed)

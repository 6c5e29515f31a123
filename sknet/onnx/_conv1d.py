"""Converters of the 1-D convolution and poolings over the steps of sequences.

sknet's sequences are ``(batch, timesteps, features)``, ONNX's 1-D windows
``(batch, channels, timesteps)``: the float32 graph transposes around ONNX's
Conv, MaxPool and AveragePool (padding ``(left, right)``, which may differ,
dilation, stride; padded steps never win a maximum and count as zeros in an
average). onnxruntime has no float64 Conv or AveragePool, so a float64 graph
writes those as sknet computes them: the windows as strided slices of the
padded steps, then one matrix product with the filters, or their mean.
"""

import numpy as np

from sknet.layers import AvgPool1D, Conv1D, GlobalMaxPool1D, MaxPool1D
from sknet.onnx._builder import host_array
from sknet.onnx._registry import register_converter


def _channels_first(builder, X):
    return builder.node("Transpose", [X], perm=[0, 2, 1])


def _padded(builder, X, padding):
    left, right = padding
    if not (left or right):
        return X
    pads = builder.constant(np.array([0, left, 0, 0, right, 0], np.int64), "pads")
    return builder.node("Pad", [X, pads], mode="constant")


def _windows(builder, X, padding, kernel, stride, dilation, steps):
    """The windows (N, OT, kernel, C) of sequences ``X`` (N, T, C), zero-padded."""
    Xp = _padded(builder, X, padding)
    parts = []
    for j in range(kernel):
        start = j * dilation
        window = builder.slice(Xp, [start], [start + stride * (steps - 1) + 1], [1], [stride])
        parts.append(builder.unsqueeze(window, [2]))
    return builder.node("Concat", parts, axis=2) if len(parts) > 1 else parts[0]


def convert_conv1d(builder, layer, X):
    k, (OT, F) = int(layer.kernel_size), layer.output_shape_
    C = layer.input_shape_[1]
    if builder.dtype == np.float64:
        windows = _windows(builder, X, layer._padding, k, layer._stride, layer._dilation, OT)
        cols = builder.reshape(windows, (-1, OT, k * C))
        W = host_array(layer.params["W"]).reshape(k * C, F)
        b = layer.params["b"] if layer.use_bias else None
        return builder.activation(layer.activation, builder.matmul_add(cols, W, b))
    W = host_array(layer.params["W"]).transpose(2, 1, 0)  # (filters, C, kernel)
    inputs = [_channels_first(builder, X), builder.constant(W, "W")]
    if layer.use_bias:
        inputs.append(builder.constant(layer.params["b"], "b"))
    Y = builder.node(
        "Conv",
        inputs,
        kernel_shape=[k],
        strides=[layer._stride],
        pads=list(layer._padding),
        dilations=[layer._dilation],
    )
    return builder.activation(layer.activation, _channels_first(builder, Y))


def _pool(builder, layer, X, op_type, **attributes):
    Y = builder.node(
        op_type,
        [_channels_first(builder, X)],
        kernel_shape=[layer._k],
        strides=[layer._s],
        pads=list(layer._padding),
        **attributes,
    )
    return _channels_first(builder, Y)


def convert_max_pool1d(builder, layer, X):
    return _pool(builder, layer, X, "MaxPool")


def convert_avg_pool1d(builder, layer, X):
    if builder.dtype == np.float64:
        OT = layer.output_shape_[0]
        windows = _windows(builder, X, layer._padding, layer._k, layer._s, 1, OT)
        return builder.reduce("ReduceMean", windows, [2], keepdims=False)
    return _pool(builder, layer, X, "AveragePool", count_include_pad=1)


def convert_global_max_pool1d(builder, layer, X):
    mask = builder.mask
    if mask is None:
        return builder.reduce("ReduceMax", X, [1], keepdims=False)
    real = builder.unsqueeze(mask, [2])  # (N, T, 1)
    X = builder.node("Where", [real, X, builder.constant(-np.inf)])
    Y = builder.reduce("ReduceMax", X, [1], keepdims=False)
    empty = builder.node("Not", [builder.any(mask, [1], keepdims=True)])  # all padding: zeros
    return builder.node("Where", [empty, builder.constant(0.0), Y])


register_converter(Conv1D, convert_conv1d)
register_converter(MaxPool1D, convert_max_pool1d)
register_converter(AvgPool1D, convert_avg_pool1d)
register_converter(GlobalMaxPool1D, convert_global_max_pool1d)

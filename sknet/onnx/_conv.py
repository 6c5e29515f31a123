"""Converters of the convolutions and poolings: ONNX's Conv, MaxPool, AveragePool.

sknet's windows are ONNX's: cross-correlation on NCHW images, symmetric
zero padding, output sizes rounded down; a padded pixel never wins a
maximum and counts as a zero in an average (``count_include_pad=1``).
onnxruntime has no float64 kernels of Conv and AveragePool, so a float64
graph writes them with standard operators instead: the windows as strided
slices of the padded images, one matrix product with the filters (im2col,
as sknet computes them), or their sum for an average.
"""

import numpy as np

from sknet.layers import AvgPool2D, Conv2D, GlobalAvgPool2D, MaxPool2D
from sknet.onnx._builder import host_array
from sknet.onnx._registry import register_converter


def _windows(builder, layer, X):
    """Every window offset's pixels, (N, C, kh * kw, OH, OW), of the zero-padded images ``X``."""
    (kh, kw), (sh, sw), (ph, pw) = layer._kernel, layer._stride, layer._padding
    _, OH, OW = layer.output_shape_
    if ph or pw:
        pads = builder.constant(np.array([0, 0, ph, pw, 0, 0, ph, pw], np.int64), "pads")
        X = builder.node("Pad", [X, pads], mode="constant")
    parts = []
    for i in range(kh):
        for j in range(kw):
            ends = [i + sh * (OH - 1) + 1, j + sw * (OW - 1) + 1]
            window = builder.slice(X, [i, j], ends, [2, 3], [sh, sw])
            parts.append(builder.unsqueeze(window, [2]))
    return builder.node("Concat", parts, axis=2) if len(parts) > 1 else parts[0]


def _conv_by_windows(builder, layer, X):
    C = layer.input_shape_[0]
    F, OH, OW = layer.output_shape_
    (kh, kw) = layer._kernel
    cols = builder.reshape(_windows(builder, layer, X), (-1, C * kh * kw, OH * OW))
    W = host_array(layer.params["W"]).reshape(F, -1)
    Y = builder.node("MatMul", [builder.constant(W, "W"), cols])  # (N, F, OH * OW)
    if layer.use_bias:
        b = host_array(layer.params["b"]).reshape(F, 1)
        Y = builder.node("Add", [Y, builder.constant(b, "b")])
    return builder.reshape(Y, (-1, F, OH, OW))


def convert_conv2d(builder, layer, X):
    (kh, kw), (sh, sw), (ph, pw) = layer._kernel, layer._stride, layer._padding
    if builder.dtype == np.float64:
        return builder.activation(layer.activation, _conv_by_windows(builder, layer, X))
    inputs = [X, builder.constant(layer.params["W"], "W")]
    if layer.use_bias:
        inputs.append(builder.constant(layer.params["b"], "b"))
    Y = builder.node(
        "Conv",
        inputs,
        kernel_shape=[kh, kw],
        strides=[sh, sw],
        pads=[ph, pw, ph, pw],
        dilations=[1, 1],
    )
    return builder.activation(layer.activation, Y)


def _pool(builder, layer, X, op_type, **attributes):
    (kh, kw), (sh, sw), (ph, pw) = layer._kernel, layer._stride, layer._padding
    return builder.node(
        op_type,
        [X],
        kernel_shape=[kh, kw],
        strides=[sh, sw],
        pads=[ph, pw, ph, pw],
        **attributes,
    )


def convert_max_pool2d(builder, layer, X):
    return _pool(builder, layer, X, "MaxPool")


def convert_avg_pool2d(builder, layer, X):
    if builder.dtype == np.float64:
        return builder.reduce("ReduceMean", _windows(builder, layer, X), [2], keepdims=False)
    return _pool(builder, layer, X, "AveragePool", count_include_pad=1)


def convert_global_avg_pool2d(builder, layer, X):
    return builder.reduce("ReduceMean", X, [2, 3], keepdims=False)


register_converter(Conv2D, convert_conv2d)
register_converter(MaxPool2D, convert_max_pool2d)
register_converter(AvgPool2D, convert_avg_pool2d)
register_converter(GlobalAvgPool2D, convert_global_avg_pool2d)

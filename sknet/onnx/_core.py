"""Converters of the core layers: Dense, Activation, Dropout, BatchNorm, Flatten."""

import numpy as np

from sknet.layers import Activation, BatchNorm, Dense, Dropout, Flatten
from sknet.onnx._builder import host_array
from sknet.onnx._registry import register_converter


def convert_dense(builder, layer, X):
    b = layer.params["b"] if layer.use_bias else None
    return builder.activation(layer.activation, builder.matmul_add(X, layer.params["W"], b))


def convert_activation(builder, layer, X):
    return builder.activation(layer.activation, X)


def convert_dropout(builder, layer, X):
    return X  # the identity at prediction time


def convert_flatten(builder, layer, X):
    return builder.node("Flatten", [X], axis=1)


def convert_batch_norm(builder, layer, X):
    # (X - running_mean) * gamma / sqrt(running_var + epsilon) + beta, as predict computes it
    dtype = layer.dtype_
    gamma, beta = (host_array(layer.params[k]).astype(dtype) for k in ("gamma", "beta"))
    mean, var = (host_array(layer.state[k]).astype(dtype) for k in ("running_mean", "running_var"))
    scale = gamma / np.sqrt(var + dtype.type(layer.epsilon))
    shape = (-1,) + (1,) * (len(layer.input_shape_) - 1)  # features, or channels of images
    centered = builder.node("Sub", [X, builder.constant(mean.reshape(shape), "running_mean")])
    scaled = builder.node("Mul", [centered, builder.constant(scale.reshape(shape), "scale")])
    return builder.node("Add", [scaled, builder.constant(beta.reshape(shape), "beta")])


register_converter(Dense, convert_dense)
register_converter(Activation, convert_activation)
register_converter(Dropout, convert_dropout)
register_converter(Flatten, convert_flatten)
register_converter(BatchNorm, convert_batch_norm)

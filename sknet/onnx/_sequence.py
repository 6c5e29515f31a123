"""Converters of the sequence layers: token embeddings, positions, pooling over time."""

import numpy as np

from sknet.layers import (
    Embedding,
    GlobalAvgPool1D,
    PositionEmbedding,
    SinusoidalPositionEmbedding,
)
from sknet.onnx._registry import register_converter


def convert_embedding(builder, layer, X):
    ids = builder.cast(X, np.int64)  # the graph's token ids are int64 already
    return builder.node("Gather", [builder.constant(layer.params["E"], "E"), ids], axis=0)


def masked_mean(builder, X, mask):
    """The mean over axis 1 of ``X`` ``(batch, timesteps, features)``, real steps only."""
    if mask is None:
        return builder.reduce("ReduceMean", X, [1], keepdims=False)
    real = builder.cast(mask, builder.dtype)  # (batch, timesteps)
    counts = builder.reduce("ReduceSum", real, [1], keepdims=True)
    counts = builder.node("Max", [counts, builder.constant(np.ones(1))])
    weights = builder.unsqueeze(builder.node("Div", [real, counts]), [2])
    return builder.reduce("ReduceSum", builder.node("Mul", [X, weights]), [1], keepdims=False)


def convert_global_avg_pool1d(builder, layer, X):
    return masked_mean(builder, X, builder.mask)


register_converter(Embedding, convert_embedding)
register_converter(GlobalAvgPool1D, convert_global_avg_pool1d)


def convert_position_embedding(builder, layer, X):
    return builder.node("Add", [X, builder.constant(layer.params["P"], "positions")])


def convert_sinusoidal_position_embedding(builder, layer, X):
    return builder.node("Add", [X, builder.constant(layer._table, "positions")])


register_converter(PositionEmbedding, convert_position_embedding)
register_converter(SinusoidalPositionEmbedding, convert_sinusoidal_position_embedding)

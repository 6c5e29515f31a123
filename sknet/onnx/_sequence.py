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
    """The table's rows of the ids ``X``; an id outside ``[0, input_dim)`` gives zeros.

    ``predict`` refuses such an id (a ValueError); a graph cannot refuse
    everywhere (ONNX's Gather reads a negative index from the end of the
    table, and an index past it is an error on some runtimes, zeros on
    others), so the graph defines it: the zero vector, on every runtime,
    never another token's row. Check ids before the session to refuse them.
    """
    ids = builder.cast(X, np.int64)  # the graph's token ids are int64 already
    inside = builder.node(
        "And",
        [
            builder.node("GreaterOrEqual", [ids, builder.constant(np.array(0, np.int64))]),
            builder.node("Less", [ids, builder.constant(np.array(layer.input_dim, np.int64))]),
        ],
        "known_id",
    )
    safe = builder.node("Where", [inside, ids, builder.constant(np.array(0, np.int64))])
    rows = builder.node("Gather", [builder.constant(layer.params["E"], "E"), safe], axis=0)
    inside = builder.unsqueeze(inside, [-1])
    return builder.node("Where", [inside, rows, builder.constant(0.0)], "embedded")


def masked_mean(builder, X, mask):
    """The mean over axis 1 of ``X`` ``(batch, timesteps, features)``, real steps only."""
    if mask is None:
        return builder.reduce("ReduceMean", X, [1], keepdims=False)
    real = builder.cast(mask, builder.dtype)  # (batch, timesteps)
    counts = builder.reduce("ReduceSum", real, [1], keepdims=True)
    counts = builder.node("Max", [counts, builder.constant(np.ones(1))])
    weights = builder.unsqueeze(builder.node("Div", [real, counts]), [2])
    with builder.masked(mask):  # padded steps as zeros: no 0 * NaN
        X = builder.padded_as_zeros(X)
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

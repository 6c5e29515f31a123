"""Converters of categorical embeddings and of the columns a branch reads."""

import numpy as np

from sknet.layers import CategoricalEmbedding, SelectColumns
from sknet.onnx._registry import register_converter


def convert_select_columns(builder, layer, X):
    return builder.node("Gather", [X, builder.constant(layer._index, "columns")], axis=1)


def convert_categorical_embedding(builder, layer, X):
    # codes rounded half to even (numpy's rint, ONNX's Round); 0 or NaN missing,
    # outside 1..c_j unknown (row c_j + 1); then each column's offset into E
    cards = np.array(layer._checked_config()[0], dtype=np.float64)
    codes = builder.node("Round", [X])
    zero = builder.constant(0.0)
    missing = builder.node(
        "Or", [builder.node("Equal", [codes, zero]), builder.node("IsNaN", [X])]
    )
    known = builder.node(
        "And",
        [
            builder.node("GreaterOrEqual", [codes, builder.constant(1.0)]),
            builder.node("LessOrEqual", [codes, builder.constant(cards, "cardinalities")]),
        ],
    )
    codes = builder.node("Where", [known, codes, builder.constant(cards + 1, "unknown")])
    codes = builder.node("Where", [missing, zero, codes])
    rows = builder.node(
        "Add",
        [builder.cast(codes, np.int64), builder.constant(np.array(layer.offsets_), "offsets")],
    )
    looked_up = builder.node("Gather", [builder.constant(layer.params["E"], "E"), rows], axis=0)
    flat = builder.reshape(looked_up, (-1, len(layer.dims_) * max(layer.dims_)))
    return builder.node("Gather", [flat, builder.constant(layer._valid, "valid")], axis=1)


register_converter(SelectColumns, convert_select_columns)
register_converter(CategoricalEmbedding, convert_categorical_embedding)

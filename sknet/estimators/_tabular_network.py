"""The layer list of a tabular estimator, from its fitted column plan.

The encoded table is one float matrix ``[numbers | missing indicators |
category codes]`` (:class:`~sknet.tabular.TabularEncoder`); the network's
first layer reads it back in branches, side by side
(:class:`~sknet.layers.Concatenate` of :class:`~sknet.layers.SelectColumns`):
the numbers through a numeric embedding (piecewise-linear over the
encoder's quantile bins, or periodic), the indicators as they are, the codes
through a :class:`~sknet.layers.CategoricalEmbedding`. Then an MLP backbone,
as one member (``Dense``) or ``k`` members sharing their weights
(:class:`~sknet.layers.EnsembleInput` and
:class:`~sknet.layers.EnsembleDense`, TabM's parameter-efficient ensemble).
"""

import numpy as np

from sknet.layers import (
    CategoricalEmbedding,
    Concatenate,
    Dense,
    Dropout,
    EnsembleDense,
    EnsembleInput,
    PeriodicEmbedding,
    PiecewiseLinearEncoding,
    SelectColumns,
    Sequential,
    embedding_size,
)

#: The numeric embeddings a tabular estimator takes by name.
NUMERIC_EMBEDDINGS = ("piecewise_linear", "periodic")


def _columns(group):
    return list(range(group.start, group.stop))


def input_branches(encoder, numeric_embedding, d_embedding, categorical_dims):
    """The branches that read the encoded columns: numbers, indicators, codes."""
    groups = encoder.output_groups_
    branches = []
    numbers = _columns(groups["numeric"])
    if numbers:
        select = SelectColumns(numbers)
        if numeric_embedding == "piecewise_linear":
            embed = PiecewiseLinearEncoding(encoder.bins_, d_embedding, activation="relu")
            branches.append(Sequential([select, embed]))
        elif numeric_embedding == "periodic":
            branches.append(Sequential([select, PeriodicEmbedding(d_embedding=d_embedding)]))
        else:
            branches.append(select)
    indicators = _columns(groups["indicators"])
    if indicators:
        branches.append(SelectColumns(indicators))
    codes = _columns(groups["categorical"])
    if codes:
        cardinalities = [int(c) for c in encoder.cardinalities_]
        n_categorical = len(encoder.categorical_features_)
        dims = categorical_dims
        if isinstance(dims, (list, tuple, np.ndarray)) and len(dims) == n_categorical:
            # one per categorical column: the numeric columns also coded get their default
            dims = [*dims, *(embedding_size(c) for c in cardinalities[n_categorical:])]
        embedding = CategoricalEmbedding(cardinalities, dims=dims)
        branches.append(Sequential([SelectColumns(codes), embedding]))
    return branches


def tabular_layers(
    encoder,
    *,
    numeric_embedding,
    d_embedding,
    categorical_dims,
    hidden_layer_sizes,
    activation,
    dropout,
    n_members,
):
    """The unbuilt layers, input branches to the last hidden layer (the head is appended)."""
    branches = input_branches(encoder, numeric_embedding, d_embedding, categorical_dims)
    layers = [branches[0] if len(branches) == 1 else Concatenate(branches)]
    if n_members > 1:
        layers.append(EnsembleInput(n_members))
    for i, units in enumerate(hidden_layer_sizes):
        if n_members > 1:
            # TabM's initialization: the first layer's input adapters break the
            # members' symmetry (a normal after embeddings, random signs on raw
            # inputs); every other adapter starts at one.
            first = "normal" if numeric_embedding else "random_signs"
            layers.append(
                EnsembleDense(units, activation, r_init=first if i == 0 else "ones", s_init="ones")
            )
        else:
            layers.append(Dense(units, activation=activation, init="he_uniform"))
        if dropout > 0:
            layers.append(Dropout(dropout))
    return layers

"""Converters of the transformer's layers: LayerNorm, MultiHeadAttention, the encoder block.

LayerNorm is ONNX's LayerNormalization over the last axis. The attention is
written as sknet computes it: the query's projection scaled by ``1 /
sqrt(key_dim)``, the heads as a reshape and a transpose, one batched
product for the scores and one for the outputs. With a padding mask or a
causal one, padded (or later) keys get no weight and a query left with no
key gets zero weights, as sknet's masked softmax gives them; without, the
softmax is ONNX's. With a mask, padded steps enter as zeros (a ``Where``), as
the layers take them. Dropout is the identity at prediction time.
"""

import math

import numpy as np

from sknet.layers import LayerNorm, MultiHeadAttention, TransformerEncoderBlock
from sknet.onnx._builder import host_array
from sknet.onnx._registry import register_converter


def layer_norm(builder, X, gamma, beta, epsilon):
    gamma, beta = builder.constant(gamma, "gamma"), builder.constant(beta, "beta")
    return builder.node(
        "LayerNormalization", [X, gamma, beta], "layer_norm", axis=-1, epsilon=float(epsilon)
    )


def convert_layer_norm(builder, layer, X):
    return layer_norm(builder, X, layer.params["gamma"], layer.params["beta"], layer.epsilon)


def _heads(builder, Z, steps, heads, key_dim, perm):
    """Projections (N, steps, heads * key_dim) as heads, transposed by ``perm``."""
    return builder.node("Transpose", [builder.reshape(Z, (-1, steps, heads, key_dim))], perm=perm)


def _masked_softmax(builder, S, key_mask, causal, Tq, Tk):
    """Softmax over the keys of scores ``S`` (N, H, Tq, Tk), masked keys weighing 0."""
    if key_mask is None and not causal:
        return builder.node("Softmax", [S], axis=-1)
    minus_inf = builder.constant(-np.inf)
    if key_mask is not None:  # (N, Tk) -> (N, 1, 1, Tk)
        S = builder.node("Where", [builder.unsqueeze(key_mask, [1, 2]), S, minus_inf])
    if causal:
        later = np.arange(Tk)[None, :] > np.arange(Tq)[:, None]
        S = builder.node("Where", [builder.constant(later, "later"), minus_inf, S])
    top = builder.reduce("ReduceMax", S, [3], keepdims=True)
    top = builder.node("Where", [builder.node("IsInf", [top]), builder.constant(0.0), top])
    E = builder.node("Exp", [builder.node("Sub", [S, top])])
    total = builder.reduce("ReduceSum", E, [3], keepdims=True)
    positive = builder.node("Greater", [total, builder.constant(0.0)])
    total = builder.node("Where", [positive, total, builder.constant(1.0)])
    return builder.node("Div", [E, total], "weights")


def attention(builder, layer, X, key_mask):
    """The attention of ``layer`` (its ``Wq, bq, ..., Wo, bo``) on sequences ``X``."""
    p = {key: host_array(value) for key, value in layer.params.items()}
    dtype = layer.dtype_
    H, d, q = layer._heads, layer._key_dim, layer._query_steps
    T = layer.input_shape_[0]
    scale = dtype.type(1.0 / math.sqrt(d))
    if q is None:
        Tq = Tk = T
        Xq = Xk = X
    else:
        Tq, Tk = q, T - q
        Xq, Xk = builder.slice(X, [0], [q], [1]), builder.slice(X, [q], [T], [1])
        if key_mask is not None:
            key_mask = builder.slice(key_mask, [q], [T], [1])
    Q = builder.matmul_add(Xq, p["Wq"].astype(dtype) * scale, p["bq"].astype(dtype) * scale)
    K = builder.matmul_add(Xk, p["Wk"], p["bk"])
    V = builder.matmul_add(Xk, p["Wv"], p["bv"])
    Q = _heads(builder, Q, Tq, H, d, [0, 2, 1, 3])  # (N, H, Tq, d)
    K = _heads(builder, K, Tk, H, d, [0, 2, 3, 1])  # (N, H, d, Tk)
    V = _heads(builder, V, Tk, H, d, [0, 2, 1, 3])  # (N, H, Tk, d)
    S = builder.node("MatMul", [Q, K], "scores")
    P = _masked_softmax(builder, S, key_mask, layer.causal, Tq, Tk)
    O = builder.node("Transpose", [builder.node("MatMul", [P, V])], perm=[0, 2, 1, 3])
    return builder.matmul_add(builder.reshape(O, (-1, Tq, H * d)), p["Wo"], p["bo"])


def convert_multi_head_attention(builder, layer, X):
    return attention(builder, layer, builder.padded_as_zeros(X), builder.mask)


def _feed_forward(builder, layer, X):
    p = layer.params
    hidden = builder.activation(layer.activation, builder.matmul_add(X, p["W1"], p["b1"]))
    return builder.matmul_add(hidden, p["W2"], p["b2"])


def convert_transformer_block(builder, layer, X):
    p, epsilon = layer.params, layer.epsilon

    def norm(Z, k):
        return layer_norm(builder, Z, p["gamma" + k], p["beta" + k], epsilon)

    X = builder.padded_as_zeros(X)

    if layer.norm_first:
        R1 = builder.node("Add", [X, attention(builder, layer, norm(X, "1"), builder.mask)])
        return builder.node("Add", [R1, _feed_forward(builder, layer, norm(R1, "2"))])
    H1 = norm(builder.node("Add", [X, attention(builder, layer, X, builder.mask)]), "1")
    return norm(builder.node("Add", [H1, _feed_forward(builder, layer, H1)]), "2")


register_converter(LayerNorm, convert_layer_norm)
register_converter(MultiHeadAttention, convert_multi_head_attention)
register_converter(TransformerEncoderBlock, convert_transformer_block)

"""Tests for sknet/layers/_steps.py: the padding mask every layer that takes one shares.

What padded steps hold (NaN and infinity included) reaches no real step's
output nor any gradient: a layer given a mask computes as if the padded steps
held zeros, forward and backward.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.layers import (
    GRU,
    LSTM,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    MultiHeadAttention,
    Sequential,
    SimpleRNN,
    TransformerEncoderBlock,
)
from tests.layers.oracles import build, numpy_params, perturb

N, T, F = 3, 5, 4


def padding_mask():
    mask = np.ones((N, T), bool)
    mask[1, 3:] = False  # padded at the end
    mask[2, :2] = False  # padded at the start
    return mask


MASK_LAYERS = [
    pytest.param(lambda: MultiHeadAttention(2), id="attention"),
    pytest.param(lambda: MultiHeadAttention(2, causal=True), id="attention-causal"),
    pytest.param(lambda: MultiHeadAttention(2, query_steps=2), id="attention-cross"),
    pytest.param(lambda: TransformerEncoderBlock(2, 8, dropout=0.0), id="block-post-norm"),
    pytest.param(
        lambda: TransformerEncoderBlock(2, 8, dropout=0.0, norm_first=True, activation="gelu"),
        id="block-pre-norm",
    ),
    pytest.param(GlobalAvgPool1D, id="avg-pool"),
    pytest.param(GlobalMaxPool1D, id="max-pool"),
    pytest.param(lambda: SimpleRNN(3, return_sequences=True), id="rnn"),
    pytest.param(lambda: LSTM(3, bidirectional=True), id="lstm"),
    pytest.param(lambda: GRU(3, return_sequences=True, bidirectional=True), id="gru"),
    pytest.param(
        lambda: Sequential([TransformerEncoderBlock(2, 8, dropout=0.0), GlobalAvgPool1D()]),
        id="sequential",
    ),
]


def _run(layer, backend, X, mask, dY=None):
    """Outputs, parameter gradients and input gradient of one training pass (NumPy)."""
    Y = layer.forward_with_mask(backend.asarray(X), training=True, mask=backend.asarray(mask))
    Y = backend.to_numpy(Y)
    if dY is None:
        dY = np.random.RandomState(1).standard_normal(Y.shape)
        if Y.ndim == 3:  # the gradient of the real steps' outputs only
            dY[~mask[:, -Y.shape[1] :]] = 0
    dX = backend.to_numpy(layer.backward(backend.asarray(dY)))
    grads = {k: backend.to_numpy(g).copy() for k, g in layer.grads.items()}
    return Y, grads, dX, dY


@pytest.mark.parametrize("make", MASK_LAYERS)
@pytest.mark.parametrize("junk", [np.nan, np.inf, -1e300], ids=["nan", "inf", "huge"])
def test_what_padded_steps_hold_reaches_no_real_output_nor_gradient(backend, make, junk):
    layer = build(make(), (T, F), backend)
    if layer.params:
        perturb(layer, np.random.RandomState(0), [k for k in layer.params if "b" in k])
    rng, mask = np.random.RandomState(2), padding_mask()
    X = rng.standard_normal((N, T, F))
    zeros, poisoned = X.copy(), X.copy()
    zeros[~mask], poisoned[~mask] = 0.0, junk

    Y0, grads0, dX0, dY = _run(layer, backend, zeros, mask)
    with np.errstate(all="raise"):  # no NaN, infinity or overflow computed anywhere
        Y, grads, dX, _ = _run(layer, backend, poisoned, mask, dY)
    real = mask[:, -Y.shape[1] :] if Y.ndim == 3 else slice(None)
    assert np.isfinite(Y[real]).all()
    assert_allclose(Y[real], Y0[real], rtol=1e-12, atol=1e-12)
    for name, grad in grads.items():
        assert np.isfinite(grad).all(), name
        assert_allclose(grad, grads0[name], rtol=1e-12, atol=1e-12, err_msg=name)
    assert np.isfinite(dX).all()
    assert_allclose(dX, dX0, rtol=1e-12, atol=1e-12)
    assert_array_equal(dX[~mask], 0)  # nothing a padded step holds changes any output
    prediction = layer.forward(backend.asarray(poisoned), training=False, mask=mask)
    assert_allclose(backend.to_numpy(prediction)[real], Y0[real], rtol=1e-12, atol=1e-12)


def test_padded_steps_enter_the_attention_as_zeros(backend):
    """Every output, padded steps' too, is the output of the sequence with zeros there."""
    layer = build(MultiHeadAttention(2), (T, F), backend)
    perturb(layer, np.random.RandomState(0), ["bq", "bk", "bv", "bo"])
    X, mask = np.random.RandomState(3).standard_normal((N, T, F)), padding_mask()
    zeros = np.where(mask[:, :, None], X, 0.0)
    Y = layer.forward(backend.asarray(X), training=False, mask=backend.asarray(mask))
    Y0 = layer.forward(backend.asarray(zeros), training=False, mask=backend.asarray(mask))
    assert_allclose(backend.to_numpy(Y), backend.to_numpy(Y0), atol=1e-12)
    params = numpy_params(layer)
    assert np.isfinite(backend.to_numpy(Y)).all() and params


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultiHeadAttention(2),
        lambda: TransformerEncoderBlock(2, 8, dropout=0.0),
        GlobalAvgPool1D,
        GlobalMaxPool1D,
        lambda: LSTM(3),
        lambda: Sequential([SimpleRNN(3, return_sequences=True), GlobalAvgPool1D()]),
    ],
    ids=["attention", "block", "avg-pool", "max-pool", "lstm", "sequential"],
)
def test_a_mask_may_be_any_array_like_of_booleans(make):
    from sknet.backend import get_backend

    backend = get_backend("cpu")
    layer = build(make(), (T, F), backend)
    X, mask = np.random.RandomState(4).standard_normal((N, T, F)), padding_mask()
    expected = layer.forward_with_mask(X, training=False, mask=mask)
    for given in (mask.tolist(), tuple(map(tuple, mask))):
        assert_allclose(layer.forward_with_mask(X, training=False, mask=given), expected)
        assert_allclose(layer.forward(X, training=False, mask=given), expected)


@pytest.mark.parametrize("given", [np.ones((N, T)), [[1, 0] * 2 + [1]] * N, "yes"])
def test_a_mask_that_is_not_booleans_is_a_type_error_naming_mask(given):
    from sknet.backend import get_backend

    layer = build(MultiHeadAttention(2), (T, F), get_backend("cpu"))
    X = np.zeros((N, T, F))
    with pytest.raises(TypeError, match=r"mask must be an array of booleans .*got"):
        layer.forward_with_mask(X, training=False, mask=given)
    with pytest.raises(TypeError, match=r"MultiHeadAttention: mask must be"):
        layer.forward(X, training=False, mask=given)

"""The sequence kernels (sknet/backend/_sequence_kernels.py, _numpy_sequence.py and the
Numba ones of _cpu_sequence_kernels.py) against NumPy oracles, on every backend."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.backend import get_backend
from tests.layers.oracles import layer_norm_oracle, softmax_oracle

DTYPES = [np.float32, np.float64]


def tol(dtype):
    return 1e-5 if dtype == np.float32 else 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_forward_and_backward(backend, dtype):
    rng = np.random.RandomState(0)
    n, F = 7, 5
    X, dY = (rng.standard_normal((n, F)).astype(dtype) for _ in range(2))
    gamma, beta = (rng.standard_normal(F).astype(dtype) for _ in range(2))
    args = [backend.asarray(a) for a in (X, gamma, beta)]
    out, xhat = backend.xp.empty((n, F), dtype), backend.xp.empty((n, F), dtype)
    inv = backend.xp.empty(n, dtype)
    backend.layer_norm_forward(*args[:3], 1e-5, out, xhat, inv)
    assert_allclose(backend.to_numpy(out), layer_norm_oracle(X, gamma, beta), atol=tol(dtype) * 10)
    dgamma, dbeta = backend.xp.empty(F, dtype), backend.xp.empty(F, dtype)
    dX = backend.xp.empty((n, F), dtype)
    backend.layer_norm_backward(backend.asarray(dY), xhat, inv, args[1], dgamma, dbeta, dX)
    # the oracle's gradients in float64: the chain rule written out
    Xd = X.astype(np.float64)
    xh = (Xd - Xd.mean(1, keepdims=True)) / np.sqrt(Xd.var(1, keepdims=True) + 1e-5)
    dxh = dY * gamma
    expected = (dxh - dxh.mean(1, keepdims=True) - xh * (dxh * xh).mean(1, keepdims=True)) / (
        np.sqrt(Xd.var(1, keepdims=True) + 1e-5)
    )
    assert_allclose(backend.to_numpy(dX), expected, atol=tol(dtype) * 10)
    assert_allclose(backend.to_numpy(dgamma), (dY * xh).sum(0), atol=tol(dtype) * 10)
    assert_allclose(backend.to_numpy(dbeta), dY.sum(0), atol=tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_attention_softmax_and_its_gradient(backend, dtype, causal, masked):
    rng = np.random.RandomState(1)
    N, H, T = 3, 2, 5
    S = (3 * rng.standard_normal((N, H, T, T))).astype(dtype)
    mask = rng.rand(N, T) > 0.3 if masked else np.ones((N, T), bool)
    mask[0] = masked is False  # a sequence without keys when masked
    allowed = np.broadcast_to(mask[:, None, None, :], S.shape).copy()
    if causal:
        allowed &= np.tril(np.ones((T, T), bool))
    P = backend.attention_softmax(
        backend.asarray(S.copy()), backend.asarray(mask) if masked else None, causal
    )
    expected = softmax_oracle(S.astype(np.float64), allowed)
    assert_allclose(backend.to_numpy(P), expected, atol=tol(dtype))
    if masked:
        assert (backend.to_numpy(P)[0] == 0).all()  # no NaN where no key is left
    dP = rng.standard_normal(S.shape).astype(dtype)
    dS = backend.attention_softmax_grad(backend.asarray(dP.copy()), P)
    inner = (dP * expected).sum(-1, keepdims=True)
    assert_allclose(backend.to_numpy(dS), expected * (dP - inner), atol=tol(dtype) * 10)


@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 3), (3, 2)])
@pytest.mark.parametrize("left, right", [(0, 0), (2, 1), (1, 3)])
def test_im2col_1d_and_its_adjoint(backend, stride, dilation, left, right):
    rng = np.random.RandomState(2)
    N, T, C, k = 2, 9, 3, 3
    Xp = np.concatenate(
        [np.zeros((N, left, C)), rng.standard_normal((N, T, C)), np.zeros((N, right, C))], 1
    )
    X = np.ascontiguousarray(Xp[:, left : left + T])
    OT = (Xp.shape[1] - dilation * (k - 1) - 1) // stride + 1
    col = backend.im2col_1d(
        backend.asarray(X), stride, dilation, left, backend.xp.empty((N, OT, k, C))
    )
    for t in range(OT):
        for j in range(k):
            assert_array_equal(backend.to_numpy(col)[:, t, j], Xp[:, t * stride + j * dilation])
    # <im2col(X), D> == <X, col2im(D)>: col2im is the adjoint
    D = rng.standard_normal((N, OT, k, C))
    back = backend.col2im_1d(
        backend.asarray(D), stride, dilation, left, backend.xp.empty((N, T, C))
    )
    assert_allclose((backend.to_numpy(col) * D).sum(), (X * backend.to_numpy(back)).sum())


def test_max_pool_1d_routes_the_gradient_to_the_first_maximum(backend):
    Xp = np.array([[[1.0], [3.0], [3.0], [0.0], [2.0]]])
    Y, argmax = backend.xp.empty((1, 2, 1)), backend.xp.empty((1, 2, 1), dtype=np.int32)
    backend.max_pool_1d_forward(backend.asarray(Xp), 3, 2, Y, argmax)
    assert_array_equal(backend.to_numpy(Y)[0, :, 0], [3.0, 3.0])
    assert_array_equal(backend.to_numpy(argmax)[0, :, 0], [1, 2])
    dX = backend.max_pool_1d_backward(
        backend.asarray(np.array([[[1.0], [10.0]]])), argmax, backend.xp.empty((1, 5, 1))
    )
    assert_array_equal(backend.to_numpy(dX)[0, :, 0], [0, 1, 10, 0, 0])


def test_the_compiled_kernels_refuse_arrays_that_do_not_fit():
    cpu = get_backend("cpu")
    if cpu.kernels is None:
        pytest.skip("numba is not installed: no compiled kernel to guard")
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="layer_norm_forward"):
        cpu.layer_norm_forward(X, np.ones(2), np.zeros(3), 1e-5, X.copy(), X.copy(), np.empty(4))
    with pytest.raises(ValueError, match="attention_softmax"):
        cpu.attention_softmax(np.zeros((2, 1, 3, 3)), np.ones((2, 4), bool), False)
    with pytest.raises(ValueError, match="im2col_1d"):  # windows of other features
        cpu.im2col_1d(np.zeros((1, 5, 2)), 1, 1, 0, np.empty((1, 3, 3, 4)))
    with pytest.raises(ValueError, match="col2im_1d"):
        cpu.col2im_1d(np.zeros((2, 3, 3, 2)), 1, 1, 0, np.empty((1, 5, 2)))


@pytest.mark.parametrize("kernel, stride", [(2, 2), (3, 1), (3, 2), (2, 3)])
def test_max_pool_1d_agrees_with_the_oracle_ties_included(backend, kernel, stride):
    rng = np.random.RandomState(3)
    N, Tp, C = 3, 10, 4
    Xp = rng.randint(0, 3, (N, Tp, C)).astype(np.float32)  # many ties
    OT = (Tp - kernel) // stride + 1
    Y, argmax = backend.xp.empty((N, OT, C), np.float32), backend.xp.empty((N, OT, C), np.int32)
    backend.max_pool_1d_forward(backend.asarray(Xp), kernel, stride, Y, argmax)
    windows = np.stack([Xp[:, t * stride : t * stride + kernel] for t in range(OT)], 1)
    assert_array_equal(backend.to_numpy(Y), windows.max(2))
    assert_array_equal(
        backend.to_numpy(argmax), windows.argmax(2) + stride * np.arange(OT)[:, None]
    )
    dY = rng.standard_normal((N, OT, C)).astype(np.float32)
    dX = backend.max_pool_1d_backward(
        backend.asarray(dY), argmax, backend.xp.empty((N, Tp, C), np.float32)
    )
    expected = np.zeros((N, Tp, C), np.float32)
    for n, t, c in np.ndindex(N, OT, C):
        expected[n, backend.to_numpy(argmax)[n, t, c], c] += dY[n, t, c]
    assert_allclose(backend.to_numpy(dX), expected, atol=1e-6)


def test_scatter_add_rows_sums_repeated_rows(backend):
    rng = np.random.RandomState(4)
    target = np.zeros((5, 3))
    idx = np.array([0, 4, 4, 1, 0, 4])
    values = rng.standard_normal((6, 3))
    out = backend.asarray(target.copy())
    backend.scatter_add_rows(out, backend.asarray(idx), backend.asarray(values))
    np.add.at(target, idx, values)
    assert_allclose(backend.to_numpy(out), target, atol=1e-12)


def test_random_bits_and_the_dropout_they_drive(backend):
    u = backend.random_bits(backend.random_generator(0), (4, 50000))
    assert u.dtype == np.uint16 and u.shape == (4, 50000)
    values = backend.to_numpy(u)
    assert abs(values.mean() / 65535 - 0.5) < 0.01 and values.min() < 100 and values.max() > 65400
    X = np.random.RandomState(5).standard_normal((4, 50000)).astype(np.float32)
    threshold, scale = 19661, 65536 / (65536 - 19661)  # a rate of 0.3
    out = backend.dropout_apply(backend.asarray(X), u, threshold, scale, backend.xp.empty_like(X))
    expected = np.where(values >= threshold, X * np.float32(scale), 0)
    assert_allclose(backend.to_numpy(out), expected, rtol=1e-6)
    assert abs((values >= threshold).mean() - 0.7) < 0.01
    same = backend.asarray(X.copy())  # in place: out is X
    backend.dropout_apply(same, u, threshold, scale, same)
    assert_allclose(backend.to_numpy(same), expected, rtol=1e-6)


def test_the_compiled_pooling_and_scatter_refuse_indices_outside_their_arrays():
    cpu = get_backend("cpu")
    if cpu.kernels is None:
        pytest.skip("numba is not installed: no compiled kernel to guard")
    with pytest.raises(ValueError, match="max_pool_1d_backward"):
        cpu.max_pool_1d_backward(
            np.ones((1, 2, 1)), np.array([[[0], [7]]], np.int32), np.empty((1, 4, 1))
        )
    with pytest.raises(ValueError, match="scatter_add_rows"):
        cpu.scatter_add_rows(np.zeros((3, 2)), np.array([0, 3]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="max_pool_1d_forward"):  # windows past the end
        cpu.max_pool_1d_forward(
            np.ones((1, 4, 1)), 3, 2, np.empty((1, 2, 1)), np.empty((1, 2, 1), np.int32)
        )

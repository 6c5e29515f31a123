"""Tests for the im2col/col2im kernels of every backend."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

# (N, C, H, W), (kh, kw), (sh, sw), (ph, pw)
CASES = [
    ((2, 3, 5, 6), (3, 3), (1, 1), (0, 0)),
    ((2, 3, 5, 6), (3, 3), (1, 1), (1, 1)),
    ((1, 2, 6, 5), (3, 2), (2, 1), (2, 0)),
    ((3, 1, 7, 7), (2, 2), (2, 2), (1, 1)),
    ((2, 2, 4, 6), (1, 3), (1, 2), (0, 1)),
    ((1, 1, 3, 3), (3, 3), (1, 1), (0, 0)),  # one window
]


def outsize(size, k, s, p):
    return (size + 2 * p - k) // s + 1


def oracle(X, kh, kw, sh, sw, ph, pw, pad_value=0.0):
    N, C, H, W = X.shape
    padded = np.full((N, C, H + 2 * ph, W + 2 * pw), pad_value, dtype=X.dtype)
    padded[:, :, ph : ph + H, pw : pw + W] = X
    OH, OW = outsize(H, kh, sh, ph), outsize(W, kw, sw, pw)
    col = np.empty((C, kh, kw, N, OH, OW), dtype=X.dtype)
    for c in range(C):
        for i in range(kh):
            for j in range(kw):
                for n in range(N):
                    for y in range(OH):
                        for x in range(OW):
                            col[c, i, j, n, y, x] = padded[n, c, y * sh + i, x * sw + j]
    return col


@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
@pytest.mark.parametrize("pad_value", [0.0, -np.inf])
def test_im2col_matches_loop_oracle(shape, kernel, stride, padding, pad_value, backend):
    X = np.random.RandomState(0).standard_normal(shape)
    col = backend.im2col(backend.asarray(X), *kernel, *stride, *padding, pad_value=pad_value)
    expected = oracle(X, *kernel, *stride, *padding, pad_value=pad_value)
    N, C, H, W = shape
    assert col.shape == (
        C,
        *kernel,
        N,
        outsize(H, kernel[0], stride[0], padding[0]),
        outsize(W, kernel[1], stride[1], padding[1]),
    )
    assert_array_equal(backend.to_numpy(col), expected)


def test_im2col_pads_with_minus_infinity(backend):
    X = np.ones((1, 1, 2, 2))
    col = backend.to_numpy(backend.im2col(backend.asarray(X), 2, 2, 1, 1, 1, 1, pad_value=-np.inf))
    # the top-left window sees one pixel and three padded ones
    assert_array_equal(col[0, :, :, 0, 0, 0], [[-np.inf, -np.inf], [-np.inf, 1.0]])
    # 9 windows of 4 entries; each of the 4 pixels lies in 4 windows
    assert (col == 1.0).sum() == 16
    assert np.isneginf(col).sum() == 36 - 16


def test_im2col_of_a_non_contiguous_view(backend):
    base = np.random.RandomState(1).standard_normal((4, 6, 7, 3))
    X = base.transpose(0, 3, 1, 2)[:, :, ::2]  # (4, 3, 3, 7), strided
    col = backend.im2col(backend.asarray(X), 2, 3, 1, 2, 1, 0)
    assert_array_equal(backend.to_numpy(col), oracle(np.ascontiguousarray(X), 2, 3, 1, 2, 1, 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_im2col_and_col2im_keep_the_dtype(dtype, backend):
    X = backend.asarray(np.ones((2, 1, 4, 4), dtype=dtype))
    col = backend.im2col(X, 3, 3, 1, 1, 1, 1, pad_value=-np.inf)
    assert col.dtype == dtype
    assert backend.col2im(col, 4, 4, 1, 1, 1, 1).dtype == dtype


@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
def test_col2im_is_the_adjoint_of_im2col(shape, kernel, stride, padding, backend):
    rng = np.random.RandomState(2)
    X = rng.standard_normal(shape)
    col = backend.to_numpy(backend.im2col(backend.asarray(X), *kernel, *stride, *padding))
    C = rng.standard_normal(col.shape)
    _, _, H, W = shape
    back = backend.to_numpy(backend.col2im(backend.asarray(C), H, W, *stride, *padding))
    assert back.shape == shape
    assert_allclose((col * C).sum(), (X * back).sum(), rtol=1e-12)


@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
def test_col2im_matches_the_transpose_of_the_oracle(shape, kernel, stride, padding, backend):
    # col2im(C)[n, c, y, x] sums every column entry im2col copied from (n, c, y, x).
    N, Cn, H, W = shape
    kh, kw = kernel
    sh, sw = stride
    ph, pw = padding
    col = np.random.RandomState(3).standard_normal(
        (Cn, kh, kw, N, outsize(H, kh, sh, ph), outsize(W, kw, sw, pw))
    )
    padded = np.zeros((N, Cn, H + 2 * ph, W + 2 * pw))
    for c, i, j, n, y, x in np.ndindex(col.shape):
        padded[n, c, y * sh + i, x * sw + j] += col[c, i, j, n, y, x]
    expected = padded[:, :, ph : ph + H, pw : pw + W]
    back = backend.col2im(backend.asarray(col), H, W, sh, sw, ph, pw)
    assert_allclose(backend.to_numpy(back), expected, rtol=1e-12, atol=1e-12)

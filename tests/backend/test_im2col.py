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


def numpy_backends():
    """The NumPy backend with its Numba kernels (when installed) and without."""
    from sknet.backend._numpy import NumpyBackend

    plain = NumpyBackend()
    plain.kernels = None
    return [pytest.param(NumpyBackend(), id="numba"), pytest.param(plain, id="numpy")]


@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
@pytest.mark.parametrize("cpu", numpy_backends())
def test_channels_last_patches_match_the_oracle(shape, kernel, stride, padding, cpu):
    X = np.random.RandomState(0).standard_normal(shape).astype(np.float32)
    col = cpu.im2col_nhwc(X, *kernel, *stride, *padding)
    # (N, OH, OW, kh, kw, C): the oracle's (C, kh, kw, N, OH, OW) reordered
    assert_array_equal(col, oracle(X, *kernel, *stride, *padding).transpose(3, 4, 5, 1, 2, 0))


@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
@pytest.mark.parametrize("cpu", numpy_backends())
def test_channels_last_col2im_is_the_adjoint(shape, kernel, stride, padding, cpu):
    # <im2col(X), D> == <X, col2im(D)> for every X and D, in float64
    rng = np.random.RandomState(1)
    X = rng.standard_normal(shape)
    col = cpu.im2col_nhwc(X, *kernel, *stride, *padding)
    D = rng.standard_normal(col.shape)
    out = np.full(shape, np.nan)  # every pixel written, zeros included
    back = cpu.col2im_nhwc(D, *shape[2:], *stride, *padding, out=out)
    assert back is out
    assert_allclose(np.vdot(col, D), np.vdot(X, back), rtol=1e-12)
    # and the same images as the NCHW col2im of the reordered patches
    expected = cpu.col2im(np.ascontiguousarray(D.transpose(5, 3, 4, 0, 1, 2)), *shape[2:],
                          *stride, *padding)  # fmt: skip
    assert_allclose(back, expected, rtol=1e-12, atol=1e-12)

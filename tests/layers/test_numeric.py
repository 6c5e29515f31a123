"""Tests for sknet/layers/_numeric.py: quantile bins, piecewise-linear and periodic embeddings."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.backend import get_backend
from sknet.layers import PeriodicEmbedding, PiecewiseLinearEncoding, quantile_bins
from sknet.utils import check_layer_gradients

RNG = np.random.RandomState(0)
X_TRAIN = RNG.normal(size=(300, 3)) * [1.0, 3.0, 0.1]


def build(layer, shape, backend, dtype=np.float64, seed=0):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def numpy_params(layer):
    return {k: layer.backend_.to_numpy(v) for k, v in layer.params.items()}


def ple_oracle(X, bins):
    """The paper's encoding, written sample by sample and bin by bin."""
    rows = []
    for x in X:
        row = []
        for value, edges in zip(x, bins):
            T = len(edges) - 1
            for t in range(1, T + 1):
                ratio = (value - edges[t - 1]) / (edges[t] - edges[t - 1])
                if value < edges[t - 1] and t > 1:
                    ratio = 0.0
                elif value >= edges[t] and t < T:
                    ratio = 1.0
                row.append(ratio)
        rows.append(row)
    return np.array(rows)


def ragged_bins():
    bins = quantile_bins(X_TRAIN, n_bins=6)
    bins[1] = bins[1][:3]  # two bins: features differ in their number of bins
    bins.append(np.array([-1.0, 1.0]))  # one bin
    return bins


# -- quantile_bins --------------------------------------------------------------------


def test_quantile_bins_are_the_deduplicated_quantiles_of_each_column():
    X = np.column_stack([X_TRAIN[:, 0], np.repeat([0.0, 1.0, 2.0], 100)])
    X[::7, 0] = np.nan  # ignored
    X[3, 1] = np.inf
    bins = quantile_bins(X, n_bins=5)
    finite = X[:, 0][np.isfinite(X[:, 0])]
    # the tabular plan's quantiles (one rule for both): NumPy's averaged inverted CDF
    levels = np.linspace(0, 1, 6)
    assert_allclose(bins[0], np.quantile(finite, levels, method="averaged_inverted_cdf"))
    assert_array_equal(bins[1], [0.0, 1.0, 2.0])  # few distinct values: fewer bins
    assert all(b.dtype == np.float64 for b in bins)


def test_quantile_bins_of_constant_and_empty_columns_give_one_bin():
    X = np.column_stack([np.full(10, 3.0), np.full(10, np.nan)])
    bins = quantile_bins(X, n_bins=4)
    assert_array_equal(bins[0], [2.5, 3.5])
    assert_array_equal(bins[1], [-0.5, 0.5])
    encoded = build(PiecewiseLinearEncoding(bins[:1]), (1,), get_backend("cpu"))
    assert_allclose(encoded.forward(np.array([[3.0]]), training=False), [[0.5]])


@pytest.mark.parametrize(
    "X, n_bins, message",
    [
        (np.ones((4, 2)), 0, "n_bins must be a positive integer, got 0"),
        (np.ones((4, 2)), True, "n_bins must be a positive integer, got True"),
        (np.ones(4), 3, r"X must be 2-D \(n_samples, n_features\), got shape \(4,\)"),
    ],
)
def test_quantile_bins_rejects_bad_input(X, n_bins, message):
    with pytest.raises(ValueError, match=message):
        quantile_bins(X, n_bins=n_bins)


# -- PiecewiseLinearEncoding ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_encoding_matches_the_paper_oracle(backend, dtype):
    bins = ragged_bins()
    X = np.column_stack([RNG.normal(size=(9, 3)) * [2.0, 4.0, 0.2], RNG.normal(size=9)])
    X[0, 0] = bins[0][0] - 5  # below the first edge: the first bin extrapolates
    X[1, 0] = bins[0][-1] + 5  # above the last
    layer = build(PiecewiseLinearEncoding(bins), (4,), backend, dtype)
    assert layer.output_shape_ == (sum(len(b) - 1 for b in bins),)
    assert layer.n_bins_ == [len(b) - 1 for b in bins]
    for training in (True, False):
        Y = layer.forward(backend.asarray(X.astype(dtype)), training=training)
        assert Y.dtype == dtype
        tol = 1e-5 if dtype == np.float32 else 1e-12
        assert_allclose(backend.to_numpy(Y), ple_oracle(X, bins), rtol=tol, atol=tol)


def test_embedding_is_a_linear_layer_per_feature_of_the_encoding(backend):
    bins = ragged_bins()
    X = RNG.normal(size=(7, 4))
    layer = build(PiecewiseLinearEncoding(bins, d_embedding=3, activation="relu"), (4,), backend)
    p = numpy_params(layer)
    encoding, start, expected = ple_oracle(X, bins), 0, []
    for f, edges in enumerate(bins):
        T = len(edges) - 1
        expected.append(np.maximum(encoding[:, start : start + T] @ p["W"][f, :T] + p["b"][f], 0))
        assert_array_equal(p["W"][f, T:], 0.0)  # the padding rows
        start += T
    Y = layer.forward(backend.asarray(X), training=False)
    assert_allclose(backend.to_numpy(Y), np.hstack(expected), rtol=1e-12)
    assert layer.output_shape_ == (12,) and layer.regularized == ("W",)


@pytest.mark.parametrize(
    "d_embedding, activation", [(None, None), (3, None), (3, "relu"), (2, "gelu"), (2, "tanh")]
)
def test_encoding_gradients_match_finite_differences(d_embedding, activation):
    layer = PiecewiseLinearEncoding(ragged_bins(), d_embedding, activation)
    errors = check_layer_gradients(layer, (4,), n_samples=8)
    assert set(errors) == ({"X"} if d_embedding is None else {"X", "W", "b"})


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_padding_rows_of_the_weights_stay_zero_through_training():
    from sknet import NeuralNetRegressor

    bins = ragged_bins()
    X = RNG.normal(size=(120, 4))
    y = np.sin(X[:, 0]) + X[:, 3]
    reg = NeuralNetRegressor(
        [PiecewiseLinearEncoding(bins, 4, "relu")],
        max_iter=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    W = reg.layers_[0].params["W"]
    for f, edges in enumerate(bins):
        assert_array_equal(W[f, len(edges) - 1 :], 0.0)
    assert np.abs(W[0]).sum() > 0


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (PiecewiseLinearEncoding([]), (1,), "bins must be a non-empty list"),
        (PiecewiseLinearEncoding([[0.0]]), (1,), r"bins\[0\] must be a 1-D array of at least 2"),
        (PiecewiseLinearEncoding([[0.0, 2.0, 1.0]]), (1,), r"bins\[0\] must be finite and strict"),
        (PiecewiseLinearEncoding([[0.0, np.inf]]), (1,), r"bins\[0\] must be finite"),
        (PiecewiseLinearEncoding([[0.0, 1.0]]), (3,), "has bins for 1 features, so it expects"),
        (PiecewiseLinearEncoding([[0.0, 1.0]], 0), (1,), "'d_embedding' parameter of Piecewise"),
        (PiecewiseLinearEncoding([[0.0, 1.0]], None, "relu"), (1,), "needs d_embedding"),
        (PiecewiseLinearEncoding([[0.0, 1.0]], 2, "swish"), (1,), "'activation' parameter of"),
    ],
)
def test_encoding_rejects_bad_configuration(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, shape, get_backend("cpu"))


def test_encoding_moves_casts_and_pickles(backend):
    bins = ragged_bins()
    X = RNG.normal(size=(5, 4))
    layer = build(PiecewiseLinearEncoding(bins, 2), (4,), get_backend("cpu"))
    expected = layer.forward(X, training=False)
    restored = pickle.loads(pickle.dumps(layer)).to_backend(backend)
    assert_allclose(
        backend.to_numpy(restored.forward(backend.asarray(X), training=False)), expected
    )
    restored.astype(np.float32)
    Y = restored.forward(backend.asarray(X.astype(np.float32)), training=False)
    assert Y.dtype == np.float32
    assert_allclose(backend.to_numpy(Y), expected, rtol=1e-5, atol=1e-5)


# -- PeriodicEmbedding ----------------------------------------------------------------


def periodic_oracle(X, p, lite, activation):
    out = []
    for f in range(X.shape[1]):
        angle = 2 * np.pi * X[:, f : f + 1] * p["frequencies"][f]
        V = np.hstack([np.cos(angle), np.sin(angle)])
        W, b = (p["W"], p["b"]) if lite else (p["W"][f], p["b"][f])
        Z = V @ W + b
        out.append(np.maximum(Z, 0) if activation == "relu" else Z)
    return np.hstack(out)


@pytest.mark.parametrize("lite, activation", [(False, "relu"), (True, "relu"), (False, None)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_periodic_embedding_matches_numpy_oracle(backend, lite, activation, dtype):
    X = RNG.normal(size=(6, 3))
    layer = PeriodicEmbedding(5, sigma=0.5, d_embedding=4, activation=activation, lite=lite)
    build(layer, (3,), backend, dtype)
    p = numpy_params(layer)
    assert p["W"].shape == ((10, 4) if lite else (3, 10, 4))
    expected = periodic_oracle(X, p, lite, activation)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for training in (True, False):
        Y = layer.forward(backend.asarray(X.astype(dtype)), training=training)
        assert Y.dtype == dtype
        assert_allclose(backend.to_numpy(Y), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "layer",
    [
        PeriodicEmbedding(4, 0.5, 3),
        PeriodicEmbedding(4, 0.5, 3, lite=True),
        PeriodicEmbedding(3, 1.0, 2, activation=None),
        PeriodicEmbedding(3, 1.0, 2, activation="silu"),
    ],
)
def test_periodic_gradients_match_finite_differences(layer):
    assert set(check_layer_gradients(layer, (3,), n_samples=6)) == {"X", "frequencies", "W", "b"}


def test_frequencies_start_normal_truncated_at_three_sigma():
    layer = build(PeriodicEmbedding(200, sigma=0.3, d_embedding=2), (50,), get_backend("cpu"))
    c = layer.params["frequencies"]
    assert np.abs(c).max() <= 0.9
    assert abs(c.std() - 0.3 * 0.986) < 0.01  # the truncated normal's standard deviation
    assert layer.regularized == ("W",)  # not the frequencies (as in the paper's code)


def test_a_frozen_periodic_embedding_first_returns_nothing_and_writes_no_gradient():
    layer = build(PeriodicEmbedding(3, 0.5, 2, trainable=False), (2,), get_backend("cpu"))
    layer.skip_input_grad = True
    layer.forward(RNG.normal(size=(4, 2)), training=True)
    assert layer.backward(np.ones((4, 4))) is None
    assert all(not g.any() for g in layer.grads.values())


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (PeriodicEmbedding(0), (2,), "'n_frequencies' parameter of PeriodicEmbedding must be"),
        (PeriodicEmbedding(sigma=0.0), (2,), "'sigma' parameter of PeriodicEmbedding must be"),
        (PeriodicEmbedding(sigma=np.nan), (2,), "'sigma' parameter .* Got nan"),
        (PeriodicEmbedding(sigma=np.inf), (2,), "'sigma' parameter .* Got inf"),
        (PeriodicEmbedding(d_embedding=2.5), (2,), "'d_embedding' parameter of Periodic"),
        (PeriodicEmbedding(), (2, 3), r"expects rows of features, got samples of shape \(2, 3\)"),
    ],
)
def test_periodic_embedding_rejects_bad_configuration(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, shape, get_backend("cpu"))

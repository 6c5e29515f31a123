"""Numeric scalings and quantile bins (sknet/tabular/_numeric.py) against scikit-learn's."""

import numpy as np
import pytest
from sklearn.preprocessing import QuantileTransformer, RobustScaler, StandardScaler

from sknet.tabular._numeric import NumericScaler, bin_edges


def columns(n=600, seed=0):
    rng = np.random.RandomState(seed)
    return np.column_stack(
        [rng.lognormal(size=n), rng.randint(0, 4, n).astype(float), rng.normal(size=n)]
    )


def scale(scaling, X, Z=None):
    scaler = NumericScaler(scaling).fit(X)
    Z = X if Z is None else Z
    return scaler.transform(Z, np.empty_like(Z))


def test_quantile_scaling_is_scikit_learns_normal_quantile_transform():
    X, Z = columns(), columns(seed=1)
    # the same number of reference quantiles (n // 30 = 20), every row used
    reference = QuantileTransformer(
        n_quantiles=20, output_distribution="normal", subsample=None
    ).fit(X)
    ours, theirs = scale("quantile", X, Z), reference.transform(Z)
    # Values at the training minimum or maximum are the one difference: scikit-learn
    # puts them at the bounds (+-5.2), here they go to the middle of their ranks, as
    # every other tie does (a quarter of the rows of the discrete column here).
    inner = (Z > X.min(axis=0)) & (Z < X.max(axis=0))
    np.testing.assert_allclose(ours[inner], theirs[inner], atol=1e-9)
    extreme = Z[:, 1] == 0
    assert np.all(theirs[extreme, 1] < -5) and np.all(np.abs(ours[extreme, 1]) < 1.5)


@pytest.mark.parametrize(
    "scaling, reference", [("robust", RobustScaler()), ("standard", StandardScaler())]
)
def test_robust_and_standard_scaling_are_scikit_learns(scaling, reference):
    X, Z = columns(), columns(seed=1)
    np.testing.assert_allclose(scale(scaling, X, Z), reference.fit(X).transform(Z), atol=1e-12)


def test_few_rows_keep_ten_reference_quantiles():
    scaler = NumericScaler("quantile").fit(columns(n=50))
    assert [q.size for q in scaler.quantiles_] == [10, 10, 10]


def test_missing_values_are_skipped_in_fit_and_put_at_the_median():
    X = columns()
    holes = X.copy()
    holes[::7, 0] = np.nan
    scaler = NumericScaler("robust").fit(holes)
    assert scaler.medians_[0] == np.median(X[np.arange(len(X)) % 7 != 0, 0])
    out = scaler.transform(holes, np.empty_like(holes))
    np.testing.assert_allclose(out[::7, 0], 0.0)  # the median, robust-scaled
    assert not np.isnan(out).any()


@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
def test_constant_and_empty_columns_give_finite_values(scaling):
    X = np.column_stack([np.full(40, 3.0), np.full(40, np.nan)])
    out = scale(scaling, X)
    assert np.isfinite(out).all()


def test_extreme_values_end_at_the_normal_quantile_bounds():
    out = scale("quantile", columns(), np.array([[-1e9, -1e9, -1e9], [1e9, 1e9, 1e9]]))
    np.testing.assert_allclose(np.abs(out), 5.199337582605575)


def test_bins_hold_about_as_many_values_each():
    X = columns(n=4000)
    edges = bin_edges(X, 8)
    counts = np.histogram(X[:, 2], edges[2])[0]
    assert len(edges[2]) == 9 and counts.min() >= 0.9 * 4000 / 8
    np.testing.assert_array_equal(edges[1], [0.0, 1.0, 2.0, 3.0])  # 4 values: 3 bins
    assert np.all(np.diff(edges[0]) > 0)


def test_bins_of_constant_missing_and_bad_requests():
    edges = bin_edges(np.column_stack([np.full(5, 2.0), np.full(5, np.nan)]), 4)
    np.testing.assert_array_equal(edges[0], [1.5, 2.5])
    np.testing.assert_array_equal(edges[1], [-0.5, 0.5])
    with pytest.raises(ValueError, match="n_bins must be a positive integer, got 0"):
        bin_edges(columns(), 0)

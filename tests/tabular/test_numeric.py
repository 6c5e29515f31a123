"""Numeric scalings and quantile bins (sknet/tabular/_numeric.py) against scikit-learn's."""

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.preprocessing import QuantileTransformer, RobustScaler, StandardScaler

from sknet.tabular._numeric import NumericScaler, bin_edges, weighted_quantiles


def columns(n=600, seed=0):
    rng = np.random.RandomState(seed)
    return np.column_stack(
        [rng.lognormal(size=n), rng.randint(0, 4, n).astype(float), rng.normal(size=n)]
    )


def scale(scaling, X, Z=None):
    scaler = NumericScaler(scaling).fit(X)
    Z = X if Z is None else Z
    return scaler.transform(Z, np.empty_like(Z))


def quantile_map(X, Z, n_quantiles):
    """The normal quantile map written out: averaged inverted-CDF references, mid ties."""
    levels = np.linspace(0, 1, n_quantiles)
    out = np.empty_like(Z)
    for j in range(X.shape[1]):
        q = np.quantile(X[:, j], levels, method="averaged_inverted_cdf")
        up = np.interp(Z[:, j], q, levels)
        down = 1 - np.interp(-Z[:, j], -q[::-1], 1 - levels[::-1])
        out[:, j] = norm.ppf(np.clip((up + down) / 2, 1e-7, 1 - 1e-7))
    return out


def test_quantile_scaling_is_the_normal_quantile_map_of_the_training_ranks():
    X, Z = columns(), columns(seed=1)
    # 20 reference quantiles (n // 30)
    np.testing.assert_allclose(scale("quantile", X, Z), quantile_map(X, Z, 20), atol=1e-9)


def test_quantile_scaling_is_close_to_scikit_learns_transform():
    X, Z = columns(), columns(seed=1)
    reference = QuantileTransformer(
        n_quantiles=20, output_distribution="normal", subsample=None
    ).fit(X)
    ours, theirs = scale("quantile", X, Z), reference.transform(Z)
    # scikit-learn interpolates its reference quantiles linearly, and puts values at
    # the training minimum or maximum at the bounds (+-5.2); here they go to the
    # middle of their ranks, as every other tie does (a quarter of the rows of the
    # discrete column here).
    inner = (Z > X.min(axis=0)) & (Z < X.max(axis=0))
    middle = inner & (np.abs(theirs) < 1.5)
    np.testing.assert_allclose(ours[middle], theirs[middle], atol=0.02)
    extreme = Z[:, 1] == 0
    assert np.all(theirs[extreme, 1] < -5) and np.all(np.abs(ours[extreme, 1]) < 1.5)


def test_standard_scaling_is_scikit_learns():
    X, Z = columns(), columns(seed=1)
    expected = StandardScaler().fit(X).transform(Z)
    np.testing.assert_allclose(scale("standard", X, Z), expected, atol=1e-12)


def test_robust_scaling_is_median_and_interquartile_range():
    X, Z = columns(), columns(seed=1)
    q1, median, q3 = np.quantile(X, [0.25, 0.5, 0.75], axis=0, method="averaged_inverted_cdf")
    np.testing.assert_allclose(scale("robust", X, Z), (Z - median) / (q3 - q1), atol=1e-12)
    # scikit-learn interpolates the quartiles linearly: close on continuous columns
    close = RobustScaler().fit(X).transform(Z)
    np.testing.assert_allclose(scale("robust", X, Z)[:, [0, 2]], close[:, [0, 2]], rtol=0.01)


@pytest.mark.parametrize("levels", [[0.5], np.linspace(0, 1, 11), [0.0, 0.01, 0.999, 1.0]])
def test_weighted_quantiles_are_those_of_the_repeated_values(levels):
    rng = np.random.RandomState(0)
    values, weights = rng.normal(size=50), rng.randint(1, 4, 50)
    repeated = np.repeat(values, weights)
    expected = np.quantile(repeated, levels, method="averaged_inverted_cdf")
    np.testing.assert_array_equal(weighted_quantiles(values, weights, levels), expected)
    plain = weighted_quantiles(values, np.ones(50), levels)
    np.testing.assert_array_equal(
        plain, np.quantile(values, levels, method="averaged_inverted_cdf")
    )


@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard"])
def test_weights_count_as_repeated_rows(scaling):
    X, Z = columns(), columns(seed=1)
    weights = np.random.RandomState(0).randint(1, 4, X.shape[0])
    weighted = NumericScaler(scaling).fit(X, weights.astype(float))
    repeated = NumericScaler(scaling).fit(np.repeat(X, weights, axis=0))
    np.testing.assert_allclose(
        weighted.transform(Z, np.empty_like(Z)),
        repeated.transform(Z, np.empty_like(Z)),
        atol=1e-12,
    )


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


@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
def test_a_table_maps_as_its_columns_one_by_one_in_blocks_or_whole(scaling, monkeypatch):
    # transform maps all the columns at once, in blocks of rows: the same numbers as
    # each column's own map, and as a block of one row (a one-row predict)
    from sknet.tabular import _numeric

    X = np.column_stack([columns(n=90), np.full(90, 2.5)])  # a constant column too
    X[::5, 0], X[::3, 3] = np.nan, np.nan
    scaler = NumericScaler(scaling).fit(X)
    whole = scaler.transform(X, np.empty_like(X))
    filled = np.where(np.isnan(X), scaler.medians_, X)
    by_column = np.column_stack([scaler.map_column(j, filled[:, j]) for j in range(4)])
    np.testing.assert_array_equal(whole, by_column)
    if scaling == "quantile":
        np.testing.assert_array_equal(whole[:, 3], 0.0)
    monkeypatch.setattr(_numeric, "_TRANSFORM_ROWS", 7)
    np.testing.assert_array_equal(scaler.transform(X, np.empty_like(X)), whole)
    out32 = scaler.transform(X[4:5], np.empty((1, 4), np.float32))
    np.testing.assert_array_equal(out32, whole[4:5].astype(np.float32))


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("n_rows", [1, 2, 4])
def test_a_few_rows_are_ranked_all_columns_at_once_as_one_by_one(n_rows, compiled, monkeypatch):
    # A one-row predict ranks every column in one pass over their reference quantiles
    # (a compiled loop, or NumPy's arrays side by side without Numba), as np.interp
    # computes each column's: the same bits on values at a reference, between two, at
    # ties, below the first and past the last, missing, and for a column of one value.
    import pickle

    from sknet.tabular import _numeric
    from sknet.tabular._compiled import compiled_ranks

    kernel = compiled_ranks()
    if compiled and kernel is None:
        pytest.skip("Numba is not installed (or SKNET_NUMBA=0): no compiled kernels")
    if compiled:  # cached on disk: no compiled function in its closure (Numba's rule)
        assert kernel.py_func.__closure__ is None
    else:
        monkeypatch.setattr(_numeric, "compiled_ranks", lambda: None)

    rng = np.random.RandomState(0)
    n = 3000
    X = np.column_stack(
        [
            rng.normal(size=n),
            rng.randint(0, 5, n).astype(float),  # ties among the references
            np.full(n, 2.0),  # one value
            rng.exponential(size=n),
            np.round(rng.normal(size=n), 1),
            rng.normal(size=n) * 1e-300,  # tiny steps
        ]
        + [rng.uniform(size=n) for _ in range(4)]  # enough columns for the one pass
    )
    X[rng.rand(n) < 0.1, 3] = np.nan
    scaler = NumericScaler("quantile").fit(X)
    references = np.array([[q[i % q.size] for q in scaler.quantiles_] for i in range(40)])
    new = np.vstack([X[:60], references, -X[60:70] * 3, X[70:80] * 3, np.nan * X[:1]])
    one_by_one = np.column_stack(
        [scaler.map_column(j, np.where(np.isnan(new[:, j]), scaler.medians_[j], new[:, j]))
         for j in range(X.shape[1])]
    )  # fmt: skip
    calls = []
    if compiled:
        monkeypatch.setattr(
            _numeric, "compiled_ranks", lambda: lambda *a: calls.append(1) or kernel(*a)
        )
    else:
        rank_all = NumericScaler._rank_all
        monkeypatch.setattr(
            NumericScaler, "_rank_all", lambda self, *a: calls.append(1) or rank_all(self, *a)
        )
    for start in range(0, len(new), n_rows):
        rows = new[start : start + n_rows]
        out = scaler.transform(rows, np.empty(rows.shape))
        np.testing.assert_array_equal(out, one_by_one[start : start + n_rows])
    assert len(calls) == -(-len(new) // n_rows)  # every block took the one pass
    assert "_references" not in pickle.loads(pickle.dumps(scaler)).__dict__  # made again
    monkeypatch.setattr(_numeric, "_MANY_COLUMNS", 100)  # few columns: one by one in NumPy
    scaler.transform(new[:1], np.empty((1, X.shape[1])))
    assert len(calls) == -(-len(new) // n_rows) + compiled  # compiled: any number of columns
    scaler.transform(new[:5], np.empty((5, X.shape[1])))  # more rows: column by column
    assert len(calls) == -(-len(new) // n_rows) + compiled
    refitted = scaler.fit(X[::-1] * 2)  # a new fit: new references
    monkeypatch.setattr(_numeric, "_MANY_COLUMNS", 8)
    again = refitted.transform(X[:1] * 2, np.empty((1, X.shape[1])))
    filled = np.where(np.isnan(X[:1] * 2), refitted.medians_, X[:1] * 2)
    expected = [refitted.map_column(j, filled[:, j]) for j in range(X.shape[1])]
    np.testing.assert_array_equal(again, np.column_stack(expected))

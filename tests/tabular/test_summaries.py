"""Mergeable summaries (sknet/tabular/_summaries.py): the plan of partitions, merged.

The plan made of merged summaries is the one-process plan (exactly, while a
column's values are few enough to keep), its quantiles within the stated
rank error when a column is compressed, whatever the cuts and the merge tree.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.tabular import TabularEncoder
from sknet.tabular._columns import categorical_mask
from sknet.tabular._numeric import weighted_quantiles
from sknet.tabular._summaries import (
    CategorySummary,
    NumericSummary,
    TableSummary,
    encoder_from_summary,
)
from sknet.tabular._table import RemoteTable, as_table

pd = pytest.importorskip("pandas")


def table(n=2000, seed=0):
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "price": rng.lognormal(size=n).round(3),
            "rooms": rng.randint(1, 6, n).astype(float),
            "city": pd.Categorical(rng.choice([f"c{i}" for i in range(40)], n)),
            "kind": rng.choice(["flat", "house", None, "boat"], n, p=[0.5, 0.3, 0.15, 0.05]),
            "garden": rng.rand(n) > 0.5,
            "floor": rng.randint(0, 9, n),
        }
    ).astype({"kind": object})
    frame.loc[rng.rand(n) < 0.1, "price"] = np.nan
    return frame


def merged_plan(encoder, frame, cuts, sample_weight=None, fan_in=2, resolution=None):
    """``encoder`` fitted from the summaries of ``frame``'s pieces, merged in a tree."""
    mask = categorical_mask(as_table(frame), encoder.categorical_features)
    options = {} if resolution is None else {"resolution": resolution}
    level = [
        TableSummary.of(
            frame.iloc[a:b],
            mask,
            None if sample_weight is None else sample_weight[a:b],
            **options,
        )
        for a, b in zip(cuts, cuts[1:])
    ]
    while len(level) > 1:
        level = [
            TableSummary.merge_all(level[i : i + fan_in]) for i in range(0, len(level), fan_in)
        ]
    return encoder_from_summary(encoder, RemoteTable(frame.iloc[:0], 0), level[0]), level[0]


def assert_same_plan(a, b, exact=True):
    for name in (
        "is_categorical_", "numeric_features_", "indicator_features_", "code_features_",
        "cardinalities_",
    ):  # fmt: skip
        assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.feature_names_in_.tolist() == b.feature_names_in_.tolist()
    assert a.output_groups_ == b.output_groups_
    assert [c.tolist() for c in a.categories_] == [c.tolist() for c in b.categories_]
    assert [c.dtype for c in a.categories_] == [c.dtype for c in b.categories_]
    compare = assert_array_equal if exact else lambda x, y: assert_allclose(x, y, rtol=1e-12)
    compare(a.medians_, b.medians_)
    for name in ("quantiles_", "bins_"):
        if getattr(a, name) is None:
            assert getattr(b, name) is None
            continue
        for x, y in zip(getattr(a, name), getattr(b, name)):
            compare(x, y)
    for name in ("offsets_", "scales_"):
        if getattr(a, name) is not None:
            assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12)


# -- exact: the one-process plan ---------------------------------------------------------
@pytest.mark.parametrize("codes", [False, True], ids=["", "codes"])
@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize(
    "cuts", [[0, 2000], [0, 700, 701, 1500, 2000], [0, 250, 500, 750, 1000, 1900, 2000]]
)
def test_the_merged_plan_is_the_one_process_plan(scaling, weighted, cuts, codes):
    frame = table()
    weights = (
        np.random.RandomState(1).randint(0, 4, len(frame)).astype(float) if weighted else None
    )
    params = dict(
        numeric_scaling=scaling,
        n_bins=12,
        min_frequency=40,
        categorical_features=["city", "kind", "garden", "floor"],
        numeric_codes=codes,
    )
    one = TabularEncoder(**params).fit(frame, sample_weight=weights)
    assert one.code_features_.tolist() == ([1] if codes else [])  # rooms: 1 to 5
    merged, summary = merged_plan(TabularEncoder(**params), frame, cuts, weights)
    assert_same_plan(one, merged, exact=scaling != "standard")
    assert_array_equal(merged.transform(frame), one.transform(frame))
    assert summary.rank_errors().tolist() == [0.0, 0.0]  # kept exact
    assert summary.n_rows == len(frame)


def test_rare_and_unseen_levels_are_those_of_one_process():
    frame = table()
    frame["city"] = frame["city"].astype(object)
    frame.loc[:9, "city"] = "once"  # ten rows of a rare level in the first piece only
    params = dict(min_frequency=11, numeric_scaling=None)
    one = TabularEncoder(**params).fit(frame)
    merged, _ = merged_plan(TabularEncoder(**params), frame, [0, 5, 12, 2000])
    assert "once" not in merged.categories_[0].tolist()
    assert_same_plan(one, merged)
    new = frame.iloc[:3].copy()
    new["city"] = ["once", "never seen", None]
    assert_array_equal(merged.transform(new), one.transform(new))  # unknown, unknown, missing


def test_mixed_types_merge_as_one_process_sorts_them():
    values = np.array([True, "b", 3, "a", 1, None, 2.5, "b", False], dtype=object)
    frame = pd.DataFrame({"mixed": values})
    one = TabularEncoder().fit(frame)
    merged, _ = merged_plan(TabularEncoder(), frame, [0, 2, 3, 6, 9])
    assert merged.categories_[0].tolist() == one.categories_[0].tolist()
    assert [type(v) for v in merged.categories_[0]] == [type(v) for v in one.categories_[0]]


def test_weights_count_as_repeated_rows_and_zero_weights_nowhere():
    frame = table(n=300)
    weights = np.random.RandomState(2).randint(0, 3, 300).astype(float)
    merged, summary = merged_plan(TabularEncoder(n_bins=8), frame, [0, 100, 300], weights)
    repeated = frame.loc[frame.index.repeat(weights.astype(int))]
    one = TabularEncoder(n_bins=8).fit(repeated)
    assert_same_plan(one, merged)
    assert summary.n_rows == 300 and summary.n_weighed == int((weights > 0).sum())


# -- compressed: within the stated rank error --------------------------------------------
def true_ranks(values, weights, q):
    """The weight of ``values`` below each of ``q``, and at or below it."""
    order = np.argsort(values)
    sorted_values, cumulative = values[order], np.concatenate([[0], np.cumsum(weights[order])])
    below = cumulative[np.searchsorted(sorted_values, q, side="left")]
    at_or_below = cumulative[np.searchsorted(sorted_values, q, side="right")]
    return below, at_or_below


@pytest.mark.parametrize("fan_in", [2, 8])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_a_compressed_column_keeps_its_quantiles_within_the_rank_error(fan_in, weighted):
    rng = np.random.RandomState(3)
    n, resolution = 60_000, 64
    values = rng.standard_t(3, size=n)
    values[rng.rand(n) < 0.15] = 0.5  # a heavy value, kept exactly
    values[rng.rand(n) < 0.05] = np.nan
    weights = rng.gamma(1.0, size=n) if weighted else np.ones(n)
    pieces = np.array_split(np.arange(n), 23)
    level = [NumericSummary.of(values[p], weights[p], resolution) for p in pieces]
    depth = 0
    while len(level) > 1:
        level = [
            NumericSummary.merge_all(level[i : i + fan_in], resolution)
            for i in range(0, len(level), fan_in)
        ]
        depth += 1
    summary = level[0]
    seen = ~np.isnan(values)
    W = weights[seen].sum()
    assert summary.values.size <= 8 * resolution
    assert summary.n_missing == int((~seen).sum())
    assert summary.total == pytest.approx(W, rel=1e-12)
    assert summary.weights.sum() == pytest.approx(W, rel=1e-12)
    assert summary.error > 0
    assert summary.rank_error() <= (1 + depth) / resolution + 1e-12  # the stated bound
    assert summary.values[0] == values[seen].min() and summary.values[-1] == values[seen].max()
    assert 0.5 in summary.values.tolist()
    levels = np.linspace(0, 1, 1001)
    q = weighted_quantiles(summary.values, summary.weights, levels)
    below, at_or_below = true_ranks(values[seen], weights[seen], q)
    assert np.all(below <= levels * W + summary.error + 1e-9 * W)
    assert np.all(at_or_below >= levels * W - summary.error - 1e-9 * W)
    mean, std = summary.mean_std()
    assert mean == pytest.approx(np.average(values[seen], weights=weights[seen]), rel=1e-10)
    expected_std = np.sqrt(np.cov(values[seen], aweights=weights[seen], ddof=0))
    assert std == pytest.approx(expected_std, rel=1e-10)


def test_a_compressed_plan_is_within_the_rank_error_of_the_one_process_plan():
    rng = np.random.RandomState(4)
    n = 20_000
    frame = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abc"), n)})
    params = dict(n_bins=16)
    one = TabularEncoder(**params).fit(frame)
    cuts = list(range(0, n + 1, 2500))
    merged, summary = merged_plan(TabularEncoder(**params), frame, cuts, resolution=32)
    epsilon = summary.rank_errors()[0]
    assert 0 < epsilon <= 4 / 32
    assert merged.categories_[0].tolist() == one.categories_[0].tolist()
    x = np.sort(frame["x"].to_numpy())
    for q in merged.quantiles_[0]:  # each reference quantile's rank, within epsilon
        rank = np.searchsorted(x, q) / n
        levels = np.linspace(0, 1, merged.quantiles_[0].size)
        assert np.min(np.abs(levels - rank)) <= epsilon + 1 / n


def test_summaries_pickle_and_merge_in_any_grouping():
    frame = table(n=500)
    mask = categorical_mask(as_table(frame), "from_dtype")
    parts = [TableSummary.of(frame.iloc[a : a + 100], mask) for a in range(0, 500, 100)]
    parts = [pickle.loads(pickle.dumps(p)) for p in parts]
    flat = TableSummary.merge_all(parts)
    nested = parts[0].merge(TableSummary.merge_all(parts[1:3])).merge(parts[3].merge(parts[4]))
    for a, b in zip(flat.numeric, nested.numeric):
        assert_array_equal(a.values, b.values)
        assert_array_equal(a.weights, b.weights)
    for a, b in zip(flat.categorical, nested.categorical):
        assert a.categories.tolist() == b.categories.tolist()
        assert_array_equal(a.frequencies, b.frequencies)


def test_category_counts_are_exact():
    values = np.array(["b", "a", None, "b", "c", "b"], dtype=object)
    left = CategorySummary.of(values[:3], np.array([1.0, 2.0, 5.0]))
    right = CategorySummary.of(values[3:])
    merged = CategorySummary.merge_all([left, right])
    assert merged.categories.tolist() == ["a", "b", "c"]
    assert merged.frequencies.tolist() == [2.0, 3.0, 1.0]
    assert merged.frequent(2).tolist() == ["a", "b"]


# -- what it refuses -----------------------------------------------------------------------
def test_no_rows_and_other_kinds_of_columns_are_refused():
    frame = table(n=50)
    mask = categorical_mask(as_table(frame), "from_dtype")
    empty = TableSummary.of(frame.iloc[:0], mask)
    with pytest.raises(ValueError, match="0 sample"):
        encoder_from_summary(TabularEncoder(), RemoteTable(frame.iloc[:0], 0), empty)
    zero = TableSummary.of(frame, mask, np.zeros(50))
    with pytest.raises(ValueError, match="positive sum"):
        encoder_from_summary(TabularEncoder(), RemoteTable(frame.iloc[:0], 0), zero)
    price_too = mask.copy()
    price_too[0] = True  # the prices summarized as categories
    with pytest.raises(ValueError, match="not the same kinds"):
        TableSummary.merge_all([empty, TableSummary.of(frame, price_too)])
    other = TableSummary.of(frame, mask)
    with pytest.raises(ValueError, match="categorical columns are not those"):
        encoder_from_summary(
            TabularEncoder(categorical_features=None), RemoteTable(frame.iloc[:0], 0), other
        )


def test_a_remote_table_has_names_and_no_values():
    frame = table(n=10)
    remote = RemoteTable(frame.iloc[:0], 10**9)
    assert remote.shape == (10**9, 6) and remote.names == list(frame.columns)
    with pytest.raises(TypeError, match="on the cluster"):
        remote.values(0)
    with pytest.raises(TypeError, match="on the cluster"):
        remote.take(np.arange(3))
    stand_in = remote.stand_in(7, np.float32)
    assert stand_in.shape == (10**9, 7) and stand_in.dtype == np.float32
    assert stand_in.strides[0] == 0 and not stand_in.flags.writeable

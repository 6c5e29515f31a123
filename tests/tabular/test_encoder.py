"""TabularEncoder (sknet/tabular/_encoder.py): the column plan, learned from training rows only."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import train_test_split

from sknet.tabular import TabularEncoder

pd = pytest.importorskip("pandas")


def table(n=200, seed=0):
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "price": rng.lognormal(size=n),
            "rooms": rng.randint(1, 6, n).astype(float),
            "city": pd.Categorical(rng.choice(["paris", "lyon", "nice"], n)),
            "kind": rng.choice(["flat", "house", None], n).astype(object),
            "garden": rng.rand(n) > 0.5,
        }
    )
    frame.loc[rng.rand(n) < 0.1, "price"] = np.nan
    return frame


def test_the_plan_of_a_frame():
    encoder = TabularEncoder().fit(table())
    assert encoder.feature_names_in_.tolist() == ["price", "rooms", "city", "kind", "garden"]
    assert encoder.is_categorical_.tolist() == [False, False, True, True, True]
    assert encoder.indicator_features_.tolist() == [0]  # only price has missing values
    assert [c.tolist() for c in encoder.categories_] == [
        ["lyon", "nice", "paris"],
        ["flat", "house"],
        [False, True],
    ]
    assert encoder.cardinalities_.tolist() == [3, 2, 2]
    assert encoder.output_groups_ == {
        "numeric": slice(0, 2),
        "indicators": slice(2, 3),
        "categorical": slice(3, 6),
    }
    assert encoder.get_feature_names_out().tolist() == [
        "price",
        "rooms",
        "missingindicator_price",
        "city",
        "kind",
        "garden",
    ]


def test_transform_codes_missing_and_unknown_values():
    encoder = TabularEncoder(numeric_scaling=None).fit(table())
    new = pd.DataFrame(
        {
            "price": [np.nan, 2.0],
            "rooms": [np.nan, 3.0],  # no missing value in training: the median, no flag
            "city": pd.Categorical(["rome", None]),
            "kind": ["flat", "castle"],
            "garden": [True, False],
        }
    )
    out = encoder.transform(new)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, :3], [encoder.medians_[0], encoder.medians_[1], 1.0])
    np.testing.assert_allclose(out[1, :3], [2.0, 3.0, 0.0])
    # city: rome unknown (3 + 1), None missing (0); kind: flat 1, castle unknown (2 + 1);
    # garden: True 2, False 1
    np.testing.assert_array_equal(out[:, 3:], [[4, 1, 2], [0, 3, 1]])


def test_fit_learns_from_the_rows_it_is_given_only():
    data = table(400)
    train, test = train_test_split(data, random_state=0)
    encoder = TabularEncoder(n_bins=8).fit(train)
    before = encoder.transform(train)
    # Whatever the other rows hold, what was learned from train is the same.
    poisoned = test.copy()
    poisoned["price"] = 1e6
    poisoned["kind"] = "castle"
    again = clone(encoder).fit(train)
    again.transform(poisoned)
    np.testing.assert_array_equal(again.transform(train), before)
    for a, b in zip(again.bins_, encoder.bins_):
        np.testing.assert_array_equal(a, b)
    assert "castle" not in again.categories_[1]
    # and fitting on every row gives another plan: the test rows count only when given
    everything = clone(encoder).fit(pd.concat([train, poisoned]))
    assert "castle" in everything.categories_[1]
    assert not np.array_equal(everything.transform(train), before)


def test_plain_arrays_and_frames_give_the_same_matrix():
    data = table()
    from_frame = TabularEncoder(categorical_features=[2, 3, 4]).fit(data)
    array = data.astype(object).to_numpy()
    from_array = TabularEncoder(categorical_features=[2, 3, 4]).fit(array)
    np.testing.assert_array_equal(from_array.transform(array), from_frame.transform(data))
    assert not hasattr(from_array, "feature_names_in_")


def test_bins_are_quantiles_of_the_scaled_values_seen():
    encoder = TabularEncoder(n_bins=4).fit(table(2000))
    scaled = encoder.transform(table(2000))[:, 0]
    seen = ~np.isnan(table(2000)["price"].to_numpy())
    levels = [0, 0.25, 0.5, 0.75, 1]
    expected = np.quantile(scaled[seen], levels, method="averaged_inverted_cdf")
    np.testing.assert_allclose(encoder.bins_[0], expected, atol=1e-6)
    assert len(encoder.bins_) == 2


def test_no_indicators_when_asked_and_float64_output():
    encoder = TabularEncoder(missing_indicators=False, dtype="float64").fit(table())
    out = encoder.transform(table())
    assert out.dtype == np.float64 and out.shape == (200, 5)
    assert encoder.indicator_features_.size == 0


def test_columns_must_match_the_fit():
    encoder = TabularEncoder().fit(table())
    with pytest.raises(ValueError, match="feature names"):
        encoder.transform(table()[["rooms", "price", "city", "kind", "garden"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        with pytest.raises(ValueError, match="X has 4 features"):
            encoder.transform(table().iloc[:, :4].to_numpy())


def test_pickles_with_its_plan():
    encoder = TabularEncoder(n_bins=4).fit(table())
    loaded = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_array_equal(loaded.transform(table()), encoder.transform(table()))


def test_sample_weights_count_as_repeated_rows_and_zero_as_removed():
    data = table(300)
    weights = np.random.RandomState(1).randint(0, 3, len(data))
    weights[:3] = 0
    data.loc[:2, "kind"] = "castle"  # only in rows of weight 0: not a category
    data.loc[:2, "rooms"] = np.nan  # missing only there: no indicator
    weighted = TabularEncoder(n_bins=8, min_frequency=3).fit(data, sample_weight=weights)
    repeated = TabularEncoder(n_bins=8, min_frequency=3).fit(data.loc[data.index.repeat(weights)])
    np.testing.assert_array_equal(weighted.transform(data), repeated.transform(data))
    assert "castle" not in weighted.categories_[1]
    assert weighted.indicator_features_.tolist() == repeated.indicator_features_.tolist() == [0]
    for a, b in zip(weighted.bins_, repeated.bins_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1.0, 2.0], r"sample_weight.shape == \(2,\), expected \(200,\)"),
        (-np.ones(200), "Negative values in data passed to sample_weight"),
        (np.full(200, np.nan), "contains NaN or infinity"),
        (np.zeros(200), "positive sum"),
    ],
)
def test_bad_sample_weights_are_refused(weights, message):
    with pytest.raises(ValueError, match=message):
        TabularEncoder().fit(table(), sample_weight=weights)


def quantile_map(values, quantiles):
    """The documented map of ``quantiles_``: the rank, ties in the middle, to a normal quantile."""
    from scipy.special import ndtri

    levels = np.linspace(0, 1, quantiles.size)
    forward = np.interp(values, quantiles, levels)
    backward = np.interp(-values, -quantiles[::-1], -levels[::-1])
    return ndtri(np.clip(0.5 * (forward - backward), 1e-7, 1 - 1e-7))


@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
def test_the_public_plan_is_what_transform_computes(scaling):
    frame = table()
    encoder = TabularEncoder(numeric_scaling=scaling, dtype="float64").fit(frame)
    numbers = frame.iloc[:, encoder.numeric_features_].to_numpy(dtype=np.float64)
    values = np.where(np.isnan(numbers), encoder.medians_, numbers)
    assert (encoder.quantiles_ is None) == (scaling != "quantile")
    assert (encoder.offsets_ is None) == (scaling not in ("robust", "standard"))
    assert (encoder.scales_ is None) == (encoder.offsets_ is None)
    if scaling == "quantile":
        expected = np.column_stack(
            [quantile_map(v, q) for v, q in zip(values.T, encoder.quantiles_)]
        )
    elif scaling is not None:
        expected = (values - encoder.offsets_) / encoder.scales_
    else:
        expected = values
    encoded = encoder.transform(frame)
    np.testing.assert_allclose(encoded[:, encoder.output_groups_["numeric"]], expected, atol=1e-12)
    positions = np.isin(encoder.numeric_features_, encoder.indicator_features_)
    np.testing.assert_array_equal(
        encoded[:, encoder.output_groups_["indicators"]], np.isnan(numbers[:, positions])
    )


def test_a_pickle_from_before_the_public_plan_gets_it():
    encoder = TabularEncoder(numeric_scaling="robust").fit(table())
    expected = {name: getattr(encoder, name) for name in ("offsets_", "scales_")}
    for name in ("quantiles_", "offsets_", "scales_"):  # what older versions did not set
        del encoder.__dict__[name]
    loaded = pickle.loads(pickle.dumps(encoder))
    assert loaded.quantiles_ is None
    for name, value in expected.items():
        np.testing.assert_array_equal(getattr(loaded, name), value)
    np.testing.assert_array_equal(loaded.transform(table()), encoder.transform(table()))


def test_a_few_rows_are_encoded_as_the_same_rows_of_a_large_table(monkeypatch):
    # Up to 64 rows (a one-row predict) the codes of object columns are taken a value at a
    # time and the numbers all at once: each row as the large table's path encodes it.
    from sknet.tabular import _encoder

    calls = []
    few = _encoder.encode_few_categories
    monkeypatch.setattr(
        _encoder, "encode_few_categories", lambda *a: calls.append(len(a[-1])) or few(*a)
    )
    frame = table(300)
    frame.loc[[3, 7], "kind"] = "castle"  # unknown
    frame["city"] = frame["city"].cat.add_categories(["brest"])
    frame.loc[5, "city"] = "brest"  # unknown
    frame.loc[[4, 8], "city"] = np.nan
    encoder = TabularEncoder().fit(frame.iloc[10:])
    whole = encoder.transform(frame)
    for rows in ([3], [4, 5], list(range(64)), list(range(2, 9))):
        np.testing.assert_array_equal(encoder.transform(frame.iloc[rows]), whole[rows])
    assert calls == [1, 2, 64, 7]  # the few rows' path, never the large table's


def mixed_table(n=300, seed=0):
    """Columns of every dtype a frame hands the encoder, with missing and unseen values."""
    rng = np.random.RandomState(seed)
    ints = rng.randint(0, 9, n)
    frame = pd.DataFrame(
        {
            "float": rng.normal(size=n),
            "int": ints * 1000,
            "float32": rng.normal(size=n).astype(np.float32),
            "uint8": ints.astype(np.uint8),
            "bool": rng.rand(n) > 0.5,
            "Int64": pd.array(np.where(rng.rand(n) < 0.1, None, ints), dtype="Int64"),
            "Float64": pd.array(rng.normal(size=n), dtype="Float64"),
            "text_number": rng.choice(["1.5", "2", "-3"], n).astype(object),
            "city": pd.Categorical(rng.choice(["paris", "lyon", "nice"], n)),
            "kind": rng.choice(["flat", "house", None], n).astype(object),
            "string": pd.array(rng.choice(["a", "b", None], n), dtype="string"),
            "code_int": ints,  # numbers planned as categories
            "code_float": np.where(rng.rand(n) < 0.1, np.nan, ints / 2),
            "code_bool": rng.rand(n) > 0.3,
            "numeric_categories": pd.Categorical(ints % 3),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "float"] = np.nan
    return frame


def test_a_few_rows_of_every_dtype_are_encoded_as_the_large_table_encodes_them(monkeypatch):
    # A few rows (a predict) are read without listing the frame's dtypes: the whole frame
    # as objects, the numbers one by one where those are not all numbers (NA, None). The
    # same codes and numbers as the large table's path, which reads its columns by dtype.
    categorical = ["city", "kind", "string", "code_int", "code_float", "code_bool"]
    categorical += ["numeric_categories"]
    frame = mixed_table()
    new = mixed_table(seed=1)
    new.loc[0, "code_int"] = 99  # unseen numbers among the numbers planned as categories
    new.loc[1, "code_float"] = 0.25
    frame["hour"] = np.arange(len(frame)) % 24  # numbers coded too (numeric_codes)
    new["hour"] = np.arange(len(new)) % 26 * 1.0  # unseen hours: 24, 25
    new.loc[new.index[2::9], "hour"] = np.nan
    encoder = TabularEncoder(categorical_features=categorical, numeric_codes=True).fit(frame)
    assert encoder.is_categorical_.tolist() == [name in categorical for name in frame]
    assert "hour" in encoder.feature_names_in_[encoder.code_features_]
    whole = encoder.transform(new)
    assert whole[0, encoder.output_groups_["categorical"]][3] == 10  # unknown: K + 1
    read = []
    dtypes = pd.DataFrame.dtypes
    monkeypatch.setattr(
        pd.DataFrame, "dtypes", property(lambda f: read.append(1) or dtypes.fget(f))
    )
    for rows in ([0], [1, 2], [3], list(range(64)), list(range(5, 12))):
        np.testing.assert_array_equal(encoder.transform(new.iloc[rows]), whole[rows])
    assert not read  # a few rows: no dtypes listed
    encoder.transform(new.iloc[:65])
    assert read  # more rows: read by their dtypes

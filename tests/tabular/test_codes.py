"""Numeric columns that look like codes (a month, a day, an hour), coded as categories too."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet import TabularClassifier, TabularRegressor
from sknet.layers import CategoricalEmbedding
from sknet.layers._tree import walk
from sknet.tabular import TabularEncoder
from sknet.tabular._codes import MAX_CODES, MIN_CODES, code_categories, column_code_categories

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def column(values, counts):
    return np.repeat(np.asarray(values, dtype=np.float64), counts)


@pytest.mark.parametrize(
    "values, counts, expected",
    [
        (range(1, 13), [30] * 12, True),  # months, equally frequent
        (range(24), [10 + h for h in range(24)], True),  # hours, the busiest 1.4x the mean
        (range(MIN_CODES), [20] * MIN_CODES, True),
        (range(MIN_CODES - 1), [20] * (MIN_CODES - 1), False),  # a level or a flag
        (range(MAX_CODES + 1), [5] * (MAX_CODES + 1), False),  # too many values
        (range(8), [200, 30, 10, 5, 3, 2, 1, 1], False),  # a count: small values dominate
        (np.arange(6) + 0.5, [10] * 6, False),  # not whole numbers
    ],
)
def test_a_code_is_whole_numbers_few_and_about_equally_frequent(values, counts, expected):
    found = column_code_categories(column(values, counts))
    assert (found is not None) == expected
    if expected:
        assert_array_equal(found, np.asarray(list(values), dtype=np.float64))


def test_a_column_continuous_in_its_first_rows_is_turned_down_before_it_is_sorted(monkeypatch):
    rng = np.random.RandomState(0)
    continuous = rng.normal(size=50_000)
    sorted_sizes = []
    original = np.unique

    def unique(values, **kwargs):
        sorted_sizes.append(values.size)
        return original(values, **kwargs)

    monkeypatch.setattr(np, "unique", unique)
    assert column_code_categories(continuous) is None
    assert column_code_categories(rng.randint(0, 50, 50_000).astype(float)) is None
    assert max(sorted_sizes, default=0) <= 4096  # the first rows only
    months = rng.randint(1, 13, 50_000).astype(float)
    assert_array_equal(column_code_categories(months), np.arange(1.0, 13.0))


def test_missing_values_are_not_a_code_and_weights_count_as_rows():
    months = column(range(1, 13), [10] * 12)
    with_missing = np.concatenate([months, [np.nan] * 500])
    assert_array_equal(column_code_categories(with_missing), np.arange(1.0, 13.0))
    heavy = np.where(months == 1, 5.0, 1.0)  # January weighs as 50 rows of 120
    assert column_code_categories(months, heavy) is None
    assert code_categories(np.arange(1.0, 13.0), np.full(12, 10.0)) is not None


def frame(n=600, seed=0):
    rng = np.random.RandomState(seed)
    return pd.DataFrame(
        {
            "month": rng.randint(1, 13, n),
            "children": rng.poisson(0.4, n),
            "price": rng.lognormal(size=n),
            "city": rng.choice(["a", "b", "c"], n).astype(object),
        }
    )


def test_the_encoder_gives_a_code_column_twice_a_number_and_a_category():
    X = frame()
    plain = TabularEncoder().fit(X)
    assert plain.code_features_.tolist() == []
    encoder = TabularEncoder(numeric_codes=True).fit(X)
    assert encoder.code_features_.tolist() == [0]  # the month, not the children
    assert encoder.numeric_features_.tolist() == [0, 1, 2]  # still a number
    assert encoder.cardinalities_.tolist() == [3, 12]
    assert encoder.output_groups_["categorical"] == slice(3, 5)
    assert encoder.get_feature_names_out().tolist() == [
        "month", "children", "price", "city", "code_month",
    ]  # fmt: skip
    new = pd.DataFrame(
        {"month": [1.0, 12.0, 13.0, np.nan], "children": [0] * 4, "price": [1.0] * 4,
         "city": ["a"] * 4}
    )  # fmt: skip
    encoded = encoder.transform(new)
    assert encoded[:, 4].tolist() == [1, 12, 13, 0]  # unseen 13: unknown (K + 1); NaN: 0
    assert_array_equal(encoded[:, :4], plain.transform(new))  # the rest as without codes


def test_an_encoder_pickled_before_the_codes_loads_and_transforms_as_before():
    X = frame()
    encoder = TabularEncoder().fit(X)
    state = encoder.__getstate__()
    assert "_lookups" in vars(encoder)  # pickling takes a copy of the state
    for name in ("code_features_", "_code_positions"):
        state.pop(name)
    old = TabularEncoder.__new__(TabularEncoder)
    old.__setstate__(state)
    assert_array_equal(old.transform(X), encoder.transform(X))
    assert_array_equal(pickle.loads(pickle.dumps(old)).transform(X), encoder.transform(X))


@pytest.mark.parametrize("make", [TabularClassifier, TabularRegressor])
def test_the_estimators_embed_the_codes_by_default(make):
    X = frame()
    signal = np.where(X["month"].isin([3, 7, 11]), 1.0, -1.0) + 0.1 * X["price"]
    y = signal if make is TabularRegressor else np.where(signal > 0, "late", "on_time")
    params = dict(hidden_layer_sizes=(16,), n_members=2, max_iter=3, random_state=0, device="cpu")
    model = make(**params).fit(X, y)
    assert model.encoder_.code_features_.tolist() == [0]
    (embedding,) = [
        layer for _, layer in walk(model.layers_) if isinstance(layer, CategoricalEmbedding)
    ]
    assert embedding.cardinalities == [3, 12]
    off = make(**params, numeric_codes=False).fit(X, y)
    assert off.encoder_.code_features_.tolist() == []
    assert off.encoder_.output_groups_["categorical"] == slice(3, 4)
    # one size per categorical column: the code columns get their default
    sized = make(**params, categorical_dims=[5]).fit(X, y)
    (embedding,) = [
        layer for _, layer in walk(sized.layers_) if isinstance(layer, CategoricalEmbedding)
    ]
    assert embedding.dims_[0] == 5 and len(embedding.dims_) == 2
    warm = model.set_params(warm_start=True, numeric_codes=False)
    with pytest.raises(ValueError, match="numeric_codes"):
        warm.fit(X, y)

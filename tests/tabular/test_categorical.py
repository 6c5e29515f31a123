"""Category codes (sknet/tabular/_categorical.py): categories, missing, unknown."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet.tabular._categorical import (
    category_lookup,
    encode_categories,
    encode_few_categories,
    learn_categories,
)


def test_codes_are_missing_then_sorted_categories_then_unknown():
    values = np.array(["b", "a", None, "c", "a"], dtype=object)
    categories = learn_categories(values)
    assert categories.tolist() == ["a", "b", "c"]
    new = np.array(["c", "zz", None, "a", np.nan], dtype=object)
    assert encode_categories(new, categories).tolist() == [3, 4, 0, 1, 0]


def test_numeric_categories_use_a_binary_search_with_the_same_codes():
    values = np.array([3.0, 1.0, np.nan, 7.0, 1.0])
    categories = learn_categories(values)
    assert categories.tolist() == [1.0, 3.0, 7.0]
    new = np.array([7.0, 2.0, np.nan, 1.0, 100.0, -5.0])
    assert encode_categories(new, categories).tolist() == [3, 4, 0, 1, 4, 4]
    as_objects = encode_categories(new.astype(object), categories)
    assert as_objects.tolist() == [3, 4, 0, 1, 4, 4]


@pytest.mark.parametrize("int_dtype", [np.int64, np.uint64])
def test_integers_and_floats_match_exactly_as_a_dict_matches_them(int_dtype):
    # NumPy's == would round 2**53 + 1 to 2.0**53; a dict (the few rows' lookup) does not
    big = 2**53
    floats = learn_categories(np.array([5.0, float(big), 1e300]))
    largest = int(np.iinfo(int_dtype).max)
    ints = np.array([big + 1, big, 5, largest], int_dtype)
    expected = [category_lookup(floats).get(v, 4) for v in ints.tolist()]
    assert expected == [4, 2, 1, 4]
    assert encode_categories(ints, floats).tolist() == expected
    # and the other way round: integer categories, float values
    categories = learn_categories(np.array([5, big + 1, big + 3], int_dtype))
    values = np.array([float(big), float(big + 4), 5.0, 2.0**64, -1.0, 5.5])
    expected = [category_lookup(categories).get(v, 4) for v in values.tolist()]
    assert expected == [4, 4, 1, 4, 4, 4]
    assert encode_categories(values, categories).tolist() == expected


def test_strings_against_numeric_categories_are_unknown():
    categories = learn_categories(np.array([1, 2]))
    assert encode_categories(np.array(["1", "x"]), categories).tolist() == [3, 3]


def test_rare_categories_are_coded_as_unknown():
    values = np.array(["a"] * 5 + ["b"] * 2 + ["c"], dtype=object)
    categories = learn_categories(values, min_frequency=2)
    assert categories.tolist() == ["a", "b"]
    assert encode_categories(values, categories).tolist() == [1] * 5 + [2, 2, 3]  # c: unknown


def test_mixed_types_are_grouped_by_type():
    values = np.array([2, "a", 1.5, "b", 2], dtype=object)
    categories = learn_categories(values)
    assert categories.tolist() == [1.5, 2, "a", "b"]
    assert encode_categories(values, categories).tolist() == [2, 3, 1, 4, 2]


def test_a_column_without_categories_codes_everything_missing_or_unknown():
    categories = learn_categories(np.array([None, None], dtype=object))
    assert categories.size == 0
    codes = encode_categories(np.array(["a", None], dtype=object), categories)
    assert codes.tolist() == [1, 0]  # unknown is 0 + 1


def test_values_that_cannot_be_categories_are_refused_by_column():
    values = np.array(["a", {"foo": "bar"}], dtype=object)
    with pytest.raises(TypeError, match="Column 'c' is categorical: each argument must be a"):
        learn_categories(values, label="'c'")
    for value, name in [([1, 2], "list"), ((1, 2), "tuple")]:
        values = objects(value, "a")
        with pytest.raises(TypeError, match=f"of type {name}"):
            learn_categories(values)
    # At transform time too (a warm start, a validation set, predict): as fit refuses them,
    # never coded as unknown; known and unknown strings are coded.
    for value, name in [(["x"], "list"), (("x",), "tuple"), ({"k": 1}, "dict")]:
        with pytest.raises(TypeError, match=f"Column 'c' is categorical.*of type {name}"):
            encode_categories(objects(value, "a"), np.array(["a"], dtype=object), label="'c'")
        with pytest.raises(TypeError, match=f"of type {name}"):
            encode_categories(objects(value, "a"), np.array([], dtype=object))
    codes = encode_categories(objects("z", "a", None), np.array(["a"], dtype=object))
    assert codes.tolist() == [2, 1, 0]


def objects(*values):
    array = np.empty(len(values), dtype=object)  # lists and tuples kept as values
    for i, value in enumerate(values):
        array[i] = value
    return array


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_codes_take_the_dtype_asked_for(dtype):
    categories = learn_categories(np.array(["a", "b"]))
    assert encode_categories(np.array(["b"]), categories, dtype).dtype == dtype


def test_many_values_are_coded_by_a_hash_table_as_the_dict_codes_them():
    pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    categories = np.array(sorted(f"c{i}" for i in range(50)), dtype=object)
    values = rng.choice(list(categories) + ["unseen", "", "C1"], 3000).astype(object)
    values[::7] = None  # missing
    values[5] = 3  # a number in a column of text: unknown, as the dict says
    many = encode_categories(values, categories)  # >= 256 values: pandas' hash table
    few = np.concatenate(
        [encode_categories(values[i : i + 100], categories) for i in range(0, 3000, 100)]
    )  # < 256 values at a time: the dict
    assert_array_equal(many, few)
    assert many[5] == 51 and many[0] == 0
    with pytest.raises(TypeError, match="Column 'x' is categorical"):
        encode_categories(
            np.array([("a", 1)] * 300 + ["c1"], dtype=object), categories, label="'x'"
        )


def _few(columns, categories):
    lookups = [category_lookup(c) for c in categories]
    block = np.empty((len(columns[0]), len(columns)), dtype=object)
    for i, column in enumerate(columns):
        block[:, i] = column
    out = np.full(block.shape, -1.0, dtype=np.float32)
    return encode_few_categories(block, categories, lookups, lambda i: f"'c{i}'", out)


def test_a_few_rows_get_the_codes_of_encode_categories():
    # The path of a one-row predict: every kind of value a column of objects holds.
    pd = pytest.importorskip("pandas")
    categories = [
        np.array(["a", "b", "c"], dtype=object),
        np.array([1.5, 2, "a", "b"], dtype=object),  # mixed types
        np.array([1, 2], dtype=object),  # numbers: strings are unknown
        np.array([False, True], dtype=object),
        np.array([], dtype=object),  # no category: all unknown or missing
    ]
    columns = [
        objects("c", "zz", None, np.nan, "a", pd.NA),
        objects(2, "a", 1.5, None, "b", 3),
        objects("1", 2, 2.0, np.nan, 1, "x"),
        objects(True, None, False, np.True_, 1, 0),
        objects("a", None, 1, np.nan, "b", pd.NA),
    ]
    expected = np.stack(
        [encode_categories(c, k, np.float32) for c, k in zip(columns, categories)], axis=1
    )
    assert_array_equal(_few(columns, categories), expected)
    assert expected[:, 0].tolist() == [3, 4, 0, 0, 1, 0]
    for rows in ([0], [2, 5], [4]):  # one row, two: the same codes as in the whole
        assert_array_equal(_few([c[rows] for c in columns], categories), expected[rows])


def test_a_few_rows_refuse_values_that_cannot_be_categories_by_column():
    categories = [np.array(["a"], dtype=object), np.array(["a", "b"], dtype=object)]
    for value, name in [(["x"], "list"), (("x",), "tuple"), ({"k": 1}, "dict")]:
        columns = [objects("a"), objects(value)]
        with pytest.raises(TypeError, match=f"Column 'c1' is categorical.*of type {name}"):
            _few(columns, categories)

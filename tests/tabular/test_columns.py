"""Column kinds and values (sknet/tabular/_columns.py, _table.py), against scikit-learn's rules."""

import numpy as np
import pytest
from sklearn.utils.validation import _check_categorical_features

from sknet.tabular._columns import categorical_mask
from sknet.tabular._table import as_table, missing_mask


def numeric_values(X, columns):
    return as_table(X).numbers(columns)


pd = pytest.importorskip("pandas")


def every_dtype_frame(n=8):
    rng = np.random.RandomState(0)
    return pd.DataFrame(
        {
            "float": rng.normal(size=n),
            "int": rng.randint(0, 5, n),
            "nullable_int": pd.array([1, None] * (n // 2), dtype="Int64"),
            "category": pd.Categorical(["a", "b", None, "a"] * (n // 4)),
            "object": np.array(["x", None, "y", "x"] * (n // 4), dtype=object),
            "string": pd.array(["u", "v", None, "u"] * (n // 4), dtype="string"),
            "bool": [True, False] * (n // 2),
            "nullable_bool": pd.array([True, None] * (n // 2), dtype="boolean"),
        }
    )


def test_from_dtype_on_a_frame_takes_category_object_string_and_bool_columns():
    mask = categorical_mask(every_dtype_frame())
    assert mask.tolist() == [False, False, False, True, True, True, True, True]


def test_from_dtype_agrees_with_scikit_learn_on_category_columns():
    X = every_dtype_frame()[["float", "int", "category"]]
    expected = _check_categorical_features(X, "from_dtype")
    np.testing.assert_array_equal(categorical_mask(X), expected)


@pytest.mark.parametrize(
    "features",
    [[0, 2], [True, False, True], np.array([2]), ["float", "category"], ("category",)],
)
def test_indices_masks_and_names_as_scikit_learn_reads_them(features):
    X = every_dtype_frame()[["float", "int", "category"]]
    expected = _check_categorical_features(X, features)
    np.testing.assert_array_equal(categorical_mask(X, features), expected)


def test_none_and_empty_mean_no_categorical_column():
    X = every_dtype_frame()
    assert not categorical_mask(X, None).any()
    assert not categorical_mask(X, []).any()


def test_arrays_from_dtype_numbers_numeric_booleans_and_strings_categorical():
    assert not categorical_mask(np.zeros((3, 2))).any()
    assert categorical_mask(np.zeros((3, 2), dtype=bool)).all()
    X = np.array([[1.0, "a", None], [2.0, "b", 3.0], [np.nan, None, 4]], dtype=object)
    assert categorical_mask(X).tolist() == [False, True, False]


@pytest.mark.parametrize(
    "features, message",
    [
        (["nope"], "not a valid feature name"),
        ([5], r"must be in \[0, n_features - 1\] = \[0, 2\], got \[5\]"),
        ([-1], "must be in"),
        ([True, False], r"boolean mask must have shape \(n_features,\) = \(3,\)"),
        ("all", "categorical_features must be 'from_dtype', None"),
        ([1.5], "array-like of bool, int or str"),
    ],
)
def test_bad_categorical_features_name_the_problem(features, message):
    X = every_dtype_frame()[["float", "int", "category"]]
    with pytest.raises(ValueError, match=message):
        categorical_mask(X, features)


def test_names_need_a_frame():
    with pytest.raises(ValueError, match="without feature names"):
        categorical_mask(np.zeros((3, 2)), ["a"])


def test_a_datetime_column_is_refused_by_name():
    X = pd.DataFrame({"when": pd.date_range("2020-01-01", periods=3), "x": [1.0, 2, 3]})
    with pytest.raises(TypeError, match="Column 'when' has dtype datetime64"):
        categorical_mask(X)


def test_missing_values_in_every_spelling():
    values = np.array(["a", None, np.nan, pd.NA, pd.NaT, "b", 0.0], dtype=object)
    assert missing_mask(values).tolist() == [False, True, True, True, True, False, False]
    assert missing_mask(np.array([1.0, np.nan])).tolist() == [False, True]
    assert not missing_mask(np.array(["a", "b"])).any()


def test_missing_values_without_pandas(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    values = np.array(["a", None, float("nan"), "b"], dtype=object)
    assert missing_mask(values).tolist() == [False, True, True, False]


def test_numeric_values_turn_nullable_and_object_missing_into_nan():
    X = every_dtype_frame()
    numbers = numeric_values(X, [0, 2])
    assert numbers.dtype == np.float64
    assert np.isnan(numbers[1::2, 1]).all() and (numbers[::2, 1] == 1).all()
    array = np.array([[1, None], [2, 3.5]], dtype=object)
    np.testing.assert_array_equal(numeric_values(array, [0, 1]), [[1, np.nan], [2, 3.5]])


def test_infinity_is_refused_naming_the_column():
    X = pd.DataFrame({"a": [1.0, 2.0], "b": [np.inf, 0.0]})
    with pytest.raises(ValueError, match="infinity in column 'b'"):
        numeric_values(X, [0, 1])


def test_a_numeric_column_of_objects_that_are_not_numbers_fails_as_numpy_does():
    X = np.array([[{"a": 1}], [2.0]], dtype=object)
    with pytest.raises(TypeError, match="argument must be a string or a real number"):
        numeric_values(X, [0])


def test_tables_are_two_dimensional_and_dense():
    import scipy.sparse as sp

    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        as_table([1.0, 2.0])
    with pytest.raises(TypeError, match="sparse matrix"):
        as_table(sp.csr_matrix(np.eye(3)))
    with pytest.raises(ValueError, match="Complex data not supported"):
        as_table(np.ones((2, 2), dtype=complex))

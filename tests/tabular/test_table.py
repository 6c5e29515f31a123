"""The one adapter of tables (sknet/tabular/_table.py): pandas, polars, pyarrow, arrays, lists."""

import re

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet.tabular import TabularEncoder
from sknet.tabular._columns import categorical_mask
from sknet.tabular._table import as_table

pd = pytest.importorskip("pandas")


def frame():
    return pd.DataFrame(
        {
            "size": [1.5, None, 3.0, 4.5, 0.5, 2.0],
            "color": ["red", None, "blue", "red", "green", "blue"],
            "count": pd.array([1, 2, None, 4, 5, 6], dtype="Int64"),
            "kind": pd.Categorical(["a", "b", "a", None, "b", "a"]),
            "flag": [True, False, True, True, False, False],
        }
    )


def as_kind(df, kind):
    """``df`` as a pandas, polars or pyarrow table (skipped when the library is missing)."""
    if kind == "pandas":
        return df
    if kind == "polars":
        pl = pytest.importorskip("polars")
        pytest.importorskip("pyarrow")  # polars reads pandas through arrow
        return pl.from_pandas(df)
    pa = pytest.importorskip("pyarrow")
    return pa.Table.from_pandas(df, preserve_index=False)


KINDS = ["pandas", "polars", "pyarrow"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_keeps_its_names_and_column_kinds(kind):
    table = as_table(as_kind(frame(), kind))
    assert table.names == ["size", "color", "count", "kind", "flag"]
    assert table.shape == (6, 5)
    assert categorical_mask(table).tolist() == [False, True, False, True, True]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reads_the_values_pandas_reads(kind):
    reference, table = as_table(frame()), as_table(as_kind(frame(), kind))
    assert_array_equal(table.numbers([0, 2]), reference.numbers([0, 2]))
    for j in (1, 3):
        got, want = table.values(j), reference.values(j)
        assert [None if v is None or v != v else v for v in got] == [
            None if v is None or v != v else v for v in want
        ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_plan_learned_from_any_kind_is_the_pandas_plan(kind):
    expected = TabularEncoder().fit(frame())
    encoder = TabularEncoder().fit(as_kind(frame(), kind))
    assert_array_equal(encoder.feature_names_in_, expected.feature_names_in_)
    assert [c.tolist() for c in encoder.categories_] == [c.tolist() for c in expected.categories_]
    assert_array_equal(encoder.transform(as_kind(frame(), kind)), expected.transform(frame()))


@pytest.mark.parametrize("kind", KINDS)
def test_reordered_columns_at_transform_are_refused_by_name(kind):
    encoder = TabularEncoder().fit(as_kind(frame(), kind))
    reordered = as_kind(frame()[["color", "size", "count", "kind", "flag"]], kind)
    with pytest.raises(ValueError, match="must be in the same order as they were in fit"):
        encoder.transform(reordered)
    renamed = as_kind(frame().rename(columns={"size": "area"}), kind)
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- area"):
        encoder.transform(renamed)


@pytest.mark.parametrize("kind", KINDS)
def test_rows_of_any_kind_are_taken_as_rows_of_the_same_kind(kind):
    table = as_table(as_kind(frame(), kind))
    part = table.take(np.array([0, 2, 5]))
    assert type(part.native) is type(table.native)
    assert part.names == table.names
    assert_array_equal(part.numbers([0]), [[1.5], [3.0], [2.0]])


def test_a_list_of_rows_mixing_numbers_and_strings_keeps_the_numbers_numeric():
    rows = [[1.5, "red"], [2.0, "blue"], [3.25, "red"]]
    table = as_table(rows)
    assert table.values(0).dtype == object and categorical_mask(table).tolist() == [False, True]
    encoder = TabularEncoder(numeric_scaling=None).fit(rows)
    assert encoder.numeric_features_.tolist() == [0]
    assert_array_equal(encoder.transform(rows)[:, 0], [1.5, 2.0, 3.25])


@pytest.mark.parametrize(
    "features, said",
    [
        ([], "categorical_features=\\[\\]"),
        (None, "categorical_features=None"),
        (["size"], "categorical_features=\\['size'\\]"),
        ([0, 0, 1], "a list of 0 and 1 is read as column indices, here \\[0, 1\\]"),
    ],
)
def test_a_string_column_planned_as_numeric_is_named(features, said):
    X = frame()[["size", "count", "color"]]  # a 0/1 list meant as a mask: indices 0 and 1
    with pytest.raises(ValueError, match="Column 'color' is planned as numeric") as raised:
        TabularEncoder(categorical_features=features).fit(X)
    message = str(raised.value)
    assert "'red'" in message and "categorical_features='from_dtype'" in message
    assert re.search(said, message), message


def test_a_string_column_of_an_array_planned_as_numeric_is_named_by_index():
    X = np.array([[1.0, "z"], [2.0, "y"]], dtype=object)
    with pytest.raises(ValueError, match="Column 1 is planned as numeric .* 'z'"):
        TabularEncoder(categorical_features=[0]).fit(X)

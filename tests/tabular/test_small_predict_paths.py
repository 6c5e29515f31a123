"""A few rows and a large table, two paths through the tabular encoding: the same rows, the
same numbers (sknet/tabular/_table.py, _encoder.py, _categorical.py, _numeric.py).

Up to ``FEW_ROWS`` rows (a predict of a row or a few) a pandas frame is converted whole to
objects, its category codes looked up a value at a time in a dict and its numbers ranked
all columns at once (Numba's loop, or NumPy's side by side); a larger table reads its
columns by dtype and codes them by binary search or, from ``_HASHED_FROM`` values, by
pandas' hash table. Seeded random frames of every dtype (nullable ones, ``pd.NA``, ``None``
and ``NaN`` in objects, categories unseen or in another order, numbers as strings,
extremes) check that each row alone and small groups of rows give, bit for bit, what the
same rows give inside a large frame (the rows repeated), or the same error.
"""

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet import TabularClassifier, TabularRegressor
from sknet.tabular import TabularEncoder, _categorical, _encoder, _numeric
from sknet.tabular._table import FEW_ROWS, as_table

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: Rows of a large frame: past the few rows' path, and enough values a column for
#: pandas' hash table (a quarter of them may be missing).
LARGE = max(4 * FEW_ROWS, 2 * _categorical._HASHED_FROM)
#: Groups of rows: one, two, the most ranked all at once, one more, the most of the
#: few rows' path, and one more (the large path's dict, below the hash table).
GROUPS = [1, 2, _numeric._ALL_AT_ONCE_ROWS, _numeric._ALL_AT_ONCE_ROWS + 1, FEW_ROWS]
#: A small network, so that each fit takes a fraction of a second.
TINY = dict(
    hidden_layer_sizes=(8,),
    n_members=2,
    d_embedding=4,
    n_bins=8,
    max_iter=2,
    random_state=0,
    device="cpu",
)
LEVELS = ["a", "b", "c"]


def objects(values):
    values = list(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def random_frame(rng, n, predict=False):
    """A frame of every dtype a table holds, missing values in most; at ``predict``,
    unseen categories and integers, categories in another order, extreme numbers."""
    levels = LEVELS + (["zz", "yy"] if predict else [])
    order = list(rng.permutation(levels)) if predict else levels

    def missing(values, p=0.15, na=np.nan):
        values = objects(values)
        values[rng.rand(n) < p] = na
        return values

    floats = rng.normal(size=n) * 10.0 ** rng.randint(-3, 4)
    floats[rng.rand(n) < 0.15] = np.nan
    if predict:  # extremes, signed zeros, far beyond the training range
        extreme = rng.rand(n) < 0.15
        floats[extreme] = rng.choice([1e300, -1e300, 1e-300, -5e-324, -0.0, 1e6], extreme.sum())
    ints = rng.randint(0, 12 if predict else 9, n)
    mixed = [1, 2, "a", "b", 2.5, True] + ([7, "new"] if predict else [])
    text = missing(missing(rng.choice(levels, n), 0.05, None), 0.05, pd.NA)
    return pd.DataFrame(
        {
            "float": floats,
            "int": ints,
            "int_nan": np.where(rng.rand(n) < 0.1, np.nan, ints),
            "Int64": pd.array(missing(ints, na=None), dtype="Int64"),
            "Float64": pd.array(missing(rng.normal(size=n), na=None), dtype="Float64"),
            "bool": rng.rand(n) > 0.5,
            "boolean": pd.array(missing(rng.rand(n) > 0.5, na=None), dtype="boolean"),
            "string": pd.array(missing(rng.choice(levels, n), na=None), dtype="string"),
            "object": missing(text, 0.05),  # None, pd.NA and NaN
            "category": pd.Categorical(missing(rng.choice(levels, n)), categories=order),
            "ordered": pd.Categorical(
                missing(rng.choice(levels, n)), categories=order, ordered=True
            ),
            "int_category": pd.Categorical(missing(ints % 4)),
            "mixed": missing(objects(mixed[i] for i in rng.randint(0, len(mixed), n))),
            "number_text": missing(rng.choice(["1.5", "2", "-3", "1e3", " 4 "], n), 0.1, None),
        }
    )


CATEGORICAL = ["int", "Int64", "bool", "boolean", "string", "object", "category"]
CATEGORICAL += ["ordered", "int_category", "mixed", "int_nan"]
NUMERIC = ["float", "int", "int_nan", "Int64", "Float64", "bool", "boolean", "number_text"]
ALL_BUT_TEXT_NUMBERS = [c for c in random_frame(np.random.RandomState(0), 2) if c != "number_text"]

#: (encoder, the columns it is fitted on): each scaling, float32 and float64, numbers coded
#: too, rare categories, every numeric column (numbers as strings among them).
PLANS = {
    "from_dtype": (TabularEncoder(), ALL_BUT_TEXT_NUMBERS),
    "listed_codes_float64": (
        TabularEncoder(categorical_features=CATEGORICAL, numeric_codes=True, dtype="float64"),
        None,
    ),
    "robust_rare": (
        TabularEncoder(
            categorical_features=CATEGORICAL, numeric_scaling="robust", min_frequency=20
        ),
        None,
    ),
    "standard_all_numeric": (
        TabularEncoder(categorical_features=None, numeric_scaling="standard"),
        NUMERIC,
    ),
    "unscaled_float64": (
        TabularEncoder(numeric_scaling=None, n_bins=8, dtype="float64"),
        ALL_BUT_TEXT_NUMBERS,
    ),
}


def large(table, n=LARGE):
    """``table``'s rows repeated to ``n`` rows (row ``i`` stays row ``i``)."""
    rows = np.resize(np.arange(table.shape[0]), max(n, table.shape[0]))
    if isinstance(table, np.ndarray):
        return table[rows]
    return table.iloc[rows]


def outcome(transform, X):
    """What ``transform(X)`` gives: its array, or its error's type and message."""
    try:
        return transform(X)
    except Exception as exc:  # compared, not swallowed
        return type(exc), str(exc)


def assert_same(got, expected, what):
    """The same array bit for bit (and dtype), or the same error."""
    if isinstance(expected, tuple) or isinstance(got, tuple):
        shown = [o if isinstance(o, tuple) else f"array {o.tolist()}" for o in (got, expected)]
        assert isinstance(got, tuple) and isinstance(expected, tuple), f"{what}: {shown}"
        assert got == expected, f"{what}: {shown}"
    else:
        assert got.dtype == expected.dtype, what
        assert_array_equal(got, expected, err_msg=what, strict=True)


def assert_paths_agree(transform, frame, groups=GROUPS):
    """Each row of ``frame`` alone, and groups of its rows, give what they give inside a
    large frame: the same numbers bit for bit, or the same error. Returns the large
    frame's outcome (of the rows that are not refused, where some are)."""
    whole = outcome(transform, large(frame))
    if isinstance(whole, tuple):  # an error: each row against a large frame of itself
        kept = []
        for i in range(frame.shape[0]):
            alone = outcome(transform, frame.iloc[[i]])
            in_large = outcome(transform, large(frame.iloc[[i]]))
            in_large = in_large if isinstance(in_large, tuple) else in_large[:1]
            assert_same(alone, in_large, f"row {i}: {frame.iloc[i].tolist()}")
            if not isinstance(alone, tuple):
                kept.append(i)
        if 0 < len(kept) < frame.shape[0]:  # the groups of the rows not refused
            return assert_paths_agree(transform, frame.iloc[kept], groups)
        return whole
    for i in range(frame.shape[0]):
        assert_same(transform(frame.iloc[[i]]), whole[[i]], f"row {i}: {frame.iloc[i].tolist()}")
    for size in groups:
        for start in range(0, frame.shape[0] - size + 1, max(size, 7)):
            rows = list(range(start, start + size))
            assert_same(transform(frame.iloc[rows]), whole[rows], f"rows {rows}")
    rows = list(range(min(FEW_ROWS + 1, frame.shape[0])))  # the large path, below the hash
    assert_same(transform(frame.iloc[rows]), whole[rows], "rows past the few rows' path")
    return whole


def fitted_plan(name, seed):
    encoder, columns = PLANS[name]
    rng = np.random.RandomState(seed)
    train, new = random_frame(rng, 300), random_frame(rng, 40, predict=True)
    columns = list(train.columns) if columns is None else columns
    return TabularEncoder(**encoder.get_params()).fit(train[columns]), new[columns]


# -- the encoder, on random frames ---------------------------------------------------------
@pytest.mark.parametrize("plan", list(PLANS))
def test_each_row_and_small_groups_encode_as_inside_a_large_frame(plan, monkeypatch):
    calls, hashed = [], []
    few, table = _encoder.encode_few_categories, _categorical._hashed_codes
    monkeypatch.setattr(
        _encoder, "encode_few_categories", lambda *a: calls.append(len(a[-1])) or few(*a)
    )
    monkeypatch.setattr(
        _categorical, "_hashed_codes", lambda *a: hashed.append(len(a[1])) or table(*a)
    )
    for seed in range(4):
        encoder, new = fitted_plan(plan, seed)
        whole = assert_paths_agree(encoder.transform, new)
        assert not isinstance(whole, tuple), whole  # most rows encoded, not refused
    if len(encoder.categories_):  # the few rows took the dict, the large frames not
        assert calls and max(calls) <= FEW_ROWS
    if any(c.dtype == object and isinstance(c[0], str) for c in encoder.categories_):
        assert max(hashed) >= _categorical._HASHED_FROM  # pandas' hash table: large frames


@pytest.mark.parametrize("plan", ["from_dtype", "standard_all_numeric"])
def test_without_numba_a_few_rows_are_ranked_as_inside_a_large_frame(plan, monkeypatch):
    # Without Numba, a few rows of many numeric columns are ranked by NumPy side by side.
    monkeypatch.setattr(_numeric, "compiled_ranks", lambda: None)
    for seed in range(2):
        encoder, new = fitted_plan(plan, seed)
        assert not isinstance(assert_paths_agree(encoder.transform, new), tuple)


def test_rows_rebuilt_from_python_values_encode_as_the_typed_frame():
    # A row built from a record (a web request) has its dtypes inferred anew: object or
    # str columns for the categories, float or object for nullable numbers.
    encoder, new = fitted_plan("listed_codes_float64", 5)
    whole = encoder.transform(large(new))
    for i in range(new.shape[0]):
        record = new.iloc[i].to_dict()
        for row in (pd.DataFrame([record]), pd.DataFrame({k: [v] for k, v in record.items()})):
            assert_array_equal(encoder.transform(row), whole[[i]], err_msg=str(record))


def test_a_row_of_missing_values_only_encodes_as_inside_a_large_frame():
    encoder, new = fitted_plan("from_dtype", 1)
    empty = new.iloc[[0]].copy()
    for name in empty:  # every column missing, in its own dtype (NumPy's ints: float)
        dtype = new[name].dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biu":
            dtype = object if dtype.kind == "b" else np.float64
        empty[name] = pd.Series([None], index=empty.index, dtype=dtype)
    untyped = pd.DataFrame({name: [None] for name in new})  # all object columns of None
    untyped_nan = pd.DataFrame({name: [np.nan] for name in new}, dtype=object)
    first = encoder.transform(empty)
    groups = encoder.output_groups_
    assert_array_equal(first[0, groups["categorical"]], 0)  # code 0: missing
    assert_array_equal(first[0, groups["indicators"]], 1)
    for frame in (empty, untyped, untyped_nan, pd.concat([new, empty])):
        assert_paths_agree(encoder.transform, frame)
    assert_array_equal(encoder.transform(untyped), first)


def test_categories_in_another_order_or_unseen_code_as_their_values_on_both_paths():
    rng = np.random.RandomState(0)
    train = pd.DataFrame(
        {
            "category": pd.Categorical(rng.choice(LEVELS, 300)),
            "ordered": pd.Categorical(rng.choice(LEVELS, 300), ordered=True),
            "ints": pd.Categorical(rng.choice([3, 1, 2], 300)),
        }
    )
    encoder = TabularEncoder().fit(train)
    values = ["c", "zz", None, "a", "b", "yy"]
    new = pd.DataFrame(
        {
            "category": pd.Categorical(values, categories=["zz", "c", "b", "a", "yy"]),
            "ordered": pd.Categorical(
                values, categories=["yy", "c", "a", "b", "zz"], ordered=True
            ),
            "ints": pd.Categorical([2, 7, None, 1, 3, 1.0], categories=[7.0, 3.0, 2.0, 1.0]),
        }
    )
    assert_paths_agree(encoder.transform, new)
    as_objects = new.astype(object)  # the same values, no categories
    assert_array_equal(encoder.transform(new), encoder.transform(as_objects))
    assert encoder.transform(new.iloc[[1]]).tolist() == [[4.0, 4.0, 4.0]]  # unknown: K + 1


# -- numbers: extremes, infinity, text ----------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
def test_extreme_numbers_encode_or_are_refused_alike_on_both_paths(scaling, dtype):
    rng = np.random.RandomState(0)
    train = pd.DataFrame({"x": rng.normal(size=300) * 1e3, "y": rng.lognormal(size=300)})
    encoder = TabularEncoder(numeric_scaling=scaling, dtype=dtype).fit(train)
    extremes = [1e300, -1e300, 1e-300, -1e-300, 5e-324, -0.0, 3.4e38, 1e38, -1e20, 1e5, np.nan]
    extremes += [np.finfo(np.float64).max, np.finfo(np.float64).min]
    new = pd.DataFrame({"x": extremes, "y": extremes[::-1]})
    assert_paths_agree(encoder.transform, new)
    assert_paths_agree(encoder.transform, new.astype(object))  # Python floats
    assert_paths_agree(encoder.transform, new.astype("Float64"))


@pytest.mark.parametrize(
    "column",
    [
        pd.Series([1.0, np.inf, -np.inf, 2.0]),
        pd.Series([1.0, np.inf, None, -np.inf], dtype="Float64"),
        pd.Series(objects([1.0, np.inf, None, "-inf"])),  # infinity as text too
        pd.Series(objects(["1", "inf", "nan", "-Infinity"])),
    ],
    ids=["float", "Float64", "object", "text"],
)
def test_infinity_is_refused_by_the_same_error_on_both_paths(column):
    train = pd.DataFrame({"x": np.arange(300.0), "y": np.arange(300.0) % 7, "c": "a"})
    encoder = TabularEncoder().fit(train)
    new = pd.DataFrame({"x": column.to_numpy(), "y": 1.0, "c": "a"})
    assert_paths_agree(encoder.transform, new)
    with pytest.raises(ValueError, match="Input X contains infinity in column 'x'"):
        encoder.transform(new.iloc[[1]])
    # in a categorical column infinity is a value like any other: unknown
    categorical = pd.DataFrame({"x": 1.0, "y": 1.0, "c": objects([np.inf, "a", -np.inf, None])})
    assert_paths_agree(encoder.transform, categorical)
    assert encoder.transform(categorical.iloc[[0]])[0, -1] == 2  # unknown: K + 1


def test_numbers_as_text_and_mixed_objects_encode_as_inside_a_large_frame():
    rng = np.random.RandomState(0)
    train = pd.DataFrame(
        {
            "number": rng.normal(size=300),
            "count": rng.randint(0, 50, 300),
            "mixed": objects(rng.choice([1, 2, 3], 300)).tolist()[:150] + ["x", "y"] * 75,
        }
    )
    encoder = TabularEncoder().fit(train)  # 'mixed': object, categorical by its strings
    assert encoder.is_categorical_.tolist() == [False, False, True]
    new = pd.DataFrame(
        {
            "number": objects(["1.5", " -2 ", "1e3", 4, 2.5, None, "nan", True, "1_0"]),
            "count": objects([3, "7", np.int64(9), np.float32(2.5), pd.NA, 10**20, 0, 1, 2]),
            "mixed": objects([1, "1", 1.0, True, "x", np.int64(2), None, 3.5, b"x"]),
        }
    )
    assert_paths_agree(encoder.transform, new)
    assert_paths_agree(encoder.transform, new.astype({"number": "string"}))


# -- errors: the same on both paths ------------------------------------------------------
def test_columns_reordered_missing_or_extra_are_the_same_error_on_both_paths():
    encoder, new = fitted_plan("from_dtype", 0)
    reordered = new[new.columns[::-1]]
    for frame in (reordered, new.drop(columns="float"), new.assign(extra=1.0)):
        alone = outcome(encoder.transform, frame.iloc[[0]])
        assert isinstance(alone, tuple) and alone[0] is ValueError
        assert alone == outcome(encoder.transform, large(frame))
    assert "same order" in outcome(encoder.transform, reordered.iloc[:2])[1]


@pytest.mark.parametrize(
    "value",
    [["x"], ("x",), {"k": 1}, {1}, 1 + 2j, pd.Timestamp("2020-01-01"), pd.Interval(0, 1)],
    ids=["list", "tuple", "dict", "set", "complex", "timestamp", "interval"],
)
@pytest.mark.parametrize("where", ["numeric", "categorical"])
def test_a_value_neither_number_nor_category_is_the_same_error_on_both_paths(where, value):
    rng = np.random.RandomState(0)
    train = pd.DataFrame(
        {"x": rng.normal(size=300), "y": rng.normal(size=300)}
        | {"c": rng.choice(LEVELS, 300), "d": rng.choice(LEVELS, 300)}
    )
    encoder = TabularEncoder().fit(train)
    column = "x" if where == "numeric" else "d"
    new = train.head(3).copy()
    new[column] = objects([new[column].iloc[0], value, new[column].iloc[2]])
    assert_paths_agree(encoder.transform, new)
    error = outcome(encoder.transform, new.iloc[[1]])
    assert isinstance(error, tuple) and f"Column '{column}'" in error[1]


def test_a_datetime_column_is_the_same_error_on_both_paths_and_not_a_time_is_missing():
    rng = np.random.RandomState(0)
    train = pd.DataFrame({"x": rng.normal(size=300), "c": rng.choice(LEVELS, 300), "d": "a"})
    with pytest.raises(TypeError, match="Column 'x' has dtype datetime64"):
        TabularEncoder().fit(train.assign(x=pd.Timestamp("2020-01-01")))
    encoder = TabularEncoder().fit(train)
    dates = pd.to_datetime(["2020-01-01", None, "2021-06-30"])
    for column in ("x", "c"):  # a date where a number or a category was
        new = train.head(3).assign(**{column: dates})
        assert_paths_agree(encoder.transform, new)
        assert isinstance(outcome(encoder.transform, new.iloc[[0]]), tuple)
        missing = encoder.transform(new.iloc[[1]])  # NaT: missing, on both paths
        assert_array_equal(missing, encoder.transform(large(new.iloc[[1]]))[:1])


# -- other tables ---------------------------------------------------------------------
def test_a_single_column_frame_encodes_as_inside_a_large_frame():
    rng = np.random.RandomState(0)
    train = random_frame(rng, 300)
    new = random_frame(rng, 30, predict=True)
    for name in ["float", "Int64", "bool", "boolean", "string", "object", "category"]:
        for features in ("from_dtype", [name]):
            encoder = TabularEncoder(categorical_features=features).fit(train[[name]])
            assert_paths_agree(encoder.transform, new[[name]], groups=[1, 2, 5])


def test_arrays_and_lists_of_rows_encode_as_inside_a_large_array():
    rng = np.random.RandomState(0)
    n = 300
    train = np.empty((n, 3), dtype=object)
    train[:, 0] = rng.normal(size=n)
    train[:, 1] = rng.choice(["a", "b", None], n)
    train[:, 2] = rng.choice([1, 2, "x"], n)
    encoder = TabularEncoder().fit(train)
    new = train[:12].copy()
    new[3] = [np.nan, "zz", 7]
    new[4] = [None, np.nan, None]
    rows = large(new)
    whole = encoder.transform(rows)
    for i in range(new.shape[0]):
        assert_array_equal(encoder.transform(new[[i]]), whole[[i]])
        assert_array_equal(encoder.transform([list(new[i])]), whole[[i]])  # a list of rows


@pytest.mark.parametrize("kind", ["polars", "pyarrow"])
def test_polars_and_pyarrow_rows_encode_as_inside_a_large_table(kind):
    pytest.importorskip("pyarrow")
    rng = np.random.RandomState(0)
    columns = ["float", "int", "Int64", "bool", "string", "object", "category"]
    train, new = random_frame(rng, 300)[columns], random_frame(rng, 30, predict=True)[columns]
    new["object"] = new["object"].where(new["object"].notna(), None).astype("string")
    train["object"] = train["object"].where(train["object"].notna(), None).astype("string")
    if kind == "polars":
        pl = pytest.importorskip("polars")
        convert, take = pl.from_pandas, lambda t, rows: t[list(rows)]
    else:
        import pyarrow as pa

        convert = lambda f: pa.Table.from_pandas(f, preserve_index=False)  # noqa: E731
        take = lambda t, rows: t.take(list(rows))  # noqa: E731
    encoder = TabularEncoder().fit(convert(train))
    table = convert(new)
    whole = encoder.transform(take(table, np.resize(np.arange(len(new)), LARGE)))
    for i in range(len(new)):
        assert_array_equal(encoder.transform(take(table, [i])), whole[[i]])
    assert_array_equal(encoder.transform(take(table, range(5))), whole[:5])


# -- the estimators ---------------------------------------------------------------------
@pytest.fixture(scope="module", params=["float32", "float64"])
def fitted(request):
    """A tiny classifier and regressor of each dtype, and rows they never saw."""
    rng = np.random.RandomState(7)
    train = random_frame(rng, 300)[ALL_BUT_TEXT_NUMBERS]
    new = random_frame(rng, 40, predict=True)[ALL_BUT_TEXT_NUMBERS]
    signal = np.nan_to_num(train["float"].to_numpy()) + (train["category"] == "a")
    dtype = request.param
    clf = TabularClassifier(**TINY, dtype=dtype).fit(train, np.where(signal > 0, "y", "n"))
    reg = TabularRegressor(**TINY, numeric_embedding="periodic", dtype=dtype).fit(train, signal)
    return clf, reg, new, dtype


def test_the_estimators_read_a_row_as_inside_a_large_frame(fitted):
    # The input the network gets: bit for bit the same rows on both paths.
    clf, reg, new, dtype = fitted
    for model in (clf, reg):
        assert model.encoder_.dtype == dtype
        assert_paths_agree(model.encoder_.transform, new, groups=[1, 2, 5])
        encode = lambda frame, plan=model.encoder_: plan._encode_table(as_table(frame))  # noqa: E731
        assert not isinstance(assert_paths_agree(encode, new, groups=[]), tuple)


def test_the_estimators_predict_a_row_as_inside_a_large_frame(fitted):
    # The same encoded rows; the network's products of one row and of many rows may sum in
    # another order (BLAS), so the outputs agree to the dtype's rounding.
    clf, reg, new, dtype = fitted
    tol = 1e-5 if dtype == "float32" else 1e-12
    big = large(new)
    proba, log_proba = clf.predict_proba(big), clf.predict_log_proba(big)
    labels, values = clf.predict(big), reg.predict(big)
    assert proba.dtype == values.dtype == np.dtype(dtype)
    for rows in [[i] for i in range(new.shape[0])] + [[0, 1], list(range(5, 10))]:
        assert_allclose(clf.predict_proba(new.iloc[rows]), proba[rows], rtol=tol, atol=tol)
        assert_allclose(clf.predict_log_proba(new.iloc[rows]), log_proba[rows], rtol=tol, atol=tol)
        assert_allclose(reg.predict(new.iloc[rows]), values[rows], rtol=tol, atol=tol)
        clear = np.abs(proba[rows, 1] - proba[rows, 0]) > 1e-4  # no tie to break otherwise
        assert_array_equal(clf.predict(new.iloc[rows])[clear], labels[rows][clear])


def test_the_estimators_refuse_bad_rows_alike_on_both_paths(fitted):
    clf, reg, new, _ = fitted
    bad = new.head(3).copy()
    bad["float"] = [1.0, np.inf, 2.0]
    reordered = new[new.columns[::-1]]
    for model in (clf, reg):
        for frame, rows in ((bad, [1]), (reordered, [0]), (new.drop(columns="int"), [0])):
            alone = outcome(model.predict, frame.iloc[rows])
            assert isinstance(alone, tuple) and alone[0] is ValueError
            assert alone == outcome(model.predict, large(frame.iloc[rows]))


# -- defects found ------------------------------------------------------------------------
def _id_table(kind, ids, other):
    frame = pd.DataFrame({"id": pd.array(ids, dtype="Int64"), "c": other})
    if "pyarrow" in kind or kind == "polars":
        pytest.importorskip("pyarrow")
    if kind in ("Int64", "UInt64", "int64[pyarrow]"):
        return frame.astype({"id": kind}), lambda t, rows: t.iloc[rows]
    if kind == "polars":
        pl = pytest.importorskip("polars")
        return pl.from_pandas(frame), lambda t, rows: t[list(rows)]
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False), lambda t, rows: t.take(list(rows))


# Integer IDs beyond 2**53 with a missing value: read through float64 (pandas' masked and
# arrow arrays, narwhals' series give floats for them), two IDs would read as one.
@pytest.mark.parametrize("kind", ["Int64", "UInt64", "int64[pyarrow]", "polars", "pyarrow"])
def test_nullable_integer_ids_beyond_2_53_code_alike_alone_and_in_a_large_frame(kind):
    big = 2**53
    ids = [big + 1, big + 3, None, 5, 7] * 80
    table, take = _id_table(kind, ids, ["a", "b", "c", "a", "b"] * 80)
    encoder = TabularEncoder(categorical_features=["id", "c"]).fit(table)
    whole = encoder.transform(table)
    alone = np.vstack([encoder.transform(take(table, [i])) for i in range(5)])
    assert_array_equal(alone, whole[:5])
    # four IDs seen, each its own code (1..4 in sorted order), the missing one 0
    assert whole[:5, 0].tolist() == [3, 4, 0, 1, 2]


def test_integer_values_against_float_categories_match_alike_on_both_paths():
    big = 2**53
    train = pd.DataFrame({"id": [float(big), 5.0, np.nan, 7.0] * 80, "c": ["a", "b"] * 160})
    encoder = TabularEncoder(categorical_features=["id", "c"]).fit(train)
    new = pd.DataFrame({"id": [big + 1, 5, 7, 8], "c": "a"})  # int64: no missing value
    whole = encoder.transform(large(new))
    alone = np.vstack([encoder.transform(new.iloc[[i]]) for i in range(4)])
    assert_array_equal(alone, whole[:4])
    assert whole[:4, 0].tolist() == [4, 1, 2, 4]  # 2**53 + 1 is not 2.0**53: unknown


def test_refused_values_in_two_columns_name_the_same_column_on_both_paths():
    train = pd.DataFrame({"A": ["a", "b"] * 150, "B": ["c", "d"] * 150})
    encoder = TabularEncoder().fit(train)
    new = pd.DataFrame({"A": objects(["a", ["y"]]), "B": objects([["x"], "c"])})
    few, many = outcome(encoder.transform, new), outcome(encoder.transform, large(new))
    assert few[0] is many[0] is TypeError
    assert re.findall("Column '.'", few[1]) == re.findall("Column '.'", many[1])


@pytest.mark.parametrize("n_rows", [1, LARGE], ids=["few", "large"])
def test_an_integer_beyond_the_float_range_is_refused_naming_its_column(n_rows):
    train = pd.DataFrame({"x": np.arange(300.0), "y": np.arange(300.0) % 7})
    encoder = TabularEncoder().fit(train)
    new = pd.DataFrame({"x": objects([10**400]), "y": [1.0]})
    with pytest.raises(ValueError, match="column 'x'"):
        encoder.transform(large(new, n_rows))


def test_a_float16_column_where_categories_were_codes_alike_on_both_paths():
    rng = np.random.RandomState(0)
    train = pd.DataFrame({"x": rng.normal(size=300), "c": rng.choice(["1", "2"], 300)})
    encoder = TabularEncoder().fit(train)
    new = pd.DataFrame({"x": [1.0, 2.0], "c": np.array([1, 2], dtype=np.float16)})
    alone = encoder.transform(new)  # a few rows: unknown (K + 1)
    assert alone[:, -1].tolist() == [3, 3]
    assert_array_equal(encoder.transform(large(new))[:2], alone)

"""Random tables through the tabular estimators' ONNX export: the graph predicts as predict.

The column plan as ONNX nodes (sknet/onnx/_tabular.py), the embeddings' converters
(_categorical.py, _numeric.py) and the model (_export.py), on seeded random frames of
every dtype the export takes (tests/tabular/test_small_predict_paths.py's
``random_frame``, less its column of mixed types, refused below): nullable integers,
floats and booleans, ``pd.NA``, ``None`` and ``NaN`` in objects, categories unseen or in
another order, integers beyond the training range, extremes (1e300, -1e-300, 5e-324,
-0.0). A tiny model is fitted on one frame; fed another as the user guide feeds a
DataFrame (float64, NaN where missing, for numbers and numeric categories; strings and
a ``'missingindicator_<column>'`` boolean for string categories), its graph gives what
``predict_proba`` and ``predict`` give: each scaling, numeric embedding and column plan,
rows alone and rows of missing values only. Rows ``predict`` refuses (a value its
scaling takes beyond float32, infinity) are left out: the graph cannot refuse them
(``to_onnx``'s docstring).
"""

from decimal import Decimal

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet import TabularClassifier, TabularRegressor
from sknet.onnx import to_onnx
from tests.onnx.helpers import FILTERS, rt  # skips the module without onnxruntime
from tests.tabular.test_small_predict_paths import TINY, random_frame

onnx = pytest.importorskip("onnx")
pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings(*FILTERS)

SCALINGS = ["quantile", "robust", "standard", None]
EMBEDDINGS = ["piecewise_linear", "periodic", None]
#: random_frame's columns, less 'mixed' (categories of several types: refused)
COLUMNS = [c for c in random_frame(np.random.RandomState(0), 2) if c != "mixed"]
#: the columns listed as categorical (numbers and booleans among them)
CATEGORICAL = ["int", "int_nan", "Int64", "bool", "boolean", "string", "object"]
CATEGORICAL += ["category", "ordered", "int_category"]
#: the numeric columns of a plan without categories (numbers as text among them)
NUMERIC = ["float", "int", "int_nan", "Int64", "Float64", "bool", "boolean", "number_text"]
#: Targets of a frame's signal: binary 0/1, three strings, four integers below zero too.
LABELS = [
    lambda s: (s > 0).astype(int),
    lambda s: np.array(["lo", "mid", "hi"])[np.digitize(s, np.quantile(s, [1 / 3, 2 / 3]))],
    lambda s: np.digitize(s, np.quantile(s, [0.25, 0.5, 0.75])) * 10 - 15,
]
STRING, DOUBLE, BOOL = onnx.TensorProto.STRING, onnx.TensorProto.DOUBLE, onnx.TensorProto.BOOL


def frames(seed, columns=COLUMNS, n=200):
    """A training frame of ``n`` rows and a frame of 40 new rows (unseen, extreme)."""
    rng = np.random.RandomState(seed)
    return random_frame(rng, n)[columns], random_frame(rng, 40, predict=True)[columns]


def signal(frame):
    return np.nan_to_num(frame["float"].to_numpy(dtype=np.float64)) + (frame["int"] > 4)


def input_name(frame, j):
    return str(frame.columns[j]) or f"x{j}"  # a column named '' is the input 'x<j>'


def feed(model, frame):
    """The graph's inputs of ``frame``: each column as its input is declared (the user
    guide's recipe), float64 with NaN where missing, or strings with the missing input."""
    declared = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    inputs = {}
    for j in range(frame.shape[1]):
        name = input_name(frame, j)
        values = frame.iloc[:, j].astype(object).to_numpy()
        missing = np.asarray(pd.isna(values), dtype=bool)  # None, NaN, pd.NA
        if declared[name] == STRING:  # any string where missing: not read
            strings = ["" if m else str(v) for v, m in zip(values, missing)]
            inputs[name] = np.array(strings, dtype=object).reshape(-1, 1)
            inputs[f"missingindicator_{name}"] = missing.reshape(-1, 1)
        else:  # booleans as 0/1, numbers as text read as numbers
            numbers = [np.nan if m else float(v) for v, m in zip(values, missing)]
            inputs[name] = np.array(numbers, dtype=np.float64).reshape(-1, 1)
    return inputs


def run(model, frame):
    session = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed(model, frame))


def assert_documented_inputs(model, estimator, frame):
    """One input per column (float64 for numbers, numeric categories and booleans,
    strings for string categories), then the missing inputs of the string columns.
    A categorical column left without categories is not looked at here (see
    test_a_numeric_category_column_left_without_categories_is_a_float64_input)."""
    encoder = estimator.encoder_
    kinds, empty = ["number"] * frame.shape[1], set()
    for j, categories in zip(encoder.categorical_features_, encoder.categories_):
        if len(categories) == 0:
            empty.add(input_name(frame, j))
        elif all(isinstance(v, str) for v in categories):
            kinds[j] = "string"
    names = [input_name(frame, j) for j in range(frame.shape[1])]
    expected = [(n, STRING if k == "string" else DOUBLE) for n, k in zip(names, kinds)]
    expected += [(f"missingindicator_{n}", BOOL) for n, k in zip(names, kinds) if k == "string"]
    got = [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input]
    got = [
        (n, t)
        for n, t in got
        if n not in empty and n.replace("missingindicator_", "") not in empty
    ]
    assert got == [(n, t) for n, t in expected if n not in empty]


def accepted(predict, frame):
    """The rows ``predict`` takes and its outputs there; the others are refused by a
    ValueError naming their column (a scaled value beyond float32, infinity)."""
    try:
        return np.arange(frame.shape[0]), predict(frame)
    except ValueError:
        pass
    rows = []
    for i in range(frame.shape[0]):
        try:
            predict(frame.iloc[[i]])
        except ValueError as exc:
            assert "Column '" in str(exc), str(exc)
            continue
        rows.append(i)
    rows = np.array(rows, dtype=np.intp)
    return rows, predict(frame.iloc[rows]) if rows.size else None


def assert_graph_predicts(estimator, frame, model=None, **params):
    """The exported graph (``model``, or ``to_onnx``'s of ``params``) gives, on ``frame``,
    what the estimator predicts; returns it.

    To float32's rounding (relative 1e-5) where the model or the graph is float32, to
    1e-10 where both are float64; the labels where the two most probable classes are
    more than 1e-4 apart (no tie for rounding to break).
    """
    model = to_onnx(estimator, **params) if model is None else model
    outputs = run(model, frame)
    dtype = np.dtype(params.get("dtype") or estimator.dtype)
    assert outputs[-1].dtype == dtype
    single = dtype == np.float32 or np.dtype(estimator.dtype) == np.float32
    tol = dict(rtol=1e-5, atol=1e-6) if single else dict(rtol=1e-10, atol=1e-12)
    classifier = hasattr(estimator, "predict_proba")
    rows, expected = accepted(estimator.predict_proba if classifier else estimator.predict, frame)
    if expected is None:  # every row refused
        return model
    assert_allclose(outputs[-1][rows].reshape(expected.shape), expected, **tol)
    if classifier:
        labels = outputs[0][rows]
        if labels.ndim == 1:
            top = np.sort(expected, axis=1)
            clear = top[:, -1] - top[:, -2] > 1e-4
        else:  # multilabel: each label's probability away from 0.5
            clear = np.abs(expected - 0.5) > 1e-4
        assert_array_equal(labels[clear], estimator.predict(frame.iloc[rows])[clear])
    return model


# -- every scaling and numeric embedding ---------------------------------------------------
@pytest.mark.parametrize("embedding", EMBEDDINGS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_the_classifiers_graph_predicts_as_predict_proba(scaling, embedding):
    # binary 0/1 in float32, three string classes in float64, four integers in float32
    for seed, (labels, dtype) in enumerate(zip(LABELS, ["float32", "float64", "float32"])):
        train, new = frames(seed)
        clf = TabularClassifier(
            **TINY, numeric_scaling=scaling, numeric_embedding=embedding, dtype=dtype
        ).fit(train, labels(signal(train)))
        assert len(clf.encoder_.code_features_)  # numeric_codes=True: the integers coded too
        model = assert_graph_predicts(clf, new)
        assert_documented_inputs(model, clf, new)


@pytest.mark.parametrize("embedding", EMBEDDINGS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_the_regressors_graph_predicts_as_predict(scaling, embedding):
    # one target of about 100 in float32, two targets in float64
    for seed, dtype in enumerate(["float32", "float64"]):
        train, new = frames(seed)
        s = signal(train)
        y = s * 100 + 5 if seed == 0 else np.column_stack([s, -3 * s + 1])
        reg = TabularRegressor(
            **TINY, numeric_scaling=scaling, numeric_embedding=embedding, dtype=dtype
        ).fit(train, y)
        assert_graph_predicts(reg, new)


# -- column plans: listed columns, rare categories, codes, numbers only ----------------------
PLANS = {
    "listed": (dict(categorical_features=CATEGORICAL), COLUMNS),
    "listed_rare": (dict(categorical_features=CATEGORICAL, min_frequency=15), COLUMNS),
    "rare_float64": (dict(min_frequency=60, dtype="float64"), COLUMNS),
    "mask_no_codes": (
        dict(categorical_features=[c in CATEGORICAL for c in COLUMNS], numeric_codes=False),
        COLUMNS,
    ),
    "indices_robust": (
        dict(
            categorical_features=[COLUMNS.index(c) for c in CATEGORICAL],
            numeric_scaling="robust",
        ),
        COLUMNS,
    ),
    "numbers_only": (dict(categorical_features=None), NUMERIC),
    "numbers_only_standard_float64": (
        dict(categorical_features=None, numeric_scaling="standard", dtype="float64"),
        NUMERIC,
    ),
}


@pytest.mark.parametrize("plan", list(PLANS))
def test_column_plans_predict_alike(plan):
    params, columns = PLANS[plan]
    for seed in range(2):
        train, new = frames(seed, columns)
        s = signal(train)
        clf = TabularClassifier(**TINY, **params).fit(train, LABELS[seed](s))
        encoder = clf.encoder_
        if "min_frequency" in params:  # rare categories left out: coded as unknown
            seen = [train.iloc[:, j].nunique() for j in encoder.categorical_features_]
            assert (encoder.cardinalities_[: len(seen)] < seen).any()
        integers = [columns.index(c) for c in ("int", "int_nan", "Int64")]  # look like codes
        coded = np.isin(integers, encoder.numeric_features_).any()
        assert bool(len(encoder.code_features_)) == (coded and params.get("numeric_codes", True))
        model = assert_graph_predicts(clf, new)
        assert_documented_inputs(model, clf, new)
        reg = TabularRegressor(**TINY, **params).fit(train, s)
        assert_graph_predicts(reg, new)


def test_a_float32_model_exported_in_float64_and_each_opset():
    train, new = frames(3)
    clf = TabularClassifier(**TINY).fit(train, LABELS[1](signal(train)))
    assert_graph_predicts(clf, new, dtype="float64")
    for opset in (17, 18, 21):
        assert_graph_predicts(clf, new, target_opset=opset)
    reg = TabularRegressor(**TINY, numeric_embedding="periodic").fit(train, signal(train))
    assert_graph_predicts(reg, new, dtype="float64")


def test_multilabel_targets():
    train, new = frames(4)
    s = signal(train)
    clf = TabularClassifier(**TINY).fit(train, np.column_stack([s > 0, s > 1]).astype(int))
    assert_graph_predicts(clf, new)


# -- rows alone, rows of missing values only ------------------------------------------------
def missing_row(frame):
    """A row of ``frame`` with every value missing, each column in its own dtype
    (NumPy's integers as floats, its booleans as objects)."""
    row = frame.iloc[[0]].copy()
    for name in row:
        dtype = frame[name].dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biu":
            dtype = object if dtype.kind == "b" else np.float64
        row[name] = pd.Series([None], index=row.index, dtype=dtype)
    return row


@pytest.mark.parametrize("scaling", ["quantile", None])
def test_single_rows_and_rows_of_missing_values_only(scaling):
    for seed, dtype in enumerate(["float32", "float64"]):
        train, new = frames(seed)
        clf = TabularClassifier(**TINY, numeric_scaling=scaling, dtype=dtype)
        clf.fit(train, LABELS[seed](signal(train)))
        reg = TabularRegressor(**TINY, numeric_scaling=scaling, dtype=dtype)
        reg.fit(train, signal(train))
        empty = missing_row(new)
        untyped = pd.DataFrame({name: [None, np.nan] for name in new}, dtype=object)
        for estimator in (clf, reg):
            model = to_onnx(estimator)
            for i in range(0, new.shape[0], 8):
                assert_graph_predicts(estimator, new.iloc[[i]], model)
            for frame in (empty, untyped, pd.concat([new, empty])):
                assert_graph_predicts(estimator, frame, model)


# -- numbers: extremes, beyond the training range ------------------------------------------
EXTREMES = [1e300, -1e300, 1e-300, -1e-300, 5e-324, -5e-324, -0.0, 0.0, 3.4e38, -1e38]
EXTREMES += [1e20, -1e6, np.nan, np.finfo(np.float64).max, np.finfo(np.float64).min]


# predict's warnings of rows whose outputs are not finite (a value that grows beyond the
# dtype in the network): NaN or infinity there, in the graph too
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:The outputs of .* not finite:RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scaling", SCALINGS)
def test_extreme_numbers(scaling, dtype):
    rng = np.random.RandomState(0)
    n = 200
    train = pd.DataFrame(
        {
            "x": rng.normal(size=n) * 1e3,
            "y": pd.array(np.where(rng.rand(n) < 0.1, None, rng.lognormal(size=n)), "Float64"),
            "z": np.where(rng.rand(n) < 0.5, 0.0, rng.exponential(size=n)),  # ties at 0
            "c": rng.choice(["a", "b", None], n),
        }
    )
    k = len(EXTREMES)
    new = pd.DataFrame(
        {
            "x": EXTREMES,
            "y": pd.array(EXTREMES[::-1], dtype="Float64"),
            "z": np.roll(EXTREMES, 5),
            "c": ["a", "zz", None] * (k // 3) + ["b"] * (k % 3),
        }
    )
    for embedding in EMBEDDINGS:
        clf = TabularClassifier(
            **TINY, numeric_scaling=scaling, numeric_embedding=embedding, dtype=dtype
        ).fit(train, (train["x"] > 0).to_numpy().astype(int))
        assert_graph_predicts(clf, new)
    reg = TabularRegressor(**TINY, numeric_scaling=scaling, dtype=dtype)
    assert_graph_predicts(reg.fit(train, train["x"].to_numpy() / 100), new)


# -- integer and boolean categories ------------------------------------------------------
@pytest.mark.parametrize("features", ["from_dtype", "listed"])
def test_integer_and_boolean_category_columns_are_float64_inputs(features):
    rng = np.random.RandomState(0)
    n = 300
    ints = rng.randint(-3, 5, n)
    train = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "ints": ints,
            "floats": np.where(rng.rand(n) < 0.1, np.nan, ints / 2),  # -0.0 among them
            "Int64": pd.array(np.where(rng.rand(n) < 0.1, None, ints), dtype="Int64"),
            "int_category": pd.Categorical(ints % 3 * 10),
            "flag": rng.rand(n) < 0.3,
            "boolean": pd.array(np.where(rng.rand(n) < 0.1, None, rng.rand(n) < 0.5), "boolean"),
        }
    )
    listed = ["ints", "floats", "Int64", "int_category", "flag", "boolean"]
    categorical = listed if features == "listed" else "from_dtype"
    new = pd.DataFrame(
        {
            "x": np.linspace(-3, 3, 10),
            "ints": [9, -1, 0, 4, -3, 100, 2, 1, 0, -4],  # unseen: 9, 100, -4
            "floats": [2.5, -0.0, 0.0, np.nan, 0.25, -1.5, 1e300, 2.0, 0.5, -2.0],
            "Int64": pd.array([None, 7, 0, -3, 4, 1, 2, -9, 3, None], dtype="Int64"),
            "int_category": pd.Categorical([10, 20, 0, None, 5, 0, 20, 10, 30, 0]),
            "flag": [True, False] * 5,
            "boolean": pd.array([None, True, False, True, None, False] + [True] * 4, "boolean"),
        }
    )
    y = (train["x"] + (train["ints"] > 1) > 0).to_numpy().astype(int)
    clf = TabularClassifier(**TINY, categorical_features=categorical).fit(train, y)
    expected = ["x", "ints", "floats", "Int64"] if features == "from_dtype" else ["x"]
    assert train.columns[clf.encoder_.numeric_features_].tolist() == expected
    model = assert_graph_predicts(clf, new)
    assert [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input] == [
        (name, DOUBLE) for name in train.columns
    ]
    reg = TabularRegressor(**TINY, categorical_features=categorical, dtype="float64")
    assert_graph_predicts(reg.fit(train, train["x"].to_numpy()), new)


# -- what the export refuses -------------------------------------------------------------
@pytest.mark.parametrize(
    "values, found",
    [
        ([b"a", b"b"], "type bytes"),
        ([Decimal("1.5"), Decimal("2")], "type Decimal"),
        (["a", 1], r"several types \(int, str\)"),
        ([True, "yes"], r"several types \(bool, str\)"),
    ],
    ids=["bytes", "decimal", "strings-and-ints", "booleans-and-strings"],
)
def test_categories_neither_strings_nor_numbers_are_refused_by_name(values, found):
    rng = np.random.RandomState(0)
    column = np.empty(200, dtype=object)
    column[:] = values * 100
    train = pd.DataFrame({"x": rng.normal(size=200), "odd": column})
    clf = TabularClassifier(**TINY, categorical_features=["odd"]).fit(train, train["x"] > 0)
    with pytest.raises(ValueError, match=f"the column 'odd' holds categories of {found}"):
        to_onnx(clf)


def test_random_frames_mixed_column_is_refused_by_name():
    rng = np.random.RandomState(0)
    train = random_frame(rng, 200)
    reg = TabularRegressor(**TINY).fit(train, signal(train))
    with pytest.raises(ValueError, match="the column 'mixed' holds categories of several"):
        to_onnx(reg)
    assert_graph_predicts(reg.fit(train[COLUMNS], signal(train)), frames(0)[1])


# -- defects found --------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["rare_integers", "Int64_all_missing"])
def test_a_numeric_category_column_left_without_categories_is_a_float64_input(case):
    rng = np.random.RandomState(0)
    x = rng.normal(size=200)
    if case == "rare_integers":  # 50 values, none seen 20 times
        c, min_frequency = rng.randint(0, 50, 200), 20
    else:
        c, min_frequency = pd.array([None] * 200, dtype="Int64"), None
    train = pd.DataFrame({"x": x, "c": c})
    clf = TabularClassifier(**TINY, categorical_features=["c"], min_frequency=min_frequency)
    clf.fit(train, (x > 0).astype(int))
    categories = clf.encoder_.categories_[0]
    assert len(categories) == 0 and categories.dtype.kind in "iuf"  # none, of numbers
    model = to_onnx(clf)
    assert [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input] == [
        ("x", DOUBLE),
        ("c", DOUBLE),
    ]
    session = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    columns = {name: train[[name]].to_numpy(dtype=np.float64, na_value=np.nan) for name in "xc"}
    _, proba = session.run(None, columns)
    assert_allclose(proba, clf.predict_proba(train), rtol=1e-5, atol=1e-6)


def test_integer_categories_beyond_2_53_are_refused_by_name():
    # float64 inputs would merge 2**53 and 2**53 + 1, which predict keeps apart
    rng = np.random.RandomState(0)
    ids = np.array([2**53, 2**53 + 1, 5, 7] * 50, dtype=np.int64)
    train = pd.DataFrame({"x": rng.normal(size=200), "id": ids})
    clf = TabularClassifier(**TINY, categorical_features=["id"]).fit(train, ids % 2)
    assert len(clf.encoder_.categories_[0]) == 4
    with pytest.raises(ValueError, match=r"the column 'id'.*would read as one"):
        to_onnx(clf)

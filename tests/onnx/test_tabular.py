"""A table's column plan as ONNX nodes (sknet/onnx/_tabular.py); the tabular estimators."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import ndtri

from sknet import TabularClassifier, TabularRegressor
from sknet.onnx import GraphBuilder, to_onnx
from sknet.onnx._export import make_model
from sknet.onnx._tabular import interp, table_inputs
from sknet.onnx._tabular import ndtri as onnx_ndtri
from sknet.tabular import TabularEncoder
from tests.onnx.helpers import FILTERS, rt

onnx = pytest.importorskip("onnx")
pytestmark = pytest.mark.filterwarnings(*FILTERS)


def _session(builder, inputs, output, dtype=np.float64):
    info = onnx.helper.make_tensor_value_info(
        "out", onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [None, None]
    )
    builder.nodes.append(onnx.helper.make_node("Identity", [output], ["out"]))
    model = make_model(builder, inputs, [info], "test")
    return rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _column(name="x"):
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.DOUBLE, ["N", 1])


def test_the_normal_quantile_function_is_scipys_to_float64_rounding():
    p = np.concatenate(
        [
            [1e-7, 1e-6, 0.01, 0.075, 0.0750001, 0.5, 0.925, 0.9249999, 1 - 1e-7],
            np.exp(-25.0 - np.linspace(0, 1, 5)) + 1e-7,  # sqrt(-log(p)) about 5: both sides
            np.random.RandomState(0).uniform(1e-7, 1 - 1e-7, 500),
        ]
    ).reshape(-1, 1)
    builder = GraphBuilder(np.float64, 17)
    (got,) = _session(builder, [_column()], onnx_ndtri(builder, "x")).run(None, {"x": p})
    assert_allclose(got, ndtri(p), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize(
    "xp",
    [
        np.array([0.0, 1.0, 2.0, 5.0]),
        np.array([0.0, 1.0, 1.0, 1.0, 3.0, 3.0]),  # ties
        np.array([-2.0, -2.0, 4.0]),
    ],
)
def test_interp_is_numpys(xp):
    fp = np.linspace(0, 1, xp.size)
    x = np.concatenate([xp, xp + 1e-9, xp - 1e-9, [-10.0, 10.0], np.linspace(-3, 6, 91)])
    x = x.reshape(-1, 1)
    builder = GraphBuilder(np.float64, 17)
    (got,) = _session(builder, [_column()], interp(builder, "x", xp, fp)).run(None, {"x": x})
    assert_allclose(got.ravel(), np.interp(x.ravel(), xp, fp), rtol=0, atol=1e-15)


def _frame(n=200, seed=0):
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n).round(),  # ties
            "income": np.where(rng.rand(n) < 0.1, np.nan, rng.lognormal(10, 1, n)),
            "constant": np.ones(n),
            "color": rng.choice(["red", "green", "blue", None], n),
            "size": rng.choice([1, 2, 3], n).astype(float),
            "member": rng.rand(n) < 0.5,
            "month": rng.randint(1, 13, n).astype(float),  # a code too (numeric_codes)
        }
    )
    frame["size"] = frame["size"].where(rng.rand(n) > 0.1)
    frame["month"] = frame["month"].where(rng.rand(n) > 0.05)
    return frame


def _feed(frame):
    """The graph's inputs: a column of strings comes with its missing values' own input."""
    pd = pytest.importorskip("pandas")
    feed = {}
    for j, name in enumerate(frame.columns):
        name = name or f"x{j}"  # a column named '' is the input 'x<j>'
        column = frame.iloc[:, [j]].to_numpy()
        if column.dtype.kind == "O":
            missing = pd.isna(column)
            feed[name] = np.where(missing, "", column).astype(str)  # any string where missing
            feed[f"missingindicator_{name}"] = missing
        else:
            feed[name] = column.astype(np.float64)
    return feed


@pytest.mark.parametrize("scaling", ["quantile", "robust", "standard", None])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_column_plan_of_a_data_frame(scaling, dtype):
    frame = _frame()
    encoder = TabularEncoder(
        numeric_scaling=scaling, categorical_features=["color", "size", "member"], dtype=dtype
    ).fit(frame.iloc[:150])
    builder = GraphBuilder(np.dtype(dtype), 17)
    inputs, encoded = table_inputs(builder, encoder)
    assert [i.name for i in inputs] == [*frame.columns, "missingindicator_color"]
    (got,) = _session(builder, inputs, encoded, dtype).run(None, _feed(frame))
    expected = encoder.transform(frame)
    codes = encoder.output_groups_["categorical"]
    assert_array_equal(got[:, codes], expected[:, codes])
    assert_allclose(got, expected, rtol=0, atol=1e-6 if dtype == "float32" else 1e-12)


def test_unknown_categories_and_an_array_of_numbers():
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.normal(size=100), rng.randint(0, 4, 100), rng.normal(size=100)])
    X[::7, 0] = np.nan
    encoder = TabularEncoder(categorical_features=[1], n_bins=8).fit(X)
    builder = GraphBuilder(np.float32, 17)
    inputs, encoded = table_inputs(builder, encoder)
    assert [i.name for i in inputs] == ["X"]
    test = X.copy()
    test[:5, 1] = [7, -1, np.nan, 2.5, 3]  # unknown, unknown, missing, unknown, known
    (got,) = _session(builder, inputs, encoded, np.float32).run(None, {"X": test})
    assert_allclose(got, encoder.transform(test), rtol=0, atol=1e-6)
    assert_array_equal(got[:5, -1], [5, 5, 0, 5, 4])


def test_a_column_of_mixed_categories_is_refused():
    X = np.array([["a", 1.0], [2, 2.0], ["a", 3.0]], dtype=object)
    encoder = TabularEncoder(categorical_features=[0]).fit(X)
    with pytest.raises(ValueError, match="categories of several types"):
        table_inputs(GraphBuilder(np.float32, 17), encoder)


def test_a_column_named_as_an_output_is_refused():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"label": [1.0, 2.0, 3.0], "x": ["a", "b", "a"]})
    encoder = TabularEncoder().fit(frame)
    builder = GraphBuilder(np.float32, 17)
    builder.reserve("label")
    with pytest.raises(ValueError, match="the column 'label' has the name of one of the model"):
        table_inputs(builder, encoder)


def test_column_names_that_are_not_identifiers():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a b": [1.0, 2.0, np.nan, 4.0], "a_b": ["u", "v", "u", "w"]})
    encoder = TabularEncoder(numeric_scaling="standard").fit(frame)
    builder = GraphBuilder(np.float32, 17)
    inputs, encoded = table_inputs(builder, encoder)
    assert [i.name for i in inputs] == ["a b", "a_b", "missingindicator_a_b"]
    (got,) = _session(builder, inputs, encoded, np.float32).run(None, _feed(frame))
    assert_allclose(got, encoder.transform(frame), rtol=0, atol=1e-6)


@pytest.mark.parametrize("seen", [False, True], ids=["unseen", "a-category"])
def test_the_empty_string_is_coded_as_transform_codes_it(seen):
    pd = pytest.importorskip("pandas")
    train = pd.DataFrame({"s": ["a", "b", "" if seen else "a", None] * 5, "x": np.arange(20.0)})
    encoder = TabularEncoder().fit(train)
    assert ("" in encoder.categories_[0].tolist()) == seen
    test = pd.DataFrame({"s": ["", "a", None, "z", "", "b"], "x": np.arange(6.0)})
    builder = GraphBuilder(np.float64, 17)
    inputs, encoded = table_inputs(builder, encoder)
    (got,) = _session(builder, inputs, encoded).run(None, _feed(test))
    expected = encoder.transform(test)
    assert_array_equal(got[:, -1], expected[:, -1])  # '' unknown or its own code, None 0
    assert_array_equal(expected[:, -1], [1, 2, 0, 4, 1, 3] if seen else [3, 1, 0, 3, 3, 2])


def test_the_missing_input_of_a_string_column_is_its_only_missing_value():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"s": ["a", "", None, "None", "nan"] * 4})
    encoder = TabularEncoder().fit(frame)
    builder = GraphBuilder(np.float64, 17)
    inputs, encoded = table_inputs(builder, encoder)
    assert [(i.name, i.type.tensor_type.elem_type) for i in inputs] == [
        ("s", onnx.TensorProto.STRING),
        ("missingindicator_s", onnx.TensorProto.BOOL),
    ]
    session = _session(builder, inputs, encoded)
    feed = _feed(frame)
    (got,) = session.run(None, feed)
    assert_array_equal(got, encoder.transform(frame))
    feed["missingindicator_s"][:] = True  # whatever the strings say
    (got,) = session.run(None, feed)
    assert_array_equal(got, 0)


def test_a_column_named_the_empty_string_is_the_input_x_and_its_position():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, np.nan], "": ["u", "", None, "u"]})
    encoder = TabularEncoder(numeric_scaling="standard", dtype="float64").fit(frame)
    builder = GraphBuilder(np.float64, 17)
    inputs, encoded = table_inputs(builder, encoder)
    assert [i.name for i in inputs] == ["a", "x1", "missingindicator_x1"]
    (got,) = _session(builder, inputs, encoded).run(None, _feed(frame))
    assert_allclose(got, encoder.transform(frame), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "columns, message",
    [
        (["", "x0"], r"the column '' and the column 'x0' would both be the input 'x0'"),
        (
            ["s", "missingindicator_s"],
            r"the column 'missingindicator_s' and the missing values of the column 's' would "
            r"both be the input 'missingindicator_s'",
        ),
    ],
)
def test_inputs_named_alike_are_refused(columns, message):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({columns[0]: ["a", "b"], columns[1]: ["c", "d"]})
    encoder = TabularEncoder().fit(frame)
    with pytest.raises(ValueError, match=message):
        table_inputs(GraphBuilder(np.float32, 17), encoder)


def test_the_export_reads_the_public_plan_of_the_encoder():
    frame = _frame()
    for scaling in ("quantile", "robust"):
        encoder = TabularEncoder(numeric_scaling=scaling, dtype="float64").fit(frame)
        expected = encoder.transform(frame)
        for private in ("_scaler", "_indicator_positions"):  # what transform uses
            encoder.__dict__.pop(private, None)
        builder = GraphBuilder(np.float64, 17)
        inputs, encoded = table_inputs(builder, encoder)
        (got,) = _session(builder, inputs, encoded).run(None, _feed(frame))
        assert_allclose(got, expected, rtol=0, atol=1e-12)


# -- the tabular estimators: the column plan, then the network -------------------------


def _run(model, feed):
    session = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


@pytest.mark.parametrize(
    "params",
    [
        {},  # piecewise-linear embeddings, an ensemble of 8
        {"numeric_embedding": "periodic", "n_members": 1, "numeric_scaling": "robust"},
        {"numeric_embedding": None, "n_members": 3, "numeric_scaling": "standard"},
    ],
)
def test_tabular_classifier_with_its_column_plan(params):
    frame = _frame(300)
    y = np.where(frame["age"] > 40, "old", "young")
    clf = TabularClassifier(
        hidden_layer_sizes=(16,), max_iter=3, random_state=0, device="cpu", **params
    ).fit(frame, y)
    assert clf.encoder_.code_features_.tolist() == [6]  # the month
    unseen = frame.assign(month=np.where(np.arange(len(frame)) % 7, frame["month"], 13.0))
    labels, proba = _run(to_onnx(clf), _feed(unseen))  # 13: an unknown code
    assert_allclose(proba, clf.predict_proba(unseen), atol=1e-5, rtol=0)
    labels, proba = _run(to_onnx(clf), _feed(frame))
    assert_allclose(proba, clf.predict_proba(frame), atol=1e-5, rtol=0)
    assert_array_equal(labels, clf.predict(frame))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tabular_regressor_maps_its_targets_back(dtype):
    frame = _frame(300)
    y = frame["age"].to_numpy() * 3 + 100
    reg = TabularRegressor(
        hidden_layer_sizes=(16,), max_iter=3, random_state=0, device="cpu", dtype=dtype
    ).fit(frame, y)
    (pred,) = _run(to_onnx(reg), _feed(frame))
    atol = 1e-5 if dtype == "float32" else 1e-9  # targets of about 200: rtol 1e-5
    assert_allclose(pred.ravel(), reg.predict(frame), atol=atol, rtol=1e-5)


def test_an_array_of_numbers():
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.normal(size=200), rng.randint(0, 4, 200), rng.normal(size=200)])
    X[::9, 2] = np.nan
    y = (X[:, 0] > 0).astype(int)
    clf = TabularClassifier(
        categorical_features=[1],
        hidden_layer_sizes=(8,),
        max_iter=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    labels, proba = _run(to_onnx(clf), {"X": X})
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5, rtol=0)
    assert_array_equal(labels, clf.predict(X))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_empty_strings_missing_values_and_a_column_named_empty(dtype):
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    n = 300
    frame = pd.DataFrame(
        {
            "": rng.choice(["", "a", "b", None], n),  # '' mixed with missing values
            "x": rng.normal(size=n),
            "other": rng.choice(["", "u", "v"], n),
        }
    )
    test = frame.copy()
    test.loc[:20, "other"] = None  # none in training: missing at predict time only
    test.loc[20:40, ""] = "unseen"
    y = (frame["x"] > 0).to_numpy().astype(int)
    clf = TabularClassifier(
        hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu", dtype=dtype
    ).fit(frame, y)
    model = to_onnx(clf)
    assert [i.name for i in model.graph.input] == [
        "x0",
        "x",
        "other",
        "missingindicator_x0",
        "missingindicator_other",
    ]
    labels, proba = _run(model, _feed(test))
    atol = 1e-5 if dtype == "float32" else 1e-10
    assert_allclose(proba, clf.predict_proba(test), atol=atol, rtol=0)
    assert_array_equal(labels, clf.predict(test))


def test_a_feature_extractor_over_a_tabular_classifier():
    from sknet import FeatureExtractor

    frame = _frame(300)
    y = np.where(frame["age"] > 40, "old", "young")
    extractor = FeatureExtractor(
        TabularClassifier(hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu")
    ).fit(frame, y)
    (features,) = _run(to_onnx(extractor), _feed(frame))
    assert_allclose(features, extractor.transform(frame), atol=1e-5, rtol=0)

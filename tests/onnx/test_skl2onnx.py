"""skl2onnx's converters of sknet's estimators (sknet/onnx/_skl2onnx.py): pipelines by skl2onnx."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tests.onnx.helpers import FILTERS, run

pytest.importorskip("skl2onnx", reason="needs skl2onnx (the onnx extra)")

from skl2onnx import to_onnx as skl2onnx_to_onnx  # noqa: E402

from sknet import (  # noqa: E402
    ConvNetClassifier,
    FeatureExtractor,
    MLPClassifier,
    MLPRegressor,
    RNNRegressor,
)
from sknet.onnx import register_onnx_converters  # noqa: E402
from tests.onnx.test_outputs import Tempered, UnnamedSigmoid  # noqa: E402

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.fixture(autouse=True)
def registered():
    register_onnx_converters()


@pytest.mark.parametrize(
    "network",
    [
        MLPClassifier(activation="gelu", max_iter=5, random_state=0, device="cpu"),
        ConvNetClassifier(conv_filters=(4,), dense_units=(8,), max_iter=2, device="cpu"),
    ],
    ids=["mlp-gelu", "convnet"],
)
def test_a_classifier_in_a_pipeline(network, digits):
    X, y = digits
    pipe = make_pipeline(StandardScaler(), network).fit(X, y)
    model = skl2onnx_to_onnx(
        pipe, X[:1].astype(np.float32), options={id(pipe[-1]): {"zipmap": False}}
    )
    labels, proba = run(model, X)
    assert_array_equal(labels, pipe.predict(X))
    assert_allclose(proba, pipe.predict_proba(X), atol=1e-5)


def test_zipmap_by_default(digits):
    X, y = digits
    pipe = make_pipeline(StandardScaler(), MLPClassifier(max_iter=3, device="cpu")).fit(X, y)
    labels, proba = run(skl2onnx_to_onnx(pipe, X[:1].astype(np.float32)), X[:5])
    assert_array_equal(labels, pipe.predict(X[:5]))
    assert isinstance(proba, list) and set(proba[0]) == set(range(10))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_regressors_in_a_pipeline(dtype, digits):
    X, y = digits
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=5, random_state=0, device="cpu")
    rnn = RNNRegressor(cell="gru", units=(4,), input_shape=(8, 8), max_iter=2, device="cpu")
    for network in (reg, rnn):
        network.set_params(dtype="float64" if dtype == np.float64 else "float32")
        pipe = make_pipeline(StandardScaler(), network).fit(X, y / 9.0)
        (pred,) = run(skl2onnx_to_onnx(pipe, X[:1].astype(dtype)), X, dtype)
        assert pred.dtype == dtype
        assert_allclose(pred.ravel(), pipe.predict(X), rtol=1e-5, atol=1e-5)


def test_a_feature_extractor_before_a_scikit_learn_model(digits):
    X, y = digits
    net = MLPClassifier(hidden_layer_sizes=(16,), max_iter=5, random_state=0, device="cpu")
    pipe = make_pipeline(FeatureExtractor(net), LogisticRegression(max_iter=200)).fit(X, y)
    model = skl2onnx_to_onnx(
        pipe, X[:1].astype(np.float32), options={id(pipe[-1]): {"zipmap": False}}
    )
    labels, proba = run(model, X)
    assert_allclose(proba, pipe.predict_proba(X), atol=1e-4)
    assert (labels == pipe.predict(X)).mean() > 0.99  # float32 features, float64 model


def test_an_opset_below_17_is_refused(digits):
    X, y = digits
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=2, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="write opset 17 or later; .*target_opset=15"):
        skl2onnx_to_onnx(reg, X[:1].astype(np.float32), target_opset=15)


@pytest.mark.parametrize(
    "loss, message",
    [
        (UnnamedSigmoid(), r"names its output activation 'identity', but its output computes"),
        (Tempered(), r"output computes another function"),
    ],
)
def test_an_output_the_export_would_not_compute_is_refused_alike(loss, message, digits):
    X, y = digits
    if isinstance(loss, Tempered):
        model = MLPClassifier(loss=loss, max_iter=2, device="cpu").fit(X, y)
    else:
        model = MLPRegressor(loss=loss, max_iter=2, device="cpu").fit(X, y / 9.0)
    with pytest.raises(ValueError, match=message):
        skl2onnx_to_onnx(model, X[:1].astype(np.float32))


@pytest.mark.parametrize("binary", [False, True])
def test_class_indices_with_nocl(binary, digits):
    X, y = digits
    target = np.where(y > 4, "big", "small") if binary else y + 10
    clf = MLPClassifier(max_iter=3, random_state=0, device="cpu").fit(X, target)
    options = {id(clf): {"zipmap": False, "nocl": True}}
    labels, _ = run(skl2onnx_to_onnx(clf, X[:1].astype(np.float32), options=options), X)
    assert_array_equal(clf.classes_[labels], clf.predict(X))


# -- tabular estimators: skl2onnx's inputs are the table's columns ---------------------


def _tabular(cls=None, **params):
    from sknet import TabularClassifier

    cls = cls or TabularClassifier
    return cls(hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu", **params)


def _column_types(feed):
    from skl2onnx.common.data_types import guess_data_type

    return [(name, guess_data_type(value)[0][1]) for name, value in feed.items()]


def _run_feed(model, feed):
    from tests.onnx.helpers import rt

    session = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def test_a_feature_extractor_over_a_tabular_estimator_applies_its_plan():
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(
        {"a": rng.normal(size=200), "b": rng.lognormal(3, 1, 200), "c": rng.normal(size=200)}
    )
    y = (frame["a"] + frame["b"] / 20 > 1).to_numpy().astype(int)
    pipe = make_pipeline(FeatureExtractor(_tabular()), LogisticRegression()).fit(frame, y)
    model = skl2onnx_to_onnx(
        pipe,
        frame.to_numpy()[:1].astype(np.float64),  # the columns as one tensor, in order
        options={id(pipe[-1]): {"zipmap": False}},
    )
    labels, proba = run(model, frame.to_numpy(), np.float64)
    assert_allclose(proba, pipe.predict_proba(frame), atol=1e-5, rtol=0)
    assert_array_equal(labels, pipe.predict(frame))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_table_by_its_columns_through_a_feature_extractor(dtype):
    from tests.onnx.test_tabular import _feed, _frame

    frame = _frame(300)
    feed = _feed(frame)
    feed["member"] = frame[["member"]].to_numpy()  # booleans, as skl2onnx types them
    feed["constant"] = frame[["constant"]].to_numpy().astype(np.int64)  # integers
    y = np.where(frame["age"] > 40, "old", "young")
    pipe = make_pipeline(FeatureExtractor(_tabular(dtype=dtype)), LogisticRegression())
    pipe.fit(frame, y)
    model = skl2onnx_to_onnx(
        pipe, initial_types=_column_types(feed), options={id(pipe[-1]): {"zipmap": False}}
    )
    labels, proba = _run_feed(model, feed)
    atol = 1e-5 if dtype == "float32" else 1e-10
    assert_allclose(proba, pipe.predict_proba(frame), atol=atol, rtol=0)
    assert_array_equal(labels, pipe.predict(frame))


def test_tabular_estimators_in_a_pipeline():
    from sknet import TabularRegressor
    from tests.onnx.test_tabular import _feed, _frame

    frame = _frame(300)
    feed = _feed(frame)
    types = _column_types(feed)
    y = np.where(frame["age"] > 40, "old", "young")
    clf = _tabular(dtype="float64").fit(frame, y)
    labels, proba = _run_feed(
        skl2onnx_to_onnx(clf, initial_types=types, options={id(clf): {"zipmap": False}}), feed
    )
    assert_allclose(proba, clf.predict_proba(frame), atol=1e-10, rtol=0)
    assert_array_equal(labels, clf.predict(frame))
    reg = _tabular(TabularRegressor).fit(frame, frame["age"].to_numpy())
    (pred,) = _run_feed(skl2onnx_to_onnx(reg, initial_types=types), feed)
    assert_allclose(pred.ravel(), reg.predict(frame), atol=1e-4, rtol=1e-5)


def test_a_table_skl2onnx_does_not_give_by_its_columns_is_refused():
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        FloatTensorType,
        StringTensorType,
    )

    from tests.onnx.test_tabular import _frame

    frame = _frame()
    y = np.where(frame["age"] > 40, "old", "young")
    pipe = make_pipeline(FeatureExtractor(_tabular()), LogisticRegression()).fit(frame, y)
    with pytest.raises(ValueError, match=r"one input per column.*'age', 'income'.*to_onnx"):
        skl2onnx_to_onnx(pipe, initial_types=[("X", FloatTensorType([None, 6]))])
    types = [(name, FloatTensorType([None, 1])) for name in frame.columns]
    with pytest.raises(ValueError, match=r"then the booleans 'missingindicator_color'"):
        skl2onnx_to_onnx(pipe, initial_types=types)  # skl2onnx's guess from the frame
    types += [("missingindicator_color", BooleanTensorType([None, 1]))]
    with pytest.raises(ValueError, match=r"column 'color' .* strings, got .*FloatTensorType"):
        skl2onnx_to_onnx(pipe, initial_types=types)
    types = [(name, StringTensorType([None, 1])) for name in frame.columns] + types[-1:]
    with pytest.raises(ValueError, match=r"column 'age' .* numbers, got .*StringTensorType"):
        skl2onnx_to_onnx(pipe, initial_types=types)

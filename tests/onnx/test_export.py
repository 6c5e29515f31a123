"""to_onnx (sknet/onnx/_export.py): the estimators, dtypes and opsets it exports."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

import sknet.onnx
from sknet import MLPClassifier, MLPRegressor
from sknet.backend import ACTIVATIONS
from sknet.onnx import DEFAULT_OPSET, to_onnx
from tests.onnx.helpers import FILTERS, assert_round_trip, run

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("binary", [False, True])
def test_classifier_matches_onnxruntime(activation, binary, digits):
    X, y = digits
    target = np.where(y > 4, "big", "small") if binary else y
    clf = MLPClassifier(
        hidden_layer_sizes=(32, 16),
        activation=activation,
        dropout=0.1,
        max_iter=10,
        random_state=0,
        device="cpu",
    ).fit(X, target)
    model = assert_round_trip(clf, X)
    assert [o.name for o in model.graph.output] == ["label", "probabilities"]
    assert [i.name for i in model.graph.input] == ["X"]


@pytest.mark.parametrize("outputs", [1, 2])
@pytest.mark.parametrize("loss", ["squared_error", "poisson"])
def test_regressor_matches_onnxruntime(outputs, loss, digits):
    X, y = digits
    Y = y / 9.0 if outputs == 1 else np.column_stack([y / 9.0, X[:, 10]])
    reg = MLPRegressor(loss=loss, max_iter=10, random_state=0, device="cpu").fit(X, Y)
    (pred,) = run(to_onnx(reg), X)
    assert pred.shape == (len(X), outputs)  # not (len(X) * outputs, 1)
    assert_allclose(pred.reshape(reg.predict(X).shape), reg.predict(X), rtol=1e-5, atol=1e-5)


def test_a_float64_model_computes_in_float64(digits):
    X, y = digits
    clf = MLPClassifier(
        hidden_layer_sizes=(16,), max_iter=5, random_state=0, dtype="float64", device="cpu"
    ).fit(X, y)
    model = assert_round_trip(clf, X)
    assert model.graph.input[0].type.tensor_type.elem_type == 11  # DOUBLE
    # or in float32, when asked
    labels, proba = run(to_onnx(clf, dtype="float32"), X)
    assert proba.dtype == np.float32
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_every_opset_from_17(opset, digits):
    X, y = digits
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=5, random_state=0, device="cpu")
    reg.fit(X, y / 9.0)
    model = assert_round_trip(reg, X, target_opset=opset)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]


def test_the_default_opset(digits):
    X, y = digits
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=2, device="cpu").fit(X, y)
    assert to_onnx(reg).opset_import[0].version == DEFAULT_OPSET == 17


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_opset": 12}, r"target_opset must be an int from 17 to \d+.*got 12"),
        ({"target_opset": "17"}, "target_opset must be an int"),
        ({"dtype": "float16"}, r"dtype must be None, 'float32' or 'float64', got 'float16'"),
        ({"flat_input": "yes"}, r"flat_input must be True or False, got 'yes'"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, message, digits):
    X, y = digits
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=2, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match=message):
        to_onnx(reg, **kwargs)


def test_only_fitted_sknet_estimators(digits):
    X, y = digits
    with pytest.raises(TypeError, match="converts fitted sknet network estimators.*got Logistic"):
        to_onnx(LogisticRegression().fit(X, y))
    with pytest.raises(NotFittedError):
        to_onnx(MLPClassifier())


def test_the_module_exposes_only_its_public_names():
    # (pytest's assertion rewriting adds names that are not identifiers)
    public = {
        name
        for name in dir(sknet.onnx)
        if name.isidentifier() and name[0] != "_" and not name.startswith("@")
    }
    assert public == set(sknet.onnx.__all__)
    assert set(sknet.onnx.__all__) == {
        "DEFAULT_OPSET",
        "GraphBuilder",
        "SUPPORTED_ACTIVATIONS",
        "SUPPORTED_OUTPUTS",
        "register_converter",
        "register_onnx_converters",
        "to_onnx",
    }


@pytest.mark.parametrize("layer", [0, -1])
def test_a_feature_extractor_gives_its_features(layer, digits):
    from sknet import ConvNetClassifier, FeatureExtractor

    X, y = digits
    images = X[:300].reshape(-1, 1, 8, 8)
    net = ConvNetClassifier(conv_filters=(4,), dense_units=(8,), max_iter=2, device="cpu")
    features = FeatureExtractor(net, layer=layer).fit(images, y[:300])
    model = to_onnx(features)
    assert [o.name for o in model.graph.output] == ["variable"]
    (got,) = run(model, images)
    assert_allclose(got, features.transform(images), atol=1e-5, rtol=1e-5)

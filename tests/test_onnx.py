"""ONNX export of the MLP estimators (needs the onnx extra: skl2onnx, onnxruntime)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_multilabel_classification

pytest.importorskip("skl2onnx", reason="needs skl2onnx (the onnx extra)")
rt = pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")

from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor  # noqa: E402
from sknet.onnx import register_onnx_converters, to_onnx  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning",
    "ignore::DeprecationWarning",  # onnx / skl2onnx internals
)


def run(onnx_model, X):
    session = rt.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": X.astype(np.float32)})


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
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
    labels, proba = run(to_onnx(clf), X)
    assert_array_equal(labels, clf.predict(X))
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5)


def test_multilabel_classifier(digits):
    X, Y = make_multilabel_classification(n_samples=200, n_classes=3, random_state=0)
    clf = MLPClassifier(max_iter=20, random_state=0, device="cpu").fit(X, Y)
    labels, proba = run(to_onnx(clf), X)
    assert_array_equal(labels, clf.predict(X))
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize("outputs", [1, 2])
def test_regressor_matches_onnxruntime(outputs, digits):
    X, y = digits
    Y = y / 9.0 if outputs == 1 else np.column_stack([y / 9.0, X[:, 10]])
    reg = MLPRegressor(max_iter=10, random_state=0, device="cpu").fit(X, Y)
    (pred,) = run(to_onnx(reg), X)
    assert_allclose(pred.reshape(reg.predict(X).shape), reg.predict(X), rtol=1e-4, atol=1e-5)


def test_skl2onnx_takes_registered_models_in_a_pipeline(digits):
    from skl2onnx import to_onnx as skl2onnx_to_onnx
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = digits
    register_onnx_converters()
    pipe = make_pipeline(StandardScaler(), MLPClassifier(max_iter=5, device="cpu")).fit(X, y)
    model = skl2onnx_to_onnx(
        pipe, X[:1].astype(np.float32), options={id(pipe[-1]): {"zipmap": False}}
    )
    labels, _ = run(model, X)
    assert_array_equal(labels, pipe.predict(X))


@pytest.mark.parametrize(
    "model, message",
    [
        (MLPClassifier(activation="gelu", max_iter=2), "supports activation in"),
        (MLPRegressor(loss="poisson", max_iter=2), "output activations"),
    ],
)
def test_unsupported_models_are_clear_errors(model, message, digits):
    X, y = digits
    model.set_params(device="cpu").fit(X, y if isinstance(model, MLPClassifier) else y / 9.0)
    with pytest.raises(ValueError, match=message):
        to_onnx(model)


def test_only_mlps_and_fitted_ones():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(TypeError, match="converts MLPClassifier and MLPRegressor"):
        to_onnx(ConvNetClassifier())
    with pytest.raises(NotFittedError):
        to_onnx(MLPClassifier())

"""ONNX export of the MLP estimators (needs the onnx extra: skl2onnx, onnxruntime)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_multilabel_classification

pytest.importorskip("skl2onnx", reason="needs skl2onnx (the onnx extra)")
rt = pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")

import sknet.onnx  # noqa: E402
from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor  # noqa: E402
from sknet import autodiff as ad  # noqa: E402
from sknet.losses import Loss  # noqa: E402
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
@pytest.mark.parametrize("loss", ["squared_error", "poisson"])
def test_regressor_matches_onnxruntime(outputs, loss, digits):
    X, y = digits
    Y = y / 9.0 if outputs == 1 else np.column_stack([y / 9.0, X[:, 10]])
    reg = MLPRegressor(loss=loss, max_iter=10, random_state=0, device="cpu").fit(X, Y)
    (pred,) = run(to_onnx(reg), X)
    assert pred.shape == (len(X), outputs)  # not (len(X) * outputs, 1)
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


class Softplus(Loss):
    """A regression loss with an output ONNX export does not know."""

    out_activation = "softplus"

    def output(self, Z):
        return np.logaddexp(0, Z)

    def value(self, Z, Y):
        return ad.mean((ad.softplus(Z) - Y) ** 2, axis=1)


@pytest.mark.parametrize(
    "model, message",
    [
        (MLPClassifier(activation="gelu", max_iter=2), "supports activation in"),
        (
            MLPRegressor(loss=Softplus(), max_iter=2),
            r"supports the output activations \('exp', 'identity', 'logistic', 'softmax'\)",
        ),
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


# -- the loss's output activation is exported, or the export refused --------------------


class SquashedError(Loss):
    """Squared error on logistic outputs (targets in [0, 1]), from its value alone."""

    out_activation = "logistic"

    def value(self, Z, Y):
        return ad.mean((ad.sigmoid(Z) - Y) ** 2, axis=1)


class SmoothedLogLoss(Loss):
    """Cross-entropy with label smoothing: softmax outputs."""

    out_activation = "softmax"

    def value(self, Z, Y):
        k = Y.shape[1]
        return -ad.sum((0.9 * Y + 0.1 / k) * ad.log_softmax(Z, axis=1), axis=1)


class UnnamedSigmoid(SquashedError):
    """A logistic output that its out_activation does not name."""

    out_activation = "identity"

    def output(self, Z):
        return 1 / (1 + np.exp(-Z))


class Tempered(SmoothedLogLoss):
    """A softmax at temperature 2: probabilities, but no ONNX operator's."""

    def output(self, Z):
        Z = Z / 2
        Z -= Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        return P / P.sum(axis=1, keepdims=True)


def test_a_user_loss_output_is_exported(digits):
    X, y = digits
    reg = MLPRegressor(loss=SquashedError(), max_iter=10, random_state=0, device="cpu")
    reg.fit(X, y / 9.0)
    assert reg.out_activation_ == "logistic"
    (pred,) = run(to_onnx(reg), X)
    assert_allclose(pred.ravel(), reg.predict(X), rtol=1e-4, atol=1e-5)
    clf = MLPClassifier(loss=SmoothedLogLoss(), max_iter=10, random_state=0, device="cpu")
    clf.fit(X, y)
    labels, proba = run(to_onnx(clf), X)
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5)
    assert_array_equal(labels, clf.predict(X))


@pytest.mark.parametrize(
    "loss, message",
    [
        (
            UnnamedSigmoid(),
            r"names its output activation 'identity', but its output computes "
            r"'logistic'.*set out_activation = 'logistic' in UnnamedSigmoid",
        ),
        (Tempered(), r"output computes another function.*supports outputs computing one of"),
    ],
)
def test_an_output_the_export_would_not_compute_is_refused(loss, message, digits):
    X, y = digits
    if isinstance(loss, Tempered):
        model = MLPClassifier(loss=loss, max_iter=2, device="cpu").fit(X, y)
    else:
        model = MLPRegressor(loss=loss, max_iter=2, device="cpu").fit(X, y / 9.0)
    with pytest.raises(ValueError, match=message):
        to_onnx(model)
    register_onnx_converters()  # a pipeline through skl2onnx itself is refused alike
    from skl2onnx import to_onnx as skl2onnx_to_onnx

    with pytest.raises(ValueError, match=message):
        skl2onnx_to_onnx(model, X[:1].astype(np.float32))


def test_the_module_exposes_only_its_public_names():
    # (pytest's assertion rewriting adds names that are not identifiers)
    public = {name for name in dir(sknet.onnx) if name.isidentifier() and name[0] != "_"}
    assert public == set(sknet.onnx.__all__)
    assert set(sknet.onnx.__all__) == {
        "SUPPORTED_ACTIVATIONS",
        "SUPPORTED_OUTPUTS",
        "register_onnx_converters",
        "to_onnx",
    }

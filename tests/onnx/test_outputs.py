"""The exported outputs (sknet/onnx/_outputs.py): the loss's output, labels, probabilities."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_multilabel_classification

from sknet import MLPClassifier, MLPRegressor, NeuralNetClassifier
from sknet import autodiff as ad
from sknet.layers import Dense, EnsembleDense, EnsembleInput
from sknet.losses import Loss
from sknet.onnx import to_onnx
from tests.onnx.helpers import FILTERS, assert_round_trip, run

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(lambda y: np.where(y > 4, "big", "small"), id="binary-strings"),
        pytest.param(lambda y: y.astype(np.int32), id="multiclass-int32"),
        pytest.param(lambda y: y * 2.0, id="multiclass-floats"),
        pytest.param(lambda y: y > 4, id="binary-booleans"),
        pytest.param(lambda y: np.array(["d%d" % v for v in y], dtype=object), id="objects"),
    ],
)
def test_labels_of_any_type(labels, digits):
    X, y = digits
    clf = MLPClassifier(hidden_layer_sizes=(16,), max_iter=5, random_state=0, device="cpu")
    clf.fit(X[:300], labels(y[:300]))
    assert_round_trip(clf, X[:300])


def test_multilabel_classifier():
    X, Y = make_multilabel_classification(n_samples=200, n_classes=3, random_state=0)
    clf = MLPClassifier(max_iter=20, random_state=0, device="cpu").fit(X, Y)
    labels, proba = run(to_onnx(clf), X)
    assert labels.dtype == np.int64 and labels.shape == Y.shape
    assert_array_equal(labels, clf.predict(X))
    assert_allclose(proba, clf.predict_proba(X), atol=1e-5)


def test_probabilities_that_underflow_stop_at_the_smallest_normal_number(digits):
    X, y = digits
    clf = MLPClassifier(hidden_layer_sizes=(16,), max_iter=5, random_state=0, device="cpu")
    clf.fit(X, y)
    far = X[:20] * 1e4  # saturated softmax: zeros in float32 but for the clamp
    _, proba = run(to_onnx(clf), far)
    assert proba.min() == np.finfo(np.float32).tiny
    assert_allclose(proba, clf.predict_proba(far), atol=1e-5)


def test_an_ensemble_averages_its_members_probabilities(digits):
    X, y = digits
    clf = NeuralNetClassifier(
        [EnsembleInput(4), EnsembleDense(16, activation="relu")],
        max_iter=5,
        random_state=0,
        device="cpu",
    ).fit(X[:400], y[:400])
    assert clf.layers_[-1].n_members_ == 4
    assert_round_trip(clf, X[:400])


# -- the loss's output activation is exported, or the export refused --------------------


class Softplus(Loss):
    """A regression loss with an output ONNX export does not know."""

    out_activation = "softplus"

    def output(self, Z):
        return np.logaddexp(0, Z)

    def value(self, Z, Y):
        return ad.mean((ad.softplus(Z) - Y) ** 2, axis=1)


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


def test_an_unknown_output_is_a_clear_error(digits):
    X, y = digits
    model = MLPRegressor(loss=Softplus(), max_iter=2, device="cpu").fit(X, y / 9.0)
    with pytest.raises(
        ValueError,
        match=r"supports the output activations \('exp', 'identity', 'logistic', 'softmax'\)",
    ):
        to_onnx(model)


def test_a_user_loss_output_is_exported(digits):
    X, y = digits
    reg = MLPRegressor(loss=SquashedError(), max_iter=10, random_state=0, device="cpu")
    reg.fit(X, y / 9.0)
    assert reg.out_activation_ == "logistic"
    assert_round_trip(reg, X)
    clf = MLPClassifier(loss=SmoothedLogLoss(), max_iter=10, random_state=0, device="cpu")
    clf.fit(X, y)
    assert_round_trip(clf, X)


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


def test_a_user_loss_of_an_ensemble_is_checked_member_by_member(digits):
    X, y = digits
    clf = NeuralNetClassifier(
        [EnsembleInput(2), EnsembleDense(8)], loss=Tempered(), max_iter=2, device="cpu"
    ).fit(X[:200], y[:200])
    with pytest.raises(ValueError, match="Tempered names its output activation 'softmax'"):
        to_onnx(clf)
    reg = NeuralNetClassifier([Dense(8)], loss=SmoothedLogLoss(), max_iter=2, device="cpu")
    assert_round_trip(reg.fit(X[:200], y[:200]), X[:200])

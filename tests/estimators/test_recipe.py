"""The training recipe's parameters on every estimator: AdamW, clipping, label smoothing."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sknet import (
    ConvNetClassifier,
    ConvNetRegressor,
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    RNNClassifier,
    RNNRegressor,
)
from sknet.engine._optimizers import AdamW
from sknet.losses import FocalLoss, LogLoss

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CLASSIFIERS = [MLPClassifier, NeuralNetClassifier, ConvNetClassifier, RNNClassifier]
REGRESSORS = [MLPRegressor, NeuralNetRegressor, ConvNetRegressor, RNNRegressor]


def small(cls):
    """A quick configuration of each estimator, on data it takes."""
    rng = np.random.RandomState(0)
    if cls in (ConvNetClassifier, ConvNetRegressor):
        X, kwargs = rng.rand(60, 1, 6, 6), dict(conv_filters=(2,), dense_units=(4,))
    elif cls in (RNNClassifier, RNNRegressor):
        X, kwargs = rng.rand(60, 4, 2), dict(units=(3,))
    else:
        X, kwargs = rng.rand(60, 5), {}
    y = (X.reshape(60, -1).sum(axis=1) > X.size / 120).astype(int)
    return cls(max_iter=3, random_state=0, device="cpu", **kwargs), X, y


@pytest.mark.parametrize("cls", CLASSIFIERS + REGRESSORS, ids=lambda c: c.__name__)
def test_every_estimator_trains_with_adamw_and_clipping(cls):
    est, X, y = small(cls)
    params = est.get_params()
    assert params["weight_decay"] == 0.01 and "clip_norm" in params
    est.set_params(solver="adamw", weight_decay=0.1, clip_norm=1.0).fit(X, y)
    assert isinstance(est._optimizer, AdamW) and est._optimizer.weight_decay == 0.1
    assert np.isfinite(est.loss_) and est.predict(X).shape[0] == 60
    t = est._optimizer.t
    est.partial_fit(X, y)  # a stochastic solver: partial_fit continues its moments
    assert est._optimizer.t > t


@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
def test_every_classifier_takes_label_smoothing(cls):
    est, X, y = small(cls)
    assert est.get_params()["label_smoothing"] == 0.0
    est.set_params(label_smoothing=0.2).fit(X, y)
    assert isinstance(est._loss, LogLoss) and est._loss.label_smoothing == 0.2


def test_weight_decay_and_label_smoothing_are_validated():
    X, y = np.random.RandomState(0).rand(20, 3), np.arange(20) % 2
    for params, name in (
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"label_smoothing": 1.0}, "label_smoothing"),
        ({"solver": "adamax"}, "solver"),
        ({"clip_norm": 0.0}, "clip_norm"),
    ):
        with pytest.raises(ValueError, match=f"The '{name}' parameter of MLPClassifier"):
            MLPClassifier(max_iter=1, device="cpu", **params).fit(X, y)
    with pytest.raises(ValueError, match="label_smoothing=0.1 applies to loss='log_loss'"):
        MLPClassifier(loss=FocalLoss(), label_smoothing=0.1, max_iter=1, device="cpu").fit(X, y)


def test_label_smoothing_trains_on_the_smoothed_log_loss(digits):
    X, y = digits
    X, y = X[:300], y[:300]
    clf = MLPClassifier(
        (16,), solver="lbfgs", max_iter=5, alpha=0.0, label_smoothing=0.1, dtype="float64"
    )
    clf.set_params(device="cpu", random_state=0).fit(X, y)
    P = clf.predict_proba(X)
    target = 0.9 * np.eye(10)[y] + 0.01
    assert_allclose(clf.loss_, -(target * np.log(P)).sum(axis=1).mean(), rtol=1e-8)
    plain = MLPClassifier((16,), solver="lbfgs", max_iter=200, alpha=0.0, device="cpu")
    smooth = MLPClassifier(
        (16,), solver="lbfgs", max_iter=200, alpha=0.0, device="cpu", label_smoothing=0.2
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        p_plain = plain.set_params(random_state=0).fit(X, y).predict_proba(X).max(axis=1)
        p_smooth = smooth.set_params(random_state=0).fit(X, y).predict_proba(X).max(axis=1)
    assert p_plain.mean() > 0.99
    assert abs(p_smooth.mean() - 0.82) < 0.02  # the optimum of each sample: 0.8 + 0.02


@pytest.mark.parametrize("cls", [MLPRegressor, ConvNetClassifier], ids=lambda c: c.__name__)
def test_clip_norm_bounds_every_step_of_sgd(cls):
    est, X, y = small(cls)
    est.set_params(solver="sgd", momentum=0.0, learning_rate_init=1.0, clip_norm=1e-3)
    est.set_params(max_iter=1, batch_size=20, shuffle=False)
    steps = []

    from sknet.callbacks import Callback

    class Steps(Callback):
        def on_train_begin(self, state):
            self.last = np.concatenate([w.ravel().copy() for w in state.network.params()])

        def on_batch_end(self, state, batch, size):
            now = np.concatenate([w.ravel() for w in state.network.params()])
            steps.append(np.linalg.norm(now - self.last))
            self.last = now.copy()

    est.set_params(callbacks=[Steps()], alpha=0.0).fit(X, y)
    assert len(steps) == 3
    assert max(steps) <= 1e-3 * (1 + 1e-5)
    assert min(steps) > 0.9e-3  # the clip was active: the gradients are far larger

"""Layers that define only forward, and losses that define only their value.

Their gradients come from the recorded forward pass; they must train, clone,
grid-search, pickle (joblib and skops), freeze and move between devices like
the built-in layers and losses, and fail clearly when written wrongly.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor
from sknet import autodiff as ad
from sknet.backend import get_backend
from sknet.layers import Dense, Flatten, Layer, Residual
from sknet.losses import Loss
from sknet.utils import check_layer_gradients, check_loss_gradients
from tests.custom_layers import GLU, ForwardDense, LayerNorm, Scale

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def convnet(layers, **params):
    defaults = dict(batch_size=32, max_iter=5, random_state=0, device="cpu")
    return ConvNetClassifier(layers=layers, **{**defaults, **params})


@pytest.mark.parametrize("layer", [GLU(4), LayerNorm(), ForwardDense(3)], ids=type)
def test_forward_only_layers_pass_the_gradient_check(layer, device):
    errors = check_layer_gradients(layer, (5,), device=device)
    assert sorted(errors) == sorted(["X", *layer_param_names(layer)])
    assert max(errors.values()) < 1e-6


def layer_param_names(layer):
    return {"GLU": ["W", "b"], "LayerNorm": ["gamma", "beta"], "ForwardDense": ["W", "b"]}[
        type(layer).__name__
    ]


def test_a_forward_only_layer_trains_like_the_built_in_dense(digits):
    # Same initial draws, same arithmetic in float64: the same loss curve.
    X, y = digits
    built_in = convnet([Flatten(), Dense(32, activation="relu")], dtype="float64").fit(X, y)
    recorded = convnet([Flatten(), ForwardDense(32)], dtype="float64").fit(X, y)
    assert_allclose(recorded.loss_curve_, built_in.loss_curve_, rtol=1e-9)
    assert_allclose(recorded.predict_proba(X), built_in.predict_proba(X), rtol=1e-7)


def test_forward_only_layers_train_in_float32_and_inside_containers(digits):
    X, y = digits
    clf = convnet(
        [Flatten(), GLU(32), Residual([LayerNorm(), GLU(32)]), LayerNorm()], max_iter=20
    ).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert all(w.dtype == np.float32 for w in clf.network_.weights())


def test_they_clone_grid_search_and_keep_the_given_objects(digits):
    X, y = digits
    layers = [Flatten(), GLU(8)]
    clf = convnet(layers, max_iter=2)
    assert clf.get_params()["layers__1__units"] == 8
    grid = GridSearchCV(clf, {"layers__1__units": [4, 16]}, cv=2).fit(X[:300], y[:300])
    assert [p["layers__1__units"] for p in grid.cv_results_["params"]] == [4, 16]
    assert grid.best_estimator_.layers_[1].output_shape_ in [(4,), (16,)]
    assert layers[1].units == 8 and not hasattr(layers[1], "params")
    assert clone(clf).layers[1] is not layers[1]


def test_they_pickle_with_joblib_and_predict_the_same(digits, tmp_path):
    import joblib

    X, y = digits
    clf = convnet([Flatten(), GLU(16), LayerNorm()]).fit(X, y)
    joblib.dump(clf, tmp_path / "model.joblib")
    restored = joblib.load(tmp_path / "model.joblib")
    assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    restored.set_params(warm_start=True, max_iter=1).fit(X, y)  # and train on


def test_they_round_trip_through_skops(digits):
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    import sknet

    X, y = digits
    clf = convnet([Flatten(), GLU(8)], max_iter=2).fit(X, y)
    data = sio.dumps(clf)
    untrusted = set(sio.get_untrusted_types(data=data)) - set(sknet.TRUSTED_TYPES)
    assert untrusted == {"tests.custom_layers.GLU"}
    loaded = sio.loads(data, trusted=sknet.TRUSTED_TYPES + sorted(untrusted))
    assert_allclose(loaded.predict_proba(X), clf.predict_proba(X))


def test_they_train_on_every_device(digits, device):
    X, y = digits
    clf = convnet([Flatten(), GLU(16)], device=device, max_iter=10).fit(X, y)
    assert clf.device_.startswith(device) and clf.score(X, y) > 0.8
    cpu_copy = pickle.loads(pickle.dumps(clf))  # loads on the device that is there
    assert_allclose(cpu_copy.predict_proba(X), clf.predict_proba(X), rtol=1e-5, atol=1e-6)


def test_a_frozen_forward_only_layer_keeps_its_parameters(digits):
    X, y = digits
    first = convnet([Flatten(), GLU(16)], max_iter=3).fit(X, y)
    trained = {k: v.copy() for k, v in first.layers_[1].params.items()}
    frozen = GLU(16, trainable=False, weights=trained)
    clf = convnet([Flatten(), frozen], max_iter=3).fit(X, y)
    for key, value in trained.items():
        assert_array_equal(clf.layers_[1].params[key], value)
    assert clf.layers_[-1].params["W"].shape == (16, 10)


class Doubled(GLU):
    """A subclass whose forward calls the recorded parent's: recorded once."""

    def forward(self, X, *, training):
        return 2 * super().forward(X, training=training)


def test_super_forward_inside_a_forward_is_recorded_once():
    errors = check_layer_gradients(Doubled(3), (4,))
    assert max(errors.values()) < 1e-6


def test_the_first_layer_skips_the_input_gradient():
    layer = GLU(2)
    layer.build((3,), backend=get_backend("cpu"), dtype=np.float64, rng=np.random.RandomState(0))
    layer.skip_input_grad = True
    Y = layer.forward(np.ones((4, 3)), training=True)
    assert layer.backward(np.ones_like(Y)) is None
    assert np.abs(layer.grads["W"]).sum() > 0 and np.abs(layer.grads["b"]).sum() > 0


def test_prediction_runs_unrecorded():
    seen = []

    class Spy(Layer):
        def forward(self, X, *, training):
            seen.append(type(X))
            return ad.tanh(X)

    layer = Spy()
    layer.build((3,), backend=get_backend("cpu"), dtype=np.float32, rng=None)
    layer.forward(np.ones((2, 3), np.float32), training=False)
    layer.forward(np.ones((2, 3), np.float32), training=True)
    assert seen == [np.ndarray, ad.Variable]


class Upcasting(Layer):
    def forward(self, X, *, training):
        return X * np.float64(2.0)  # a NumPy float64 scalar promotes float32


class DropsTheBatch(Layer):
    def forward(self, X, *, training):
        return ad.sum(X)


class Cumulative(Layer):
    def forward(self, X, *, training):
        return np.cumsum(X, axis=1)


@pytest.mark.parametrize(
    "layer, error, message",
    [
        (Upcasting(), TypeError, "returned float64 values for float32 inputs"),
        (DropsTheBatch(), ValueError, "first axis must stay the batch"),
        (Cumulative(), TypeError, "numpy.cumsum is not differentiable"),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Layer) else None,
)
def test_wrong_forward_passes_fail_on_the_first_batch(layer, error, message, digits):
    X, y = digits
    with pytest.raises(error, match=message):
        convnet([Flatten(), GLU(8), layer], max_iter=1).fit(X, y)


def test_backward_without_a_training_forward_is_a_clear_error():
    layer = GLU(2)
    layer.build((3,), backend=get_backend("cpu"), dtype=np.float64, rng=np.random.RandomState(0))
    with pytest.raises(RuntimeError, match="training=True first"):
        layer.backward(np.ones((4, 2)))


def test_hand_written_layers_are_not_recorded():
    # Every layer's forward is wrapped (its input shape checked at the boundary): what
    # tells is whether a training forward leaves a record for the backward.
    backend, X = get_backend("cpu"), np.ones((4, 3))
    for layer, recorded in [(Dense(2), False), (Scale(), False), (GLU(2), True)]:
        layer.build((3,), backend=backend, dtype=np.float64, rng=np.random.RandomState(0))
        layer.forward(X, training=True)
        assert ("autodiff" in layer._cache) is recorded, type(layer).__name__


# -- losses from their value ----------------------------------------------------------


class HalfSquared(Loss):
    """The stock squared error, written as its value only."""

    def value(self, Z, Y):
        return ad.mean(ad.square(Z - Y), axis=1) * 0.5


class SoftmaxCrossEntropy(Loss):
    """The stock multiclass log-loss, written as its value only."""

    out_activation = "softmax"

    def __init__(self, smoothing=0.0):
        self.smoothing = smoothing

    def output(self, Z):
        return ad.softmax(Z)

    def value(self, Z, Y):
        n_classes = Y.shape[1]
        targets = Y * (1 - self.smoothing) + self.smoothing / n_classes
        return -ad.sum(targets * ad.log_softmax(Z), axis=1)


@pytest.mark.parametrize("loss", [HalfSquared(), SoftmaxCrossEntropy(smoothing=0.1)], ids=type)
def test_value_only_losses_pass_the_gradient_check(loss, device):
    assert check_loss_gradients(loss, device=device) < 1e-6


def test_a_value_only_loss_trains_like_the_stock_squared_error():
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    params = dict(hidden_layer_sizes=(16,), max_iter=20, random_state=0, dtype="float64")
    stock = MLPRegressor(device="cpu", **params).fit(X, y / y.std())
    mine = MLPRegressor(HalfSquared(), device="cpu", **params).fit(X, y / y.std())
    assert_allclose(mine.loss_curve_, stock.loss_curve_, rtol=1e-9)


def test_a_value_only_classification_loss_trains_and_grid_searches(digits):
    X, y = digits
    params = dict(hidden_layer_sizes=(32,), max_iter=20, random_state=0, device="cpu")
    stock = MLPClassifier(dtype="float64", **params).fit(X, y)
    mine = MLPClassifier(loss=SoftmaxCrossEntropy(), dtype="float64", **params).fit(X, y)
    assert_allclose(mine.loss_curve_, stock.loss_curve_, rtol=1e-8)
    assert mine.out_activation_ == "softmax"
    assert_allclose(mine.predict_proba(X).sum(axis=1), 1.0)
    grid = GridSearchCV(
        MLPClassifier(loss=SoftmaxCrossEntropy(), **{**params, "max_iter": 2}),
        {"loss__smoothing": [0.0, 0.2]},
        cv=2,
    ).fit(X[:300], y[:300])
    assert [p["loss__smoothing"] for p in grid.cv_results_["params"]] == [0.0, 0.2]
    restored = pickle.loads(pickle.dumps(mine))
    assert_array_equal(restored.predict_proba(X), mine.predict_proba(X))


class NoValue(Loss):
    pass


class PerOutput(Loss):
    def value(self, Z, Y):
        return ad.square(Z - Y)  # one value per output, not per sample


class Float64Loss(Loss):
    def value(self, Z, Y):
        return ad.sum(ad.square(Z - Y), axis=1) * np.float64(1.0)


@pytest.mark.parametrize(
    "loss, error, message",
    [
        (NoValue(), NotImplementedError, "must implement value .* or loss_and_gradient"),
        (PerOutput(), ValueError, r"one loss per sample, shape \(\d+,\); got \(\d+, 2\)"),
        (Float64Loss(), TypeError, "returned float64 values for float32 outputs"),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Loss) else None,
)
def test_wrong_value_only_losses_are_clear_errors(loss, error, message):
    X, y = np.random.RandomState(0).rand(40, 3), np.random.RandomState(1).rand(40, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(error, match=message):
            MLPRegressor(loss, max_iter=1, device="cpu").fit(X, y)

"""Tests for sknet/layers/_ensemble.py: the parameter-efficient ensemble, in estimators too."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import sknet.engine._sharding as sharding
from sknet import NeuralNetClassifier, NeuralNetRegressor
from sknet.backend import get_backend
from sknet.layers import Dropout, EnsembleDense, EnsembleHead, EnsembleInput, Sequential
from sknet.layers._ensemble import ensemble_size
from sknet.losses import EnsembleLoss
from sknet.utils import check_layer_gradients, estimate_memory
from tests.layers.test_activation import oracle

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def build(layer, shape, backend, dtype=np.float64, seed=0):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def numpy_params(layer):
    return {k: layer.backend_.to_numpy(v) for k, v in layer.params.items()}


# -- the layers -----------------------------------------------------------------------


def test_ensemble_input_copies_each_sample_k_times(backend):
    X = np.arange(6.0).reshape(2, 3)
    layer = build(EnsembleInput(4), (3,), backend)
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=True))
    assert Y.shape == (2, 4, 3) and layer.n_members_ == 4
    assert_array_equal(Y, np.repeat(X[:, None], 4, axis=1))
    dY = np.random.RandomState(0).normal(size=(2, 4, 3))
    assert_allclose(backend.to_numpy(layer.backward(backend.asarray(dY))), dY.sum(axis=1))


@pytest.mark.parametrize("activation", [None, "relu", "tanh", "gelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ensemble_dense_is_each_members_adapted_dense(backend, activation, dtype):
    X = np.random.RandomState(1).normal(size=(5, 3, 4))
    layer = build(
        EnsembleDense(6, activation, r_init="normal", s_init="random_signs"),
        (3, 4),
        backend,
        dtype,
    )
    p = numpy_params(layer)
    expected = np.stack(
        [
            oracle(
                activation or "identity", ((X[:, i] * p["r"][i]) @ p["W"]) * p["s"][i] + p["b"][i]
            )
            for i in range(3)  # member by member, as k separate layers would
        ],
        axis=1,
    )
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for training in (True, False):
        Y = layer.forward(backend.asarray(X.astype(dtype)), training=training)
        assert Y.dtype == dtype and Y.shape == (5, 3, 6)
        assert_allclose(backend.to_numpy(Y), expected, rtol=tol, atol=tol)


def test_ensemble_dense_runs_one_matrix_product_for_all_members(monkeypatch):
    backend = get_backend("cpu")
    layer = build(EnsembleDense(6), (8, 4), backend)
    calls = []
    real = backend.matmul
    monkeypatch.setattr(
        backend, "matmul", lambda A, B, out=None: calls.append(A.shape) or real(A, B, out=out)
    )
    layer.forward(np.ones((5, 8, 4)), training=True)
    assert calls == [(40, 4)]  # (n * k, features) @ W


@pytest.mark.parametrize("activation", [None, "relu", "logistic", "silu"])
def test_ensemble_gradients_match_finite_differences(activation):
    dense = EnsembleDense(5, activation, r_init="normal", s_init="normal")
    assert set(check_layer_gradients(dense, (3, 4), n_samples=4)) == {"X", "W", "r", "s", "b"}
    assert set(check_layer_gradients(EnsembleHead(2, activation), (3, 4))) == {"X", "W", "b"}
    assert set(check_layer_gradients(EnsembleInput(3), (4,))) == {"X"}


def test_a_first_ensemble_dense_still_trains_its_adapters():
    layer = build(EnsembleDense(3, r_init="normal"), (2, 4), get_backend("cpu"))
    layer.skip_input_grad = True
    layer.forward(np.random.RandomState(0).normal(size=(5, 2, 4)), training=True)
    assert layer.backward(np.ones((5, 2, 3))) is None
    assert all(np.abs(g).sum() > 0 for g in layer.grads.values())


def test_adapters_start_as_asked_and_members_share_the_first_bias():
    layer = build(EnsembleDense(50, r_init="random_signs"), (4, 30), get_backend("cpu"))
    p = numpy_params(layer)
    assert set(np.unique(p["r"])) == {-1.0, 1.0}
    assert_array_equal(p["s"], 1.0)
    assert_array_equal(p["b"], np.tile(p["b"][0], (4, 1)))
    assert np.abs(p["W"]).max() <= 30**-0.5 and np.abs(p["b"]).max() <= 30**-0.5
    normal = numpy_params(
        build(EnsembleDense(50, r_init="normal", s_init="ones"), (4, 30), get_backend("cpu"))
    )
    assert abs(normal["r"].std() - 1) < 0.1
    head = numpy_params(build(EnsembleHead(3), (4, 30), get_backend("cpu")))
    assert head["W"].shape == (4, 30, 3) and not np.allclose(head["W"][0], head["W"][1])


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (EnsembleInput(0), (3,), "'k' parameter of EnsembleInput must be an int in the range"),
        (EnsembleInput(2), (3, 4), r"expects rows of features, got samples of shape \(3, 4\)"),
        (EnsembleDense(4), (6,), r"expects samples of shape \(k, features\).*got \(6,\)"),
        (EnsembleDense(4, k=3), (2, 5), r"EnsembleDense\(k=3\) got samples of 2 members"),
        (EnsembleDense(0), (2, 5), "'units' parameter of EnsembleDense must be an int"),
        (EnsembleDense(4, r_init="zeros"), (2, 5), "'r_init' parameter of EnsembleDense must"),
        (EnsembleDense(4, "swish"), (2, 5), "'activation' parameter of EnsembleDense must"),
        (EnsembleHead(0), (2, 5), "'units' parameter of EnsembleHead must be an int"),
        (EnsembleHead(3), (5,), r"expects samples of shape \(k, features\)"),
    ],
)
def test_bad_configuration_is_refused_at_build(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, shape, get_backend("cpu"))


def test_ensemble_size_finds_the_member_count_inside_containers():
    assert ensemble_size([Sequential([EnsembleInput(3), EnsembleDense(4)])]) == 3
    assert ensemble_size([EnsembleDense(4)]) is None
    with pytest.raises(ValueError, match=r"EnsembleInput layers of different k: \[2, 3\]"):
        ensemble_size([EnsembleInput(2), Sequential([EnsembleInput(3)])])


# -- in the estimators ---------------------------------------------------------------


@pytest.fixture(scope="module")
def data(digits):
    X, y = digits
    return X[:400].astype(np.float32), y[:400]


def ensemble_layers(k=3, units=16):
    return [
        EnsembleInput(k),
        EnsembleDense(units, activation="relu"),
        EnsembleDense(units, activation="relu", r_init="ones"),
    ]


def make_classifier(**kwargs):
    params = dict(
        layers=ensemble_layers(), max_iter=4, random_state=0, device="cpu", batch_size=50
    )
    return NeuralNetClassifier(**{**params, **kwargs})


def softmax(Z):
    E = np.exp(Z - Z.max(axis=-1, keepdims=True))
    return E / E.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_classifier_predicts_the_mean_of_its_members_probabilities(data, dtype):
    X, y = data
    clf = make_classifier(dtype=dtype, max_iter=15, learning_rate_init=0.01).fit(X, y)
    head = clf.layers_[-1]
    assert isinstance(head, EnsembleHead) and head.params["W"].shape == (3, 16, 10)
    assert isinstance(clf._loss, EnsembleLoss) and clf.out_activation_ == "softmax"
    Z = clf.network_.forward(X[:20].astype(dtype), training=False)  # (20, 3, 10)
    P = clf.predict_proba(X[:20])
    assert P.dtype == dtype
    assert_allclose(P, softmax(Z).mean(axis=1), rtol=1e-5)
    assert_array_equal(clf.predict(X[:20]), clf.classes_[P.argmax(axis=1)])
    assert not np.allclose(softmax(Z)[:, 0], softmax(Z)[:, 1])  # the members differ
    assert clf.score(X, y) > 0.8


def test_the_training_loss_is_the_mean_of_the_members_losses(data):
    X, y = data
    clf = make_classifier(max_iter=1, solver="lbfgs").fit(X, y)  # full batch: one loss
    Z = clf.network_.forward(X, training=False).astype(np.float64)
    Y = np.eye(10)[y]
    member_losses = -(np.log(softmax(Z)) * Y[:, None]).sum(axis=2)  # (n, k)
    penalty = (
        0.5
        * clf.alpha
        / len(X)
        * sum(
            float((w.astype(np.float64) ** 2).sum())
            for _, leaf in clf.network_.leaves()
            for key, w in leaf.params.items()
            if key in leaf.regularized
        )
    )
    assert_allclose(clf.loss_, member_losses.mean() + penalty, rtol=1e-5)


def test_binary_and_multilabel_members_average_their_sigmoids(data):
    X, y = data
    binary = make_classifier().fit(X, y % 2)
    Z = binary.network_.forward(X[:10], training=False)
    p1 = (1 / (1 + np.exp(-Z))).mean(axis=1)[:, 0]
    assert_allclose(binary.predict_proba(X[:10])[:, 1], p1, rtol=1e-5)
    Ymulti = np.column_stack([y % 2, y > 4])
    multi = make_classifier().fit(X, Ymulti)
    Z = multi.network_.forward(X[:10], training=False)
    assert_allclose(multi.predict_proba(X[:10]), (1 / (1 + np.exp(-Z))).mean(axis=1), rtol=1e-5)


def test_a_regressor_predicts_the_mean_of_its_members(data):
    X, y = data
    Y = np.column_stack([X[:, 10], X[:, 20]])
    reg = NeuralNetRegressor(ensemble_layers(k=4), max_iter=5, random_state=0, device="cpu").fit(
        X, Y
    )
    Z = reg.network_.forward(X[:10], training=False)
    assert Z.shape == (10, 4, 2)
    assert_allclose(reg.predict(X[:10]), Z.mean(axis=1), rtol=1e-6)
    assert reg.predict(X[:1]).shape == (1, 2)


@pytest.mark.parametrize("solver", ["adam", "sgd", "lbfgs"])
def test_every_solver_trains_an_ensemble(data, solver):
    X, y = data
    clf = make_classifier(solver=solver, max_iter=3).fit(X, y)
    assert np.isfinite(clf.loss_) and clf.predict_proba(X).shape == (400, 10)


def test_frozen_ensemble_layers_keep_their_parameters_bit_identical(data):
    X, y = data
    layers = ensemble_layers()
    layers[1].trainable = False  # the first EnsembleDense: W, r, s and b
    one = make_classifier(layers=layers, max_iter=1).fit(X, y)
    more = make_classifier(layers=layers, max_iter=3, warm_start=True).fit(X, y)
    more.fit(X, y)  # and a warm start on
    for name, value in more.layers_[1].params.items():
        assert_array_equal(value, one.layers_[1].params[name])
    assert not np.array_equal(more.layers_[2].params["W"], one.layers_[2].params["W"])
    assert not np.array_equal(more.layers_[3].params["W"], one.layers_[3].params["W"])


def test_an_ensemble_pickles_and_trains_on_the_same(data):
    X, y = data
    clf = make_classifier(warm_start=True).fit(X, y)
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    clf.fit(X, y)
    restored.fit(X, y)
    assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))


def test_an_ensemble_trains_the_same_split_over_threads(data, monkeypatch):
    X, y = data
    layers = ensemble_layers()[:2] + [Dropout(0.2), ensemble_layers()[2]]
    monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 1)
    whole = make_classifier(layers=layers, dtype="float64").fit(X, y)
    monkeypatch.setattr(sharding, "cpu_threads", lambda: 2)
    split = make_classifier(layers=layers, dtype="float64").fit(X, y)
    assert all(layer.shardable for layer in split.layers_)
    assert_allclose(split.loss_curve_, whole.loss_curve_, rtol=1e-9)
    assert_allclose(split.predict_proba(X), whole.predict_proba(X), rtol=1e-9)


def test_an_ensemble_trains_the_same_streamed(data):
    X, y = data
    est = make_classifier(dtype="float64", max_iter=2)
    estimate = estimate_memory(est, X, y)
    streamed = clone(est).set_params(max_device_memory=int(estimate.total - estimate["data"] // 2))
    streamed.fit(X, y)
    in_memory = clone(est).fit(X, y)
    assert streamed.data_placement_ == "streamed" and in_memory.data_placement_ == "device"
    assert_allclose(streamed.loss_curve_, in_memory.loss_curve_, rtol=1e-12)


def test_early_stopping_partial_fit_and_weights_work_with_an_ensemble(data):
    X, y = data
    w = np.where(y < 5, 2.0, 1.0)
    clf = make_classifier(early_stopping=True, max_iter=3).fit(X, y, sample_weight=w)
    assert all(row["valid_loss"] is not None for row in clf.history_)
    inc = make_classifier()
    for _ in range(2):
        inc.partial_fit(X, y, classes=np.arange(10))
    assert inc.t_ == 2 * len(X) and inc.predict(X).shape == (400,)


def test_grid_search_over_the_ensemble_layers(data):
    X, y = data
    search = GridSearchCV(make_classifier(max_iter=2), {"layers__1__units": [8, 16]}, cv=2).fit(
        X, y
    )
    assert search.best_estimator_.layers_[1].params["W"].shape[1] in (8, 16)

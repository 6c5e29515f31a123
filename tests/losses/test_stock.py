"""Tests for sknet/losses/_stock.py: values against scikit-learn, gradients by finite differences,
the new losses and a user-defined one in the estimators."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network._base import LOSS_FUNCTIONS as SKLEARN_LOSSES

from sknet.losses import (
    AbsoluteError,
    FocalLoss,
    Huber,
    LogLoss,
    Loss,
    Quantile,
    make_loss,
    output_activation,
)
from sknet.utils import check_loss_gradients

SKLEARN_NAMES = ["binary_log_loss", "log_loss", "poisson", "squared_error"]
STOCK = [
    ("log_loss", None),
    ("log_loss", "binary"),
    ("focal", None),
    ("focal", "binary"),
    ("focal", "multilabel-indicator"),
    (FocalLoss(gamma=0.5), None),
    ("squared_error", None),
    ("absolute_error", None),
    ("huber", None),
    (Huber(delta=0.3), None),
    ("quantile", None),
    (Quantile(quantile=0.9), None),
    ("poisson", None),
]


def problem(name, n=7, k=3, seed=0):
    rng = np.random.RandomState(seed)
    Z = rng.standard_normal((n, k)) * 2
    if name == "log_loss":
        Y = np.eye(k)[rng.randint(k, size=n)]
    elif name == "binary_log_loss":
        Y = (rng.rand(n, k) > 0.5).astype(float)
    elif name == "poisson":
        Y = rng.poisson(2.0, size=(n, k)).astype(float)
    else:
        Y = rng.standard_normal((n, k))
    return Z, Y


def sklearn_value(name, Z, Y, w):
    P = output_activation(make_loss(name).out_activation, Z.copy())
    return SKLEARN_LOSSES[name](Y, P, w)


@pytest.mark.parametrize("name", SKLEARN_NAMES)
@pytest.mark.parametrize("weighted", [False, True])
def test_values_match_scikit_learn(name, weighted, backend):
    Z, Y = problem(name)
    w = np.random.RandomState(1).rand(Z.shape[0]) if weighted else None
    loss, _ = make_loss(name)(
        backend.asarray(Z), backend.asarray(Y), None if w is None else backend.asarray(w)
    )
    assert_allclose(float(loss), sklearn_value(name, Z, Y, w), rtol=1e-10)


@pytest.mark.parametrize("name", SKLEARN_NAMES)
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_finite_differences(name, weighted, backend):
    Z, Y = problem(name, n=4)
    w = np.random.RandomState(1).rand(4) if weighted else None
    loss_fn = make_loss(name)

    def value(z):
        return float(
            loss_fn(
                backend.asarray(z), backend.asarray(Y), None if w is None else backend.asarray(w)
            )[0]
        )

    _, dZ = loss_fn(
        backend.asarray(Z), backend.asarray(Y), None if w is None else backend.asarray(w)
    )
    dZ = backend.to_numpy(dZ).copy()
    numeric = np.zeros_like(Z)
    h = 1e-6
    for idx in np.ndindex(*Z.shape):
        zp, zm = Z.copy(), Z.copy()
        zp[idx] += h
        zm[idx] -= h
        numeric[idx] = (value(zp) - value(zm)) / (2 * h)
    assert_allclose(dZ, numeric, rtol=1e-6, atol=1e-7 * np.abs(numeric).max())


@pytest.mark.parametrize("name", ["log_loss", "binary_log_loss"])
def test_canonical_gradient_is_p_minus_y(name, backend):
    Z, Y = problem(name)
    w = np.random.RandomState(1).rand(Z.shape[0])
    loss_fn = make_loss(name)
    _, dZ = loss_fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w))
    P = output_activation(loss_fn.out_activation, Z.copy())
    assert_allclose(backend.to_numpy(dZ), (P - Y) * w[:, None] / w.sum(), rtol=1e-12)


def test_known_sum_of_weights_gives_the_same_result(backend):
    Z, Y = problem("log_loss")
    w = np.random.RandomState(1).rand(Z.shape[0])
    fn = make_loss("log_loss")
    l1, g1 = fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w))
    g1 = backend.to_numpy(g1).copy()
    l2, g2 = fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w), float(w.sum()))
    assert_allclose(float(l1), float(l2))
    assert_allclose(g1, backend.to_numpy(g2))


def test_softmax_log_loss_is_stable_for_huge_logits(backend):
    Z = np.array([[1000.0, 0.0, -1000.0], [-1e4, 1e4, 0.0]], dtype=np.float32)
    Y = np.array([[1.0, 0, 0], [1.0, 0, 0]], dtype=np.float32)
    loss, dZ = make_loss("log_loss")(backend.asarray(Z), backend.asarray(Y))
    assert np.isfinite(float(loss))
    assert_allclose(float(loss), (0 + 2e4) / 2, rtol=1e-6)
    assert np.isfinite(backend.to_numpy(dZ)).all()


def test_logistic_log_loss_is_stable_for_huge_logits(backend):
    Z = np.array([[500.0], [-500.0]], dtype=np.float32)
    Y = np.array([[0.0], [0.0]], dtype=np.float32)
    loss, dZ = make_loss("binary_log_loss")(backend.asarray(Z), backend.asarray(Y))
    assert_allclose(float(loss), 250.0, rtol=1e-6)
    assert np.isfinite(backend.to_numpy(dZ)).all()


def test_input_logits_are_not_modified(backend):
    Z, Y = problem("log_loss")
    Zb = backend.asarray(Z.copy())
    make_loss("log_loss")(Zb, backend.asarray(Y))
    assert_allclose(backend.to_numpy(Zb), Z)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("softmax", lambda z: np.exp(z) / np.exp(z).sum(1, keepdims=True)),
        ("logistic", lambda z: 1 / (1 + np.exp(-z))),
        ("identity", lambda z: z),
        ("exp", np.exp),
    ],
)
def test_output_activations(name, expected):
    Z = np.random.RandomState(0).standard_normal((5, 3))
    assert_allclose(output_activation(name, Z.copy()), expected(Z), rtol=1e-12)


def test_unknown_loss():
    with pytest.raises(ValueError, match="loss must be a Loss or one of"):
        make_loss("hinge")


@pytest.mark.parametrize("loss, target_type", STOCK, ids=lambda v: repr(v))
def test_every_stock_loss_passes_the_gradient_check(loss, target_type, backend):
    assert check_loss_gradients(loss, target_type=target_type, device=backend) < 1e-6


def test_the_gradient_check_catches_a_wrong_gradient():
    class Wrong(Loss):
        def loss_and_gradient(self, Z, Y):
            return ((Z - Y) ** 2).sum(axis=1), 3 * (Z - Y)

    with pytest.raises(AssertionError, match="Wrong: the gradient is off"):
        check_loss_gradients(Wrong())


@pytest.mark.parametrize("target_type", ["multiclass", "binary"])
def test_focal_loss_with_gamma_0_is_the_log_loss(target_type, backend):
    name = "log_loss" if target_type == "multiclass" else "binary_log_loss"
    Z, Y = problem(name)
    w = np.random.RandomState(1).rand(Z.shape[0])
    args = (backend.asarray(Z), backend.asarray(Y), backend.asarray(w))
    focal_value, focal_grad = FocalLoss(gamma=0).for_target(target_type)(*args)
    focal_grad = backend.to_numpy(focal_grad).copy()
    value, grad = make_loss(name)(*args)
    assert_allclose(float(focal_value), float(value), rtol=1e-12)
    assert_allclose(focal_grad, backend.to_numpy(grad), rtol=1e-10, atol=1e-14)


def test_focal_loss_down_weights_easy_samples():
    Z = np.array([[4.0, 0.0], [0.2, 0.0]])  # a confident and an unsure right answer
    Y = np.array([[1.0, 0.0], [1.0, 0.0]])
    plain, _ = FocalLoss(gamma=0).loss_and_gradient(Z, Y)
    focal, _ = FocalLoss(gamma=2).loss_and_gradient(Z, Y)
    assert focal[0] / plain[0] < 0.001 < 0.2 < focal[1] / plain[1]


def test_huber_is_quadratic_inside_delta_and_linear_outside():
    Z = np.array([[0.5], [3.0]])
    Y = np.zeros((2, 1))
    values, grad = Huber(delta=1.0).loss_and_gradient(Z, Y)
    assert_allclose(values, [0.125, 2.5])
    assert_allclose(grad, [[0.5], [1.0]])


def test_quantile_and_absolute_error():
    rng = np.random.RandomState(0)
    Z, Y = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    median, _ = Quantile(0.5).loss_and_gradient(Z, Y)
    absolute, _ = AbsoluteError().loss_and_gradient(Z, Y)
    assert_allclose(median, absolute / 2)
    high, _ = Quantile(0.9).loss_and_gradient(np.zeros((1, 1)), np.ones((1, 1)))
    low, _ = Quantile(0.9).loss_and_gradient(np.ones((1, 1)), np.zeros((1, 1)))
    assert_allclose([high[0], low[0]], [0.9, 0.1])  # under-predicting costs 9x more


@pytest.mark.parametrize(
    "loss, message",
    [
        (FocalLoss(gamma=-1), r"'gamma' parameter of FocalLoss must be a float in the range \[0"),
        (Huber(delta=0), r"'delta' parameter of Huber must be a float in the range \(0"),
        (Quantile(quantile=1.5), r"'quantile' parameter of Quantile .*\(0.0, 1.0\). Got 1.5"),
        (Quantile(quantile=np.nan), r"'quantile' parameter of Quantile .*Got nan"),
        # not numbers: the same message, not a comparison failing in Python
        (FocalLoss(gamma="2"), r"'gamma' parameter of FocalLoss .*Got '2' instead"),
        (Huber(delta=None), r"'delta' parameter of Huber .*Got None instead"),
        (Quantile(quantile=[0.5]), r"'quantile' parameter of Quantile .*Got \[0.5\] instead"),
    ],
)
def test_bad_loss_parameters_are_clear_errors(loss, message):
    from sknet import MLPClassifier, MLPRegressor

    X = np.random.RandomState(0).rand(20, 3)
    est = MLPClassifier(loss=loss) if isinstance(loss, FocalLoss) else MLPRegressor(loss=loss)
    with pytest.raises(ValueError, match=message):
        est.set_params(max_iter=1, device="cpu").fit(X, np.arange(20) % 2)


def test_losses_are_parameters_that_clone_and_grid_search():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    from sknet import MLPClassifier

    X, y = np.random.RandomState(0).rand(60, 4), np.arange(60) % 3
    clf = MLPClassifier(loss=FocalLoss(gamma=1.0), max_iter=2, device="cpu")
    twin = clone(clf)
    assert twin.loss is not clf.loss and twin.loss.gamma == 1.0
    assert clf.get_params()["loss__gamma"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid = GridSearchCV(clf, {"loss__gamma": [0.0, 2.0]}, cv=2).fit(X, y)
    assert [p["loss__gamma"] for p in grid.cv_results_["params"]] == [0.0, 2.0]
    assert clf.loss.gamma == 1.0  # the searched estimator is untouched


# -- losses in the estimators ----------------------------------------------------------


class LogCosh(Loss):
    """A user's loss, written against the public base class."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def loss_and_gradient(self, Z, Y):
        from sknet.backend import get_array_module

        xp = get_array_module(Z)
        R = (Z - Y) / self.scale
        return xp.log(xp.cosh(R)).mean(axis=1), xp.tanh(R) / (self.scale * Z.shape[1])


@pytest.fixture(scope="module")
def regression():
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    return X, y / y.std()


def test_a_user_loss_trains_predicts_and_pickles(regression, tmp_path):
    import pickle

    from sknet import MLPRegressor

    X, y = regression
    reg = MLPRegressor(
        LogCosh(),
        hidden_layer_sizes=(32,),
        learning_rate_init=0.01,
        max_iter=200,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert reg.out_activation_ == "identity" and reg.score(X, y) > 0.95
    assert check_loss_gradients(LogCosh(scale=2.0)) < 1e-6
    restored = pickle.loads(pickle.dumps(reg))
    assert_allclose(restored.predict(X), reg.predict(X))
    assert restored.loss.scale == 1.0 and type(restored._loss) is LogCosh


def test_a_user_loss_round_trips_through_skops(regression):
    sio = pytest.importorskip("skops.io")
    import sknet
    from sknet import MLPRegressor

    X, y = regression
    reg = MLPRegressor(
        LogCosh(), hidden_layer_sizes=(8,), max_iter=5, random_state=0, device="cpu"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(X, y)
    data = sio.dumps(reg)
    untrusted = set(sio.get_untrusted_types(data=data)) - set(sknet.TRUSTED_TYPES)
    assert untrusted == {"tests.losses.test_stock.LogCosh"}  # the stock losses are trusted
    loaded = sio.loads(data, trusted=sknet.TRUSTED_TYPES + sorted(untrusted))
    assert_allclose(loaded.predict(X), reg.predict(X))


@pytest.mark.parametrize("loss", ["focal", FocalLoss(gamma=1.0)])
def test_focal_loss_in_the_classifiers(loss, digits):
    from sknet import ConvNetClassifier, MLPClassifier

    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier(loss=loss, max_iter=30, random_state=0, device="cpu").fit(X, y)
        binary = MLPClassifier(loss=loss, max_iter=30, random_state=0, device="cpu")
        binary.fit(X, y == 3)
        conv = ConvNetClassifier(
            loss=loss,
            conv_filters=(4,),
            dense_units=(16,),
            max_iter=3,
            random_state=0,
            device="cpu",
        ).fit(X, y)
    assert clf.out_activation_ == "softmax" and clf.score(X, y) > 0.95
    assert_allclose(clf.predict_proba(X).sum(axis=1), 1, rtol=1e-5)
    assert binary.out_activation_ == "logistic" and binary.score(X, y == 3) > 0.95
    assert type(conv._loss) is FocalLoss


@pytest.mark.parametrize("loss", ["absolute_error", "huber", "quantile", "poisson"])
def test_regression_losses_in_the_regressors(loss, regression):
    from sknet import MLPRegressor, RNNRegressor

    X, y = regression
    y = np.abs(y) if loss == "poisson" else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = MLPRegressor(
            loss,
            hidden_layer_sizes=(32,),
            learning_rate_init=0.01,
            max_iter=100,
            random_state=0,
            device="cpu",
        ).fit(X, y)
        assert reg.score(X, y) > 0.8
        rnn = RNNRegressor(loss, units=(4,), max_iter=2, random_state=0, device="cpu")
        rnn.fit(X[:, :, None], y)
    assert rnn.out_activation_ == ("exp" if loss == "poisson" else "identity")


def test_huber_resists_outliers_that_mislead_the_squared_error(regression):
    from sklearn.metrics import mean_absolute_error

    from sknet import MLPRegressor

    X, y = regression
    rng = np.random.RandomState(0)
    noisy = y.copy()
    outliers = rng.rand(len(y)) < 0.05
    noisy[outliers] += rng.choice([-1, 1], outliers.sum()) * 15
    kw = dict(
        hidden_layer_sizes=(32,),
        learning_rate_init=0.01,
        max_iter=150,
        random_state=0,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        squared = MLPRegressor("squared_error", **kw).fit(X, noisy)
        huber = MLPRegressor(Huber(delta=1.0), **kw).fit(X, noisy)
    assert mean_absolute_error(y, huber.predict(X)) < 0.5 * mean_absolute_error(
        y, squared.predict(X)
    )


def test_quantile_loss_predicts_the_quantile():
    from sklearn.datasets import make_regression

    from sknet import MLPRegressor

    X, y = make_regression(n_samples=2000, n_features=5, noise=20.0, random_state=0)
    y = y / y.std()
    reg = MLPRegressor(
        Quantile(0.9),
        hidden_layer_sizes=(32,),
        learning_rate_init=0.01,
        max_iter=200,
        random_state=0,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(X, y)
    assert 0.87 <= np.mean(y <= reg.predict(X)) <= 0.93


def test_a_warm_fit_takes_new_loss_parameters_but_not_a_new_output(digits):
    from sknet import MLPClassifier, MLPRegressor

    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier(
            loss=FocalLoss(gamma=2.0), max_iter=2, warm_start=True, random_state=0, device="cpu"
        ).fit(X, y)
        clf.set_params(loss__gamma=0.5).fit(X, y)
        assert clf._loss.gamma == 0.5
        clf.set_params(loss="log_loss").fit(X, y)  # the same softmax output: fine
        reg = MLPRegressor(max_iter=2, warm_start=True, random_state=0, device="cpu")
        reg.fit(X, y.astype(float))
        reg.set_params(loss="huber").fit(X, y.astype(float))
    with pytest.raises(ValueError, match="loss changed.*'identity' -> 'exp'"):
        reg.set_params(loss="poisson").fit(X, y.astype(float))


def test_the_module_exposes_only_its_own_names():
    import sknet.losses

    # (pytest's assertion rewriting adds names that are not identifiers)
    public = {name for name in dir(sknet.losses) if name.isidentifier() and name[0] != "_"}
    assert public == set(sknet.losses.__all__)
    for name in public:
        module = getattr(getattr(sknet.losses, name), "__module__", "sknet.losses")
        assert module.startswith("sknet.losses")


# -- label smoothing ------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.35])
def test_label_smoothing_matches_torch_cross_entropy(smoothing, backend):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(0)
    Z, labels = rng.normal(size=(6, 4)) * 3, rng.randint(4, size=6)
    w = rng.uniform(0.5, 2.0, size=6)
    loss = LogLoss(label_smoothing=smoothing).for_target("multiclass")
    value, dZ = loss(
        backend.asarray(Z.copy()), backend.asarray(np.eye(4)[labels]), backend.asarray(w)
    )
    Zt = torch.tensor(Z, requires_grad=True)
    per_sample = torch.nn.functional.cross_entropy(
        Zt, torch.tensor(labels), label_smoothing=smoothing, reduction="none"
    )
    reference = (per_sample * torch.tensor(w)).sum() / w.sum()
    reference.backward()
    assert_allclose(float(value), reference.item(), rtol=1e-12)
    assert_allclose(backend.to_numpy(dZ), Zt.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_logistic_label_smoothing_is_two_class_smoothing(backend):
    # A logistic output is a softmax over (0, z): its smoothing mixes in 1/2.
    rng = np.random.RandomState(1)
    z, y = rng.normal(size=(5, 1)) * 2, rng.randint(2, size=(5, 1)).astype(float)
    binary = LogLoss(label_smoothing=0.2).for_target("binary")
    two = LogLoss(label_smoothing=0.2).for_target("multiclass")
    v1, g1 = binary.loss_and_gradient(backend.asarray(z), backend.asarray(y))
    Z2, Y2 = np.hstack([np.zeros_like(z), z]), np.hstack([1 - y, y])
    v2, g2 = two.loss_and_gradient(backend.asarray(Z2), backend.asarray(Y2))
    assert_allclose(backend.to_numpy(v1), backend.to_numpy(v2), rtol=1e-12)
    assert_allclose(backend.to_numpy(g1)[:, 0], backend.to_numpy(g2)[:, 1], rtol=1e-12)
    assert (
        check_loss_gradients(LogLoss(label_smoothing=0.3), target_type="multilabel-indicator")
        < 1e-6
    )


def test_label_smoothing_out_of_range_is_refused():
    for bad in (-0.1, 1.0, "0.1"):
        with pytest.raises(ValueError, match="needs 0 <= label_smoothing < 1"):
            LogLoss(label_smoothing=bad).check_target(np.ones((2, 2), bool))

"""Bad input gets a clear ValueError (or NotFittedError) naming the problem."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sknet import MLPClassifier, MLPRegressor

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

rng = np.random.RandomState(0)
X = rng.rand(40, 3)
y = np.arange(40) % 2
y_reg = rng.rand(40)


@pytest.fixture
def clf():
    return MLPClassifier(hidden_layer_sizes=(4,), max_iter=5, random_state=0, device="cpu")


@pytest.mark.parametrize("Est", [MLPClassifier, MLPRegressor])
@pytest.mark.parametrize(
    "value, message", [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity")]
)
def test_non_finite_X(Est, value, message):
    Xbad = X.copy()
    Xbad[3, 1] = value
    target = y if Est is MLPClassifier else y_reg
    with pytest.raises(ValueError, match=message):
        Est(device="cpu").fit(Xbad, target)
    fitted = Est(max_iter=2, device="cpu").fit(X, target)
    with pytest.raises(ValueError, match=message):
        fitted.predict(Xbad)


def test_non_finite_y_for_regressor():
    ybad = y_reg.copy()
    ybad[0] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        MLPRegressor(device="cpu").fit(X, ybad)


def test_wrong_number_of_features_at_predict(clf):
    clf.fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but MLPClassifier is expecting 3"):
        clf.predict(X[:, :2])


def test_one_dimensional_X(clf):
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array instead"):
        clf.fit(X[:, 0], y)


def test_empty_X(clf):
    with pytest.raises(ValueError, match="Found array with 0 sample"):
        clf.fit(X[:0], y[:0])


def test_mismatched_lengths(clf):
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(X, y[:-1])


def test_single_class(clf):
    with pytest.raises(ValueError, match="at least 2 classes.*only one class: 'a'"):
        clf.fit(X, np.array(["a"] * 40))


def test_continuous_target_for_classifier(clf):
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        clf.fit(X, y_reg)


def test_non_numeric_target_for_regressor():
    with pytest.raises(ValueError):
        MLPRegressor(device="cpu").fit(X, np.array(["a", "b"] * 20))


@pytest.mark.parametrize(
    "param, value, message",
    [
        (
            "activation",
            "sigmoid",
            "The 'activation' parameter of MLPClassifier must be a str among",
        ),
        ("solver", "rmsprop", "The 'solver' parameter of MLPClassifier must be a str among"),
        ("learning_rate_init", -1.0, "The 'learning_rate_init' parameter"),
        ("batch_size", 0, "The 'batch_size' parameter"),
        ("dropout", 1.0, "The 'dropout' parameter"),
        ("dtype", "float16", "The 'dtype' parameter"),
    ],
)
def test_bad_parameters(clf, param, value, message):
    with pytest.raises(ValueError, match=message):
        clf.set_params(**{param: value}).fit(X, y)


@pytest.mark.parametrize("sizes", [(-3,), (10, 0), -1])
def test_non_positive_hidden_layer_sizes(clf, sizes):
    with pytest.raises(ValueError, match=r"hidden_layer_sizes must be > 0|parameter"):
        clf.set_params(hidden_layer_sizes=sizes).fit(X, y)


def test_non_integer_hidden_layer_sizes(clf):
    with pytest.raises(ValueError, match="hidden_layer_sizes must contain positive integers"):
        clf.set_params(hidden_layer_sizes=(10.5,)).fit(X, y)


def test_dropout_with_lbfgs(clf):
    with pytest.raises(ValueError, match="dropout is not supported with solver='lbfgs'"):
        clf.set_params(solver="lbfgs", dropout=0.2).fit(X, y)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "predict_log_proba", "score"])
def test_not_fitted(clf, method):
    args = (X, y) if method == "score" else (X,)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        getattr(clf, method)(*args)


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.ones(39), r"sample_weight.shape == \(39,\), expected \(40,\)"),
        (np.ones((40, 2)), "Sample weights must be 1D"),
        (-np.ones(40), "Negative values in data passed to sample_weight"),
        (np.zeros(40), "sample_weight must have a positive sum"),
        (np.full(40, np.nan), "sample_weight contains NaN"),
    ],
)
def test_bad_sample_weight(clf, weights, message):
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y, sample_weight=weights)


def test_poisson_needs_non_negative_targets():
    with pytest.raises(ValueError, match="loss='poisson' requires y >= 0"):
        MLPRegressor(loss="poisson", device="cpu").fit(X, y_reg - 1)


def test_warm_start_with_other_outputs():
    reg = MLPRegressor(max_iter=2, warm_start=True, device="cpu").fit(X, y_reg)
    with pytest.raises(ValueError, match="y has 2 output.*fitted with 1"):
        reg.fit(X, np.column_stack([y_reg, y_reg]))


def test_bad_input_never_corrupts_a_fitted_model(clf):
    clf.fit(X, y)
    proba = clf.predict_proba(X)
    Xbad = X.copy()
    Xbad[0, 0] = np.nan
    for bad in [
        lambda: clf.partial_fit(Xbad, y),
        lambda: clf.partial_fit(X[:, :2], y),
        lambda: clf.partial_fit(X, y + 5),
    ]:
        with pytest.raises(ValueError):
            bad()
    np.testing.assert_array_equal(clf.predict_proba(X), proba)

"""Bad input gets a clear ValueError (or NotFittedError) naming the problem."""

import re

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


# -- values checked in the model's dtype, naming the array ----------------------------------
# A float64 value beyond the largest float32 is finite where scikit-learn checks it, and
# infinite where a float32 model computes: refused, under the array's own name.
BEYOND_FLOAT32 = 1e39
FLOAT32_MESSAGE = r"Input {} contains infinity or a value too large for dtype\('float32'\)"


def test_predict_proba_of_a_value_beyond_float32_names_X(clf):
    clf.fit(X, y)
    Xbad = X[:2].copy()
    Xbad[0, 1] = BEYOND_FLOAT32
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format("X") + r".*X\[0, 1\] = 1e\+39"):
        clf.predict_proba(Xbad)
    # a float64 model computes with it: a probability, as scikit-learn gives
    proba = clf.set_params(dtype="float64").fit(X, y).predict_proba(Xbad)
    assert np.isfinite(proba).all()


def test_a_sparse_X_beyond_float32_names_X(clf):
    sp = pytest.importorskip("scipy.sparse")
    Xbad = sp.csr_matrix(X)
    Xbad.data[5] = -BEYOND_FLOAT32
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format("X")):
        clf.fit(Xbad, y)


def test_an_X_val_beyond_float32_names_X_val(clf):
    X_val = X.copy()
    X_val[4, 0] = BEYOND_FLOAT32
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format("X_val")):
        clf.set_params(early_stopping=True).fit(X, y, X_val=X_val, y_val=y)


@pytest.mark.parametrize(
    "value, message",
    [(np.nan, "Input y_val contains NaN"), (BEYOND_FLOAT32, FLOAT32_MESSAGE.format("y_val"))],
)
def test_a_bad_y_val_names_y_val(value, message):
    y_val = y_reg.copy()
    y_val[2] = value
    reg = MLPRegressor(hidden_layer_sizes=(4,), max_iter=2, device="cpu")
    with pytest.raises(ValueError, match=message):
        reg.fit(X, y_reg, X_val=X, y_val=y_val)


def test_the_validation_set_is_named_in_scikit_learn_errors(clf):
    with pytest.raises(ValueError, match=r"validation set \(X_val, y_val\): X has 2 features"):
        clf.fit(X, y, X_val=X[:, :2], y_val=y)


def test_a_y_beyond_float32_is_blamed_on_y_not_X():
    ybad = y_reg.copy()
    ybad[7] = BEYOND_FLOAT32
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format("y") + r".*y\[7\]"):
        MLPRegressor(hidden_layer_sizes=(4,), max_iter=2, device="cpu").fit(X, ybad)


@pytest.mark.parametrize("name", ["sample_weight", "sample_weight_val"])
def test_a_sample_weight_beyond_float32_is_blamed_on_it(clf, name):
    weights = np.ones(40)
    weights[3] = BEYOND_FLOAT32
    if name == "sample_weight":
        kwargs = {"sample_weight": weights}
    else:
        kwargs = {"X_val": X, "y_val": y, "sample_weight_val": weights}
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format(name)):
        clf.fit(X, y, **kwargs)


def test_sample_weights_that_round_to_zero_in_float32_are_refused(clf):
    with pytest.raises(
        ValueError, match="sample_weight has no weight that stays positive.*float32"
    ):
        clf.fit(X, y, sample_weight=np.full(40, 1e-50))
    clf.set_params(dtype="float64").fit(X, y, sample_weight=np.full(40, 1e-50))  # fine there


def test_sample_weight_times_class_weight_is_checked_in_the_model_dtype(clf):
    weights = np.full(40, 1e20)
    with pytest.raises(ValueError, match=FLOAT32_MESSAGE.format("sample_weight \\* class_weight")):
        clf.set_params(class_weight={0: 1e20, 1: 1e20}).fit(X, y, sample_weight=weights)


def test_float32_data_are_checked_without_a_copy(clf):
    tracemalloc = pytest.importorskip("tracemalloc")
    X32 = np.random.RandomState(0).rand(50_000, 20).astype(np.float32)  # 4 MB
    clf.fit(X32[:40], y)
    tracemalloc.start()
    try:
        clf._validate_X_predict(X32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < X32.nbytes / 10


# -- class_weight gets sample_weight's checks ------------------------------------------------
@pytest.mark.parametrize(
    "class_weight, message",
    [
        ({0: 0, 1: 0}, r"class_weight=\{0: 0, 1: 0\} gives every sample zero weight"),
        ({0: -1.0, 1: 1.0}, "class_weight must map classes to finite numbers >= 0, got -1.0"),
        ({0: np.nan, 1: 1.0}, "class_weight must map classes to finite numbers >= 0, got nan"),
        ({0: np.inf, 1: 1.0}, "class_weight must map classes to finite numbers >= 0, got inf"),
        ({0: "heavy", 1: 1.0}, "class_weight must map classes to finite numbers >= 0"),
        ({0: 1e39, 1: 1.0}, FLOAT32_MESSAGE.format("class_weight")),
        # scikit-learn's rule for keys that are not classes
        ({0: 2.0, 5: 1.0}, r"The classes, \[1\], are not in class_weight"),
    ],
)
def test_bad_class_weight_is_a_value_error_naming_it(clf, class_weight, message):
    with pytest.raises(ValueError, match=message):
        clf.set_params(class_weight=class_weight).fit(X, y)


def test_class_weight_all_zero_is_refused_by_partial_fit_too(clf):
    with pytest.raises(ValueError, match="gives every sample zero weight"):
        clf.set_params(class_weight={0: 0.0, 1: 0.0}).partial_fit(X, y, classes=[0, 1])


def test_class_weight_zero_for_one_class_and_balanced_still_train(clf):
    one = clf.set_params(class_weight={0: 0.0, 1: 1.0}).fit(X, y)
    assert np.isfinite(one.loss_curve_).all()
    balanced = MLPClassifier(hidden_layer_sizes=(4,), max_iter=5, random_state=0, device="cpu")
    balanced.set_params(class_weight="balanced").fit(X[:30], y[:30])
    assert np.isfinite(balanced.loss_curve_).all()


# -- what a user's callback or scorer returns ----------------------------------------


def _returning(value):
    from sknet.callbacks import Callback

    class Answers(Callback):
        def on_epoch_end(self, state, epoch, logs):
            return value

    return Answers()


@pytest.mark.parametrize(
    "value, shown",
    [("yes", "str 'yes'"), (1, "int 1"), (np.array([1, 0]), "ndarray array([1, 0])")],
    ids=["str", "int", "array"],
)
def test_a_callback_returning_anything_but_a_bool_is_named(value, shown, clf):
    # Before: "yes" and 1 stopped training after one epoch (truthiness); an array
    # failed with NumPy's "truth value of an array ... is ambiguous".
    with pytest.raises(TypeError, match=r"Answers\.on_epoch_end must return True, False or None"):
        clf.set_params(callbacks=[_returning(value)]).fit(X, y)
    with pytest.raises(TypeError, match=re.escape(shown)):
        clf.set_params(callbacks=[_returning(value)]).fit(X, y)


@pytest.mark.parametrize("value, n_iter", [(None, 5), (False, 5), (True, 1), (np.True_, 1)])
def test_a_callback_returning_a_bool_or_none_is_obeyed(value, n_iter, clf):
    assert clf.set_params(callbacks=[_returning(value)]).fit(X, y).n_iter_ == n_iter


def _scorer(value):
    def constant_score(estimator, X, y):
        return value

    return constant_score


@pytest.mark.parametrize(
    "value, shown",
    [("a", "str 'a'"), (np.array([1.0, 2.0]), "ndarray"), (None, "NoneType None")],
    ids=["str", "array", "None"],
)
def test_a_scorer_returning_anything_but_one_number_is_named(value, shown, clf):
    # Before: float() failed inside the validation step ("could not convert string to
    # float", "only 0-dimensional arrays can be converted"), naming no scorer.
    clf.set_params(early_stopping=True, scoring=_scorer(value))
    with pytest.raises(TypeError, match=r"scoring=.*constant_score must return one number") as e:
        clf.fit(X, y)
    assert shown in str(e.value)


@pytest.mark.parametrize("value", [0.5, np.float32(0.5), np.array(0.5), 1], ids=repr)
def test_a_scorer_returning_one_number_is_recorded(value, clf):
    clf.set_params(early_stopping=True, scoring=_scorer(value), max_iter=2)
    expected = float(value)
    assert clf.fit(X, y).validation_scores_ == [expected, expected]


# -- outputs of a fitted model are never non-finite without a warning naming the layer -----
def _fitted(Est, **kwargs):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Est(max_iter=3, random_state=0, device="cpu", **kwargs).fit(X, y_reg)


def test_outputs_that_overflow_name_the_layer_that_made_them():
    from sknet import NeuralNetRegressor
    from sknet.layers import Dense

    reg = _fitted(NeuralNetRegressor, layers=[Dense(8, activation="relu"), Dense(8)])
    big = np.full((3, 3), 3e38)  # finite in float32; a weighted sum of them is not
    big[0] = X[0]
    with (
        np.errstate(all="ignore"),
        pytest.warns(RuntimeWarning, match=r"2 of 3 rows are not finite.*Dense \(layers_\[0\]\)"),
    ):
        P = reg.predict(big)
    assert np.isfinite(P[0]) and not np.isfinite(P[1:]).any()


def test_an_output_activation_that_overflows_is_named():
    reg = _fitted(MLPRegressor, hidden_layer_sizes=(4,), loss="poisson")
    with (
        np.errstate(all="ignore"),
        pytest.warns(RuntimeWarning, match=r"output activation 'exp' of Poisson"),
    ):
        reg.predict(np.full((2, 3), 1e30))


def test_features_that_overflow_name_the_layer():
    from sklearn.frozen import FrozenEstimator

    from sknet import FeatureExtractor, NeuralNetRegressor
    from sknet.layers import Dense

    reg = _fitted(NeuralNetRegressor, layers=[Dense(8), Dense(8, activation="relu")])
    features = FeatureExtractor(FrozenEstimator(reg), layer=1).fit(X, y_reg)
    with (
        np.errstate(all="ignore"),
        pytest.warns(RuntimeWarning, match=r"features of 1 of 1 rows .*Dense \(layers_\[0\]\)"),
    ):
        features.transform(np.full((1, 3), 3e38))


def test_finite_outputs_warn_nothing():
    import warnings

    reg = _fitted(MLPRegressor, hidden_layer_sizes=(4,), loss="poisson")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(reg.predict(X)).all()

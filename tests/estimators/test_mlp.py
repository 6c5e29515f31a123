"""Behaviour tests for sknet/estimators/_mlp.py (and the fit of sknet/estimators/_base.py)."""

import os
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import neural_network as sk
from sklearn.base import clone
from sklearn.datasets import make_multilabel_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import sknet.backend._numpy as numpy_backend_module
from sknet import MLPClassifier, MLPRegressor
from sknet.engine._trainer import Trainer
from sknet.layers import Dense, Dropout

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def digits_split(digits):
    X, y = digits
    return train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(n_samples=200, n_features=8, noise=0.1, random_state=0)
    return X, y / y.std()


def max_coef_diff(a, b):
    return max(np.abs(ca - cb).max() for ca, cb in zip(a.coefs_, b.coefs_))


# -- the same numbers as scikit-learn -----------------------------------------

SAME_AS_SKLEARN = [
    dict(),
    dict(solver="sgd"),
    dict(solver="sgd", nesterovs_momentum=False, learning_rate="invscaling"),
    dict(solver="sgd", learning_rate="adaptive", n_iter_no_change=2, tol=0.1, max_iter=40),
    dict(solver="lbfgs", max_iter=30),
    dict(activation="logistic", alpha=0.01),
    dict(activation="tanh", batch_size=64, shuffle=False),
    dict(hidden_layer_sizes=(20, 10), activation="identity"),
]


@pytest.mark.parametrize("params", SAME_AS_SKLEARN)
def test_float64_classifier_trains_exactly_like_sklearn(params, digits):
    X, y = digits
    params = {"max_iter": 8, **params}
    ours = MLPClassifier(random_state=0, dtype="float64", device="cpu", **params).fit(X, y)
    theirs = sk.MLPClassifier(random_state=0, **params).fit(X, y)
    assert max_coef_diff(ours, theirs) < 1e-9
    assert ours.n_iter_ == theirs.n_iter_
    assert_allclose(ours.loss_, theirs.loss_, rtol=1e-9)
    if params.get("solver") != "lbfgs":
        assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-9)
        assert ours.t_ == theirs.t_
    assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-9)


def test_float64_binary_early_stopping_like_sklearn(digits):
    X, y = digits
    y = y > 4  # binary: scikit-learn stratifies this split too
    kw = dict(random_state=0, max_iter=10, early_stopping=True)
    ours = MLPClassifier(dtype="float64", device="cpu", **kw).fit(X, y)
    theirs = sk.MLPClassifier(**kw).fit(X, y)
    assert max_coef_diff(ours, theirs) < 1e-9
    assert_allclose(ours.validation_scores_, theirs.validation_scores_)


@pytest.mark.parametrize("params", [dict(), dict(solver="lbfgs"), dict(loss="poisson")])
def test_float64_regressor_trains_exactly_like_sklearn(params, regression):
    X, y = regression
    if params.get("loss") == "poisson":
        y = np.exp(y / 3)
    ours = MLPRegressor(random_state=0, max_iter=10, dtype="float64", device="cpu", **params)
    theirs = sk.MLPRegressor(random_state=0, max_iter=10, **params)
    ours.fit(X, y)
    theirs.fit(X, y)
    assert max_coef_diff(ours, theirs) < 1e-9
    assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-8)


def test_float32_accuracy_matches_sklearn_on_digits(digits_split):
    X_train, X_test, y_train, y_test = digits_split
    kw = dict(random_state=0, max_iter=60)
    ours = MLPClassifier(device="cpu", **kw).fit(X_train, y_train)
    theirs = sk.MLPClassifier(**kw).fit(X_train, y_train)
    assert ours.coefs_[0].dtype == np.float32
    assert abs(ours.score(X_test, y_test) - theirs.score(X_test, y_test)) <= 0.005
    assert ours.score(X_test, y_test) > 0.95


# -- targets ------------------------------------------------------------------


def test_multiclass_with_string_labels(digits_split):
    X_train, X_test, y_train, y_test = digits_split
    names = np.array(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    )
    clf = MLPClassifier(random_state=0, max_iter=30, device="cpu")
    clf.fit(X_train, names[y_train])
    assert_array_equal(clf.classes_, np.sort(names))
    pred = clf.predict(X_test)
    assert pred.dtype.kind == "U" and set(pred) <= set(names)
    assert (pred == names[y_test]).mean() > 0.9
    proba = clf.predict_proba(X_test)
    assert proba.shape == (len(X_test), 10)
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    assert_array_equal(clf.classes_[proba.argmax(axis=1)], pred)
    assert clf.out_activation_ == "softmax" and clf.n_outputs_ == 10


def test_binary_labels_of_any_type(digits):
    X, y = digits
    for labels in ([-1, 1], ["no", "yes"], [False, True], [3.0, 7.0]):
        yy = np.where(y > 4, labels[1], labels[0])
        clf = MLPClassifier(random_state=0, max_iter=20, device="cpu").fit(X, yy)
        assert clf.n_outputs_ == 1 and clf.out_activation_ == "logistic"
        assert_array_equal(clf.classes_, np.array(labels))
        proba = clf.predict_proba(X)
        assert proba.shape == (len(X), 2)
        assert_array_equal(clf.classes_[proba.argmax(1)], clf.predict(X))
        assert clf.score(X, yy) > 0.9


def test_multilabel():
    X, Y = make_multilabel_classification(n_samples=300, n_classes=4, random_state=0)
    clf = MLPClassifier(hidden_layer_sizes=(50,), random_state=0, max_iter=200, device="cpu")
    clf.fit(X, Y)
    assert clf.out_activation_ == "logistic" and clf.n_outputs_ == 4
    pred = clf.predict(X)
    assert pred.shape == Y.shape and set(np.unique(pred)) <= {0, 1}
    assert (pred == Y).mean() > 0.85
    proba = clf.predict_proba(X)
    assert proba.shape == Y.shape and ((proba >= 0) & (proba <= 1)).all()
    assert_array_equal(pred, (proba > 0.5).astype(int))


def test_multilabel_partial_fit():
    X, Y = make_multilabel_classification(n_samples=200, n_classes=3, random_state=1)
    clf = MLPClassifier(random_state=0, device="cpu")
    for _ in range(30):
        clf.partial_fit(X, Y)
    assert clf.predict(X).shape == Y.shape
    assert (clf.predict(X) == Y).mean() > 0.8


def test_multioutput_regression(regression):
    X, y = regression
    Y = np.column_stack([y, -2 * y, y**2])
    reg = MLPRegressor(
        hidden_layer_sizes=(50,),
        learning_rate_init=0.01,
        max_iter=300,
        random_state=0,
        device="cpu",
    ).fit(X, Y)
    assert reg.n_outputs_ == 3 and reg.predict(X).shape == (200, 3)
    assert reg.score(X, Y) > 0.8


def test_regressor_single_output_and_column_vector(regression):
    X, y = regression
    reg = MLPRegressor(learning_rate_init=0.01, max_iter=200, random_state=0, device="cpu")
    assert reg.fit(X, y).predict(X).shape == (200,)
    assert reg.score(X, y) > 0.95
    with pytest.warns(Warning, match="column-vector y"):
        reg.fit(X, y[:, None])
    assert reg.predict(X).shape == (200,)


def test_poisson_regression_predicts_positive_means():
    rng = np.random.RandomState(0)
    X = rng.rand(400, 3)
    y = rng.poisson(np.exp(X @ [1.0, -1.0, 2.0]))
    reg = MLPRegressor(
        loss="poisson", learning_rate_init=0.01, max_iter=200, random_state=0, device="cpu"
    ).fit(X, y)
    assert reg.out_activation_ == "exp"
    assert (reg.predict(X) > 0).all()
    assert np.corrcoef(reg.predict(X), np.exp(X @ [1.0, -1.0, 2.0]))[0, 1] > 0.9


# -- inputs -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_equals_dense(fmt, digits):
    X, y = digits
    kw = dict(random_state=0, max_iter=5, device="cpu")
    dense = MLPClassifier(**kw).fit(X, y)
    sparse = MLPClassifier(**kw).fit(sp.csr_matrix(X).asformat(fmt), y)
    assert max_coef_diff(dense, sparse) < 1e-5
    assert_allclose(
        sparse.predict_proba(sp.csr_matrix(X).asformat(fmt)), dense.predict_proba(X), atol=1e-5
    )


def test_pandas_dataframe_keeps_feature_names(digits):
    pd = pytest.importorskip("pandas")
    X, y = digits
    df = pd.DataFrame(X, columns=[f"pixel{i}" for i in range(64)])
    clf = MLPClassifier(random_state=0, max_iter=5, device="cpu").fit(df, pd.Series(y))
    assert_array_equal(clf.feature_names_in_, df.columns)
    assert clf.n_features_in_ == 64
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        assert_array_equal(clf.predict(df), clf.predict(df.to_numpy()))
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(df.rename(columns={"pixel0": "other"}))


def test_float32_data_is_not_copied(digits, monkeypatch):
    X, y = digits
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    seen = []
    original = numpy_backend_module.NumpyBackend.asarray

    def spy(self, x, dtype=None):
        out = original(self, x, dtype)
        seen.append((x, out))
        return out

    monkeypatch.setattr(numpy_backend_module.NumpyBackend, "asarray", spy)
    MLPClassifier(random_state=0, max_iter=2, device="cpu").fit(X32, y)
    moved = [out for x, out in seen if getattr(x, "shape", None) == X32.shape]
    assert moved and all(out is X32 for out in moved)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float16, np.uint8, object])
def test_any_numeric_input_dtype(dtype, digits):
    X, y = digits
    Xd = (X * 16).astype(dtype)
    clf = MLPClassifier(random_state=0, max_iter=3, device="cpu").fit(Xd, y)
    assert clf.predict_proba(Xd).dtype == np.float32


def test_dtype_float64_gives_float64_model(digits):
    X, y = digits
    clf = MLPClassifier(random_state=0, max_iter=2, dtype="float64", device="cpu").fit(X, y)
    assert clf.coefs_[0].dtype == np.float64
    assert clf.predict_proba(X).dtype == np.float64


# -- training loop ------------------------------------------------------------


def test_random_state_reproducibility(digits):
    X, y = digits
    kw = dict(max_iter=3, device="cpu", dropout=0.2, early_stopping=True)
    a = MLPClassifier(random_state=7, **kw).fit(X, y)
    b = MLPClassifier(random_state=7, **kw).fit(X, y)
    c = MLPClassifier(random_state=8, **kw).fit(X, y)
    assert max_coef_diff(a, b) == 0
    assert max_coef_diff(a, c) > 0.01


def test_early_stopping_restores_the_best_weights(digits):
    X, y = digits
    clf = MLPClassifier(
        random_state=0,
        max_iter=200,
        early_stopping=True,
        n_iter_no_change=3,
        learning_rate_init=0.02,
        device="cpu",
    ).fit(X, y)
    scores = clf.validation_scores_
    assert clf.n_iter_ < 200 and len(scores) == clf.n_iter_
    assert clf.best_validation_score_ == max(scores)
    assert clf.best_loss_ is None
    # The restored model scores the best epoch's score on its validation split,
    # which is the stratified split scikit-learn would draw.
    from sklearn.utils import check_random_state

    rng = check_random_state(0)
    for n_in, n_out in [(64, 100), (100, 10)]:
        rng.uniform(size=(n_in, n_out))
        rng.uniform(size=n_out)
    _, val = train_test_split(np.arange(len(y)), test_size=0.1, stratify=y, random_state=rng)
    assert np.bincount(y[val]).min() >= 17  # stratified: every class present
    assert clf.score(X[val], y[val]) == pytest.approx(clf.best_validation_score_)


def test_early_stopping_split_is_stratified(monkeypatch, digits):
    X, y = digits
    import sknet.engine._validation as base

    seen = {}
    original = base.train_test_split

    def spy(*args, **kwargs):
        seen["stratify"] = kwargs.get("stratify")
        return original(*args, **kwargs)

    monkeypatch.setattr(base, "train_test_split", spy)
    MLPClassifier(random_state=0, max_iter=2, early_stopping=True, device="cpu").fit(X, y)
    assert_array_equal(seen["stratify"], y)


def test_convergence_warning_at_max_iter(digits):
    X, y = digits
    with pytest.warns(ConvergenceWarning, match=r"Maximum iterations \(3\) reached"):
        MLPClassifier(max_iter=3, random_state=0, device="cpu").fit(X, y)


def test_no_warning_when_converged(digits):
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = MLPClassifier(max_iter=500, tol=1e-2, random_state=0, device="cpu").fit(X, y)
    assert clf.n_iter_ < 500


def test_verbose_prints_sklearn_lines(digits, capsys):
    X, y = digits
    MLPClassifier(max_iter=2, verbose=True, random_state=0, early_stopping=True, device="cpu").fit(
        X, y
    )
    out = capsys.readouterr().out
    assert re.search(r"^Iteration 1, loss = \d+\.\d{8}$", out, re.M)
    assert re.search(r"^Iteration 2, loss = ", out, re.M)
    assert "Validation score: " in out


def test_verbose_lbfgs_prints_iterations(digits, capsys):
    X, y = digits
    MLPClassifier(solver="lbfgs", max_iter=3, verbose=True, random_state=0, device="cpu").fit(X, y)
    out = capsys.readouterr().out
    assert re.search(r"^Iteration 3, loss = \d+\.\d{8}$", out, re.M)


def test_silent_by_default(digits, capsys):
    X, y = digits
    MLPClassifier(max_iter=2, random_state=0, device="cpu").fit(X, y)
    assert capsys.readouterr().out == ""


def test_keyboard_interrupt_leaves_a_usable_model(digits, monkeypatch):
    X, y = digits
    clf = MLPClassifier(max_iter=50, random_state=0, device="cpu")
    original = Trainer.run_batches
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "run_batches", interrupted)
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        clf.fit(X, y)
    assert clf.n_iter_ == 3 and len(clf.loss_curve_) == 3
    monkeypatch.undo()
    three_epochs = MLPClassifier(max_iter=3, random_state=0, device="cpu").fit(X, y)
    assert max_coef_diff(clf, three_epochs) == 0
    assert_array_equal(clf.predict(X), three_epochs.predict(X))


def test_divergence_is_a_clear_error_and_leaves_no_broken_model(digits):
    X, y = digits
    clf = MLPClassifier(
        solver="sgd",
        learning_rate_init=1e6,
        momentum=0.99,
        max_iter=20,
        random_state=0,
        device="cpu",
    )
    with pytest.raises(
        ValueError,
        match="^Solver produced non-finite parameter weights.*"
        "loss became nan.*lower learning_rate_init",
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            clf.fit(X * 100, y)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        clf.predict(X)


def test_divergence_during_partial_fit_restores_the_previous_model(digits):
    X, y = digits
    clf = MLPClassifier(solver="sgd", random_state=0, device="cpu")
    clf.partial_fit(X, y, classes=np.unique(y))
    before = [c.copy() for c in clf.coefs_]
    proba = clf.predict_proba(X)
    velocity = [v.copy() for v in clf._optimizer.velocities]
    curve = list(clf.loss_curve_)
    clf.set_params(learning_rate_init=1e8)
    with pytest.raises(ValueError, match="non-finite"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for _ in range(5):
                clf.partial_fit(X * 1e3, y)
    assert_allclose(clf.predict_proba(X), proba)
    for a, b in zip(clf.coefs_, before):
        assert_array_equal(a, b)
    assert clf.loss_curve_[: len(curve)] == curve
    assert np.isfinite(clf.loss_curve_).all()
    assert all(np.isfinite(v).all() for v in clf._optimizer.velocities)
    assert len(clf._optimizer.velocities) == len(velocity)


def test_partial_fit_keeps_optimizer_state_and_counts(digits):
    X, y = digits
    clf = MLPClassifier(random_state=0, batch_size=100, device="cpu")
    clf.partial_fit(X, y, classes=np.unique(y))
    assert clf.n_iter_ == 1 and clf._optimizer.t == 18 and clf.t_ == len(X)
    clf.partial_fit(X[:500], y[:500])
    assert clf.n_iter_ == 1 and clf._optimizer.t == 23 and clf.t_ == len(X) + 500
    assert len(clf.loss_curve_) == 2


def test_partial_fit_equals_fit_epochs(digits):
    X, y = digits
    kw = dict(random_state=0, shuffle=False, device="cpu", dtype="float64")
    fitted = MLPClassifier(max_iter=3, **kw).fit(X, y)
    partial = MLPClassifier(**kw)
    for _ in range(3):
        partial.partial_fit(X, y, classes=np.unique(y))
    assert max_coef_diff(fitted, partial) < 1e-12


def test_partial_fit_needs_classes_first(digits):
    X, y = digits
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        MLPClassifier(device="cpu").partial_fit(X, y)
    clf = MLPClassifier(device="cpu").partial_fit(X[y < 5], y[y < 5], classes=np.arange(10))
    assert clf.predict_proba(X).shape == (len(X), 10)
    with pytest.raises(ValueError, match="not the same as on last call"):
        clf.partial_fit(X, y, classes=np.arange(5))
    with pytest.raises(ValueError, match="classes not in"):
        clf.partial_fit(X, y + 20)


def test_partial_fit_unavailable_for_lbfgs():
    clf = MLPClassifier(solver="lbfgs")
    assert not hasattr(clf, "partial_fit")
    assert not hasattr(MLPRegressor(solver="lbfgs"), "partial_fit")
    assert hasattr(MLPRegressor(solver="sgd"), "partial_fit")


def test_partial_fit_refuses_early_stopping(digits):
    X, y = digits
    from sklearn.exceptions import NotFittedError

    clf = MLPClassifier(early_stopping=True, device="cpu")
    with pytest.raises(ValueError, match="partial_fit does not support early_stopping"):
        clf.partial_fit(X, y, classes=np.unique(y))
    with pytest.raises(NotFittedError):  # no untrained model left behind
        clf.predict(X)


def test_warm_start_continues_training(digits):
    X, y = digits
    clf = MLPClassifier(max_iter=5, warm_start=True, random_state=0, device="cpu").fit(X, y)
    t, curve = clf._optimizer.t, list(clf.loss_curve_)
    clf.fit(X, y)
    assert clf._optimizer.t == 2 * t  # Adam's state carried over
    assert clf.loss_curve_[:5] == curve and len(clf.loss_curve_) == 10
    assert clf.loss_curve_[5] < curve[-1] * 1.05
    with pytest.raises(ValueError, match="warm_start can only be used where `y` has the same"):
        clf.fit(X[y < 5], y[y < 5])


def test_refit_without_warm_start_starts_over(digits):
    X, y = digits
    clf = MLPClassifier(max_iter=3, random_state=0, device="cpu")
    first = [c.copy() for c in clf.fit(X, y).coefs_]
    clf.fit(X, y)
    assert len(clf.loss_curve_) == 3
    for a, b in zip(first, clf.coefs_):
        assert_array_equal(a, b)


def test_zero_sample_weight_equals_dropping_samples(digits):
    X, y = digits
    w = np.ones(len(y))
    w[::3] = 0
    kw = dict(random_state=0, max_iter=5, batch_size=len(y), shuffle=False, device="cpu")
    weighted = MLPClassifier(**kw).fit(X, y, sample_weight=w)
    dropped = MLPClassifier(**{**kw, "batch_size": int(w.sum())}).fit(X[w > 0], y[w > 0])
    assert max_coef_diff(weighted, dropped) < 1e-4


def test_integer_sample_weight_equals_repetition_in_float32():
    rng = np.random.RandomState(42)
    X, y = rng.rand(15, 30), rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    kw = dict(random_state=0, device="cpu")
    repeated = MLPClassifier(**kw).fit(X.repeat(sw, axis=0), y.repeat(sw))
    weighted = MLPClassifier(**kw).fit(X, y, sample_weight=sw)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-3, atol=1e-4)


def test_sample_weight_shifts_the_decision(digits):
    X, y = digits
    yb = (y == 3).astype(int)
    kw = dict(random_state=0, max_iter=30, device="cpu")
    plain = MLPClassifier(**kw).fit(X, yb)
    heavy = MLPClassifier(**kw).fit(X, yb, sample_weight=np.where(yb == 1, 20.0, 1.0))
    assert heavy.predict(X).sum() > plain.predict(X).sum()


def test_dropout_trains_and_changes_the_model(digits_split):
    X_train, X_test, y_train, y_test = digits_split
    kw = dict(random_state=0, max_iter=40, device="cpu")
    with_dropout = MLPClassifier(dropout=0.3, **kw).fit(X_train, y_train)
    assert [type(layer) for layer in with_dropout.layers_] == [Dense, Dropout, Dense]
    assert with_dropout.score(X_test, y_test) > 0.93
    assert max_coef_diff(with_dropout, MLPClassifier(**kw).fit(X_train, y_train)) > 1e-3
    # predictions are deterministic: dropout is off at predict time
    assert_array_equal(with_dropout.predict_proba(X_test), with_dropout.predict_proba(X_test))


@pytest.mark.parametrize("activation", ["leaky_relu", "elu", "gelu", "silu"])
def test_modern_activations_learn(activation, digits_split):
    X_train, X_test, y_train, y_test = digits_split
    clf = MLPClassifier(activation=activation, random_state=0, max_iter=40, device="cpu")
    assert clf.fit(X_train, y_train).score(X_test, y_test) > 0.93


def test_fitted_attributes(digits):
    X, y = digits
    clf = MLPClassifier(hidden_layer_sizes=(30, 20), max_iter=3, random_state=0, device="cpu")
    clf.fit(X, y)
    assert [c.shape for c in clf.coefs_] == [(64, 30), (30, 20), (20, 10)]
    assert [b.shape for b in clf.intercepts_] == [(30,), (20,), (10,)]
    assert all(type(c) is np.ndarray for c in clf.coefs_ + clf.intercepts_)
    assert clf.n_layers_ == 4 and clf.n_outputs_ == 10 and clf.n_features_in_ == 64
    assert clf.n_iter_ == 3 and clf.t_ == 3 * len(X)
    assert clf.loss_ == clf.loss_curve_[-1] and clf.best_loss_ == min(clf.loss_curve_)
    assert clf.validation_scores_ is None and clf.best_validation_score_ is None
    assert clf.device_ == "cpu"
    # the training buffers are gone: only the weights outlive fit
    for layer in clf.layers_:
        assert layer._buffers == {} and layer._cache == {}
    assert all(layer.grads == {} for layer in clf.layers_)  # no gradients outlive fit


def test_lbfgs_fitted_attributes(digits):
    X, y = digits
    clf = MLPClassifier(solver="lbfgs", max_iter=20, random_state=0, device="cpu").fit(X, y)
    assert clf.n_iter_ <= 20 and np.isfinite(clf.loss_)
    assert not hasattr(clf, "loss_curve_")


def test_layer_objects_are_not_shared_between_fits(digits):
    X, y = digits
    a = MLPClassifier(max_iter=2, random_state=0, device="cpu").fit(X, y)
    b = clone(a).fit(X, y)
    assert a.layers_[0] is not b.layers_[0]
    assert a.layers_[0].params["W"] is not b.layers_[0].params["W"]


# -- scikit-learn tools ---------------------------------------------------------


def test_pipeline_and_grid_search(digits):
    X, y = digits
    pipe = make_pipeline(
        StandardScaler(), MLPClassifier(max_iter=20, random_state=0, device="cpu")
    )
    grid = GridSearchCV(
        pipe,
        {
            "mlpclassifier__hidden_layer_sizes": [(16,), (32,)],
            "mlpclassifier__alpha": [1e-4, 1e-2],
        },
        cv=2,
        n_jobs=2,
    )
    grid.fit(X, y)
    assert grid.best_score_ > 0.7
    assert len(grid.cv_results_["params"]) == 4
    assert grid.best_estimator_[-1].n_iter_ == 20


def test_set_params_and_clone():
    clf = MLPClassifier(hidden_layer_sizes=(5,), dropout=0.1, device="cpu")
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    assert twin.set_params(dropout=0.5).dropout == 0.5 and clf.dropout == 0.1


def test_predict_log_proba_is_stable(digits):
    X, y = digits
    for yy in (y, y > 4):
        clf = MLPClassifier(max_iter=20, random_state=0, device="cpu").fit(X, yy)
        log_p = clf.predict_log_proba(X)
        assert np.isfinite(log_p).all()
        assert_allclose(np.exp(log_p), clf.predict_proba(X), atol=1e-6)
        # far from the data, probabilities would underflow: they stop at the
        # smallest normal float32, so log-probabilities stay finite
        far = X[:3] * 1e4
        assert (clf.predict_proba(far) > 0).all()
        assert np.isfinite(clf.predict_log_proba(far)).all()


def test_device_parameter(digits, monkeypatch):
    X, y = digits
    monkeypatch.delenv("SKNET_DEVICE", raising=False)
    clf = MLPClassifier(max_iter=2, random_state=0).fit(X, y)
    assert clf.device_ in ("cpu", "cuda:0")
    monkeypatch.setenv("SKNET_DEVICE", "cpu")
    assert MLPClassifier(max_iter=2).fit(X, y).device_ == "cpu"


def test_cuda_device_without_gpu_is_a_clear_error(digits, monkeypatch):
    import sys

    import sknet.backend as backend_module

    monkeypatch.setitem(sys.modules, "cupy", None)
    backend_module.cuda_device_count.cache_clear()
    try:
        X, y = digits
        with pytest.raises(ValueError, match="CUDA GPU.*device='cpu'"):
            MLPClassifier(device="cuda").fit(X, y)
        with pytest.raises(ValueError, match="device must be"):
            MLPClassifier(device="tpu").fit(X, y)
    finally:
        backend_module.cuda_device_count.cache_clear()


def test_training_runs_on_every_device(device, digits_split):
    X_train, X_test, y_train, y_test = digits_split
    clf = MLPClassifier(max_iter=30, random_state=0, device=device).fit(X_train, y_train)
    assert clf.device_.startswith(device)
    assert clf.score(X_test, y_test) > 0.93


def test_a_layer_replacing_its_gradient_arrays_is_caught(digits, monkeypatch):
    X, y = digits
    original = Dense.backward

    def rebinding_backward(self, dY):
        dX = original(self, dY)
        self.grads["b"] = self.grads["b"].copy()  # breaks the in-place contract
        return dX

    monkeypatch.setattr(Dense, "backward", rebinding_backward)
    with pytest.raises(TypeError, match=r"replaced grads\['b'\].*in place"):
        MLPClassifier(max_iter=2, device="cpu").fit(X, y)


MNIST_DIR = os.environ.get("SKNET_MNIST_DIR")


@pytest.mark.skipif(not MNIST_DIR, reason="MNIST not configured (set SKNET_MNIST_DIR)")
def test_mnist_accuracy_matches_sklearn():
    from sknet.datasets import load_mnist

    X, y = load_mnist(MNIST_DIR, subset="test")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=0
    )
    kw = dict(hidden_layer_sizes=(128,), batch_size=128, max_iter=15, random_state=0)
    ours = MLPClassifier(device="cpu", **kw).fit(X_train, y_train)
    theirs = sk.MLPClassifier(**kw).fit(X_train, y_train)
    ours_acc, theirs_acc = ours.score(X_test, y_test), theirs.score(X_test, y_test)
    assert abs(ours_acc - theirs_acc) <= 0.005
    assert ours_acc > 0.93


def test_a_failing_first_fit_leaves_no_fitted_model(digits, monkeypatch):
    from sklearn.exceptions import NotFittedError

    X, y = digits

    def broken_epoch(self, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(Trainer, "run_batches", broken_epoch)
    clf = MLPClassifier(device="cpu")
    with pytest.raises(RuntimeError, match="boom"):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        clf.predict(X)


def test_refit_with_another_solver_forgets_the_old_curves(digits):
    X, y = digits
    clf = MLPClassifier(max_iter=3, early_stopping=True, random_state=0, device="cpu")
    clf.fit(X, y)
    clf.set_params(solver="lbfgs", early_stopping=False).fit(X, y)
    for name in ("loss_curve_", "validation_scores_", "best_validation_score_"):
        assert not hasattr(clf, name)

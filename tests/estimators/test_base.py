"""Tests of the estimator core: warm starts, the fit transaction, training state,
early stopping, scoring, callbacks' checks, persistence and scikit-learn's output."""

import doctest
import inspect
import pickle
import re

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import balanced_accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

import sknet
import sknet.engine._network
import sknet.engine._trainer
import sknet.layers._init
from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor, RNNClassifier
from sknet.backend import get_backend
from sknet.callbacks import (
    Callback,
    Checkpoint,
    EarlyStopping,
    LRScheduler,
    PrintLog,
    TerminateOnNaN,
)
from sknet.layers import LSTM, Dense, Dropout, Embedding, Flatten, Layer
from tests.custom_layers import Scale

# Small max_iter everywhere: "not converged" is expected, not the subject here.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def data(digits):
    X, y = digits
    return train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)


def mlp(**params):
    params = {
        "hidden_layer_sizes": (16,),
        "max_iter": 3,
        "random_state": 0,
        "device": "cpu",
        **params,
    }
    return MLPClassifier(**params)


def fitted_attributes(est):
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("__"))


def assert_same_model(est, before, X):
    """``est`` still is the model ``before`` (a pickled copy taken earlier)."""
    assert est.n_iter_ == before.n_iter_
    assert est.t_ == before.t_
    assert len(est.history_) == len(before.history_)
    for a, b in zip(est.network_.weights(), before.network_.weights()):
        assert_array_equal(np.asarray(a), np.asarray(b))
    assert_array_equal(est.predict_proba(X), before.predict_proba(X))


# -- 1. warm start / partial_fit refuse a changed network ------------------------------
@pytest.mark.parametrize("name, value", [("hidden_layer_sizes", (7,)), ("activation", "tanh")])
@pytest.mark.parametrize("how", ["warm_start", "partial_fit"])
def test_warm_fit_refuses_changed_mlp_parameter(data, name, value, how):
    X, _, y, _ = data
    clf = mlp().fit(X, y)
    proba = clf.predict_proba(X)
    clf.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"{name} changed"):
        if how == "warm_start":
            clf.set_params(warm_start=True).fit(X, y)
        else:
            clf.partial_fit(X, y)
    assert_array_equal(clf.predict_proba(X), proba)
    assert clf.coefs_[0].shape == (64, 16)


def test_warm_fit_refuses_changed_regressor_loss(data):
    X, _, y, _ = data
    y = y.astype(float)
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu")
    reg.fit(X, y)
    pred = reg.predict(X)
    reg.set_params(loss="poisson", warm_start=True)
    with pytest.raises(ValueError, match="loss changed"):
        reg.fit(X, y)
    with pytest.raises(ValueError, match="loss changed"):
        reg.partial_fit(X, y)
    assert_array_equal(reg.predict(X), pred)


def test_warm_fit_refuses_changed_conv_filters(data):
    X, _, y, _ = data
    clf = ConvNetClassifier(
        conv_filters=(4,), dense_units=(8,), max_iter=1, random_state=0, device="cpu"
    ).fit(X[:300], y[:300])
    proba = clf.predict_proba(X[:50])
    clf.set_params(conv_filters=(5,), warm_start=True)
    with pytest.raises(ValueError, match="conv_filters changed"):
        clf.fit(X[:300], y[:300])
    with pytest.raises(ValueError, match="conv_filters changed"):
        clf.partial_fit(X[:300], y[:300])
    assert_array_equal(clf.predict_proba(X[:50]), proba)


def test_warm_fit_refuses_changed_rnn_units():
    rng = np.random.RandomState(0)
    X, y = rng.rand(60, 5, 2), rng.randint(0, 2, 60)
    clf = RNNClassifier(units=(4,), max_iter=1, random_state=0, device="cpu").fit(X, y)
    proba = clf.predict_proba(X)
    clf.set_params(units=(5,), warm_start=True)
    with pytest.raises(ValueError, match="units changed"):
        clf.fit(X, y)
    with pytest.raises(ValueError, match="units changed"):
        clf.partial_fit(X, y)
    assert_array_equal(clf.predict_proba(X), proba)


def test_list_and_tuple_hidden_layer_sizes_are_the_same_network(data):
    X, _, y, _ = data
    clf = mlp(hidden_layer_sizes=(16,)).fit(X, y)
    n_iter = clf.n_iter_
    clf.set_params(hidden_layer_sizes=[16], warm_start=True).fit(X, y)
    clf.partial_fit(X, y)
    assert len(clf.history_) == 2 * n_iter + 1


def test_cold_refit_after_a_change_builds_the_new_network(data):
    X, _, y, _ = data
    clf = mlp().fit(X, y)
    clf.set_params(hidden_layer_sizes=(7,), warm_start=False).fit(X, y)
    assert clf.coefs_[0].shape == (64, 7)
    assert clf.layers_[0].params["W"].shape == (64, 7)
    # ... and it is now the network a warm fit continues.
    clf.set_params(warm_start=True).fit(X, y)
    assert clf.coefs_[0].shape == (64, 7)


def test_warm_start_can_switch_early_stopping_on_and_off(data):
    X, _, y, _ = data
    clf = mlp(warm_start=True).fit(X, y)
    clf.set_params(early_stopping=True).fit(X, y)
    assert len(clf.validation_scores_) == clf.n_iter_ == 3
    clf.set_params(early_stopping=False).fit(X, y)
    assert clf.best_loss_ == min(clf.loss_curve_[-3:])


# -- 2. a dtype change on warm start converts the whole state --------------------------
def test_warm_start_dtype_change_converts_params_and_optimizer(data):
    X, _, y, _ = data
    clf = mlp(dtype="float32").fit(X, y)
    assert clf.predict_proba(X).dtype == np.float32
    n_iter, t = clf.n_iter_, clf.t_
    clf.set_params(dtype="float64", warm_start=True).fit(X, y)
    for layer in clf.layers_:
        for value in layer.params.values():
            assert value.dtype == np.float64
    assert clf._optimizer.ms and clf._optimizer.vs
    for array in clf._optimizer.ms + clf._optimizer.vs:
        assert array.dtype == np.float64
    assert clf.predict_proba(X).dtype == np.float64
    assert clf.n_iter_ == n_iter  # n_iter_ counts the last call, as in scikit-learn
    assert clf.t_ == t + n_iter * X.shape[0]
    assert len(clf.history_) == 2 * n_iter
    assert np.isfinite(clf.loss_)


# -- 3. dropout masks are fresh on every call ------------------------------------------
def test_dropout_masks_differ_across_partial_fit_calls(data, monkeypatch):
    X, _, y, _ = data
    clf = mlp(dropout=0.5, shuffle=False)
    clf.partial_fit(X, y, classes=np.unique(y))
    assert isinstance(clf.layers_[1], Dropout)
    saved = [{k: np.array(v, copy=True) for k, v in layer.params.items()} for layer in clf.layers_]

    masks, record = [], {"first": True}
    forward = Dropout.forward

    def recording_forward(self, X, *, training):
        out = forward(self, X, training=training)
        if training and record["first"]:
            masks.append(np.array(self._cache["draws"], copy=True))
            record["first"] = False
        return out

    monkeypatch.setattr(Dropout, "forward", recording_forward)
    for _ in range(2):
        for layer, params in zip(clf.layers_, saved):  # same weights, data and order
            for k, v in params.items():
                layer.params[k][...] = v
        record["first"] = True
        clf.partial_fit(X, y)
    assert len(masks) == 2
    assert masks[0].shape == masks[1].shape
    assert not np.array_equal(masks[0], masks[1])


def test_fresh_fits_with_the_same_random_state_repeat_themselves(data):
    X, _, y, _ = data
    a = mlp(dropout=0.5).fit(X, y)
    b = mlp(dropout=0.5).fit(X, y)
    for wa, wb in zip(a.coefs_ + a.intercepts_, b.coefs_ + b.intercepts_):
        assert_array_equal(wa, wb)


# -- 4. interrupts and errors: the previous model or a complete new one ------------------
def test_keyboard_interrupt_during_lbfgs_first_fit_keeps_a_complete_model(data, monkeypatch):
    X, _, y, _ = data
    calls = {"n": 0}
    original = sknet.engine._trainer.Trainer.loss_and_gradients

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sknet.engine._trainer.Trainer, "loss_and_gradients", interrupted)
    clf = mlp(solver="lbfgs", max_iter=50)
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        clf.fit(X, y)
    check_is_fitted(clf)
    assert len(clf.coefs_) == 2
    assert clf.predict(X).shape == y.shape
    # four loss evaluations ran before the interrupt: L-BFGS's first iterations, each
    # complete (the fifth, interrupted, is not counted)
    assert 1 <= clf.n_iter_ <= 4
    assert np.isfinite(clf.loss_)


def _raise_keyboard_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "target", [(sknet.engine._network.Network, "build"), (MLPClassifier, "_validation_split")]
)
def test_keyboard_interrupt_outside_epochs_leaves_first_fit_unfitted(data, monkeypatch, target):
    X, _, y, _ = data
    monkeypatch.setattr(*target, _raise_keyboard_interrupt)
    clf = mlp(early_stopping=True)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    assert fitted_attributes(clf) == []


@pytest.mark.parametrize(
    "target", [(sknet.engine._network.Network, "build"), (MLPClassifier, "_validation_split")]
)
def test_keyboard_interrupt_outside_epochs_keeps_previous_model(data, monkeypatch, target):
    X, _, y, _ = data
    clf = mlp(early_stopping=True).fit(X, y)
    before = pickle.loads(pickle.dumps(clf))
    coefs = clf.coefs_
    monkeypatch.setattr(*target, _raise_keyboard_interrupt)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    assert_same_model(clf, before, X)
    for a, b in zip(clf.coefs_, coefs):
        assert_array_equal(a, b)
    assert fitted_attributes(clf) == fitted_attributes(before)


class _Boom(Callback):
    def on_epoch_end(self, state, epoch, logs):
        raise RuntimeError("boom")


def test_callback_error_in_warm_fit_keeps_previous_model(data):
    X, _, y, _ = data
    clf = mlp().fit(X, y)
    before = pickle.loads(pickle.dumps(clf))
    clf.set_params(warm_start=True, callbacks=[_Boom()])
    with pytest.raises(RuntimeError, match="boom"):
        clf.fit(X, y)
    assert_same_model(clf, before, X)
    for a, b in zip(clf._optimizer.ms, before._optimizer.ms):
        assert_array_equal(np.asarray(a), np.asarray(b))
    # and the model still trains on
    clf.set_params(callbacks=None).fit(X, y)
    assert len(clf.history_) == 2 * before.n_iter_


# -- 5. two early-stopping mechanisms; BestWeights -----------------------------------
@pytest.mark.parametrize(
    "params",
    [
        # accuracy, the default score, peaks some epochs before the validation loss
        {"learning_rate_init": 0.01, "n_iter_no_change": 5},
        # a constant score: the built-in rule's best epoch is the first one
        {"learning_rate_init": 0.003, "n_iter_no_change": 4, "scoring": lambda est, X, y: 0.5},
    ],
    ids=["accuracy", "constant-score"],
)
def test_user_early_stopping_callback_wins_over_builtin_early_stopping(data, params):
    X, X_val, y, y_val = data
    clf = mlp(
        early_stopping=True,
        max_iter=40,
        dtype="float64",
        callbacks=[EarlyStopping(monitor="valid_loss", patience=2)],
        **params,
    )
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    valid_losses = [row["valid_loss"] for row in clf.history_]
    best_epoch = int(np.argmin(valid_losses)) + 1
    builtin_best = int(np.argmax(clf.validation_scores_)) + 1
    assert best_epoch != builtin_best  # the two rules disagree: the test tells them apart
    assert clf.callbacks_[0].best_epoch_ == best_epoch
    assert log_loss(y_val, clf.predict_proba(X_val), labels=clf.classes_) == pytest.approx(
        min(valid_losses), rel=1e-4
    )


def test_best_weights_save_restore_clear(data):
    X, _, y, _ = data
    network = mlp().fit(X, y).network_
    best = sknet.engine._callbacks.BestWeights()
    assert best.restore(network) is False  # nothing saved
    best.save(network, 3)
    assert best.epoch == 3
    saved = [np.array(w, copy=True) for w in network.weights()]
    for w in network.weights():
        w[...] = 0
    assert best.restore(network) is True
    for w, s in zip(network.weights(), saved):
        assert_array_equal(w, s)
    # a second save overwrites the first copy, and is not an alias of the weights
    network.weights()[0][...] = 1
    best.save(network, 4)
    network.weights()[0][...] = 2
    best.restore(network)
    assert best.epoch == 4
    assert_array_equal(network.weights()[0], 1)
    best.clear()
    assert best.epoch is None
    assert best.restore(network) is False


def test_terminate_on_nan_and_early_stopping_share_best_weights(data, monkeypatch):
    X, X_val, y, y_val = data
    created = []

    class CountingBestWeights(sknet.engine._callbacks.BestWeights):
        def __init__(self):
            super().__init__()
            self.saves = 0
            created.append(self)

        def save(self, network, epoch):
            self.saves += 1
            super().save(network, epoch)

    monkeypatch.setattr(sknet.callbacks._stopping, "_BestWeights", CountingBestWeights)
    clf = mlp(callbacks=[TerminateOnNaN(), EarlyStopping(monitor="valid_loss")])
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    assert len(created) == 2
    assert all(bw.saves >= 1 for bw in created)
    # nothing outlives fit: no callback still holds a copy of the weights
    for callback in clf.callbacks_:
        for value in vars(callback).values():
            assert not (isinstance(value, CountingBestWeights) and value._arrays is not None)


# -- 6. callbacks that cannot work are refused before the first epoch -------------------
def _recorder(events):
    class Recorder(Callback):
        def on_epoch_begin(self, state, epoch):
            events.append(epoch)

    return Recorder()


def test_lr_scheduler_with_lbfgs_is_a_clear_value_error(data):
    X, _, y, _ = data
    events = []
    clf = mlp(solver="lbfgs", callbacks=[LRScheduler(), _recorder(events)])
    with pytest.raises(ValueError, match="LRScheduler needs solver"):
        clf.fit(X, y)
    assert events == []
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


@pytest.mark.parametrize(
    "make_callback",
    [
        lambda tmp_path: EarlyStopping(monitor="valid_loss"),
        lambda tmp_path: Checkpoint(tmp_path / "model.joblib", monitor="valid_score"),
    ],
    ids=["EarlyStopping", "Checkpoint"],
)
def test_validation_monitor_without_validation_set_fails_before_training(
    data, tmp_path, make_callback
):
    X, _, y, _ = data
    events = []
    clf = mlp(callbacks=[make_callback(tmp_path), _recorder(events)])
    with pytest.raises(ValueError, match="needs a validation set"):
        clf.fit(X, y)
    assert events == []
    assert not hasattr(clf, "history_")
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    assert not (tmp_path / "model.joblib").exists()


# -- 7. the documented custom layer works ----------------------------------------------
def test_documented_custom_layer_example_fits_and_predicts(data):
    X, X_test, y, _ = data
    clf = ConvNetClassifier(
        layers=[Flatten(), Dense(16, activation="relu"), Scale()],
        max_iter=5,
        random_state=0,
        device="cpu",
    )
    clf.fit(X, y)
    assert clf.predict(X_test).shape == (X_test.shape[0],)
    assert isinstance(clf.layers_[2], Scale)
    assert clf.layers_[2].output_shape_ == (16,)
    assert clf.layers_[2].params["s"][0] != 1  # it was trained


def test_scale_above_is_the_docstring_example():
    source = "".join(
        example.source for example in doctest.DocTestParser().get_examples(Layer.__doc__)
    )
    code = inspect.getsource(Scale).replace(
        "    # The example of Layer's docstring, as written there.\n", ""
    )
    assert code in source.replace("from sknet.layers import Layer\n", "")


def _scale_layer_from_docstring():
    """The docstring's Scale, run as doctest runs it (a class pickle cannot find)."""
    namespace = {}
    for example in doctest.DocTestParser().get_examples(Layer.__doc__):
        exec(example.source, namespace)
    return namespace["Scale"]


def _local_initializer(rng, weight_shape, n_biases, fan_in, fan_out, activation=None):
    W, b = sknet.layers._init.he_uniform(rng, weight_shape, n_biases, fan_in, fan_out, activation)
    return W, b


@pytest.mark.parametrize(
    "layers",
    [
        lambda: [Flatten(), Dense(16, activation="relu"), _scale_layer_from_docstring()()],
        lambda: [
            Flatten(),
            Dense(16, activation="relu", init=lambda *args, **kw: _local_initializer(*args, **kw)),
        ],
    ],
    ids=["docstring-Scale-as-doctest-runs-it", "lambda-initializer"],
)
def test_layers_that_cannot_be_pickled_still_fit(data, layers):
    # Neither a class defined in a doctest/function nor a lambda can be pickled;
    # fitting (and predicting) must not need to.
    X, X_test, y, _ = data
    clf = ConvNetClassifier(layers=layers(), max_iter=2, random_state=0, device="cpu")
    clf.fit(X, y)
    assert clf.predict(X_test).shape == (X_test.shape[0],)
    clf.set_params(warm_start=True).fit(X, y)
    assert len(clf.history_) == 4


# -- 8. validation in a Pipeline ---------------------------------------------------------
def test_pipeline_transform_input_sends_X_val_through_the_scaler(data):
    X, X_val, y, y_val = data
    X, X_val = X * 50 + 100, X_val * 50 + 100
    with sklearn.config_context(enable_metadata_routing=True):
        clf = mlp(max_iter=5, learning_rate_init=0.01)
        pipe = Pipeline(
            [("scale", StandardScaler()), ("mlp", clf.set_fit_request(X_val=True, y_val=True))],
            transform_input=["X_val"],
        )
        pipe.fit(X, y, X_val=X_val, y_val=y_val)
        score = pipe.score(X_val, y_val)
    assert score > 0.8
    assert pipe[-1].history_[-1]["valid_score"] == pytest.approx(score)
    # X_val left raw would score differently:
    assert pipe[-1].score(X_val, y_val) != pytest.approx(score)


def test_validation_data_is_deprecated_in_favour_of_transform_input(data):
    X, X_val, y, y_val = data
    with pytest.warns(FutureWarning, match="transform_input"):
        clf = mlp().fit(X, y, validation_data=(X_val, y_val))
    assert clf.history_[-1]["valid_score"] == pytest.approx(clf.score(X_val, y_val))


# -- 9. scoring= --------------------------------------------------------------------------
def test_scoring_balanced_accuracy_drives_early_stopping(data):
    X, X_val, y, y_val = data
    # Imbalanced: classes 5-9 keep a fifth of their samples.
    rng = np.random.RandomState(0)
    keep = (y < 5) | (rng.rand(y.shape[0]) < 0.2)
    keep_val = (y_val < 5) | (rng.rand(y_val.shape[0]) < 0.2)
    X, y, X_val, y_val = X[keep], y[keep], X_val[keep_val], y_val[keep_val]
    clf = mlp(
        early_stopping=True,
        scoring="balanced_accuracy",
        class_weight="balanced",
        max_iter=8,
        n_iter_no_change=3,
    )
    clf.fit(X, y, X_val=X_val, y_val=y_val)
    scores = [row["valid_score"] for row in clf.history_]
    assert_allclose(scores, clf.validation_scores_)
    best = int(np.argmax(scores))
    expected = balanced_accuracy_score(y_val, clf.predict(X_val))
    assert clf.history_[best]["valid_score"] == pytest.approx(expected)
    assert clf.best_validation_score_ == pytest.approx(expected)


def test_scoring_loss_is_minus_the_validation_loss(data):
    X, X_val, y, y_val = data
    clf = mlp(scoring="loss").fit(X, y, X_val=X_val, y_val=y_val)
    assert len(clf.history_) == 3
    for row in clf.history_:
        assert row["valid_score"] == -row["valid_loss"]


def test_scoring_callable_is_called_with_estimator_X_y(data):
    X, X_val, y, y_val = data
    clf = mlp(scoring=lambda est, X, y: 0.5).fit(X, y, X_val=X_val, y_val=y_val)
    assert [row["valid_score"] for row in clf.history_] == [0.5] * 3


def test_unknown_scoring_name_is_a_value_error(data):
    X, _, y, _ = data
    clf = mlp(early_stopping=True, scoring="no_such_scorer")
    with pytest.raises(ValueError):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


@pytest.mark.parametrize("cls", [MLPClassifier, ConvNetClassifier, RNNClassifier])
def test_classifier_docstrings_document_class_weight_and_scoring(cls):
    assert "class_weight :" in cls.__doc__
    assert "scoring :" in cls.__doc__


# -- 10. smaller items --------------------------------------------------------------------
def test_gradients_do_not_outlive_fit_nor_get_pickled(data):
    X, _, y, _ = data
    clf = mlp(hidden_layer_sizes=(256,)).fit(X, y)
    assert all(layer.grads == {} for layer in clf.layers_)
    param_bytes = sum(int(p.nbytes) for p in clf.network_.params())
    # A pickle holds the parameters and Adam's two moments (3x their bytes) plus a
    # little bookkeeping; gradients would add a fourth copy (4x).
    size = len(pickle.dumps(clf))
    assert 3 * param_bytes < size < 3.5 * param_bytes
    assert all(layer.grads == {} for layer in pickle.loads(pickle.dumps(clf)).layers_)


def test_coefs_are_copies(data):
    X, _, y, _ = data
    clf = mlp().fit(X, y)
    proba = clf.predict_proba(X)
    clf.coefs_[0][...] = 0
    clf.intercepts_[0][...] = 0
    assert_array_equal(clf.predict_proba(X), proba)


def test_partial_fit_keeps_the_memory_pool_fit_releases_it(data, monkeypatch):
    X, _, y, _ = data
    calls = []
    monkeypatch.setattr(
        type(get_backend("cpu")), "release_memory", lambda self: calls.append(self)
    )
    clf = mlp()
    for _ in range(3):
        clf.partial_fit(X, y, classes=np.unique(y))
    assert calls == []
    clf.fit(X, y)
    assert len(calls) == 1


def test_predict_after_unpickling_does_not_modify_the_estimator(data):
    X, _, y, _ = data
    clf = pickle.loads(pickle.dumps(mlp().fit(X, y)))
    backend = get_backend("cpu")
    assert clf.network_.backend is backend
    assert all(layer.backend_ is backend for layer in clf.layers_)
    keys = sorted(vars(clf))
    network_state = dict(vars(clf.network_))
    ids = [(id(layer.params), [id(v) for v in layer.params.values()]) for layer in clf.layers_]
    clf.predict(X)
    clf.predict_proba(X)
    assert sorted(vars(clf)) == keys
    assert {k: id(v) for k, v in vars(clf.network_).items()} == {
        k: id(v) for k, v in network_state.items()
    }
    assert [
        (id(layer.params), [id(v) for v in layer.params.values()]) for layer in clf.layers_
    ] == ids


def test_classifier_partial_fit_positional_order_matches_scikit_learn(data):
    X, _, y, _ = data
    sample_weight = np.linspace(0.5, 1.5, X.shape[0])
    classes = np.unique(y)
    positional = mlp().partial_fit(X, y, sample_weight, classes)
    keyword = mlp().partial_fit(X, y, sample_weight=sample_weight, classes=classes)
    assert_array_equal(positional.classes_, classes)
    for a, b in zip(positional.coefs_, keyword.coefs_):
        assert_array_equal(a, b)


def test_verbose_2_adds_no_progress_bar(data, capsys):
    X, _, y, _ = data
    clf = mlp(verbose=2).fit(X, y)
    out, err = capsys.readouterr()
    assert err == ""
    assert clf.callbacks_ == []
    assert "Iteration 1, loss" in out


def test_rnn_infers_token_sequence_length_without_input_shape():
    rng = np.random.RandomState(0)
    X = rng.randint(0, 20, size=(40, 12))
    y = rng.randint(0, 2, 40)
    clf = RNNClassifier(
        layers=[Embedding(20, 8), LSTM(8)], device="cpu", max_iter=2, random_state=0
    )
    clf.fit(X, y)
    assert clf.input_shape_ == (12,)
    assert clf.predict(X).shape == (40,)


# -- 11. scikit-learn's printed lines; PrintLog; divergence --------------------------------
@pytest.mark.parametrize("verbose", [True, 2])
def test_verbose_prints_scikit_learn_lines(data, capsys, verbose):
    X, _, y, _ = data
    mlp(verbose=verbose, early_stopping=True).fit(X, y)
    out = capsys.readouterr().out
    assert re.search(r"^Iteration 1, loss = \d+\.\d{8}$", out, re.MULTILINE)
    assert re.search(r"^Iteration 3, loss = \d+\.\d{8}$", out, re.MULTILINE)
    assert len(re.findall(r"^Validation score: \d\.\d{6}$", out, re.MULTILINE)) == 3


def test_print_log_prints_a_header_and_one_row_per_epoch(data, capsys):
    X, X_val, y, y_val = data
    clf = mlp(callbacks=[PrintLog()]).fit(X, y, X_val=X_val, y_val=y_val)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("epoch  train_loss")
    assert lines[0] == PrintLog.HEADER
    assert len(lines) == 1 + clf.n_iter_
    for epoch, line in enumerate(lines[1:], start=1):
        assert line.split()[0] == str(epoch)
        assert float(line.split()[1]) == pytest.approx(
            clf.history_[epoch - 1]["train_loss"], abs=1e-5
        )


def _diverging(**params):
    return MLPClassifier(
        solver="sgd",
        learning_rate_init=1e5,
        momentum=0.99,
        max_iter=30,
        random_state=0,
        device="cpu",
        **params,
    )


def test_non_finite_loss_with_early_stopping_keeps_best_weights(data):
    X, _, y, _ = data
    clf = _diverging(early_stopping=True)
    with np.errstate(all="ignore"), pytest.warns(ConvergenceWarning, match="non-finite"):
        clf.fit(X * 100, y)
    assert all(np.isfinite(c).all() for c in clf.coefs_)
    assert all(np.isfinite(b).all() for b in clf.intercepts_)


def test_non_finite_loss_without_early_stopping_is_scikit_learn_error(data):
    X, _, y, _ = data
    clf = _diverging()
    with (
        np.errstate(all="ignore"),
        pytest.raises(
            ValueError,
            match=r"^Solver produced non-finite parameter weights\. The input "
            r"data may contain large values and need to be preprocessed\.",
        ),
    ):
        clf.fit(X * 100, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)

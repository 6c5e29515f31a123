"""Behaviour tests for frozen layers (``trainable=False``) and per-layer learning
rates (``lr_scale``): sknet/layers/_base.py, sknet/engine/_network.py (trainable_layers,
prepare_training, backward), sknet/engine/_trainer.py (Trainer._lay_out_parameters),
sknet/engine/_optimizers.py (rebind, _scaled), sknet/estimators/_base.py (_make_optimizer,
_canonical) and the frozen BatchNorm of sknet/layers/_normalization.py."""

import inspect
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import sknet.layers as layers_module
from sknet import ConvNetClassifier, NeuralNetRegressor, RNNClassifier
from sknet.callbacks import Callback
from sknet.layers import (
    GRU,
    LSTM,
    Activation,
    BatchNorm,
    Concatenate,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    Lambda,
    Layer,
    MaxPool2D,
    Residual,
    Sequential,
    SimpleRNN,
    TimeDistributed,
)
from sknet.layers._tree import walk
from tests.user_containers import Gate

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# -- helpers ---------------------------------------------------------------------


def host(a):
    return np.array(a, copy=True)


def copy_params(layers):
    """Host copies of every layer's ``params`` (one dict per layer)."""
    return [{k: host(v) for k, v in layer.params.items()} for layer in layers]


def copy_state(layers):
    return [{k: host(v) for k, v in getattr(layer, "state", {}).items()} for layer in layers]


def changed(before, after):
    """Whether any parameter of a layer differs (dicts of arrays)."""
    assert before.keys() == after.keys() and before
    return any(not np.array_equal(before[k], np.asarray(after[k])) for k in before)


def assert_same(before, after):
    assert before.keys() == after.keys() and before
    for k in before:
        assert_array_equal(np.asarray(after[k]), before[k], err_msg=f"param {k!r} moved")


def n_trainable_params(clf):
    return sum(
        int(v.size) for layer in clf.layers_ if layer.trainable for v in layer.params.values()
    )


class InitialWeights(Callback):
    """Copies every layer's params (and state) when training begins."""

    def on_train_begin(self, state):
        self.params_ = copy_params(state.network.layers)
        self.state_ = copy_state(state.network.layers)


class FrozenGradsAreZero(Callback):
    """After every batch, the grads of the layer at ``index`` are all zero."""

    def __init__(self, index=0):
        self.index = index

    def on_batch_end(self, state, batch, size):
        layer = state.network.layers[self.index]
        assert not layer.trainable
        self.checked_ = getattr(self, "checked_", 0) + 1
        for key, grad in layer.grads.items():
            assert not np.asarray(grad).any(), f"frozen grads[{key!r}] is not zero"


class MomentRecorder(Callback):
    """Adam's first moments per (layer, key) when training begins (after re-layout)."""

    def on_train_begin(self, state):
        self.moments_ = adam_moments(state.optimizer)


def adam_moments(optimizer):
    pieces = {}
    for m, segment in zip(optimizer.ms, optimizer.layout):
        offset = 0
        for layer, key, size in segment:
            pieces[(layer, key)] = host(m[offset : offset + size])
            offset += size
    return pieces


class FrozenScale(Layer):
    """A user layer that takes ``trainable`` but always writes its gradient."""

    def __init__(self, *, trainable=True):
        self.trainable = trainable

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.params = {"s": backend.xp.full((1,), 1.5, dtype=dtype)}
        self.grads = {"s": backend.xp.zeros((1,), dtype=dtype)}
        return input_shape

    def forward(self, X, *, training):
        if training:
            self._cache["X"] = X
        return X * self.params["s"]

    def backward(self, dY):
        self.grads["s"][...] = (dY * self._cache["X"]).sum()  # trainable or not
        return dY * self.params["s"]


@pytest.fixture(scope="module")
def data(digits):
    X, y = digits
    return X[:240], y[:240]


def convnet(layers, **kwargs):
    params = dict(
        layers=layers,
        alpha=0.1,
        random_state=0,
        max_iter=3,
        learning_rate_init=0.01,
        device="cpu",
        callbacks=[InitialWeights()],
    )
    params.update(kwargs)
    return ConvNetClassifier(**params)


def frozen_conv_layers():
    return [
        Conv2D(4, 3, activation="relu", trainable=False),
        Flatten(),
        Dense(16, activation="relu"),
    ]


# -- 1. frozen parameters never move ------------------------------------------------


@pytest.mark.parametrize("solver", ["adam", "sgd", "lbfgs"])
def test_frozen_params_are_bit_identical_after_fit(solver, data):
    X, y = data
    clf = convnet(frozen_conv_layers(), solver=solver).fit(X, y)
    initial = clf.callbacks_[0].params_
    after = copy_params(clf.layers_)
    assert_same(initial[0], after[0])  # alpha=0.1 would have shrunk W
    assert changed(initial[2], after[2])
    assert changed(initial[3], after[3])  # the output Dense


def test_frozen_params_are_bit_identical_through_warm_start(data):
    X, y = data
    clf = convnet(frozen_conv_layers(), warm_start=True).fit(X, y)
    initial = clf.callbacks_[0].params_
    first = copy_params(clf.layers_)
    clf.fit(X, y)
    second = copy_params(clf.layers_)
    assert_same(initial[0], second[0])
    assert changed(first[2], second[2]) and changed(first[3], second[3])


def test_frozen_params_are_bit_identical_through_partial_fit(data):
    X, y = data
    clf = convnet(frozen_conv_layers())
    clf.partial_fit(X[:120], y[:120], classes=np.unique(y))
    initial = clf.callbacks_[0].params_
    first = copy_params(clf.layers_)
    clf.partial_fit(X[120:], y[120:])
    second = copy_params(clf.layers_)
    assert_same(initial[0], first[0])
    assert_same(initial[0], second[0])
    assert changed(initial[2], first[2]) and changed(first[2], second[2])


# -- 2. no optimizer state for frozen parameters ----------------------------------------


def test_adam_state_covers_trainable_params_only(data):
    X, y = data
    clf = convnet(frozen_conv_layers()).fit(X, y)
    n = n_trainable_params(clf)
    assert n < sum(int(v.size) for layer in clf.layers_ for v in layer.params.values())
    assert sum(int(m.size) for m in clf._optimizer.ms) == n
    assert sum(int(v.size) for v in clf._optimizer.vs) == n
    laid_out = {(i, key) for segment in clf._optimizer.layout for i, key, _ in segment}
    assert all(i != 0 for i, _ in laid_out)


def test_sgd_velocities_cover_trainable_params_only(data):
    X, y = data
    clf = convnet(frozen_conv_layers(), solver="sgd").fit(X, y)
    assert sum(int(v.size) for v in clf._optimizer.velocities) == n_trainable_params(clf)


def test_one_state_array_per_lr_scale(data):
    X, y = data
    layers = [
        Conv2D(4, 3, activation="relu", trainable=False),
        Flatten(),
        Dense(16, activation="relu", lr_scale=0.1),
    ]
    clf = convnet(layers).fit(X, y)
    assert sorted(clf._optimizer.lr_scales) == [0.1, 1.0]
    assert len(clf._optimizer.ms) == 2
    assert sum(int(m.size) for m in clf._optimizer.ms) == n_trainable_params(clf)


# -- 3. frozen layers compute no weight gradient; backward stops early --------------------


def count_calls(monkeypatch, cls, predicate=lambda layer: True):
    calls = []
    original = cls.backward

    def backward(self, dY):
        if predicate(self):
            calls.append(self)
        return original(self, dY)

    monkeypatch.setattr(cls, "backward", backward)
    return calls


def test_frozen_lowest_layer_has_zero_grads_and_no_backward(monkeypatch, data):
    X, y = data
    calls = count_calls(monkeypatch, Conv2D)
    clf = convnet(frozen_conv_layers(), callbacks=[FrozenGradsAreZero(0)], batch_size=60).fit(X, y)
    assert clf.callbacks_[0].checked_ == 3 * 4
    assert calls == []


def test_frozen_dense_above_a_trainable_layer_passes_the_gradient_down(monkeypatch, data):
    X, y = data
    frozen_calls = count_calls(monkeypatch, Dense, lambda layer: not layer.trainable)
    conv_calls = count_calls(monkeypatch, Conv2D)
    layers = [
        Conv2D(4, 3, activation="relu"),
        Flatten(),
        Dense(16, activation="relu", trainable=False),
    ]
    clf = convnet(layers, batch_size=60, callbacks=[InitialWeights(), FrozenGradsAreZero(2)]).fit(
        X, y
    )
    assert len(frozen_calls) == 3 * 4
    assert len(conv_calls) == 3 * 4
    assert clf.callbacks_[1].checked_ == 3 * 4
    initial, after = clf.callbacks_[0].params_, copy_params(clf.layers_)
    assert_same(initial[2], after[2])
    assert changed(initial[0], after[0])  # trained through the frozen Dense


# -- 4. frozen BatchNorm -------------------------------------------------------------


def batchnorm_layers(trainable):
    return [Conv2D(4, 3), BatchNorm(trainable=trainable), Flatten(), Dense(8)]


def test_frozen_batchnorm_keeps_params_and_running_statistics(data):
    X, y = data
    clf = convnet(batchnorm_layers(False)).fit(X, y)
    cb = clf.callbacks_[0]
    bn = clf.layers_[1]
    assert_same(cb.params_[1], copy_params(clf.layers_)[1])
    assert set(bn.state) == {"running_mean", "running_var"}
    assert_same(cb.state_[1], copy_state(clf.layers_)[1])
    assert changed(cb.params_[0], copy_params(clf.layers_)[0])


def test_trainable_batchnorm_updates_running_statistics(data):
    X, y = data
    clf = convnet(batchnorm_layers(True)).fit(X, y)
    cb = clf.callbacks_[0]
    assert changed(cb.state_[1], copy_state(clf.layers_)[1])
    assert changed(cb.params_[1], copy_params(clf.layers_)[1])


# -- 5. lr_scale scales the step exactly ------------------------------------------------


@pytest.mark.parametrize("solver", ["sgd", "adam"])
def test_lr_scale_scales_the_first_step_exactly(solver, data):
    X, y = data

    def step(lr_scale):
        layers = [
            Conv2D(4, 3, activation="relu", lr_scale=lr_scale),
            Flatten(),
            Dense(16, activation="relu"),
        ]
        clf = convnet(
            layers,
            solver=solver,
            dtype="float64",
            momentum=0.0,
            alpha=0.0,
            shuffle=False,
            batch_size=len(X),
            learning_rate_init=0.05,
        )
        clf.partial_fit(X, y, classes=np.unique(y))
        initial = clf.callbacks_[0].params_
        after = copy_params(clf.layers_)
        return [{k: after[i][k] - initial[i][k] for k in after[i]} for i in range(len(after))]

    scaled, plain = step(0.1), step(1.0)
    for key in plain[0]:
        assert np.abs(plain[0][key]).max() > 0
        assert_allclose(scaled[0][key], 0.1 * plain[0][key], rtol=1e-9, atol=1e-15)
    for i in (2, 3):
        for key in plain[i]:
            assert np.abs(plain[i][key]).max() > 0
            assert_allclose(scaled[i][key], plain[i][key], rtol=1e-9, atol=1e-15)


# -- 6. freeze, then unfreeze on a warm start -----------------------------------------


def test_unfreezing_on_a_warm_start_trains_the_layer_and_keeps_head_moments(data):
    X, y = data
    clf = convnet(frozen_conv_layers(), warm_start=True).fit(X, y)
    saved = adam_moments(clf._optimizer)
    assert not any(i == 0 for i, _ in saved)
    head = {k: v for k, v in saved.items() if k[0] != 0}
    assert any(v.any() for v in head.values())
    before = copy_params(clf.layers_)

    clf.set_params(layers__0__trainable=True, callbacks=[MomentRecorder()])
    clf.fit(X, y)  # no ValueError: trainable is not part of the network's identity
    moments = clf.callbacks_[0].moments_
    assert (0, "W") in moments and (0, "b") in moments, "layer 0 was not laid out"
    for key, value in head.items():
        assert_array_equal(moments[key], value)
    assert not moments[(0, "W")].any() and not moments[(0, "b")].any()
    assert clf.layers_[0].trainable
    assert changed(before[0], copy_params(clf.layers_)[0])


def test_optimizer_state_follows_parameters_when_a_built_layer_is_unfrozen(data):
    # The re-layout (Trainer._lay_out_parameters + StochasticOptimizer.rebind) after
    # the layer's parameter is flipped: the built layer follows its parameter.
    X, y = data
    clf = convnet(frozen_conv_layers(), warm_start=True).fit(X, y)
    saved = adam_moments(clf._optimizer)
    before = copy_params(clf.layers_)
    clf.set_params(layers__0__trainable=True, callbacks=[MomentRecorder()])
    clf.fit(X, y)
    moments = clf.callbacks_[0].moments_
    assert set(moments) == set(saved) | {(0, "W"), (0, "b")}
    for key, value in saved.items():
        assert_array_equal(moments[key], value)
    assert not moments[(0, "W")].any() and not moments[(0, "b")].any()
    assert changed(before[0], copy_params(clf.layers_)[0])
    assert sum(int(m.size) for m in clf._optimizer.ms) == n_trainable_params(clf)


def test_freezing_on_a_warm_start_stops_the_layer(data):
    X, y = data
    layers = [Conv2D(4, 3, activation="relu"), Flatten(), Dense(16, activation="relu")]
    clf = convnet(layers, warm_start=True).fit(X, y)
    before = copy_params(clf.layers_)
    clf.set_params(layers__0__trainable=False)
    clf.fit(X, y)
    assert_same(before[0], copy_params(clf.layers_)[0])
    assert sum(int(m.size) for m in clf._optimizer.ms) == n_trainable_params(clf)


def test_changing_lr_scale_on_a_warm_start_is_accepted(data):
    X, y = data
    clf = convnet(frozen_conv_layers(), warm_start=True).fit(X, y)
    clf.set_params(layers__2__lr_scale=0.5)
    clf.fit(X, y)  # no ValueError
    clf.set_params(layers__0__lr_scale=2.0)
    clf.partial_fit(X, y)
    assert clf.n_iter_ > 0


def test_changed_lr_scale_takes_effect_on_a_warm_start(data):
    X, y = data
    layers = [Conv2D(4, 3, activation="relu"), Flatten(), Dense(16, activation="relu")]
    clf = convnet(layers, warm_start=True).fit(X, y)
    clf.set_params(layers__2__lr_scale=0.5)
    clf.fit(X, y)
    assert clf.layers_[2].lr_scale == 0.5
    assert sorted(clf._optimizer.lr_scales) == [0.5, 1.0]
    scale_of = {
        i: s
        for s, segment in zip(clf._optimizer.lr_scales, clf._optimizer.layout)
        for i, _, _ in segment
    }
    assert scale_of == {0: 1.0, 2: 0.5, 3: 1.0}


# -- 7. grid search and clone ------------------------------------------------------------


def test_grid_search_over_trainable_and_lr_scale(data):
    X, y = data
    clf = ConvNetClassifier(
        layers=[Conv2D(4, 3, activation="relu"), Flatten()],
        max_iter=2,
        random_state=0,
        device="cpu",
    )
    grid = {"layers__0__trainable": [True, False], "layers__0__lr_scale": [0.1, 1.0]}
    search = GridSearchCV(clf, grid, cv=2).fit(X, y)
    assert len(search.cv_results_["params"]) == 4
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    best = search.best_estimator_
    assert best.layers_[0].trainable == search.best_params_["layers__0__trainable"]
    assert best.layers_[0].lr_scale == search.best_params_["layers__0__lr_scale"]


def test_clone_keeps_trainable_and_lr_scale():
    clf = ConvNetClassifier(
        layers=[Conv2D(4, 3, trainable=False, lr_scale=0.1), Flatten(), Dense(8, lr_scale=3.0)]
    )
    params = clone(clf).get_params()
    assert params["layers__0__trainable"] is False
    assert params["layers__0__lr_scale"] == 0.1
    assert params["layers__2__trainable"] is True
    assert params["layers__2__lr_scale"] == 3.0
    layer = clone(Embedding(10, 4, trainable=False, lr_scale=0.5))
    assert (layer.trainable, layer.lr_scale) == (False, 0.5)


# -- 8. recurrent networks -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tokens():
    rng = np.random.RandomState(0)
    X = rng.randint(0, 20, size=(120, 10))
    return X, (X == 3).any(axis=1).astype(int)


def rnn(layers, **kwargs):
    return RNNClassifier(
        layers=layers,
        max_iter=3,
        learning_rate_init=0.01,
        random_state=0,
        device="cpu",
        callbacks=[InitialWeights()],
        **kwargs,
    )


def test_frozen_embedding_with_trainable_lstm(tokens):
    X, y = tokens
    clf = rnn([Embedding(20, 8, trainable=False), LSTM(8)], alpha=0.1).fit(X, y)
    initial, after = clf.callbacks_[0].params_, copy_params(clf.layers_)
    assert_same(initial[0], after[0])
    assert changed(initial[1], after[1])
    assert sum(int(m.size) for m in clf._optimizer.ms) == n_trainable_params(clf)


@pytest.mark.parametrize("trainable", [False, True])
def test_time_distributed_follows_its_inner_layer(trainable):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(80, 6, 3))
    y = (X[:, :, 0].sum(axis=1) > 0).astype(int)
    layers = [TimeDistributed(Dense(4, activation="tanh", trainable=trainable)), LSTM(8)]
    clf = rnn(layers).fit(X, y)
    assert clf.layers_[0].trainable is None  # as its inner layer says
    assert clf.layers_[0].layer_.trainable is trainable
    initial = clf.callbacks_[0].params_[0]
    inner = {k: host(v) for k, v in clf.layers_[0].layer_.params.items()}
    assert set(inner) == {"W", "b"}
    if trainable:
        assert changed(initial, inner)
    else:
        assert_same(initial, inner)
    assert changed(clf.callbacks_[0].params_[1], copy_params(clf.layers_)[1])


# -- 9. a user layer that writes its gradient anyway ------------------------------------


def test_custom_frozen_layer_that_writes_grads_trains_the_rest(data):
    X, y = data
    layers = [
        Conv2D(4, 3, activation="relu"),
        Flatten(),
        FrozenScale(trainable=False),
        Dense(8, activation="relu"),
    ]
    clf = convnet(layers).fit(X, y)
    initial, after = clf.callbacks_[0].params_, copy_params(clf.layers_)
    assert_array_equal(after[2]["s"], [1.5])
    assert_same(initial[2], after[2])
    assert changed(initial[0], after[0]) and changed(initial[3], after[3])
    assert sum(int(m.size) for m in clf._optimizer.ms) == n_trainable_params(clf)
    # lowest layer with parameters, frozen: its backward is skipped, still no error
    clf = convnet([FrozenScale(trainable=False), Conv2D(4, 3), Flatten()]).fit(X, y)
    assert_array_equal(clf.layers_[0].params["s"], [1.5])


def test_custom_trainable_layer_does_train(data):
    X, y = data
    layers = [Conv2D(4, 3, activation="relu"), Flatten(), FrozenScale(), Dense(8)]
    clf = convnet(layers).fit(X, y)
    assert not np.array_equal(clf.layers_[2].params["s"], [1.5])


# -- 10. bad values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(trainable="no"), "trainable"),
        (dict(trainable=1), "trainable"),
        (dict(trainable=None), "trainable"),
        (dict(lr_scale=0), "lr_scale"),
        (dict(lr_scale=-1.0), "lr_scale"),
        (dict(lr_scale="1"), "lr_scale"),
        (dict(lr_scale=float("nan")), "lr_scale"),
    ],
)
def test_bad_trainable_or_lr_scale_raises_at_fit(kwargs, name, data):
    X, y = data
    clf = convnet([Conv2D(2, 3), Flatten(), Dense(4, **kwargs)], max_iter=1)
    with pytest.raises(ValueError, match=name):
        clf.fit(X[:40], y[:40])


# -- 11. every stock layer with parameters takes them --------------------------------------


@pytest.mark.parametrize(
    "layer",
    [
        Dense(4),
        Conv2D(4, 3),
        BatchNorm(),
        SimpleRNN(4),
        LSTM(4),
        GRU(4),
        Embedding(10, 4),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_stock_layers_take_trainable_and_lr_scale(layer):
    params = layer.get_params()
    assert params["trainable"] is True and params["lr_scale"] == 1.0
    frozen = clone(layer).set_params(trainable=False, lr_scale=0.25)
    assert (frozen.trainable, frozen.lr_scale) == (False, 0.25)
    assert (layer.trainable, layer.lr_scale) == (True, 1.0)  # clone: not shared


def test_time_distributed_flags_are_its_inner_layers_unless_set():
    layer = TimeDistributed(Dense(4, trainable=False, lr_scale=0.5))
    params = layer.get_params()
    assert params["layer__trainable"] is False and params["layer__lr_scale"] == 0.5
    assert (layer.trainable, layer.lr_scale) == (None, None)  # None: the inner layer's


# -- 12. warm starts carry flags set at any depth of the tree ------------------------------


@pytest.mark.parametrize(
    "make, key",
    [
        (lambda: TimeDistributed(Dense(3)), "layers__0__layer__trainable"),
        (
            lambda: TimeDistributed(Sequential([Dense(3)])),
            "layers__0__layer__layers__0__trainable",
        ),
        (lambda: Sequential([Flatten(), Dense(3)]), "layers__0__layers__1__trainable"),
        (lambda: TimeDistributed(Gate(Dense(3))), "layers__0__layer__block__trainable"),
    ],
    ids=["TimeDistributed", "TimeDistributed(Sequential)", "Sequential", "user container"],
)
def test_a_warm_start_freezes_a_layer_set_inside_a_container(make, key):
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(60, 4, 3)), rng.normal(size=60)
    inner = make()
    layers = [inner] if isinstance(inner, Sequential) else [inner, GlobalAvgPool1D()]
    reg = NeuralNetRegressor(layers, max_iter=2, warm_start=True, random_state=0, device="cpu")
    reg.fit(X, y)
    dense = next(leaf for _, leaf in reg.network_.leaves() if isinstance(leaf, Dense))
    W = host(dense.params["W"])
    reg.set_params(**{key: False}).fit(X, y)
    assert dense.trainable is False
    assert_array_equal(dense.params["W"], W)
    reg.set_params(**{key: True}).fit(X, y)
    assert dense.trainable is True and not np.array_equal(dense.params["W"], W)


# -- 13. flags are bools and positive numbers, on containers too, before anything trains ----------


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: Sequential([Dense(4)], **kw),
        lambda **kw: Residual([Dense(4)], **kw),
        lambda **kw: Concatenate([Dense(2), Dense(2)], **kw),
        lambda **kw: TimeDistributed(Dense(4), **kw),
        lambda **kw: Gate(Dense(4), **kw),
        lambda **kw: Sequential([Dropout(0.1, **kw)]),
    ],
    ids=["Sequential", "Residual", "Concatenate", "TimeDistributed", "Gate", "Dropout"],
)
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(trainable="no"), "trainable must be True or False, got 'no'"),
        (dict(trainable=0), "trainable must be True or False, got 0"),
        (dict(lr_scale=0), "lr_scale must be a positive number, got 0"),
        (dict(lr_scale=float("inf")), "lr_scale must be a positive number, got inf"),
        (dict(lr_scale=True), "lr_scale must be a positive number, got True"),
    ],
)
def test_bad_flags_of_any_layer_are_refused_before_the_first_epoch(make, kwargs, message):
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(20, 3, 4)), rng.normal(size=20)
    layer = make(**kwargs)
    layers = [TimeDistributed(layer) if not isinstance(layer, TimeDistributed) else layer]
    started = []

    class Started(Callback):
        def on_epoch_begin(self, state, epoch):
            started.append(epoch)

    reg = NeuralNetRegressor(
        [*layers, GlobalAvgPool1D()], max_iter=1, device="cpu", callbacks=[Started()]
    )
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        reg.fit(X, y)
    assert "layers[0]" in str(info.value) and not started


def test_a_sequential_with_trainable_no_does_not_train(data):
    """``trainable='no'`` was read by truthiness: the whole block trained."""
    X, y = data
    clf = convnet([Sequential([Conv2D(2, 3)], trainable="no"), Flatten()], max_iter=1)
    with pytest.raises(ValueError, match=r"Sequential \(layers\[0\]\): trainable must be"):
        clf.fit(X[:40], y[:40])


# -- 14. every stock layer takes trainable, lr_scale and weights -------------------------------


def _stock_layer_classes():
    classes = [getattr(layers_module, name) for name in layers_module.__all__]
    return [c for c in classes if isinstance(c, type) and issubclass(c, Layer) and c is not Layer]


#: arguments for the stock layers whose constructor requires some
REQUIRED = {
    "Embedding": (10, 4),
    "Lambda": (np.tanh,),
    "Sequential": ([Dense(2)],),
    "Residual": ([Dense(2)],),
    "Concatenate": ([Dense(2)],),
    "TimeDistributed": (Dense(2),),
    **{name: (2,) for name in ("Dense", "Conv2D", "SimpleRNN", "LSTM", "GRU", "Conv1D")},
}


@pytest.mark.parametrize("cls", _stock_layer_classes(), ids=lambda c: c.__name__)
def test_every_stock_layer_takes_trainable_lr_scale_and_weights(cls):
    # the class itself: its constructor takes them, its docstring lists them
    assert {"trainable", "lr_scale", "weights"} <= set(cls._get_param_names())
    assert "trainable :" in cls.__doc__ and "weights :" in cls.__doc__
    required = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.default is p.empty and p.name != "self"
    ]
    if required and cls.__name__ not in REQUIRED:
        return  # a layer this test cannot make (a new one): its class is checked above
    layer = cls(*REQUIRED.get(cls.__name__, ()))
    params = layer.get_params(deep=False)
    assert {"trainable", "lr_scale", "weights"} <= set(params)
    frozen = clone(layer).set_params(trainable=False, lr_scale=0.5)
    assert (frozen.trainable, frozen.lr_scale) == (False, 0.5)
    assert clone(frozen).get_params(deep=False)["trainable"] is False
    # a container holding it lists its flags among its own
    block = Sequential([layer], trainable=False)
    assert block.get_params()["layers__0__trainable"] == params["trainable"]


def test_freezing_a_container_of_parameter_free_layers_fits(data):
    X, y = data
    block = Sequential(
        [Conv2D(2, 3), Activation("relu"), MaxPool2D(2), Dropout(0.1), Lambda(np.tanh)],
        trainable=False,
    )
    clf = convnet([block, Flatten()], max_iter=2).fit(X, y)
    assert all(node.trainable is False for _, node in walk([clf.layers_[0]]))
    assert_same(clf.callbacks_[0].params_[0], copy_params(clf.layers_)[0])

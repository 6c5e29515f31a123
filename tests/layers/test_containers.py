"""Tests for sknet/layers/_containers.py: Sequential, Residual, Concatenate; masks, set_params."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from sknet import ConvNetClassifier, NeuralNetRegressor
from sknet.layers import (
    GRU,
    LSTM,
    Activation,
    BatchNorm,
    Concatenate,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    Residual,
    Sequential,
    SimpleRNN,
    TimeDistributed,
    from_estimator,
)
from sknet.utils import check_layer_gradients
from tests.conftest import make_backend
from tests.user_containers import Gate, Wrap

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CASES = [
    (Sequential([Dense(4, activation="tanh"), Dense(3)]), (5,)),
    (Residual([Dense(5, activation="tanh"), Dense(5)]), (5,)),  # identity shortcut
    (Residual([Dense(3, activation="tanh")]), (5,)),  # a Dense projection
    (Residual([Conv2D(2, 3, padding="same", activation="tanh"), BatchNorm()]), (2, 5, 5)),
    (Residual([Conv2D(3, 3, stride=2, padding="same", activation="tanh")]), (2, 5, 5)),
    (Residual([Dense(4)], shortcut=[Dense(4, activation="tanh")]), (3,)),
    (Concatenate([Dense(2, activation="tanh"), Sequential([Dense(3), Activation("relu")])]), (4,)),
    (Concatenate([Conv2D(2, 3, padding="same"), Conv2D(1, 1)]), (2, 4, 4)),
    (Sequential([Residual([Sequential([Dense(4, activation="tanh")])])]), (4,)),  # nested
]


@pytest.mark.parametrize("layer, input_shape", CASES, ids=lambda v: repr(v)[:60])
def test_gradients_match_finite_differences(layer, input_shape, device):
    errors = check_layer_gradients(layer, input_shape, device=device)
    assert "X" in errors and max(errors.values()) < 1e-6


def build(layer, input_shape, backend=None):
    backend = backend if backend is not None else make_backend("cpu")
    layer.build(input_shape, backend=backend, dtype=np.float64, rng=np.random.RandomState(0))
    return layer


def test_forward_against_numpy(backend):
    X = np.random.RandomState(1).standard_normal((3, 4))
    host = backend.to_numpy
    residual = build(Residual([Dense(4, activation="tanh")]), (4,), backend)
    W, b = (host(residual.blocks_[0].params[key]) for key in ("W", "b"))
    out = host(residual.forward(backend.asarray(X), training=False))
    assert_allclose(out, np.tanh(X @ W + b) + X, rtol=1e-12)
    joined = build(Concatenate([Dense(2), Dense(3)]), (4,), backend)
    Y = host(joined.forward(backend.asarray(X), training=False))
    parts = [X @ host(block.params["W"]) + host(block.params["b"]) for block in joined.blocks_]
    assert_allclose(Y, np.concatenate(parts, axis=1), rtol=1e-12)
    assert joined.output_shape_ == (5,)


def test_params_are_gathered_and_written_through():
    block = build(Sequential([Dense(3), Dense(2)]), (4,))
    assert sorted(block.params) == ["0.W", "0.b", "1.W", "1.b"]
    block.params["1.b"] = np.full(2, 7.0)
    assert_array_equal(block.blocks_[1].params["b"], [7.0, 7.0])
    assert block.values_per_sample() == 3


def test_shapes_that_cannot_join_are_clear_errors():
    with pytest.raises(
        ValueError,
        match=r"block outputs samples of shape \(3,\) but the "
        r"shortcut \(4,\)",
    ):
        build(Residual([Dense(3)], shortcut=[Dense(4)]), (5,))
    with pytest.raises(ValueError, match="differ outside axis 0"):
        build(Concatenate([Conv2D(2, 3), Conv2D(2, 3, padding="same")]), (1, 5, 5))
    with pytest.raises(ValueError, match="axis=3 is out of range"):
        build(Concatenate([Dense(2), Dense(3)], axis=3), (4,))
    with pytest.raises(ValueError, match="layers must be a list of sknet layers"):
        build(Sequential([Dense(2), "relu"]), (4,))


def residual_convnet(**params):
    def block(filters):
        return Residual(
            [
                Conv2D(filters, 3, padding="same", use_bias=False),
                BatchNorm(),
                Activation("relu"),
                Conv2D(filters, 3, padding="same"),
            ]
        )

    layers = [
        Conv2D(8, 3, padding="same", activation="relu"),
        block(8),
        Activation("relu"),
        Residual([Conv2D(16, 3, stride=2, padding="same", activation="relu")]),
        Concatenate([Sequential([Flatten(), Dense(16, activation="relu")]), GlobalAvgPool2D()]),
    ]
    return ConvNetClassifier(
        layers=layers,
        **{
            "max_iter": 15,
            "learning_rate_init": 0.01,
            "random_state": 0,
            "device": "cpu",
            **params,
        },
    )


def test_a_residual_convnet_learns_digits(digits):
    X, y = digits
    clf = residual_convnet().fit(X[:1200], y[:1200])
    assert clf.score(X[1200:], y[1200:]) > 0.85
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict(X[1200:]), clf.predict(X[1200:]))


def test_nested_parameters_grid_search_and_clone(digits):
    X, y = digits
    clf = residual_convnet(max_iter=2)
    params = clf.get_params()
    assert params["layers__1__layers__0__filters"] == 8
    assert params["layers__4__branches__0__layers__1__units"] == 16
    twin = clone(clf).set_params(layers__1__layers__0__filters=4)
    assert twin.layers[1].layers[0].filters == 4 and clf.layers[1].layers[0].filters == 8
    grid = GridSearchCV(clf, {"layers__4__branches__0__layers__1__units": [8, 16]}, cv=2)
    grid.fit(X[:300], y[:300])
    best = grid.best_params_["layers__4__branches__0__layers__1__units"]
    assert grid.best_estimator_.layers_[4].blocks_[0].blocks_[1].units == best


def test_frozen_blocks_inside_containers_and_transfer(digits):
    X, y = digits
    frozen = Conv2D(8, 3, padding="same", use_bias=False, trainable=False)
    layers = [
        Conv2D(8, 3, padding="same", activation="relu"),
        Residual([frozen, BatchNorm(), Activation("relu")]),
        Flatten(),
    ]
    clf = ConvNetClassifier(
        layers=layers, max_iter=3, random_state=0, device="cpu", warm_start=True
    ).fit(X, y)
    before = clf.layers_[1].blocks_[0].params["W"].copy()
    bn = clf.layers_[1].blocks_[1].params["gamma"].copy()
    clf.fit(X, y)
    assert_array_equal(clf.layers_[1].blocks_[0].params["W"], before)  # frozen
    assert not np.array_equal(clf.layers_[1].blocks_[1].params["gamma"], bn)  # trained
    copies = from_estimator(clf, upto=2)
    assert isinstance(copies[1], Residual)
    assert_array_equal(copies[1].layers[0].weights["W"], before)
    reused = ConvNetClassifier(
        layers=[*copies, Flatten(), Dense(8)], max_iter=2, random_state=0, device="cpu"
    ).fit(X, y)
    assert_array_equal(reused.layers_[0].params["W"], clf.layers_[0].params["W"])


# -- masks reach the layers inside containers ---------------------------------------------------


def _padded(rng, n=12, T=6, F=3, value=0.0):
    """Sequences of random lengths, padded before and after with ``value``."""
    lengths = rng.randint(2, T + 1, size=n)
    data = rng.normal(size=(n, T, F))
    front, back = np.full((n, T, F), value), np.full((n, T, F), value)
    for i, length in enumerate(lengths):
        front[i, T - length :] = data[i, :length]
        back[i, :length] = data[i, :length]
    return front, back


MASKED = {
    "Sequential": lambda: [Sequential([LSTM(4, return_sequences=True), LSTM(3)])],
    "Residual": lambda: [Residual([LSTM(3, return_sequences=True)]), GlobalAvgPool1D()],
    "Concatenate": lambda: [
        Concatenate([LSTM(2), Sequential([GRU(3, return_sequences=True), GlobalAvgPool1D()])])
    ],
    "Sequential(Sequential)": lambda: [Sequential([Sequential([SimpleRNN(3)])])],
    "user container": lambda: [
        Gate(Sequential([LSTM(3, return_sequences=True)])),
        GlobalAvgPool1D(),
    ],
}


@pytest.mark.parametrize("name", MASKED)
def test_padding_before_or_after_is_the_same_inside_containers(name):
    rng = np.random.RandomState(0)
    front, back = _padded(rng)
    y = rng.normal(size=len(front))
    est = NeuralNetRegressor(
        MASKED[name](),
        max_iter=2,
        random_state=0,
        device="cpu",
        dtype="float64",
        padding_value=0.0,
    )
    est.fit(back, y)
    assert_allclose(est.predict(front), est.predict(back), rtol=1e-10, atol=1e-12)
    trained_front = clone(est).fit(front, y)
    assert_allclose(trained_front.loss_curve_, est.loss_curve_, rtol=1e-10)


def test_padding_of_the_inner_steps_is_the_same_inside_time_distributed():
    """Sequences of sequences: each step's own steps padded before or after."""
    rng = np.random.RandomState(1)
    n, T, S, F = 10, 3, 5, 2
    front, back = (np.zeros((n, T, S, F)) for _ in range(2))
    for t in range(T):
        f, b = _padded(rng, n=n, T=S, F=F)
        front[:, t], back[:, t] = f, b
    y = rng.normal(size=n)
    layers = [TimeDistributed(Sequential([LSTM(3)])), LSTM(2)]
    est = NeuralNetRegressor(
        layers, max_iter=2, random_state=0, device="cpu", dtype="float64", padding_value=0.0
    )
    est.fit(back, y)
    assert_allclose(est.predict(front), est.predict(back), rtol=1e-10, atol=1e-12)
    after = back.copy()
    after[:, -1] = 0  # the last outer step is padding throughout: the outer LSTM skips it
    before = np.roll(after, 1, axis=1)  # the same, padded before
    assert_allclose(est.predict(before), est.predict(after), rtol=1e-10, atol=1e-12)


def test_a_container_that_drops_the_mask_is_refused_with_padding():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(10, 4, 3))
    est = NeuralNetRegressor([Wrap(LSTM(3))], max_iter=1, device="cpu", padding_value=0.0)
    with pytest.raises(ValueError, match=r"LSTM \(layers_\[0\]\[0\]\).*Wrap.*supports_mask"):
        est.fit(X, rng.normal(size=10))
    NeuralNetRegressor([Wrap(LSTM(3))], max_iter=1, device="cpu").fit(X, rng.normal(size=10))


# -- set_params: a replacement first, then what is set inside it ---------------------------------


@pytest.mark.parametrize(
    "owner",
    [
        lambda: NeuralNetRegressor([Dense(8), Dense(2)]),
        lambda: Sequential([Dense(8), Dense(2)]),
    ],
    ids=["estimator", "container"],
)
def test_set_params_applies_a_replacement_before_the_parameters_set_inside_it(owner):
    given = Dense(3)
    for order in (
        {"layers__0__units": 5, "layers__0": given},
        {"layers__0": given, "layers__0__units": 5},
    ):
        target = owner().set_params(**order)
        assert type(target.layers[0]) is Dense and target.layers[0].units == 5
        assert given.units == 3  # the caller's layer is not modified
    nested = owner().set_params(
        layers__1__layers__0__units=7, layers__1=Sequential([Dense(1)]), layers__0__units=4
    )
    assert nested.layers[1].layers[0].units == 7 and nested.layers[0].units == 4
    deep = owner().set_params(
        layers__1=Sequential([Dense(1), Dense(1)]),
        layers__1__layers__0__units=6,
        layers__1__layers__0=Dense(2, activation="tanh"),
    )
    assert deep.layers[1].layers[0].units == 6 and deep.layers[1].layers[0].activation == "tanh"

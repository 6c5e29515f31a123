"""Tests for sknet/layers/_transfer.py (from_estimator) and the layers' ``weights``."""

import pickle
import re

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier as SklearnMLPClassifier

from sknet import ConvNetClassifier, MLPClassifier, RNNClassifier
from sknet.layers import (
    LSTM,
    BatchNorm,
    Conv2D,
    Dense,
    Embedding,
    Flatten,
    Layer,
    MaxPool2D,
    from_estimator,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = dict(max_iter=3, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def source(digits):
    X, y = digits
    return ConvNetClassifier(
        layers=[
            Conv2D(4, 3, padding="same", activation="relu"),
            BatchNorm(),
            MaxPool2D(2),
            Flatten(),
            Dense(16, activation="relu"),
        ],
        **FAST,
    ).fit(X, y)


def test_copies_carry_the_weights_and_are_frozen(source):
    layers = from_estimator(source)
    assert [type(layer) for layer in layers] == [Conv2D, BatchNorm, MaxPool2D, Flatten, Dense]
    assert all(layer is not built for layer, built in zip(layers, source.layers_))
    for layer, built in zip(layers, source.layers_):
        if built.params:
            assert layer.trainable is False
            for key, value in {**built.params, **built.state}.items():
                assert_array_equal(layer.weights[key], value)
                assert not np.shares_memory(layer.weights[key], value)
    assert set(layers[1].weights) == {"gamma", "beta", "running_mean", "running_var"}
    assert from_estimator(source, trainable=True)[0].trainable is True


def test_upto_cuts_the_stack(source):
    assert len(from_estimator(source)) == len(source.layers_) - 1  # not the output layer
    assert [type(layer) for layer in from_estimator(source, upto=2)] == [Conv2D, BatchNorm]
    assert len(from_estimator(source, upto=-3)) == len(source.layers_) - 3
    with pytest.raises(ValueError, match="keeps no layer"):
        from_estimator(source, upto=0)
    with pytest.raises(ValueError, match="upto must be an int"):
        from_estimator(source, upto="all")
    with pytest.raises(NotFittedError):
        from_estimator(ConvNetClassifier())


def test_a_new_network_starts_from_the_source_weights(source, digits):
    X, y = digits
    target = ConvNetClassifier(
        layers=[*from_estimator(source), Dense(8, activation="relu")], **{**FAST, "max_iter": 30}
    ).fit(X, y % 2)
    for built, original in zip(target.layers_[:5], source.layers_[:5]):
        for key in {**original.params, **original.state}:
            value = built.params.get(key, built.state.get(key))
            assert_array_equal(value, {**original.params, **original.state}[key])  # frozen
    assert target.score(X, y % 2) > 0.7  # a new task (odd or even) on the frozen features


def test_fine_tuning_moves_the_copied_weights(source, digits):
    X, y = digits
    layers = from_estimator(source, trainable=True)
    layers[0].set_params(lr_scale=0.1)
    target = ConvNetClassifier(layers=layers, **FAST).fit(X, y % 2)
    assert not np.array_equal(target.layers_[0].params["W"], source.layers_[0].params["W"])


def test_weights_survive_clone_pickle_and_grid_search(source, digits):
    X, y = digits
    target = ConvNetClassifier(layers=[*from_estimator(source), Dense(8)], **FAST)
    twin = pickle.loads(pickle.dumps(clone(target))).fit(X, y)
    assert_array_equal(twin.layers_[0].params["W"], source.layers_[0].params["W"])
    grid = GridSearchCV(
        target, {"layers__0__trainable": [False, True], "layers__5__units": [4, 8]}, cv=2
    ).fit(X, y)
    best = grid.best_estimator_
    assert best.layers_[5].units == grid.best_params_["layers__5__units"]
    if not grid.best_params_["layers__0__trainable"]:
        assert_array_equal(best.layers_[0].params["W"], source.layers_[0].params["W"])


def test_weights_round_trip_through_skops(source):
    sio = pytest.importorskip("skops.io")
    import sknet

    target = ConvNetClassifier(layers=from_estimator(source, upto=1))
    loaded = sio.loads(sio.dumps(target), trusted=sknet.TRUSTED_TYPES)
    assert_array_equal(loaded.layers[0].weights["W"], source.layers_[0].params["W"])


def test_shapes_that_do_not_fit_name_the_layer_and_both_shapes(source, digits):
    X, y = digits
    bigger = np.zeros((20, 10, 10))  # images of another size: the Dense no longer fits
    with pytest.raises(
        ValueError,
        match=r"Dense: the weights 'W' have shape \(64, 16\), "
        r"but .* needs \(100, 16\)",
    ):
        ConvNetClassifier(layers=from_estimator(source), **FAST).fit(bigger, np.arange(20) % 2)
    two_channels = np.zeros((20, 2, 8, 8))  # another number of channels: the Conv2D
    with pytest.raises(ValueError, match=r"Conv2D: the weights 'W' have shape \(4, 1, 3, 3\)"):
        ConvNetClassifier(layers=from_estimator(source), **FAST).fit(
            two_channels, np.arange(20) % 2
        )


def test_bad_weights_are_clear_errors(digits):
    X, y = digits
    with pytest.raises(
        ValueError,
        match=r"weights has \['W'\], but this layer holds "
        r"\['W', 'b'\]",
    ):
        ConvNetClassifier(
            layers=[Flatten(), Dense(4, weights={"W": np.zeros((64, 4))})], **FAST
        ).fit(X, y)
    with pytest.raises(
        ValueError, match="'weights' parameter of Dense must be an instance of 'dict'"
    ):
        ConvNetClassifier(layers=[Flatten(), Dense(4, weights=[1, 2])], **FAST).fit(X, y)


def test_mlp_and_rnn_sources(digits):
    X, y = digits
    mlp = MLPClassifier(hidden_layer_sizes=(32, 16), **FAST).fit(X, y)
    layers = from_estimator(mlp)
    assert [layer.units for layer in layers] == [32, 16]
    reused = ConvNetClassifier(layers=[Flatten(), *layers], **FAST).fit(X, y)
    assert_array_equal(reused.layers_[1].params["W"], mlp.coefs_[0])

    rng = np.random.RandomState(0)
    tokens = rng.randint(0, 20, (120, 10))
    labels = (tokens == 3).any(axis=1).astype(int)
    rnn = RNNClassifier(layers=[Embedding(20, 8), LSTM(8)], **FAST).fit(tokens, labels)
    copies = from_estimator(rnn)
    assert [type(layer) for layer in copies] == [Embedding, LSTM]
    again = RNNClassifier(layers=copies, **FAST).fit(tokens, labels)
    assert_array_equal(again.layers_[1].params["U"], rnn.layers_[1].params["U"])


class NoWeights(Layer):
    """A custom layer with parameters that declares none of trainable/lr_scale/weights."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("s", rng.uniform(0.5, 1.5, size=1))
        return input_shape

    def forward(self, X, *, training):
        return X * self.params["s"]


def test_a_custom_layer_that_declares_no_weights_is_reused_frozen(digits):
    # Every layer takes trainable/lr_scale/weights: from_estimator carries its
    # parameters, and the copy starts from them, frozen.
    X, y = digits
    clf = ConvNetClassifier(layers=[Flatten(), NoWeights(), Dense(8)], **FAST).fit(X, y)
    reused = from_estimator(clf)
    assert reused[1].trainable is False
    trained = clf.network_.backend.to_numpy(clf.layers_[1].params["s"])
    assert_array_equal(reused[1].weights["s"], trained)
    target = ConvNetClassifier(layers=[*reused, Dense(4)], **FAST).fit(X, y)
    assert_array_equal(target.network_.backend.to_numpy(target.layers_[1].params["s"]), trained)


def test_freezing_and_transfer_on_every_device(device, digits):
    """Frozen copies stay bit-identical, lr_scale and the features work on each device."""
    from sknet import FeatureExtractor

    X, y = digits
    source = ConvNetClassifier(
        conv_filters=(4,), dense_units=(16,), **{**FAST, "device": device}
    ).fit(X, y)
    layers = from_estimator(source, upto=-2)
    target = ConvNetClassifier(
        layers=[*layers, Dense(8, lr_scale=0.5)], **{**FAST, "device": device}
    ).fit(X, y % 2)
    assert target.device_.startswith(device)
    assert_array_equal(
        target.network_.backend.to_numpy(target.layers_[0].params["W"]), layers[0].weights["W"]
    )
    features = FeatureExtractor(target).fit(X, y % 2).transform(X[:5])
    assert type(features) is np.ndarray and features.shape == (5, 8)


@pytest.mark.parametrize(
    "model, got",
    [
        (
            SklearnMLPClassifier(max_iter=5),
            "got sklearn.neural_network._multilayer_perceptron.MLPClassifier",
        ),
        ("model.joblib", "got builtins.str 'model.joblib'"),
        (None, "got builtins.NoneType None"),
        (Dense(3), "got sknet.layers._dense.Dense Dense(units=3)"),
    ],
    ids=["scikit-learn", "str", "None", "layer"],
)
def test_a_model_that_is_not_an_sknet_estimator_is_a_type_error_naming_it(model, got, digits):
    # Before: AttributeError 'MLPClassifier' object has no attribute 'layers_'.
    if isinstance(model, SklearnMLPClassifier):
        model.fit(*digits)
    with pytest.raises(TypeError, match=re.escape(got)) as info:
        from_estimator(model)
    assert str(info.value).startswith("from_estimator takes a fitted sknet estimator")

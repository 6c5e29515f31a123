"""Tests for sknet/estimators/_neural_net.py: one estimator for any layers and any input.

Tabular, image, sequence and token-id input with custom layers; the presets
(MLP, ConvNet, RNN) are the same estimator as NeuralNet* with their layer list;
the input-shape rules and their errors; ConvNetRegressor.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sknet import (
    ConvNetClassifier,
    ConvNetRegressor,
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    RNNClassifier,
    RNNRegressor,
)
from sknet.layers import (
    LSTM,
    Conv2D,
    Dense,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    MaxPool2D,
    Residual,
    TimeDistributed,
)
from tests.custom_layers import GLU, LayerNorm

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _weights(est):
    return [np.asarray(w) for w in est.network_.weights()]


def _assert_same_model(a, b):
    for wa, wb in zip(_weights(a), _weights(b), strict=True):
        assert_array_equal(wa, wb)


# -- any input, with custom layers ---------------------------------------------------------


def test_tabular_input_with_a_custom_layer(digits):
    X, y = digits
    clf = NeuralNetClassifier(
        [GLU(32), LayerNorm(), Dense(16, activation="relu")],
        max_iter=30,
        random_state=0,
        device="cpu",
    ).fit(X[:1200], y[:1200])
    assert clf.input_shape_ == (64,)
    assert [type(layer).__name__ for layer in clf.layers_] == [
        "GLU",
        "LayerNorm",
        "Dense",
        "Dense",
    ]
    assert clf.score(X[1200:], y[1200:]) > 0.9


def test_image_input_of_four_dimensions(digits):
    X, y = digits
    images = X.reshape(-1, 1, 8, 8)
    clf = NeuralNetClassifier(
        [
            Conv2D(8, 3, padding="same", activation="relu"),
            Residual([Conv2D(8, 3, padding="same")]),
            MaxPool2D(2),
        ],
        max_iter=15,
        random_state=0,
        device="cpu",
    ).fit(images[:1200], y[:1200])
    assert clf.input_shape_ == (1, 8, 8)
    assert type(clf.layers_[-2]).__name__ == "Flatten"  # appended before the output
    assert clf.score(images[1200:], y[1200:]) > 0.7
    # Flat rows of the same images predict the same.
    assert_array_equal(clf.predict_proba(X[1200:]), clf.predict_proba(images[1200:]))


def test_sequence_regression_with_a_custom_layer_in_time():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 6, 3))
    y = X[:, :, 0].sum(axis=1)
    reg = NeuralNetRegressor(
        [TimeDistributed(GLU(8)), LSTM(16)],
        learning_rate_init=0.01,
        max_iter=60,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert reg.input_shape_ == (6, 3)
    assert reg.score(X, y) > 0.8


def test_token_ids_with_an_embedding():
    rng = np.random.RandomState(0)
    X = rng.randint(1, 20, size=(400, 8))
    y = (X == 7).any(axis=1).astype(int)
    clf = NeuralNetClassifier(
        [Embedding(20, 8), LSTM(16)],
        learning_rate_init=0.01,
        max_iter=40,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert clf.input_shape_ == (8,)
    assert clf.score(X, y) > 0.9
    with pytest.raises(ValueError, match="token id"):
        clf.predict(np.full((2, 8), 25))


def test_flat_rows_reshaped_by_input_shape_after_a_scaler(digits):
    X, y = digits
    pipe = make_pipeline(
        StandardScaler(),
        NeuralNetClassifier(
            [Conv2D(4, 3, activation="relu"), Flatten()],
            input_shape=(1, 8, 8),
            max_iter=10,
            random_state=0,
            device="cpu",
        ),
    ).fit(X[:600], y[:600])
    assert pipe[-1].input_shape_ == (1, 8, 8)
    assert pipe[-1].layers_[0].output_shape_ == (4, 6, 6)


def test_default_layers_flatten_samples_that_are_not_flat(digits):
    X, y = digits
    clf = NeuralNetClassifier(max_iter=5, random_state=0, device="cpu")
    clf.fit(X[:300].reshape(-1, 8, 8), y[:300])
    assert [type(layer).__name__ for layer in clf.layers_] == ["Flatten", "Dense", "Dense"]
    assert clf.layers_[1].units == 100
    flat = NeuralNetClassifier(max_iter=5, random_state=0, device="cpu").fit(X[:300], y[:300])
    assert [type(layer).__name__ for layer in flat.layers_] == ["Dense", "Dense"]


# -- the input-shape rules and their errors --------------------------------------------------


def test_input_shape_must_hold_the_features(digits):
    X, y = digits
    clf = NeuralNetClassifier([Flatten()], input_shape=(3, 5), device="cpu")
    with pytest.raises(ValueError, match=r"holds 15 values per sample, but X has 64"):
        clf.fit(X[:50], y[:50])


def test_input_shape_must_match_shaped_samples(digits):
    X, y = digits
    clf = NeuralNetClassifier([Flatten()], input_shape=(4, 16), device="cpu")
    with pytest.raises(ValueError, match="does not match the samples in X"):
        clf.fit(X[:50].reshape(-1, 8, 8), y[:50])


def test_predict_refuses_samples_of_another_shape(digits):
    X, y = digits
    clf = NeuralNetClassifier([Flatten()], max_iter=2, device="cpu")
    clf.fit(X[:100].reshape(-1, 8, 8), y[:100])
    with pytest.raises(ValueError, match=r"fitted on samples of shape \(8, 8\)"):
        clf.predict(X[:5].reshape(-1, 4, 16))
    assert clf.predict(X[:5]).shape == (5,)  # flat rows of the right size are fine


@pytest.mark.parametrize("bad", [(0, 8), (-1,), "abc", ()])
def test_bad_input_shape_is_a_clear_error(digits, bad):
    X, y = digits
    with pytest.raises(ValueError, match="input_shape"):
        NeuralNetClassifier(input_shape=bad, device="cpu").fit(X[:20], y[:20])


def test_layers_that_do_not_fit_the_samples_say_so(digits):
    X, y = digits
    clf = NeuralNetClassifier([Conv2D(4, 3)], device="cpu")
    with pytest.raises(ValueError, match="Conv2D"):
        clf.fit(X[:20], y[:20])  # flat samples: no channels, no image


# -- presets are the same estimator ----------------------------------------------------------


def test_presets_are_network_estimators():
    for preset in (MLPClassifier, ConvNetClassifier, RNNClassifier):
        assert issubclass(preset, NeuralNetClassifier)
    for preset in (MLPRegressor, ConvNetRegressor, RNNRegressor):
        assert issubclass(preset, NeuralNetRegressor)
    # Each takes its own parameters, not the general estimator's it does not use.
    assert "layers" not in MLPClassifier().get_params()
    assert "hidden_layer_sizes" not in NeuralNetClassifier().get_params()
    assert "padding_value" not in ConvNetClassifier().get_params()


def test_convnet_preset_is_the_network_of_its_layers(digits):
    X, y = digits
    preset = ConvNetClassifier(
        conv_filters=(4,), dense_units=(16,), max_iter=3, random_state=0, device="cpu"
    ).fit(X[:300], y[:300])
    general = NeuralNetClassifier(
        [clone(layer) for layer in preset._preset_layers()],
        input_shape=(1, 8, 8),
        max_iter=3,
        random_state=0,
        device="cpu",
    ).fit(X[:300], y[:300])
    _assert_same_model(preset, general)
    assert preset.loss_curve_ == general.loss_curve_


def test_rnn_preset_is_the_network_of_its_layers():
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(120, 5, 2)), rng.randint(0, 2, 120)
    preset = RNNClassifier(units=(6,), max_iter=3, random_state=0, device="cpu").fit(X, y)
    general = NeuralNetClassifier(
        [clone(layer) for layer in preset._preset_layers()],
        clip_norm=5.0,
        max_iter=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    _assert_same_model(preset, general)


# -- the scikit-learn contract with a layer list -----------------------------------------------


def test_grid_search_over_the_layers_entries(digits):
    X, y = digits
    clf = NeuralNetClassifier([Dense(8, activation="relu")], max_iter=5, device="cpu")
    grid = GridSearchCV(clf, {"layers__0__units": [4, 16]}, cv=2).fit(X[:200], y[:200])
    assert grid.best_estimator_.layers_[0].units in (4, 16)
    assert clf.layers[0].units == 8  # the searched estimator's layers are untouched


def test_pickled_model_predicts_the_same(digits):
    X, y = digits
    clf = NeuralNetRegressor(
        [GLU(8), Dense(4, activation="tanh")], max_iter=5, random_state=0, device="cpu"
    ).fit(X[:200], y[:200] / 9.0)
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict(X[:20]), clf.predict(X[:20]))


def test_warm_start_refuses_other_layers(digits):
    X, y = digits
    clf = NeuralNetClassifier([Dense(8)], max_iter=2, warm_start=True, device="cpu")
    clf.fit(X[:100], y[:100])
    clf.set_params(layers=[Dense(16)])
    with pytest.raises(ValueError, match="layers changed"):
        clf.fit(X[:100], y[:100])


# -- ConvNetRegressor ---------------------------------------------------------------------------


def test_convnet_regressor_on_images_with_two_targets(digits):
    X, y = digits
    images = X.reshape(-1, 8, 8)
    targets = np.column_stack([images[:, :4].mean(axis=(1, 2)), images[:, 4:].mean(axis=(1, 2))])
    reg = ConvNetRegressor(
        conv_filters=(4,),
        dense_units=(16,),
        learning_rate_init=0.01,
        max_iter=40,
        random_state=0,
        device="cpu",
    ).fit(images[:1200], targets[:1200])
    assert reg.input_shape_ == (1, 8, 8)
    assert reg.predict(images[1200:]).shape == (len(images) - 1200, 2)
    assert reg.score(images[1200:], targets[1200:]) > 0.5


def test_convnet_regressor_takes_scikit_learn_loss_names(digits):
    X, y = digits
    reg = ConvNetRegressor(
        loss="poisson", conv_filters=(2,), dense_units=(4,), max_iter=3, device="cpu"
    )
    reg.fit(X[:100], y[:100])
    assert reg.out_activation_ == "exp"
    assert (reg.predict(X[:10]) > 0).all()


def test_global_pooling_regressor_of_mean_values():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(200, 4, 2))
    reg = NeuralNetRegressor([TimeDistributed(Dense(4)), GlobalAvgPool1D()], device="cpu")
    reg.set_params(max_iter=3, random_state=0).fit(X, X.mean(axis=(1, 2)))
    assert reg.layers_[-1].units == 1


# -- token ids stay integers, exact, from X to the embedding -------------------------------
# A float32 holds whole numbers up to 2**24 only: 2**24 + 1 rounds to 2**24 (two ids merge),
# 2**24 + 3 rounds to 2**24 + 4 (a valid id refused as out of the vocabulary).
BIG = 2**24
VOCABULARY = BIG + 4


def _frozen_table():
    """An embedding whose rows of the large ids carry their label (+5 for 0, -5 for 1)."""
    table = np.zeros((VOCABULARY, 1), np.float32)
    table[BIG], table[BIG + 1], table[BIG + 3] = 5.0, -5.0, -5.0
    return Embedding(VOCABULARY, 1, trainable=False, weights={"E": table})


def _large_ids(n=60):
    ids = np.array([BIG, BIG + 1, BIG + 3] * (n // 3), np.int64).reshape(-1, 1)
    return ids, (ids[:, 0] != BIG).astype(int)


def test_token_ids_above_2_to_the_24_stay_distinct_and_in_range():
    ids, labels = _large_ids()
    clf = NeuralNetClassifier(
        [_frozen_table(), GlobalAvgPool1D()],
        learning_rate_init=0.1,
        max_iter=30,
        random_state=0,
        device="cpu",
    )
    clf.fit(ids, labels, X_val=ids, y_val=labels)  # the validation set takes the same path
    assert clf.score(ids, labels) == 1.0
    assert clf.history_[-1]["valid_score"] == 1.0
    # float ids holding whole numbers (float64: exact) are the same ids
    assert_array_equal(clf.predict(ids.astype(np.float64)), labels)


def test_the_network_keeps_integer_ids_exact():
    from sknet.backend import get_backend
    from sknet.engine._network import Network

    network = Network.build(
        [_frozen_table(), Flatten()],
        (1,),
        backend=get_backend("cpu"),
        dtype=np.float32,
        rng=np.random.RandomState(0),
    )
    assert network.input_dtype is None
    out = network.predict(np.array([[BIG], [BIG + 1], [BIG + 3]]))
    assert_array_equal(out.ravel(), [5.0, -5.0, -5.0])


@pytest.mark.parametrize(
    "ids, message",
    [
        ([[0, 16], [1, 2]], r"token ids \(X\) must be in \[0, 16\) .*from 0 to 16"),
        ([[0.0, 2.5], [1, 2]], r"token ids \(X\) must be whole numbers .*got 2.5 at \(0, 1\)"),
        ([[-1, 3], [1, 2]], r"token ids \(X\) must be in \[0, 16\) .*from -1 to 3"),
    ],
)
def test_bad_token_ids_are_a_value_error_naming_them(ids, message):
    clf = NeuralNetClassifier([Embedding(16, 2), GlobalAvgPool1D()], max_iter=2, device="cpu")
    with pytest.raises(ValueError, match=message):
        clf.fit(np.array(ids), [0, 1])
    fitted = clf.fit(np.array([[0, 1], [2, 3]]), [0, 1])
    with pytest.raises(ValueError, match=message):
        fitted.predict(np.array(ids))


def test_embedding_parameters_are_checked_before_the_ids_are_compared():
    clf = NeuralNetClassifier([Embedding("x", 4), GlobalAvgPool1D()], device="cpu")
    with pytest.raises(ValueError, match=r"'input_dim' parameter of Embedding .*Got 'x'"):
        clf.fit(np.array([[1, 2], [0, 1]]), [0, 1])


def test_bad_token_ids_of_X_val_are_named_X_val():
    ids = np.array([[1, 2], [0, 1], [3, 1], [2, 2]])
    clf = NeuralNetClassifier([Embedding(4, 2), GlobalAvgPool1D()], max_iter=2, device="cpu")
    with pytest.raises(ValueError, match=r"token ids \(X_val\) must be in \[0, 4\)"):
        clf.fit(ids, [0, 1, 0, 1], X_val=ids + 1, y_val=[0, 1, 0, 1])


def test_the_memory_estimate_counts_token_ids_at_their_own_size():
    """Ids stay integers on the device: int64 ids take 8 bytes each there, not float32's 4."""
    from sknet.backend import get_backend
    from sknet.engine._memory import array_bytes, data_bytes

    ids = np.zeros((10, 5), np.int64)
    assert array_bytes(ids, np.float32) == ids.nbytes
    assert array_bytes(ids.astype(np.float64), np.float32) == ids.size * 4  # cast to the model's
    # on the CPU the ids are used as they are: no copy to count
    cpu = get_backend("cpu")
    order = data_bytes(cpu, np.float32, None, None, None, 10)  # the shuffled row order
    assert data_bytes(cpu, np.float32, ids, None, None, 10) == order

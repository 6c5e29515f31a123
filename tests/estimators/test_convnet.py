"""Behaviour tests for sknet/estimators/_convnet.py."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sknet import ConvNetClassifier
from sknet.layers import (
    Activation,
    AvgPool2D,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
)
from tests.custom_layers import Scale

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SMALL = dict(
    conv_filters=(8,),
    dense_units=(32,),
    learning_rate_init=0.01,
    max_iter=15,
    random_state=0,
    device="cpu",
)


@pytest.fixture(scope="module")
def images(digits):
    X, y = digits
    return train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)


def kinds(clf):
    return [type(layer).__name__ for layer in clf.layers_]


# -- input forms ----------------------------------------------------------------


def test_flat_square_input_is_a_single_channel_image(images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(**SMALL).fit(X_train, y_train)
    assert clf.input_shape_ == (1, 8, 8) and clf.n_features_in_ == 64
    assert kinds(clf) == ["Conv2D", "MaxPool2D", "Flatten", "Dense", "Dense"]
    assert clf.layers_[0].output_shape_ == (8, 8, 8)
    assert clf.score(X_test, y_test) > 0.9


@pytest.mark.parametrize("form", ["flat", "nhw", "nchw"])
def test_every_input_form_gives_the_same_model(form, images):
    X_train, X_test, y_train, _ = images
    reshape = {
        "flat": lambda X: X,
        "nhw": lambda X: X.reshape(-1, 8, 8),
        "nchw": lambda X: X.reshape(-1, 1, 8, 8),
    }[form]
    reference = ConvNetClassifier(**SMALL).fit(X_train, y_train)
    clf = ConvNetClassifier(**SMALL).fit(reshape(X_train), y_train)
    assert clf.input_shape_ == (1, 8, 8)
    assert_allclose(clf.predict_proba(reshape(X_test)), reference.predict_proba(X_test))
    # a model fitted on images also takes flat rows, and the other way round
    assert_array_equal(clf.predict(X_test), reference.predict(X_test.reshape(-1, 1, 8, 8)))


def test_multichannel_images():
    rng = np.random.RandomState(0)
    X = rng.rand(60, 3, 6, 5)
    y = (X[:, 0].mean(axis=(1, 2)) > X[:, 2].mean(axis=(1, 2))).astype(int)
    clf = ConvNetClassifier(
        conv_filters=(4,), dense_units=(8,), max_iter=5, random_state=0, device="cpu"
    ).fit(X, y)
    assert clf.input_shape_ == (3, 6, 5) and clf.n_features_in_ == 90
    assert clf.predict_proba(X).shape == (60, 2)
    with pytest.raises(ValueError, match=r"fitted on images of shape \(3, 6, 5\)"):
        clf.predict(X[:, :2])
    with pytest.raises(ValueError, match="X has 60 features"):
        clf.predict(X[:, :2].reshape(60, -1))


def test_flat_input_with_input_shape(images):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(input_shape=(4, 16), **SMALL).fit(X_train, y_train)
    assert clf.input_shape_ == (1, 4, 16)
    clf = ConvNetClassifier(input_shape=(2, 4, 8), **SMALL).fit(X_train, y_train)
    assert clf.input_shape_ == (2, 4, 8)


def test_non_square_flat_input_is_a_one_row_image():
    rng = np.random.RandomState(0)
    X, y = rng.rand(50, 10), np.arange(50) % 2
    clf = ConvNetClassifier(
        conv_filters=(4,), dense_units=(8,), max_iter=3, random_state=0, device="cpu"
    ).fit(X, y)
    assert clf.input_shape_ == (1, 1, 10)
    assert "MaxPool2D" not in kinds(clf)  # the image is too small to pool


@pytest.mark.parametrize(
    "X_shape, input_shape, message",
    [
        ((10, 64), (3, 3), r"input_shape=\(3, 3\) holds 9 values per sample, but X has 64"),
        ((10, 8, 8), (1, 4, 16), "does not match the images in X"),
        ((10, 1, 8, 8, 1), None, r"expects X of shape \(n, h, w\), \(n, c, h, w\) or flat"),
        ((10, 64), (0, 8), "input_shape must be a sequence of positive integers"),
        ((10, 64), (1, 2, 4, 8), r"input_shape must be \(channels, height, width\)"),
    ],
)
def test_bad_shapes_are_clear_errors(X_shape, input_shape, message):
    X = np.ones(X_shape)
    y = np.arange(10) % 2
    with pytest.raises(ValueError, match=message):
        ConvNetClassifier(input_shape=input_shape, device="cpu").fit(X, y)


def test_one_dimensional_X_is_rejected():
    with pytest.raises(ValueError, match="Expected 2D array"):
        ConvNetClassifier(device="cpu").fit(np.ones(10), np.arange(10) % 2)


def test_pipeline_after_a_scaler(images):
    X_train, X_test, y_train, y_test = images
    pipe = make_pipeline(StandardScaler(), ConvNetClassifier(**SMALL)).fit(X_train, y_train)
    assert pipe.score(X_test, y_test) > 0.9


def test_sparse_flat_input(images):
    X_train, X_test, y_train, _ = images
    dense = ConvNetClassifier(**SMALL).fit(X_train, y_train)
    sparse = ConvNetClassifier(**SMALL).fit(sp.csr_matrix(X_train), y_train)
    assert_allclose(
        sparse.predict_proba(sp.csr_matrix(X_test)), dense.predict_proba(X_test), atol=1e-5
    )


# -- the simple parameters --------------------------------------------------------


def test_default_architecture_on_mnist_sized_images():
    rng = np.random.RandomState(0)
    X, y = rng.rand(20, 784).astype(np.float32), np.arange(20) % 3
    clf = ConvNetClassifier(max_iter=1, random_state=0, device="cpu").fit(X, y)
    assert clf.input_shape_ == (1, 28, 28)
    assert kinds(clf) == [
        "Conv2D",
        "MaxPool2D",
        "Conv2D",
        "MaxPool2D",
        "Flatten",
        "Dense",
        "Dense",
    ]
    assert [layer.output_shape_ for layer in clf.layers_] == [
        (32, 28, 28),
        (32, 14, 14),
        (64, 14, 14),
        (64, 7, 7),
        (3136,),
        (128,),
        (3,),
    ]


def test_batch_norm_and_dropout_blocks(images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(batch_norm=True, dropout=0.3, **SMALL).fit(X_train, y_train)
    assert kinds(clf) == [
        "Conv2D",
        "BatchNorm",
        "Activation",
        "MaxPool2D",
        "Flatten",
        "Dense",
        "BatchNorm",
        "Activation",
        "Dropout",
        "Dense",
    ]
    assert not clf.layers_[0].use_bias
    assert clf.score(X_test, y_test) > 0.9
    # predictions use the running statistics: deterministic, batch-independent
    assert_allclose(clf.predict_proba(X_test[:5]), clf.predict_proba(X_test)[:5], rtol=1e-4)


def test_no_pooling_and_no_convolutions(images):
    X_train, _, y_train, _ = images
    assert "MaxPool2D" not in kinds(ConvNetClassifier(pool_size=1, **SMALL).fit(X_train, y_train))
    plain = ConvNetClassifier(**{**SMALL, "conv_filters": ()}).fit(X_train, y_train)
    assert kinds(plain) == ["Flatten", "Dense", "Dense"]


def test_grid_search_over_simple_parameters(images):
    X_train, _, y_train, _ = images
    grid = GridSearchCV(
        ConvNetClassifier(**{**SMALL, "max_iter": 5}),
        {"conv_filters": [(4,), (8,)], "dropout": [0.0, 0.2]},
        cv=2,
    )
    grid.fit(X_train, y_train)
    assert len(grid.cv_results_["params"]) == 4 and grid.best_score_ > 0.6


# -- the layers parameter ----------------------------------------------------------


def layer_list():
    return [
        Conv2D(6, 3, padding="same", activation="relu"),
        MaxPool2D(2),
        Flatten(),
        Dense(24, activation="relu"),
        Dropout(0.2),
    ]


def test_layers_override_simple_parameters_and_get_a_head(images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(
        layers=layer_list(),
        conv_filters=(99,),
        max_iter=15,
        learning_rate_init=0.01,
        random_state=0,
        device="cpu",
    ).fit(X_train, y_train)
    assert kinds(clf) == ["Conv2D", "MaxPool2D", "Flatten", "Dense", "Dropout", "Dense"]
    assert clf.layers_[-1].units == 10
    assert clf.score(X_test, y_test) > 0.85


def test_a_flatten_is_added_when_the_layers_end_on_images(images):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(
        layers=[Conv2D(4, 3), GlobalAvgPool2D()], max_iter=2, device="cpu"
    ).fit(X_train, y_train)
    assert kinds(clf) == ["Conv2D", "GlobalAvgPool2D", "Dense"]
    clf = ConvNetClassifier(layers=[Conv2D(4, 3), AvgPool2D(2)], max_iter=2, device="cpu").fit(
        X_train, y_train
    )
    assert kinds(clf) == ["Conv2D", "AvgPool2D", "Flatten", "Dense"]


def test_layer_objects_passed_are_never_modified(images):
    X_train, _, y_train, _ = images
    layers = layer_list()
    before = [layer.get_params() for layer in layers]
    clf = ConvNetClassifier(layers=layers, max_iter=2, random_state=0, device="cpu")
    clf.fit(X_train, y_train)
    assert all(not hasattr(layer, "params") for layer in layers)  # not built
    assert [layer.get_params() for layer in layers] == before
    assert all(a is not b for a, b in zip(layers, clf.layers_))
    twin = clone(clf)
    assert all(a is not b for a, b in zip(twin.layers, layers))
    assert [type(layer) for layer in twin.layers] == [type(layer) for layer in layers]


def test_nested_layer_parameters():
    clf = ConvNetClassifier(layers=layer_list())
    params = clf.get_params()
    assert params["layers__0__filters"] == 6 and params["layers__4__rate"] == 0.2
    original = clf.layers
    clf.set_params(layers__0__filters=3, layers__4__rate=0.5)
    assert clf.layers[0].filters == 3 and clf.layers[4].rate == 0.5
    assert original[0].filters == 6 and original[4].rate == 0.2  # caller's objects untouched
    with pytest.raises(ValueError, match="has 5 entries"):
        clf.set_params(layers__7__rate=0.1)
    with pytest.raises(ValueError, match="no `layers` list"):
        ConvNetClassifier().set_params(layers__0__filters=3)


def test_grid_search_over_entries_of_the_layers_list(images):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(layers=layer_list(), max_iter=4, random_state=0, device="cpu")
    grid = GridSearchCV(
        clf, {"layers__0__filters": [2, 4], "layers__4__rate": [0.0, 0.5]}, cv=2
    ).fit(X_train, y_train)
    assert len(grid.cv_results_["params"]) == 4
    best = grid.best_estimator_
    assert best.layers_[0].filters == grid.best_params_["layers__0__filters"]
    assert clf.layers[0].filters == 6  # the searched estimator is untouched
    # whole alternative lists work too
    grid = GridSearchCV(clf, {"layers": [layer_list(), [Flatten(), Dense(16)]]}, cv=2)
    grid.fit(X_train, y_train)
    assert len(grid.cv_results_["params"]) == 2


def test_custom_layers_train_and_pickle(images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(
        layers=[Scale(), Conv2D(6, 3, activation="relu"), Flatten(), Dense(24, activation="tanh")],
        max_iter=15,
        learning_rate_init=0.01,
        random_state=0,
        device="cpu",
    ).fit(X_train, y_train)
    assert clf.layers_[0].params["s"][0] != 1.0  # the scalar was trained
    assert clf.score(X_test, y_test) > 0.8
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict_proba(X_test), clf.predict_proba(X_test))


def test_layers_must_be_layer_objects():
    with pytest.raises(ValueError, match="non-empty list of sknet.layers.Layer"):
        ConvNetClassifier(layers=["conv"], device="cpu").fit(np.ones((4, 4)), [0, 1, 0, 1])


def test_dropout_layers_with_lbfgs_are_refused():
    with pytest.raises(ValueError, match="dropout is not supported with solver='lbfgs'"):
        ConvNetClassifier(layers=[Flatten(), Dropout(0.5)], solver="lbfgs", device="cpu").fit(
            np.ones((4, 4)), [0, 1, 0, 1]
        )


# -- the classifier contract ----------------------------------------------------------


def test_string_labels_probabilities_and_scores(images):
    X_train, X_test, y_train, y_test = images
    names = np.array(list("abcdefghij"))
    clf = ConvNetClassifier(**SMALL).fit(X_train, names[y_train])
    assert_array_equal(clf.classes_, names)
    proba = clf.predict_proba(X_test)
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    assert_array_equal(clf.predict(X_test), names[proba.argmax(axis=1)])
    assert_allclose(clf.predict_log_proba(X_test), np.log(proba))
    assert clf.score(X_test, names[y_test]) > 0.9


def test_partial_fit_with_classes(images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(
        conv_filters=(8,), dense_units=(32,), learning_rate_init=0.01, random_state=0, device="cpu"
    )
    for start in range(0, len(X_train), 300):
        clf.partial_fit(
            X_train[start : start + 300], y_train[start : start + 300], classes=np.arange(10)
        )
    for _ in range(5):
        clf.partial_fit(X_train, y_train)
    assert clf.n_iter_ == 1 and len(clf.loss_curve_) == 10
    assert clf.score(X_test, y_test) > 0.85


def test_sample_weight_zero_equals_dropping(images):
    X_train, _, y_train, _ = images
    w = np.ones(len(y_train))
    w[::4] = 0
    kw = {**SMALL, "max_iter": 3, "shuffle": False, "batch_size": len(y_train)}
    weighted = ConvNetClassifier(**kw).fit(X_train, y_train, sample_weight=w)
    dropped = ConvNetClassifier(**{**kw, "batch_size": int(w.sum())}).fit(
        X_train[w > 0], y_train[w > 0]
    )
    for a, b in zip(weighted.layers_, dropped.layers_):
        for key in a.params:
            assert_allclose(a.params[key], b.params[key], atol=1e-5)


def test_early_stopping_and_reproducibility(images):
    X_train, _, y_train, _ = images
    kw = {**SMALL, "max_iter": 100, "early_stopping": True, "batch_norm": True}
    a = ConvNetClassifier(**kw).fit(X_train, y_train)
    b = ConvNetClassifier(**kw).fit(X_train, y_train)
    assert a.n_iter_ < 100 and a.best_validation_score_ == max(a.validation_scores_)
    for la, lb in zip(a.layers_, b.layers_):
        for key in la.params:
            assert_array_equal(la.params[key], lb.params[key])
        for key in la.state:  # running statistics are restored with the weights
            assert_array_equal(la.state[key], lb.state[key])


def test_predictions_do_not_depend_on_sample_order_in_float32(images):
    X_train, X_test, y_train, _ = images
    clf = ConvNetClassifier(**SMALL).fit(X_train, y_train)
    order = np.random.RandomState(0).permutation(len(X_test))
    assert_allclose(
        clf.predict_proba(X_test)[order], clf.predict_proba(X_test[order]), rtol=1e-4, atol=1e-6
    )


def test_persistence_round_trip(images, tmp_path):
    import joblib

    X_train, X_test, y_train, _ = images
    clf = ConvNetClassifier(batch_norm=True, **SMALL).fit(X_train, y_train)
    joblib.dump(clf, tmp_path / "convnet.joblib")
    restored = joblib.load(tmp_path / "convnet.joblib")
    assert_array_equal(restored.predict_proba(X_test), clf.predict_proba(X_test))
    assert restored.input_shape_ == (1, 8, 8)


def test_not_fitted_and_bad_input(images):
    X_train, _, y_train, _ = images
    with pytest.raises(NotFittedError):
        ConvNetClassifier().predict(X_train)
    bad = X_train.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        ConvNetClassifier(device="cpu").fit(bad, y_train)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        ConvNetClassifier(device="cpu").fit(X_train, X_train[:, 3] + 0.5)


def test_every_backend_layer_kind_trains_on_every_device(device, images):
    X_train, X_test, y_train, y_test = images
    clf = ConvNetClassifier(
        layers=[
            Conv2D(4, 3, padding=1, activation="relu"),
            BatchNorm(),
            MaxPool2D(2),
            Activation("tanh"),
            Flatten(),
            Dense(16),
        ],
        max_iter=10,
        learning_rate_init=0.01,
        random_state=0,
        device=device,
    ).fit(X_train, y_train)
    assert clf.device_.startswith(device)
    assert clf.score(X_test, y_test) > 0.8


# -- kernel and pool sizes the preset cannot take ------------------------------------


@pytest.mark.parametrize("kernel_size", [2, 4])
def test_an_even_kernel_size_is_refused_with_what_to_do(images, kernel_size):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(**{**SMALL, "kernel_size": kernel_size, "max_iter": 1})
    with pytest.raises(ValueError, match=rf"kernel_size must be odd.*got {kernel_size}") as info:
        clf.fit(X_train, y_train)
    message = str(info.value)
    # what it suggests, the preset (or the layers it points to) takes
    assert "give the padding as an int" not in message
    assert f"kernel_size={kernel_size - 1} or {kernel_size + 1}" in message
    for odd in (kernel_size - 1, kernel_size + 1):
        clf.set_params(kernel_size=odd).fit(X_train, y_train)
    layer = f"Conv2D(filters, {kernel_size}, padding={kernel_size // 2})"
    assert layer in message
    layers = [Conv2D(8, kernel_size, padding=kernel_size // 2), Flatten()]
    clf.set_params(kernel_size=kernel_size, layers=layers).fit(X_train, y_train)


def test_an_even_kernel_size_is_fine_when_layers_replace_the_preset(images):
    X_train, _, y_train, _ = images
    layers = [Conv2D(4, 2), Flatten()]
    ConvNetClassifier(**{**SMALL, "kernel_size": 4, "layers": layers, "max_iter": 1}).fit(
        X_train, y_train
    )


@pytest.mark.parametrize("pool_size", [9, 16])
def test_a_pool_size_larger_than_the_images_is_refused(images, pool_size):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(**{**SMALL, "pool_size": pool_size, "max_iter": 1})
    with pytest.raises(ValueError, match=rf"pool_size={pool_size} .*images of size \(8, 8\)"):
        clf.fit(X_train, y_train)
    clf.set_params(pool_size=8).fit(X_train, y_train)  # the largest that fits
    assert clf.layers_[1].output_shape_ == (8, 1, 1)


def test_later_blocks_pool_while_the_image_is_large_enough(images):
    X_train, _, y_train, _ = images
    clf = ConvNetClassifier(**{**SMALL, "conv_filters": (4, 4, 4), "pool_size": 4, "max_iter": 1})
    clf.fit(X_train, y_train)  # 8x8 -> 2x2 after the first block: the others cannot pool
    assert kinds(clf).count("MaxPool2D") == 1

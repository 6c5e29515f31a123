"""Lambda: a parameter-free layer from a function, its gradient recorded."""

import pickle
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV

from sknet import ConvNetClassifier
from sknet import autodiff as ad
from sknet.backend import get_backend
from sknet.layers import Dense, Flatten, Lambda
from sknet.utils import check_layer_gradients
from tests.custom_layers import swish

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def build(layer, input_shape, dtype=np.float32):
    backend = get_backend("cpu")
    return layer.build(input_shape, backend=backend, dtype=dtype, rng=np.random.RandomState(0))


def halves_product(X):
    """Split the features in two halves and multiply them: the shape changes."""
    half = X.shape[1] // 2
    return X[:, :half] * X[:, half:]


def channel_stats(X):
    """Mean and maximum of each channel of images: (C, H, W) -> (2 * C,)."""
    return ad.concatenate([ad.mean(X, axis=(2, 3)), ad.max(X, axis=(2, 3))], axis=1)


@pytest.mark.parametrize(
    "func, kw_args, input_shape",
    [
        (swish, {"beta": 1.5}, (4,)),
        (halves_product, None, (6,)),
        (channel_stats, None, (2, 3, 3)),
    ],
)
def test_gradient_check(func, kw_args, input_shape, device):
    errors = check_layer_gradients(Lambda(func, kw_args=kw_args), input_shape, device=device)
    assert list(errors) == ["X"] and errors["X"] < 1e-6


def test_forward_oracle_and_output_shape():
    layer = Lambda(halves_product)
    assert build(layer, (6,)) == (3,)
    X = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert_array_equal(layer.forward(X, training=False), X[:, :3] * X[:, 3:])
    assert build(Lambda(channel_stats), (2, 3, 3)) == (4,)


def test_in_a_convnet_grid_search_and_pickle(digits):
    X, y = digits
    clf = ConvNetClassifier(
        layers=[Flatten(), Dense(32), Lambda(swish)],
        max_iter=40,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert clf.score(X, y) > 0.9
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    grid = GridSearchCV(
        clf.set_params(max_iter=2), {"layers__2__kw_args": [{"beta": 0.5}, {"beta": 2.0}]}, cv=2
    ).fit(X[:300], y[:300])
    assert [p["layers__2__kw_args"] for p in grid.cv_results_["params"]] == [
        {"beta": 0.5},
        {"beta": 2.0},
    ]


def test_a_lambda_function_works_but_does_not_pickle(digits):
    X, y = digits
    clf = ConvNetClassifier(
        layers=[Flatten(), Dense(16), Lambda(lambda X: ad.tanh(X) * 2.0)],
        max_iter=2,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert clf.predict(X[:5]).shape == (5,)
    with pytest.raises(TypeError, match="lambda or is defined inside another function"):
        pickle.dumps(clf)


def test_unsupported_operations_fail_when_built_naming_them():
    with pytest.raises(TypeError, match="numpy.cumsum is not differentiable"):
        build(Lambda(lambda X: np.cumsum(X, axis=1)), (3,))


@pytest.mark.parametrize(
    "layer, error, message",
    [
        (Lambda("relu"), TypeError, "func must be callable, got str"),
        (Lambda(swish, kw_args=[1.0]), TypeError, "kw_args must be a dict, got list"),
        (Lambda(ad.sum), ValueError, r"returned shape \(\) for a batch of 2"),
    ],
)
def test_bad_configurations_are_clear_errors(layer, error, message):
    with pytest.raises(error, match=message):
        build(layer, (3,))


def test_float64_networks_keep_their_dtype():
    layer = Lambda(swish)
    build(layer, (3,), dtype=np.float64)
    X = np.random.RandomState(0).standard_normal((4, 3))
    Y = layer.forward(X, training=True)
    assert Y.dtype == np.float64
    assert_allclose(Y, X / (1 + np.exp(-X)))


def test_skops_trusts_the_layer_but_asks_about_the_function(digits):
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    import sknet

    X, y = digits
    clf = ConvNetClassifier(
        layers=[Flatten(), Dense(8), Lambda(swish)], max_iter=2, random_state=0, device="cpu"
    ).fit(X, y)
    data = sio.dumps(clf)
    untrusted = set(sio.get_untrusted_types(data=data)) - set(sknet.TRUSTED_TYPES)
    assert untrusted == {"tests.custom_layers.swish"}
    loaded = sio.loads(data, trusted=sknet.TRUSTED_TYPES + sorted(untrusted))
    assert_allclose(loaded.predict_proba(X), clf.predict_proba(X))


def returns_none(X):
    return None


def returns_a_float(X):
    return 1.0


def returns_its_value(X):
    return ad.value(X) * 2  # X.data: a plain array, its gradient lost


def adds_a_float64_constant(X):
    return X + np.ones(X.shape[1])


def drops_the_features(X):
    return X[:, :0]


@pytest.mark.parametrize(
    "func, error, message",
    [
        (returns_none, TypeError, "Lambda(returns_none) must return an array, got NoneType"),
        (returns_a_float, TypeError, "Lambda(returns_a_float) must return an array, got float"),
        (returns_its_value, TypeError, "Lambda(returns_its_value) returned a plain ndarray"),
        (adds_a_float64_constant, TypeError, "returned float64 values for float32 inputs"),
        (drops_the_features, ValueError, "Lambda(drops_the_features) returned the output shape"),
    ],
)
def test_what_the_function_returns_is_checked_when_built_naming_it(func, error, message):
    # Before: None or a float failed with AttributeError 'shape'; X.data trained with
    # no gradient below the layer; a float64 constant failed at the first batch.
    with pytest.raises(error, match=re.escape(message)):
        build(Lambda(func), (3,))


def keeps_the_batch_when_built(X):
    return X if X.shape[0] == 2 else X[:, :2]


def test_an_output_shape_that_changes_after_build_is_named():
    from sknet import NeuralNetRegressor

    X = np.random.RandomState(0).rand(10, 3).astype(np.float32)
    with pytest.raises(ValueError, match=re.escape("Lambda(keeps_the_batch_when_built).forward")):
        NeuralNetRegressor([Lambda(keeps_the_batch_when_built), Dense(1)], max_iter=1).fit(
            X, X[:, 0]
        )


def doubles_in_place(X):
    X *= 2
    return X


def test_a_function_writing_into_its_input_is_named_and_the_data_kept():
    # Recorded while built or trained (X *= 2 makes a new recorded array), it wrote
    # into the caller's rows when predicting.
    layer = Lambda(doubles_in_place)
    build(layer, (3,))
    X = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=re.escape("Lambda(doubles_in_place), called by")):
        layer.forward(X, training=False)
    assert_array_equal(X, 1.0)

"""Converters of the 2-D convolutions and poolings (sknet/onnx/_conv.py)."""

import numpy as np
import pytest

from sknet import ConvNetClassifier, ConvNetRegressor
from sknet.layers import (
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
)
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted, op_types

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_convnet_classifier_on_flat_rows(batch_norm, digits):
    X, y = digits
    clf = ConvNetClassifier(
        conv_filters=(4, 8),
        dense_units=(16,),
        batch_norm=batch_norm,
        dropout=0.2,
        max_iter=2,
        random_state=0,
        device="cpu",
    ).fit(X[:400], y[:400])
    assert clf.input_shape_ == (1, 8, 8)
    model = assert_round_trip(clf, X[:400], flat_input=True)  # flat rows, as it was fitted
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [64]
    images = X[:400].reshape(-1, 1, 8, 8)
    model = assert_round_trip(clf, images)  # or images
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:] == [1, 8, 8]


def test_convnet_regressor_in_float64(digits):
    X, y = digits
    reg = ConvNetRegressor(
        conv_filters=(3,),
        dense_units=(8,),
        max_iter=2,
        random_state=0,
        dtype="float64",
        device="cpu",
    ).fit(X[:300], y[:300] / 9)
    assert_round_trip(reg, X[:300], flat_input=True)


@pytest.mark.parametrize(
    "layers",
    [
        pytest.param(
            [
                Conv2D(4, 3, stride=2, padding=1, activation="relu"),
                MaxPool2D(3, stride=1, padding=1),
            ],
            id="strided-padded-max",
        ),
        pytest.param(
            [Conv2D(4, (3, 1), padding=(1, 0), use_bias=False), AvgPool2D(2, padding=1)],
            id="rectangular-avg-padded",
        ),
        pytest.param([Conv2D(5, 3, activation="silu"), GlobalAvgPool2D()], id="global-avg"),
        pytest.param(
            [Conv2D(4, 1, activation="gelu"), MaxPool2D((2, 3), stride=(1, 2))], id="1x1"
        ),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows(layers, dtype):
    # float64: the windows as slices (onnxruntime has no float64 Conv, AveragePool)
    images = np.random.RandomState(0).standard_normal((32, 2, 7, 6))
    reg = fitted([*layers, Flatten(), Dense(4)], images, dtype=dtype)
    model = assert_round_trip(reg, images)
    assert ("Conv" in op_types(model)) == (dtype == "float32")

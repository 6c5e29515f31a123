"""Converters of the containers (sknet/onnx/_containers.py): residual, concatenating networks."""

import numpy as np
import pytest

from sknet import NeuralNetClassifier
from sknet.layers import (
    BatchNorm,
    Concatenate,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    Residual,
    Sequential,
    TimeDistributed,
)
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted

pytestmark = pytest.mark.filterwarnings(*FILTERS)


def test_residual_convnet(digits):
    X, y = digits
    images = X[:300].reshape(-1, 1, 8, 8)
    clf = NeuralNetClassifier(
        [
            Conv2D(4, 3, padding="same", activation="relu"),
            Residual([Conv2D(4, 3, padding="same", activation="relu"), BatchNorm()]),
            Residual([Conv2D(6, 3, stride=2, padding=1)]),  # a learned 1x1 projection
            MaxPool2D(2),
            Residual([Conv2D(6, 1)], shortcut=[]),
            GlobalAvgPool2D(),
        ],
        max_iter=2,
        random_state=0,
        device="cpu",
    ).fit(images, y[:300])
    assert_round_trip(clf, images)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_residual_and_concatenating_dense_network(dtype):
    X = np.random.RandomState(0).standard_normal((64, 6))
    layers = [
        Residual([Dense(6, activation="relu"), Dropout(0.2), Dense(6)]),
        Residual([Dense(4, activation="tanh")]),  # projected
        Concatenate([Dense(3, activation="relu"), Sequential([Dense(5), Dense(2)]), Dense(1)]),
        Sequential([Residual([Dense(6)], shortcut=[Dense(6, use_bias=False)])]),
    ]
    reg = fitted(layers, X, dtype=dtype)
    assert_round_trip(reg, X)


def test_concatenated_channels_of_images():
    images = np.random.RandomState(0).standard_normal((32, 2, 6, 6))
    branches = [Conv2D(3, 3, padding="same"), Sequential([Conv2D(2, 1), BatchNorm()])]
    reg = fitted([Concatenate(branches), Conv2D(2, 3), Flatten()], images)
    assert_round_trip(reg, images)


def test_time_distributed():
    X = np.random.RandomState(0).standard_normal((32, 5, 2, 3))  # sequences of images...
    layers = [
        TimeDistributed(Sequential([Flatten(), Dense(4, activation="relu")])),
        TimeDistributed(Dense(2)),
        Flatten(),
    ]
    reg = fitted(layers, X, classifier=True)
    assert_round_trip(reg, X)

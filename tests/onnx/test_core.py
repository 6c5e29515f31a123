"""Converters of the core layers (sknet/onnx/_core.py), checked with onnxruntime."""

import numpy as np
import pytest

from sknet.backend import ACTIVATIONS
from sknet.layers import Activation, BatchNorm, Conv2D, Dense, Dropout, Flatten
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_activation_layers(activation):
    X = np.random.RandomState(1).standard_normal((64, 5)) * 2
    reg = fitted([Dense(8), Activation(activation), Dense(4, activation=activation)], X)
    assert_round_trip(reg, X)


def test_dense_without_bias_and_dropout():
    X = np.random.RandomState(1).standard_normal((64, 5))
    reg = fitted([Dense(8, use_bias=False, activation="tanh"), Dropout(0.5), Dense(3)], X)
    assert_round_trip(reg, X)


@pytest.mark.parametrize("frozen", [False, True])
def test_batch_norm_uses_its_running_statistics(frozen):
    rng = np.random.RandomState(1)
    X = rng.standard_normal((128, 6)) * 3 + 5
    reg = fitted([Dense(8), BatchNorm(trainable=not frozen), Activation("relu")], X, max_iter=5)
    assert_round_trip(reg, X)
    images = rng.standard_normal((64, 2, 5, 5)) + 1
    reg = fitted([Conv2D(3, 3), BatchNorm(), Flatten(), Dense(4)], images, max_iter=3)
    assert_round_trip(reg, images)


def test_float64():
    X = np.random.RandomState(1).standard_normal((64, 5))
    reg = fitted([Dense(8, activation="gelu"), BatchNorm(), Dense(3)], X, dtype="float64")
    assert_round_trip(reg, X)

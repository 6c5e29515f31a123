"""Converters of the 1-D convolution and poolings (sknet/onnx/_conv1d.py)."""

import numpy as np
import pytest

from sknet.layers import AvgPool1D, Conv1D, Dense, Flatten, GlobalMaxPool1D, MaxPool1D
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted, op_types

pytestmark = pytest.mark.filterwarnings(*FILTERS)


@pytest.mark.parametrize(
    "layers",
    [
        pytest.param([Conv1D(4, 3, padding="same", activation="relu"), MaxPool1D(2)], id="same"),
        pytest.param(
            [Conv1D(3, 2, stride=2, padding="same"), AvgPool1D(3, stride=1, padding=1)], id="asym"
        ),
        pytest.param(
            [
                Conv1D(4, 3, dilation=2, use_bias=False, activation="gelu"),
                MaxPool1D(3, stride=2, padding=1),
            ],
            id="dilated",
        ),
        pytest.param([Conv1D(5, 1, padding=2), AvgPool1D(2)], id="padded"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_over_steps(layers, dtype):
    X = np.random.RandomState(0).standard_normal((40, 11, 3))
    reg = fitted([*layers, Flatten(), Dense(3)], X, dtype=dtype)
    model = assert_round_trip(reg, X)
    assert ("Conv" in op_types(model)) == (dtype == "float32")


@pytest.mark.parametrize("padding_value", [None, 0.0])
def test_global_max_pooling_of_padded_sequences(padding_value):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((48, 6, 3))
    X[::3, 3:] = 0.0
    X[1::3, :4] = 0.0
    X[5] = 0.0  # nothing but padding: zeros
    reg = fitted([Conv1D(4, 1), GlobalMaxPool1D()], X, padding_value=padding_value)
    assert_round_trip(reg, X)

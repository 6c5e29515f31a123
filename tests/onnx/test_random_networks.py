"""Random networks of tests/test_random_networks.py exported: every tree predicts alike in ONNX.

The random trees hold every kind of stock layer and container, users' layers (exported
through converters registered here, users' containers converting their sublayers with
``builder.convert``), frozen layers, dropout, ensembles, sequence layers, recurrent
layers on padded sequences.
"""

import numpy as np
import pytest

from sknet import NeuralNetRegressor
from sknet.onnx import register_converter
from sknet.onnx._registry import _CONVERTERS
from tests.onnx.helpers import FILTERS, assert_round_trip
from tests.test_random_networks import (
    N_FEATURES,
    SEEDS,
    SEQ_FEATURES,
    SEQ_STEPS,
    TREE_SEEDS,
    Affine,
    Swish,
    padded,
    random_layers,
    random_recurrent_layers,
    random_sequence_layers,
)
from tests.user_containers import Gate, Wrap

pytestmark = pytest.mark.filterwarnings(*FILTERS)


def convert_swish(builder, layer, X):
    return builder.node("Mul", [X, builder.node("Sigmoid", [X])])


def convert_affine(builder, layer, X):
    return builder.node("Tanh", [builder.matmul_add(X, layer.params["W"], layer.params["b"])])


def convert_gate(builder, layer, X):
    Y = builder.convert(layer.block_, X)  # the padding mask goes on, as Gate's forward
    return builder.node("Mul", [Y, builder.constant(layer.params["s"], "s")])


def convert_wrap(builder, layer, X):
    with builder.masked(None):  # Wrap takes no mask
        return builder.convert(layer.block_, X)


@pytest.fixture(scope="module", autouse=True)
def users_converters():
    converters = {Swish: convert_swish, Affine: convert_affine, Gate: convert_gate}
    converters[Wrap] = convert_wrap
    for cls, converter in converters.items():
        register_converter(cls, converter)
    yield
    for cls in converters:
        del _CONVERTERS[cls]


def _fit(layers, X, y, dtype, **params):
    return NeuralNetRegressor(
        layers, max_iter=3, batch_size=40, random_state=0, device="cpu", dtype=dtype, **params
    ).fit(X, y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", TREE_SEEDS)
def test_a_random_network(seed, dtype):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(160, N_FEATURES))
    y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], X[:, 3] - X[:, 4]])
    assert_round_trip(_fit(random_layers(seed, dropout=True), X, y, dtype), X)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_sequence_network(seed, dtype):
    rng = np.random.RandomState(100 + seed)
    X = rng.normal(size=(96, SEQ_STEPS, SEQ_FEATURES))
    y = np.column_stack([X[:, :3, 0].sum(1), X[:, 3:, 1].max(1)])
    # float32 through attention and recurrent cells: a few units in the last place of ~1
    # (onnxruntime 1.32's kernels round differently from NumPy's, up to 2.3e-5 seen)
    atol = 5e-5 if dtype == "float32" else None
    assert_round_trip(_fit(random_sequence_layers(seed, dropout=True), X, y, dtype), X, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_recurrent_tree_on_padded_sequences(seed, dtype):
    rng = np.random.RandomState(300 + seed)
    front, back = padded(rng, n=48)
    X = np.concatenate([front[::2], back[1::2]])  # padding before and after
    y = rng.normal(size=len(X))
    reg = _fit(random_recurrent_layers(seed), X, y, dtype, padding_value=0.0)
    assert_round_trip(reg, X)

"""Tests for sknet/layers/_tree.py: the one traversal, and the sublayers a layer declares."""

import copy

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone

from sknet import NeuralNetRegressor
from sknet.backend import get_backend
from sknet.layers import (
    LSTM,
    Concatenate,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool1D,
    Layer,
    Residual,
    Sequential,
    TimeDistributed,
    from_estimator,
)
from sknet.layers._base import build_layer
from sknet.layers._tree import MAX_DEPTH, leaves, walk
from sknet.utils import check_layer_gradients
from tests.user_containers import Gate, Twin, Wrap

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def built(layer, input_shape):
    layer = clone(layer)
    build_layer(
        layer,
        input_shape,
        backend=get_backend("cpu"),
        dtype=np.float64,
        rng=np.random.RandomState(0),
    )
    return layer


def types(layers):
    return [(path, type(layer).__name__) for path, layer in walk(layers)]


TREES = [
    Sequential([Dense(3), Sequential([Dense(2), Dropout(0.1)])]),
    Residual([Dense(4)], shortcut=[Dense(4)]),
    Concatenate([Dense(2), Sequential([Dense(1)])]),
    TimeDistributed(Sequential([TimeDistributed(Dense(3)), Flatten(), Dense(2)])),
    Wrap(Sequential([Dense(2)])),
    Gate(Dense(4)),
    Twin([Dense(3)], [Dense(2), Dense(4)]),
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_built_and_unbuilt_layers_answer_the_same(tree):
    shape = (3, 4, 4) if isinstance(tree, TimeDistributed) else (4,)
    done = built(tree, shape)
    assert types([tree]) == types([done])
    assert [type(s).__name__ for s in tree.source_layers()] == [
        type(s).__name__ for s in done.source_layers()
    ]
    # the built tree holds copies, the unbuilt one the layers it was given
    assert all(node is not source for (_, node), (_, source) in zip(walk([done]), walk([tree])))
    assert tree.sublayers() == tree.source_layers()


def test_a_declared_container_lists_its_parameters_sublayers_in_order():
    first, a, b = Dense(3), Dense(2), Dense(4)
    twin = Twin([first], [a, b])
    assert twin.source_layers() == [first, a, b]
    done = built(twin, (5,))
    assert [layer.units for layer in done.sublayers()] == [3, 2, 4]
    assert done.sublayers()[0] is done.first_[0] and done.sublayers()[2] is done.second_[1]


def test_a_declared_sublayer_that_build_did_not_store_is_a_clear_error():
    class Forgetful(Layer):
        sublayer_params = ("block",)

        def __init__(self, block):
            self.block = block

        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.inner = self.build_sublayer(self.block, input_shape, rng=rng)
            return self.inner.output_shape_

        def forward(self, X, *, training):
            return self.inner.forward(X, training=training)

    with pytest.raises(ValueError, match=r"Forgetful declares sublayer_params.*block_"):
        built(Forgetful(Dense(2)), (3,))


def test_sublayer_params_must_name_constructor_parameters():
    class Misnamed(Gate):
        sublayer_params = ("blocks",)

    with pytest.raises(ValueError, match=r"sublayer_params.*'blocks'.*not a parameter"):
        Misnamed(Dense(2)).source_layers()


def test_build_sublayer_before_super_build_is_a_clear_error():
    class Early(Gate):
        def build(self, input_shape, *, backend, dtype, rng):
            self.block_ = self.build_sublayer(self.block, input_shape, rng=rng)
            return input_shape

    with pytest.raises(RuntimeError, match=r"build_sublayer.*super\(\).build"):
        built(Early(Dense(2)), (3,))


def test_a_containers_own_parameters_and_its_sublayers_are_the_holders():
    gate = built(Gate(Sequential([Dense(3), Dense(2)])), (4,))
    held = [(path, type(layer).__name__) for path, layer in leaves([gate])]
    assert held == [((0,), "Gate"), ((0, 0, 0), "Dense"), ((0, 0, 1), "Dense")]
    # stock containers gather their blocks' arrays: they hold none of their own
    assert [path for path, _ in leaves([built(Sequential([Dense(2)]), (3,))])] == [(0, 0)]


def test_a_container_mixing_its_own_arrays_with_its_sublayers_is_a_clear_error():
    class Mixed(Gate):
        def build(self, input_shape, *, backend, dtype, rng):
            shape = super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.params["inner"] = self.block_.params["W"]
            return shape

    with pytest.raises(ValueError, match=r"Mixed.params holds arrays of its sublayers"):
        list(leaves([built(Mixed(Dense(2)), (3,))]))


def test_a_users_container_trains_its_own_parameters_and_its_sublayers(digits):
    X, y = digits[0][:200], digits[0][:200, :2].sum(axis=1)
    est = NeuralNetRegressor(
        [Gate(Dense(8, activation="tanh"))], max_iter=3, random_state=0, device="cpu"
    )
    start = clone(est).set_params(max_iter=1).fit(X, y)
    est.fit(X, y)
    gate, start_gate = est.layers_[0], start.layers_[0]
    errors = check_layer_gradients(Gate(Dense(3, activation="tanh")), (4,))
    assert max(errors.values()) < 1e-6 and set(errors) == {"X", "s", "0.W", "0.b"}
    # the scalar of its own trained (the first fit moved it too: it starts at 1)
    assert start_gate.params["s"][0] != 1.0 and gate.params["s"][0] != start_gate.params["s"][0]
    assert not np.array_equal(gate.block_.params["W"], start_gate.block_.params["W"])


def test_from_estimator_carries_a_containers_own_weights(digits):
    X, y = digits[0][:100], digits[0][:100, 0]
    est = NeuralNetRegressor([Gate(Dense(4))], max_iter=2, random_state=0, device="cpu").fit(X, y)
    (copy_,) = from_estimator(est)
    assert isinstance(copy_, Gate) and isinstance(copy_.block, Dense)
    assert_array_equal(copy_.weights["s"], est.layers_[0].params["s"])
    assert_array_equal(copy_.block.weights["W"], est.layers_[0].block_.params["W"])
    again = NeuralNetRegressor([copy_], max_iter=1, random_state=1, device="cpu").fit(X, y)
    assert again.layers_[0].trainable is False


# -- the depth of the tree ---------------------------------------------------------------------


def nested(depth):
    layer = Dense(2)
    for _ in range(depth - 1):
        layer = Sequential([layer])
    return layer


def test_a_tree_deeper_than_the_limit_is_a_clear_error_not_a_recursion_error():
    X, y = np.random.RandomState(0).normal(size=(20, 3)), np.arange(20.0)
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels") as info:
        NeuralNetRegressor([nested(300)], max_iter=1, device="cpu").fit(X, y)
    assert "layers[0][0]" in str(info.value)
    fitted = NeuralNetRegressor([nested(MAX_DEPTH)], max_iter=1, device="cpu").fit(X, y)
    assert max(len(path) for path, _ in walk(fitted.layers_)) == MAX_DEPTH


def test_walk_is_parents_first_and_goes_no_deeper_than_the_limit():
    tree = Sequential([Dense(1), Sequential([Dense(2)]), Dense(3)])
    assert types([tree]) == [
        ((0,), "Sequential"),
        ((0, 0), "Dense"),
        ((0, 1), "Sequential"),
        ((0, 1, 0), "Dense"),
        ((0, 2), "Dense"),
    ]
    with pytest.raises(ValueError, match="nested deeper"):
        list(walk([nested(MAX_DEPTH + 1)]))


# -- masks through a user's container ----------------------------------------------------------


def test_a_time_distributed_lstm_in_a_users_container_trains_with_a_mask():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 5, 3))
    y = rng.normal(size=30)
    layers = [Gate(Sequential([LSTM(4, return_sequences=True)])), GlobalAvgPool1D()]
    est = NeuralNetRegressor(layers, max_iter=2, random_state=0, device="cpu", padding_value=0.0)
    est.fit(X, y)
    assert est.n_iter_ == 2


def test_copies_of_a_container_are_independent():
    gate = Gate(Dense(2))
    done = built(gate, (3,))
    twin = copy.deepcopy(done)
    twin.block_.params["W"][...] = 0
    assert done.block_.params["W"].any()
    assert gate.block.__dict__.get("params") is None  # the given layer stays unbuilt

"""What sknet checks at the boundary with a user's layer (sknet/layers/_contract.py).

``build`` must call ``super().build`` and return a shape of positive integers;
``forward`` gets its input read-only, so a layer writing into it is named
instead of changing the caller's data or another layer's saved output.
"""

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet import NeuralNetClassifier, NeuralNetRegressor
from sknet.backend import get_backend
from sknet.layers import Dense, Layer
from sknet.utils import check_layer_gradients

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

rng = np.random.RandomState(0)
X = rng.rand(40, 4).astype(np.float32)
y = X.sum(axis=1)


def fit(layers, X=X, y=y, **params):
    params = {"max_iter": 2, "device": "cpu", "random_state": 0, **params}
    return NeuralNetRegressor(layers=layers, **params).fit(X, y)


def returning(shape):
    """A layer class whose build returns ``shape``."""

    class Returns(Layer):
        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            return shape

        def forward(self, X, *, training):
            return X

    return Returns


@pytest.mark.parametrize(
    "shape, error, message",
    [
        (None, TypeError, "Returns.build returned None; it must return the shape of one output"),
        (4, TypeError, "Returns.build must return the shape of one output sample, a tuple of "),
        ("4", TypeError, "tuple of positive integers (return input_shape for a layer that"),
        ((-3,), ValueError, "Returns.build returned the output shape (-3,): every size must be a"),
        ((0,), ValueError, "must be a positive integer, got 0"),
        ((4.5,), ValueError, "got 4.5 (divide sizes with //)"),
        ((4.0,), ValueError, "got 4.0 (divide sizes with //)"),
        (("4",), ValueError, "every size must be a positive integer, got '4'"),
        ((True,), ValueError, "every size must be a positive integer, got True"),
    ],
)
def test_a_build_returning_no_shape_of_positive_integers_is_named(shape, error, message):
    # Before: None or 4 failed in tuple() ('NoneType' object is not iterable), -3 in
    # NumPy's random draw of the next layer, and 4.5 or '4' were truncated and trained.
    with pytest.raises(error, match=re.escape(message)):
        fit([returning(shape)(), Dense(1)])


def test_a_build_returning_numpy_integers_or_a_list_is_accepted():
    layer = returning([np.int64(4)])()
    shape = layer.build((4,), backend=get_backend("cpu"), dtype=np.float32, rng=rng)
    assert shape == (4,) and all(type(size) is int for size in shape)


class NoSuperBuild(Layer):
    def build(self, input_shape, *, backend, dtype, rng):
        return input_shape

    def forward(self, X, *, training):
        return X * 2


class ParamBeforeSuperBuild(Layer):
    def build(self, input_shape, *, backend, dtype, rng):
        self.add_param("s", [1.0])
        return super().build(input_shape, backend=backend, dtype=dtype, rng=rng)

    def forward(self, X, *, training):
        return X * self.params["s"]


@pytest.mark.parametrize("layer", [NoSuperBuild(), ParamBeforeSuperBuild()], ids=type)
def test_a_build_that_skips_super_build_is_named(layer):
    # Before: AttributeError 'params' in the training plan, or 'backend_' in add_param.
    name = type(layer).__name__
    with pytest.raises(TypeError, match=rf"{name}\.build must call super\(\)\.build\("):
        fit([layer, Dense(1)])


def test_a_build_calling_super_build_through_a_parent_passes():
    class Child(ParamBeforeSuperBuild):
        def build(self, input_shape, *, backend, dtype, rng):
            super(ParamBeforeSuperBuild, self).build(
                input_shape, backend=backend, dtype=dtype, rng=rng
            )
            self.add_param("s", [2.0])
            return tuple(input_shape)

    assert set(check_layer_gradients(Child(), (3,))) == {"X", "s"}


# -- the input is read-only ----------------------------------------------------------


class DoublesItsInput(Layer):
    """Writes into its input: ``X *= 2``."""

    def forward(self, X, *, training):
        X *= 2
        return X


class DoublesItsInputWhenPredicting(Layer):
    def forward(self, X, *, training):
        if not training:
            X *= 2
        return X * 2 if training else X


WRITES = "DoublesItsInput.forward wrote into a read-only array, most likely its input X"


@pytest.mark.parametrize(
    "params",
    [{}, {"shuffle": False}, {"solver": "lbfgs"}, {"solver": "sgd", "batch_size": 40}],
    ids=["shuffled", "in-order", "lbfgs", "one-batch"],
)
def test_a_layer_writing_into_its_input_never_changes_the_callers_data(params):
    # Before: in-order batches, L-BFGS and one-batch epochs handed the first layer
    # slices of the caller's own X, which the layer doubled at every epoch.
    data = X.copy()
    with pytest.raises(ValueError, match=WRITES):
        fit([DoublesItsInput(), Dense(1)], X=data, **params)
    assert_array_equal(data, X)


def test_predict_never_changes_the_callers_data():
    # Before: predict handed the first layer a view of the caller's X.
    model = fit([DoublesItsInputWhenPredicting(), Dense(1)])
    data = X.copy()
    with pytest.raises(ValueError, match="DoublesItsInputWhenPredicting.forward wrote into"):
        model.predict(data)
    assert_array_equal(data, X)


class Scaled(Layer):
    """``2 X`` with a hand-written backward, optionally written in place."""

    def __init__(self, in_place=False):
        self.in_place = in_place

    def forward(self, X, *, training):
        if self.in_place:
            X *= 2
            return X
        return X * 2

    def backward(self, dY):
        return 2 * dY


def test_a_layer_writing_into_the_output_of_the_layer_before_it_is_named():
    # Dense keeps its output for its backward pass; a layer doubling it in place made
    # Dense's gradient wrong without a word.
    with pytest.raises(ValueError, match="Scaled.forward wrote into a read-only array"):
        fit([Dense(3, activation="tanh"), Scaled(in_place=True), Dense(1)])
    fit([Dense(3, activation="tanh"), Scaled(), Dense(1)])


class KeepsInput(Layer):
    """``X ** 2``, its backward reusing the kept input in place."""

    def forward(self, X, *, training):
        if training:
            self._cache["X"] = X
        return X * X

    def backward(self, dY):
        X = self._cache["X"]
        X *= 2 * dY
        return X


def test_a_backward_writing_into_the_kept_input_is_named():
    with pytest.raises(ValueError, match="KeepsInput.backward wrote into a read-only array"):
        fit([Dense(3), KeepsInput(), Dense(1)])


class Identity(Layer):
    def forward(self, X, *, training):
        return X


class Reshaped(Layer):
    def forward(self, X, *, training):
        return X.reshape(X.shape[0], -1)


@pytest.mark.parametrize("last", [Identity(), Reshaped()], ids=type)
def test_what_a_layer_returns_of_its_input_stays_as_writable_as_it_was(last):
    # The output activation works in place on the last layer's output: a read-only
    # view of Dense's output must not reach it.
    Xc = X[:, :3]
    labels = (Xc[:, 0] > 0.5).astype(int)
    clf = NeuralNetClassifier(layers=[Dense(3), last], max_iter=2, device="cpu", random_state=0)
    data = Xc.copy()
    proba = clf.fit(data, labels).predict_proba(data)
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
    assert_array_equal(data, Xc)
    # The first layer: its output (the caller's rows) is copied before the output function.
    first = NeuralNetRegressor(layers=[Identity()], max_iter=2, device="cpu", random_state=0)
    first.fit(data, Xc[:, :3])
    assert first.predict(data).flags.writeable
    assert_array_equal(data, Xc)


def test_a_read_only_input_is_not_copied():
    seen = []

    class Records(Layer):
        def forward(self, X, *, training):
            seen.append(X)
            return X * 1

    layer = Records()
    layer.build((4,), backend=get_backend("cpu"), dtype=np.float32, rng=rng)
    data = X.copy()
    layer.forward(data, training=False)
    assert not seen[0].flags.writeable and np.shares_memory(seen[0], data)
    assert data.flags.writeable  # the caller's array keeps its flags


# -- what other methods of a user's layer return ---------------------------------------


def with_values_per_sample(count):
    class Counts(Layer):
        def forward(self, X, *, training):
            return X * 1

        def values_per_sample(self):
            return count

    return Counts()


@pytest.mark.parametrize("count", [None, 0, -5, 2.5, "10", True], ids=repr)
def test_values_per_sample_must_be_a_positive_integer(count):
    # Before: None or '10' failed comparing with an int inside the network; 0 divided by
    # zero sizing prediction chunks when it was the only layer; 2.5 and -5 passed.
    model = fit([Dense(4), with_values_per_sample(4)], max_iter=1)
    model.network_.layers[1] = with_values_per_sample(count)
    model.network_.layers[1].output_shape_ = (4,)
    with pytest.raises(TypeError, match="Counts.values_per_sample must return a positive integer"):
        model.predict(X)


def with_sublayers(found):
    class Declares(Layer):
        def forward(self, X, *, training):
            return X * 1

        def sublayers(self):
            return found

    return Declares()


@pytest.mark.parametrize("found", [None, 1, [1], "x", [Dense(2), None]], ids=repr)
def test_sublayers_must_be_a_list_of_layers(found):
    # Before: "'NoneType' object is not iterable" or "'int' object has no attribute
    # '__dict__'" inside the tree walk.
    with pytest.raises(TypeError, match=r"Declares\.sublayers must return a list of the layers"):
        fit([with_sublayers(found), Dense(1)])


def test_sublayers_returning_a_tuple_of_layers_is_a_list():
    assert with_sublayers(()).sublayers() == []


class ReturnsTorch(Layer):
    def forward(self, X, *, training):
        import torch

        return torch.from_numpy(X * 2)


def test_a_forward_returning_another_kind_of_array_is_named():
    # Before: "ReturnsTorch.forward returned torch.float32 values for float32 inputs",
    # or, for a NumPy array from a layer on a GPU, an error inside CuPy's kernels.
    pytest.importorskip("torch")
    with pytest.raises(
        TypeError,
        match=r"ReturnsTorch\.forward returned a torch\.Tensor for numpy\.ndarray inputs",
    ):
        fit([ReturnsTorch(), Dense(1)])


# -- the input a built layer's forward takes -----------------------------------------
def _built(layer, shape, dtype=np.float64):
    layer.build(shape, backend=get_backend("cpu"), dtype=dtype, rng=np.random.RandomState(0))
    return layer


def _stock_layers():
    from sknet.layers import (
        LSTM,
        BatchNorm,
        Conv1D,
        Conv2D,
        Embedding,
        GlobalAvgPool1D,
        LayerNorm,
        MaxPool2D,
        MultiHeadAttention,
        Residual,
        Sequential,
        TimeDistributed,
        TransformerEncoderBlock,
    )

    return [
        (Dense(3), (4,), (2, 5)),
        (Dense(3), (4,), (2, 4, 1)),
        (BatchNorm(), (4,), (2, 6)),
        (LayerNorm(), (5, 4), (2, 5, 3)),
        (Conv2D(2, 3), (1, 6, 6), (2, 1, 7, 6)),
        (MaxPool2D(2), (2, 6, 6), (2, 3, 6, 6)),
        (Conv1D(2, 3), (6, 4), (2, 6, 5)),
        (Embedding(10, 3), (5,), (2, 6)),
        (GlobalAvgPool1D(), (5, 4), (2, 5, 3)),
        (LSTM(3), (5, 4), (2, 7, 4)),
        (MultiHeadAttention(2), (5, 4), (2, 5, 6)),
        (TransformerEncoderBlock(2, 8), (5, 4), (2, 4, 4)),
        (TimeDistributed(Dense(2)), (5, 4), (2, 5, 3)),
        (Sequential([Dense(3), Dense(2)]), (4,), (2, 5)),
        (Residual([Dense(4)]), (4,), (2, 3)),
    ]


@pytest.mark.parametrize("layer, built_for, given", _stock_layers(), ids=lambda v: str(v)[:24])
def test_forward_on_samples_of_another_shape_names_the_layer_and_both_shapes(
    layer, built_for, given
):
    layer = _built(layer, built_for)
    X = np.zeros(given, np.int64 if type(layer).__name__ == "Embedding" else np.float64)
    expected = re.escape(f"{type(layer).__name__}.forward: built for samples of shape")
    message = rf"{expected} {re.escape(str(built_for))}, got .* {re.escape(str(given[1:]))}"
    for training in (False, True):
        with pytest.raises(ValueError, match=message):
            layer.forward(X, training=training)
    assert layer.forward(np.zeros((2, *built_for), X.dtype), training=False).shape[0] == 2


def test_forward_of_a_users_layer_on_samples_of_another_shape_is_named():
    class Scale(Layer):
        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.add_param("s", np.ones(input_shape))
            return input_shape

        def forward(self, X, *, training):
            return X * self.params["s"]

    layer = _built(Scale(), (3,))
    with pytest.raises(ValueError, match=r"Scale.forward: built for samples of shape \(3,\)"):
        layer.forward(np.ones((2, 4)), training=False)
    with pytest.raises(ValueError, match=r"got a batch of shape \(2, 1\)"):
        layer.forward(np.ones((2, 1)), training=True)  # would broadcast silently
    assert_allclose(layer.forward(np.ones((2, 3)), training=False), np.ones((2, 3)))

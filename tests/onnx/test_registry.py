"""The converters' registry (sknet/onnx/_registry.py): users' layers refused, or exported."""

import inspect

import numpy as np
import pytest

import sknet.layers
from sknet import NeuralNetRegressor
from sknet.layers import Dense, Lambda, Layer, Residual, Sequential
from sknet.onnx import register_converter, to_onnx
from sknet.onnx._registry import _CONVERTERS, NOT_EXPORTABLE, find_converter
from tests.onnx.helpers import FILTERS, assert_round_trip, fitted

pytestmark = pytest.mark.filterwarnings(*FILTERS)


class Scale(Layer):
    """A user's layer: a learned scale per feature, from its forward alone."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("s", rng.uniform(0.5, 1.5, input_shape))
        return input_shape

    def forward(self, X, *, training):
        return X * self.params["s"]


class Shifted(Scale):
    """Its own forward: Scale's converter does not apply."""

    def forward(self, X, *, training):
        return X * self.params["s"] + 1


class SameScale(Scale):
    """Scale's forward: Scale's converter applies."""


@pytest.fixture
def scale_converter():
    def convert(builder, layer, X):
        return builder.node("Mul", [X, builder.constant(layer.params["s"], "s")])

    register_converter(Scale, convert)
    yield convert
    del _CONVERTERS[Scale]


def _X():
    return np.random.RandomState(0).standard_normal((64, 4))


def test_a_user_layer_without_a_converter_is_refused_with_what_to_provide():
    reg = fitted([Dense(4), Scale()], _X())
    with pytest.raises(
        TypeError,
        match=r"Scale \(tests\.onnx\.test_registry\.Scale\) has no ONNX converter\. Register "
        r"one before calling to_onnx: sknet\.onnx\.register_converter\(Scale, convert\), where "
        r"convert\(builder, layer, X\)",
    ):
        to_onnx(reg)


def test_a_user_layer_is_exported_through_the_hook(scale_converter):
    X = _X()
    reg = fitted([Dense(4), Scale(), Residual([Scale(), Dense(4)]), Sequential([SameScale()])], X)
    assert find_converter(SameScale) is scale_converter
    assert_round_trip(reg, X)


def test_a_subclass_with_its_own_forward_needs_its_own_converter(scale_converter):
    reg = fitted([Shifted()], _X())
    with pytest.raises(TypeError, match="Shifted has no ONNX converter: it subclasses Scale but"):
        to_onnx(reg)


def test_a_subclass_of_a_stock_layer():
    class Wide(Dense):
        pass  # Dense's forward

    class Doubled(Dense):
        def forward(self, X, *, training):
            return 2 * super().forward(X, training=training)

        def backward(self, dY):
            return super().backward(2 * dY)

    X = _X()
    assert_round_trip(fitted([Wide(5, activation="tanh")], X), X)
    with pytest.raises(TypeError, match="Doubled has no ONNX converter: it subclasses Dense"):
        to_onnx(fitted([Doubled(5)], X))


def test_lambda_is_refused_with_its_reason_and_takes_a_registered_converter():
    X = _X()
    reg = fitted([Lambda(lambda X: X * 2), Dense(3)], X)
    with pytest.raises(TypeError, match="Lambda has no ONNX form: its function is Python code"):
        to_onnx(reg)

    @register_converter(Lambda)
    def doubled(builder, layer, X):
        return builder.node("Mul", [X, builder.constant(2.0)])

    try:
        assert_round_trip(reg, X)
    finally:
        del _CONVERTERS[Lambda]


def test_register_converter_checks_its_arguments():
    with pytest.raises(TypeError, match="layer_class must be a subclass of sknet.layers.Layer"):
        register_converter(NeuralNetRegressor, lambda b, layer, X: X)
    with pytest.raises(TypeError, match="converter must be a callable"):
        register_converter(Scale, "Mul")
    assert Scale not in _CONVERTERS


def test_every_stock_layer_has_a_converter_or_a_reason():
    # A layer added to sknet.layers cannot skip export: a converter, or a reason here.
    classes = [
        getattr(sknet.layers, name)
        for name in sknet.layers.__all__
        if inspect.isclass(getattr(sknet.layers, name))
    ]
    assert Dense in classes and Layer in classes
    missing = [
        c.__name__ for c in classes if find_converter(c) is None and c not in NOT_EXPORTABLE
    ]
    assert not missing, f"layers with neither a converter nor a reason: {missing}"
    both = [c.__name__ for c in classes if find_converter(c) is not None and c in NOT_EXPORTABLE]
    assert not both
    assert all(isinstance(reason, str) and reason for reason in NOT_EXPORTABLE.values())

"""Custom layers the tests use, written as a user would write them."""

import importlib.util
from pathlib import Path

import numpy as np

from sknet import autodiff as ad
from sknet.layers import Layer


class Scale(Layer):
    # The example of Layer's docstring, as written there.
    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.params = {"s": backend.xp.ones((1,), dtype=dtype)}
        self.grads = {"s": backend.xp.zeros((1,), dtype=dtype)}
        return input_shape

    def forward(self, X, *, training):
        if training:
            self._cache["X"] = X
        return X * self.params["s"]

    def backward(self, dY):
        self.grads["s"][...] = (dY * self._cache["X"]).sum()
        return dY * self.params["s"]


# -- forward-only layers: their backward comes from sknet.autodiff -------------------


class GLU(Layer):
    """A gated linear unit: ``a * sigmoid(g)`` with ``[a | g] = X @ W + b``."""

    regularized = ("W",)

    def __init__(self, units=8, *, trainable=True, lr_scale=1.0, weights=None):
        self.units = units
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n = input_shape[0]
        self.add_param("W", rng.normal(0, n**-0.5, (n, 2 * self.units)), regularized=True)
        self.add_param("b", np.zeros(2 * self.units))
        return (self.units,)

    def forward(self, X, *, training):
        A = X @ self.params["W"] + self.params["b"]
        return A[:, : self.units] * ad.sigmoid(A[:, self.units :])


class LayerNorm(Layer):
    """Layer normalization over the features of each sample."""

    def __init__(self, epsilon=1e-5, *, trainable=True, lr_scale=1.0, weights=None):
        self.epsilon = epsilon
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("gamma", np.ones(input_shape))
        self.add_param("beta", np.zeros(input_shape))
        return input_shape

    def forward(self, X, *, training):
        centered = X - ad.mean(X, axis=1, keepdims=True)
        scale = ad.sqrt(ad.mean(centered * centered, axis=1, keepdims=True) + self.epsilon)
        return centered / scale * self.params["gamma"] + self.params["beta"]


def _benchmark_layer(name):
    """A layer of ``benchmarks/bench_autodiff.py``: the tests check what it measures."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_autodiff.py"
    spec = importlib.util.spec_from_file_location("bench_autodiff", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


#: ``relu(X @ W + b)`` drawn like ``Dense(units, activation='relu')``.
ForwardDense = _benchmark_layer("ForwardDense")


def swish(X, beta=1.0):
    """A parameter-free function for ``Lambda``."""
    return X * ad.sigmoid(beta * X)

"""Containers written as a user would write them: layers made of other layers.

``Wrap`` is written the way the documentation described before containers declared
their sublayers: a built copy in an attribute named after its parameter plus an
underscore, found by discovery. ``Gate`` and ``Twin`` declare theirs
(``sublayer_params``) and build them with ``build_sublayer``; ``Gate`` holds a
parameter of its own besides its sublayer's, and passes the padding mask on.
"""

import copy

import numpy as np

from sknet.layers import Layer


class Wrap(Layer):
    """Runs one layer (discovered from ``block_``), with a hand-written backward."""

    def __init__(self, block):
        self.block = block

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.block_ = copy.deepcopy(self.block)
        return self.block_.build(input_shape, backend=backend, dtype=dtype, rng=rng)

    def forward(self, X, *, training):
        return self.block_.forward(X, training=training)

    def backward(self, dY):
        return self.block_.backward(dY)


class Gate(Layer):
    """``block(X) * s``: a sublayer and a learned scalar ``s`` of its own; passes masks on."""

    sublayer_params = ("block",)
    supports_mask = True

    def __init__(self, block):
        self.block = block

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.block_ = self.build_sublayer(self.block, input_shape, rng=rng)
        self.add_param("s", np.ones(1))
        return self.block_.output_shape_

    def forward(self, X, *, training, mask=None):
        Y = self.block_.forward_with_mask(X, training=training, mask=mask)
        if training:
            self._cache["Y"] = Y
        return Y * self.params["s"]

    def backward(self, dY):
        self.grads["s"][...] = (dY * self._cache["Y"]).sum()
        return self.block_.backward(dY * self.params["s"])


class Twin(Layer):
    """Two lists of layers run one after the other (declared; no mask support)."""

    sublayer_params = ("first", "second")

    def __init__(self, first, second):
        self.first = first
        self.second = second

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        shape = input_shape
        self.first_, self.second_ = [], []
        for name in ("first", "second"):
            for layer in getattr(self, name):
                built = self.build_sublayer(layer, shape, rng=rng)
                getattr(self, name + "_").append(built)
                shape = built.output_shape_
        return shape

    def forward(self, X, *, training):
        for layer in self.first_ + self.second_:
            X = layer.forward(X, training=training)
        return X

    def backward(self, dY):
        for layer in reversed(self.first_ + self.second_):
            dY = layer.backward(dY)
            if layer.skip_input_grad:
                return None
        return dY

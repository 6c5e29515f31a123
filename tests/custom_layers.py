"""Custom layers the tests use, written as a user would write them."""

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

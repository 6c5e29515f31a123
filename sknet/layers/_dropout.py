"""Inverted dropout."""

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import TRAINING_CONSTRAINTS, Number


def dropout_factor(rate):
    """``(threshold, scale)`` of inverted dropout on 16-bit draws (``Backend.dropout_apply``).

    A draw is dropped below ``round(rate * 65536)``: the rate ``r`` applied is
    ``rate`` to the nearest 1/65536, and the kept values are scaled by that
    ``r``'s ``1 / (1 - r)``, so the expectation is unchanged.
    """
    threshold = int(round(rate * 65536))
    return threshold, 65536.0 / (65536 - threshold)


class Dropout(Layer):
    """Randomly zero a fraction ``rate`` of the inputs while training.

    Kept inputs are scaled by ``1 / (1 - rate)`` ("inverted" dropout; the
    rate applied is ``rate`` to the nearest 1/65536, the draws being 16-bit
    integers, and the scale is that rate's, so the expectation is exact), so the
    layer is the identity at prediction time. Masks are drawn on the backend
    from a generator seeded by the estimator's ``random_state``.

    Parameters
    ----------
    rate : float, default=0.5
        Fraction of inputs to drop, in ``[0, 1)``.

    Notes
    -----
    Input shape: any. Output shape: same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Dropout
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Dropout(rate=0.5)
    >>> layer.build((4,), backend=backend, dtype=np.float32, rng=rng)
    (4,)
    >>> X = np.ones((2, 4), np.float32)
    >>> layer.forward(X, training=False) is X  # the identity at prediction time
    True
    >>> np.unique(layer.forward(X, training=True))  # dropped, or kept and doubled
    array([0., 2.], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    _parameter_constraints: dict = {"rate": [Number(0, 1, closed="left")], **TRAINING_CONSTRAINTS}

    def __init__(self, rate=0.5):
        self.rate = rate

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self._seed = int(rng.randint(0, 2**31 - 1))
        self._offset = 0
        self._generator = None
        self.output_shape_ = self.input_shape_
        return self.output_shape_

    def forward(self, X, *, training):
        if not training or self.rate == 0:
            return X
        u = self.__dict__.pop("_draws", None)  # this copy's rows of a split batch
        if u is None:
            u = self._uniform(X.shape)
        threshold, scale = dropout_factor(self.rate)
        Y = self.backend_.dropout_apply(X, u, threshold, scale, self._buffer("Y", X.shape))
        self._cache = {"draws": u}
        return Y

    def _uniform(self, shape):
        """The draws of a batch of ``shape``: uniform 16-bit integers (``random_bits``),
        half the time of float uniforms; a draw below ``round(rate * 65536)`` drops."""
        return self.backend_.random_bits(self._stream(), shape)

    def _stream(self):
        """This layer's random generator (a network's copies draw from it too)."""
        if self._generator is None:
            seed = np.random.SeedSequence([self._seed, self._offset]).generate_state(1)[0]
            self._generator = self.backend_.random_generator(int(seed))
        return self._generator

    def split_draws(self, copies, bounds):
        # the whole batch's numbers, from this layer's stream: masks independent of the split
        if self.rate == 0:
            return
        u = self._uniform((bounds[-1],) + self.input_shape_)
        for layer, start, stop in zip(copies, bounds[:-1], bounds[1:]):
            layer._draws = u[start:stop]

    def backward(self, dY):
        if self.rate == 0:
            return dY
        threshold, scale = dropout_factor(self.rate)
        return self.backend_.dropout_apply(dY, self._cache["draws"], threshold, scale, dY)

    def reseed(self, offset):
        self._offset = int(offset)
        self._generator = None

    def to_backend(self, backend):
        self._generator = None
        return super().to_backend(backend)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_generator", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_seed" in state:
            self._generator = None

"""Weight initializers, drawn on the host from ``random_state``.

Drawing on the host (in float64, then cast) makes the initial weights the same
on every backend and for every dtype, and lets ``MLPClassifier`` start from
exactly the weights scikit-learn's MLP starts from for the same ``random_state``.

An initializer is called as ``init(rng, weight_shape, n_biases, fan_in, fan_out,
activation)`` and returns float64 NumPy arrays ``(W, b)``. What a user's
initializer returns is checked (:func:`initial_weights`): a pair of arrays of
real numbers, of the shapes asked for, finite; anything else is an error naming
the initializer.
"""

import numpy as np

from sknet.backend import ACTIVATIONS


def glorot_uniform(rng, weight_shape, n_biases, fan_in, fan_out, activation=None):
    """scikit-learn's Glorot-uniform variant: weights *and* biases uniform.

    The bound is ``sqrt(factor / (fan_in + fan_out))`` with ``factor = 2`` for a
    logistic activation and 6 otherwise, drawn weights first, then biases, as
    ``sklearn.neural_network.MLPClassifier`` does.
    """
    factor = 2.0 if activation == "logistic" else 6.0
    bound = np.sqrt(factor / (fan_in + fan_out))
    W = rng.uniform(-bound, bound, weight_shape)
    b = rng.uniform(-bound, bound, n_biases)
    return W, b


def he_uniform(rng, weight_shape, n_biases, fan_in, fan_out, activation=None):
    """He-uniform weights, ``U(-sqrt(6 / fan_in), sqrt(6 / fan_in))``; zero biases."""
    bound = np.sqrt(6.0 / fan_in)
    W = rng.uniform(-bound, bound, weight_shape)
    return W, np.zeros(n_biases)


class SklearnGlorotUniform:
    """scikit-learn's MLP initialization, with the factor of a whole network's activation.

    Weights and biases are drawn uniformly in ``+-sqrt(factor / (fan_in +
    fan_out))``, ``factor = 2`` for a logistic activation and 6 otherwise,
    weights first, as ``sklearn.neural_network.MLPClassifier`` does (the
    ``'glorot_uniform'`` ``init`` of :class:`~sknet.layers.Dense`).
    scikit-learn picks the factor from the *hidden* activation for every
    layer, the output layer included; :class:`MLPClassifier` and
    :class:`MLPRegressor` give this initializer to all their Dense layers to
    start from scikit-learn's weights for the same ``random_state``.

    Parameters
    ----------
    activation : str
        The hidden activation of the network.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet import SklearnGlorotUniform
    >>> from sknet.layers import Dense
    >>> layer = Dense(4, init=SklearnGlorotUniform("relu"))
    >>> W, b = SklearnGlorotUniform("relu")(np.random.RandomState(0), (3, 4), 4, 3, 4)
    >>> bool(np.abs(W).max() <= np.sqrt(6 / 7))
    True
    """

    def __init__(self, activation):
        self.activation = activation

    def __call__(self, rng, weight_shape, n_biases, fan_in, fan_out, activation=None):
        if not isinstance(self.activation, str) or self.activation not in ACTIVATIONS:
            raise ValueError(
                f"SklearnGlorotUniform: activation must be one of {sorted(ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        return glorot_uniform(rng, weight_shape, n_biases, fan_in, fan_out, self.activation)

    def __repr__(self):
        return f"SklearnGlorotUniform({self.activation!r})"


INITIALIZERS = {
    "glorot_uniform": glorot_uniform,
    "he_uniform": he_uniform,
}


def initial_weights(init, rng, weight_shape, n_biases, fan_in, fan_out, activation):
    """Draw ``(W, b)`` with ``init``, a name in :data:`INITIALIZERS` or a callable.

    What a callable returns is checked before a layer uses it: a pair of
    arrays (NumPy, CuPy or nested lists) of real numbers, ``W`` of
    ``weight_shape`` and ``b`` of ``(n_biases,)``, every value finite; else a
    TypeError or ValueError naming the initializer and what was wrong.
    """
    if not callable(init):
        if init not in INITIALIZERS:
            raise ValueError(
                f"init must be one of {sorted(INITIALIZERS)} or a callable, got {init!r}"
            )
        init = INITIALIZERS[init]
    drawn = init(rng, weight_shape, n_biases, fan_in, fan_out, activation)
    return _checked_weights(init, drawn, tuple(int(d) for d in weight_shape), int(n_biases))


def _checked_weights(init, drawn, weight_shape, n_biases):
    """``drawn`` as two NumPy arrays, or a clear error naming ``init``."""
    name = f"init={getattr(init, '__qualname__', None) or repr(init)}"
    wanted = f"a pair (W, b), W of shape {weight_shape} and b of shape ({n_biases},)"
    if not isinstance(drawn, (tuple, list)) or len(drawn) != 2:
        got = (
            f"{type(drawn).__name__} of shape {drawn.shape}"
            if hasattr(drawn, "shape")
            else (f"{type(drawn).__name__} {drawn!r:.60}")
        )
        raise TypeError(f"{name} must return {wanted}; got {got}")
    arrays = []
    for what, value, shape in (("W", drawn[0], weight_shape), ("b", drawn[1], (n_biases,))):
        if hasattr(value, "get") and not isinstance(value, np.ndarray):
            value = value.get()  # a CuPy array
        try:
            array = np.asanyarray(value)  # a subclass stays (the memory estimate's dry arrays)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name} must return {wanted}; its {what} is no array: {exc}"
            ) from None
        if array.dtype.kind not in "fiu":
            raise TypeError(
                f"{name} returned {what} of dtype {array.dtype}; the weights must be real "
                f"numbers (floats): {wanted}"
            )
        if array.shape != shape:
            raise ValueError(
                f"{name} returned {what} of shape {array.shape}; the layer needs {shape} "
                f"({wanted})"
            )
        if not np.isfinite(array).all():
            raise ValueError(f"{name} returned {what} with NaN or infinite values")
        arrays.append(array)
    return tuple(arrays)

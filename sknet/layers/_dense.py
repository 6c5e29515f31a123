"""Fully connected layer."""

from sklearn.utils._param_validation import StrOptions

from sknet.backend import ACTIVATIONS, activation_needs_input
from sknet.layers._base import Layer
from sknet.layers._constraints import ACTIVATION, POSITIVE_INT, TRAINING_CONSTRAINTS
from sknet.layers._init import INITIALIZERS, initial_weights

#: the constraints of ``init``: a name of INITIALIZERS or a callable
INITIALIZER = [StrOptions(set(INITIALIZERS)), callable]


def _check_activation(activation):
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be None or one of {sorted(ACTIVATIONS)}, got {activation!r}"
        )


class Dense(Layer):
    """Fully connected layer, ``Y = f(X @ W + b)``.

    The activation is applied in place on the layer's own output buffer, so a
    ``Dense(..., activation="relu")`` costs no more memory than a bare one.

    Parameters
    ----------
    units : int
        Number of output features.
    activation : str or None, default=None
        One of :data:`sknet.backend.ACTIVATIONS` (``'identity'``, ``'logistic'``,
        ``'tanh'``, ``'relu'``, ``'leaky_relu'``, ``'elu'``, ``'gelu'``,
        ``'silu'``); ``None`` means identity.
    use_bias : bool, default=True
        Whether to add a learned bias ``b``.
    init : {'glorot_uniform', 'he_uniform'} or callable, default='glorot_uniform'
        Initializer; ``'glorot_uniform'`` is scikit-learn's MLP initialization.
        A callable is called as ``init(rng, weight_shape, n_biases, fan_in,
        fan_out, activation)`` and returns float64 NumPy arrays ``(W, b)``.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'W'`` of shape ``(n_features, units)`` and, with ``use_bias``, ``'b'``
        of shape ``(units,)``.

    Notes
    -----
    Input shape: ``(batch, n_features)``, dense or (as a first layer) sparse.
    Output shape: ``(batch, units)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Dense
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Dense(4, activation="relu")
    >>> layer.build((3,), backend=backend, dtype=np.float32, rng=rng)
    (4,)
    >>> layer.params["W"].shape, layer.params["b"].shape
    ((3, 4), (4,))
    >>> layer.forward(np.ones((2, 3), np.float32), training=False).shape
    (2, 4)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    accepts_sparse = True
    regularized = ("W",)

    _parameter_constraints: dict = {
        "units": [POSITIVE_INT],
        "activation": [ACTIVATION, None],
        "use_bias": ["boolean"],
        "init": INITIALIZER,
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        units,
        activation=None,
        *,
        use_bias=True,
        init="glorot_uniform",
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.units = units
        self.activation = activation
        self.use_bias = use_bias
        self.init = init
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if len(self.input_shape_) != 1:
            raise ValueError(
                f"Dense expects flat samples of shape (n_features,), got "
                f"{self.input_shape_}; put a Flatten() layer before it"
            )
        n_in, units = self.input_shape_[0], int(self.units)
        W, b = initial_weights(self.init, rng, (n_in, units), units, n_in, units, self.activation)
        self._add_params(**({"W": W, "b": b} if self.use_bias else {"W": W}))
        self.output_shape_ = (units,)
        return self.output_shape_

    def forward(self, X, *, training):
        backend = self.backend_
        n, units = X.shape[0], self.output_shape_[0]
        act = self.activation or "identity"
        Z = self._buffer("Z", (n, units)) if training else None
        Z = backend.matmul(X, self.params["W"], out=Z)
        bias = self.params["b"] if self.use_bias else None
        if not activation_needs_input(act):  # bias and activation in place, one call
            Y = backend.bias_activation(Z, bias, act)
        else:
            backend.bias_activation(Z, bias, "identity")
            Y = self._buffer("Y", (n, units)) if training else Z
            backend.activation_forward(act, Z, Y)
        if training:
            self._cache = {"X": X, "Y": Y, "Z": Z}
        return Y

    def backward(self, dY):
        backend, cache = self.backend_, self._cache
        act = self.activation or "identity"
        if activation_needs_input(act):
            dY = backend.activation_backward(act, dY, cache["Y"], cache["Z"], dY)
            act = "identity"
        # the activation's gradient in place, and the bias gradient, in one call
        train = self.trainable
        dZ = backend.bias_activation_grad(
            dY, cache["Y"], act, self.grads["b"] if self.use_bias and train else None
        )
        if train:
            backend.matmul(cache["X"].T, dZ, out=self.grads["W"])
        if self.skip_input_grad:
            return None
        dX = self._buffer("dX", (dZ.shape[0], self.input_shape_[0]))
        return backend.xp.matmul(dZ, self.params["W"].T, out=dX)

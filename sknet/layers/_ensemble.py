"""The parameter-efficient ensemble: k members in one network, a member axis in every layer.

After :class:`EnsembleInput` each sample has a member axis, ``(k, features)``.
:class:`EnsembleDense` is BatchEnsemble's layer (Wen, Tran and Ba, 2020) as
TabM uses it (Gorishniy et al., ICLR 2025): the members share one weight
matrix ``W`` and differ by rank-1 adapters, ``Y_i = f(((X_i * r_i) @ W) * s_i
+ b_i)``, computed as one matrix product over the batch with the members
folded into its rows, ``(n * k, d) @ W``. :class:`EnsembleHead` gives each
member an output layer of its own (one batched product). Layers that act on
each value alone (:class:`~sknet.layers.Dropout`,
:class:`~sknet.layers.Activation`) keep the member axis as they find it.

In the estimators, a network that starts with ``EnsembleInput(k)`` and still
has its ``k`` members at the end gets an ``EnsembleHead`` as its output
layer; training minimizes the mean of the members' losses, and ``predict``
and ``predict_proba`` average the members' predictions (probabilities after
each member's softmax or sigmoid), through
:class:`~sknet.losses.EnsembleLoss`.
"""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import StrOptions

from sknet.backend import activation_needs_input
from sknet.layers._base import Layer
from sknet.layers._constraints import ACTIVATION, POSITIVE_INT, TRAINING_CONSTRAINTS
from sknet.layers._dense import _check_activation

_ADAPTER_INITS = ("ones", "random_signs", "normal")


def _check_k(k, name="k"):
    if not isinstance(k, (Integral, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def _member_input(layer, k):
    """The ``(k, d)`` of ``layer``'s samples, checked against its ``k`` (None: any)."""
    shape = layer.input_shape_
    if len(shape) != 2:
        raise ValueError(
            f"{type(layer).__name__} expects samples of shape (k, features), a member axis "
            f"first (put an EnsembleInput before it), got {shape}"
        )
    if k is not None and _check_k(k) != shape[0]:
        raise ValueError(
            f"{type(layer).__name__}(k={k}) got samples of {shape[0]} members, shape {shape}"
        )
    return shape


def ensemble_size(layers):
    """The ``k`` of the :class:`EnsembleInput` in a list of (unbuilt) layers, or None.

    Containers are searched through their layer parameters. A ValueError if
    two ensemble inputs disagree.
    """
    found = set()

    def visit(value):
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, EnsembleInput):
            found.add(value.k)
        elif isinstance(value, Layer):
            visit([v for v in value.get_params(deep=False).values() if _holds_layers(v)])

    visit(list(layers))
    if len(found) > 1:
        raise ValueError(f"The network has EnsembleInput layers of different k: {sorted(found)}")
    return next(iter(found), None)


def _holds_layers(value):
    if isinstance(value, Layer):
        return True
    return isinstance(value, (list, tuple)) and any(isinstance(v, Layer) for v in value)


class EnsembleInput(Layer):
    """``k`` copies of each sample: the member axis of a parameter-efficient ensemble.

    Parameters
    ----------
    k : int
        The number of members (TabM's default is 32).

    Attributes
    ----------
    n_members_ : int
        ``k``.

    Notes
    -----
    Input shape: ``(batch, features)``. Output shape: ``(batch, k,
    features)``. The gradient of the input is the sum over the members.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import EnsembleInput
    >>> layer = EnsembleInput(4)
    >>> layer.build((3,), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))
    (4, 3)
    >>> layer.forward(np.ones((2, 3), np.float32), training=False).shape
    (2, 4, 3)

    In an estimator, which appends an :class:`EnsembleHead`:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import NeuralNetClassifier
    >>> from sknet.layers import EnsembleDense
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = NeuralNetClassifier(
    ...     [EnsembleInput(4), EnsembleDense(32, activation="relu"),
    ...      EnsembleDense(32, activation="relu", r_init="ones")],
    ...     learning_rate_init=0.01, early_stopping=True, random_state=0, device="cpu",
    ... ).fit(X[:1000] / 16, y[:1000])
    >>> clf.layers_[-1].params["W"].shape  # the output layer: one per member
    (4, 32, 10)
    >>> clf.predict_proba(X[1000:] / 16).shape  # the members' mean
    (797, 10)
    >>> bool(clf.score(X[1000:] / 16, y[1000:]) > 0.9)
    True
    """

    shardable = True  # rows are independent (see Layer.shardable)
    _parameter_constraints: dict = {"k": [POSITIVE_INT], **TRAINING_CONSTRAINTS}

    def __init__(self, k):
        self.k = k

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        k = _check_k(self.k)
        if len(self.input_shape_) != 1:
            raise ValueError(
                f"EnsembleInput expects rows of features, got samples of shape "
                f"{self.input_shape_} (put a Flatten() before it)"
            )
        self.n_members_ = k
        self.output_shape_ = (k, self.input_shape_[0])
        return self.output_shape_

    def forward(self, X, *, training):
        n, d = X.shape
        Y = self._buffer("Y", (n, self.n_members_, d)) if training else None
        if Y is None:
            Y = self.xp.empty((n, self.n_members_, d), dtype=X.dtype)
        Y[...] = X[:, None, :]
        return Y

    def backward(self, dY):
        return None if self.skip_input_grad else self.backend_.member_sum(dY)


class EnsembleDense(Layer):
    """BatchEnsemble's dense layer: one shared weight matrix, rank-1 adapters per member.

    Member ``i`` computes ``Y_i = f(((X_i * r_i) @ W) * s_i + b_i)``: ``W``
    is shared, ``r_i`` (input side), ``s_i`` (output side) and ``b_i`` are
    the member's own. The whole batch runs as one matrix product, the
    members folded into its rows.

    Parameters
    ----------
    units : int
        Outputs per member.
    activation : str or None, default=None
        One of :data:`sknet.backend.ACTIVATIONS`; ``None`` means identity.
    k : int or None, default=None
        The number of members; ``None`` takes it from the input (checked
        when given).
    r_init, s_init : {'ones', 'random_signs', 'normal'}, default='random_signs', 'ones'
        How the adapters start: ones, random signs (+-1) or a standard
        normal. TabM starts every adapter at ones except the first layer's
        ``r``, which breaks the members' symmetry (random signs on plain
        inputs, a normal after numeric embeddings). The default here gives
        every layer random signs on ``r``, so a stack of default layers is
        never an ensemble of identical members; for TabM's initialization
        give ``r_init='ones'`` to every layer but the first.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'W'`` of shape ``(features, units)``, ``'r'`` of shape ``(k,
        features)``, ``'s'`` and ``'b'`` of shape ``(k, units)``.
    n_members_ : int
        ``k``.

    Notes
    -----
    Input shape: ``(batch, k, features)``. Output shape: ``(batch, k,
    units)``. ``W`` starts uniform in ``+-1 / sqrt(features)`` and the
    biases at one draw of the same law shared by all members (TabM's
    initialization, PyTorch's for a linear layer). ``W``, ``r`` and ``s`` are
    regularized (``alpha``, AdamW's ``weight_decay``, as in TabM), ``b`` is
    not.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import EnsembleDense
    >>> layer = EnsembleDense(8, activation="relu")
    >>> layer.build((4, 3), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))  # 4 members of 3 features
    (4, 8)
    >>> layer.params["W"].shape, layer.params["r"].shape, layer.params["s"].shape
    ((3, 8), (4, 3), (4, 8))
    """

    shardable = True  # rows are independent (see Layer.shardable)
    regularized = ("W", "r", "s")
    _parameter_constraints: dict = {
        "units": [POSITIVE_INT],
        "activation": [ACTIVATION, None],
        "k": [POSITIVE_INT, None],
        "r_init": [StrOptions(set(_ADAPTER_INITS))],
        "s_init": [StrOptions(set(_ADAPTER_INITS))],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        units,
        activation=None,
        *,
        k=None,
        r_init="random_signs",
        s_init="ones",
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.units = units
        self.activation = activation
        self.k = k
        self.r_init = r_init
        self.s_init = s_init
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        units = _check_k(self.units, "units")
        _check_activation(self.activation)
        k, d = _member_input(self, self.k)
        for name in ("r_init", "s_init"):
            if getattr(self, name) not in _ADAPTER_INITS:
                raise ValueError(
                    f"{name} must be one of {list(_ADAPTER_INITS)}, got {getattr(self, name)!r}"
                )
        bound = d**-0.5
        self.add_param("W", rng.uniform(-bound, bound, (d, units)), regularized=True)
        self.add_param("r", _adapter(self.r_init, rng, (k, d)), regularized=True)
        self.add_param("s", _adapter(self.s_init, rng, (k, units)), regularized=True)
        self.add_param("b", np.tile(rng.uniform(-bound, bound, units), (k, 1)))
        self.n_members_ = k
        self.output_shape_ = (k, units)
        return self.output_shape_

    def forward(self, X, *, training):
        backend, xp = self.backend_, self.xp
        (n, k, d), units = X.shape, self.output_shape_[1]
        act = self.activation or "identity"

        def buffer(key, shape):
            return self._buffer(key, shape) if training else xp.empty(shape, dtype=X.dtype)

        Xr = xp.multiply(X, self.params["r"], out=buffer("Xr", (n, k, d)))
        U = backend.matmul(Xr.reshape(n * k, d), self.params["W"], out=buffer("U", (n * k, units)))
        s, b, Z = self.params["s"], self.params["b"], buffer("Z", (n, k, units))
        if activation_needs_input(act):
            backend.scale_bias_activation(U.reshape(n, k, units), s, b, "identity", Z)
            Z = Z.reshape(n, k * units)
            Y = buffer("Y", (n, k * units))
            backend.activation_forward(act, Z, Y)
        else:  # adapter, bias and activation in place, one call
            Z = backend.scale_bias_activation(U.reshape(n, k, units), s, b, act, Z)
            Y = Z = Z.reshape(n, k * units)
        if training:
            self._cache = {"X": X, "Xr": Xr, "U": U, "Z": Z, "Y": Y}
        return Y.reshape(n, k, units)

    def backward(self, dY):
        backend, cache, train = self.backend_, self._cache, self.trainable
        n, k, units = dY.shape
        d = self.input_shape_[1]
        act = self.activation or "identity"
        dY = dY.reshape(n, k * units)
        if activation_needs_input(act):
            dY = backend.activation_backward(act, dY, cache["Y"], cache["Z"], dY)
            act = "identity"
        if train:  # b's and s's gradients, and dY becomes the gradient of U
            dZ = backend.scale_bias_activation_grad(
                dY.reshape(n, k, units),
                cache["Y"].reshape(n, k, units),
                act,
                cache["U"].reshape(n, k, units),
                self.params["s"],
                self.grads["b"],
                self.grads["s"],
            )
        else:
            dZ = backend.bias_activation_grad(dY, cache["Y"], act, None).reshape(n, k, units)
            dZ *= self.params["s"]
        dU = dZ.reshape(n * k, units)
        if train:  # only the optimizer reads it: on the helper thread, if any
            Xr = cache["Xr"].reshape(n * k, d)
            backend.defer(
                backend.matmul, Xr.T, dU, self.grads["W"], overlap=not self.skip_input_grad
            )
        if self.skip_input_grad and not train:
            return None
        dXr = (dU @ self.params["W"].T).reshape(n, k, d)
        if self.skip_input_grad:
            self.grads["r"][...] = (dXr * cache["X"]).sum(axis=0)
            return None
        if train:  # r's gradient, and dXr becomes the gradient of X
            return backend.scale_and_sum(dXr, cache["X"], self.params["r"], self.grads["r"])
        dXr *= self.params["r"]
        return dXr


def _adapter(init, rng, shape):
    if init == "ones":
        return np.ones(shape)
    if init == "random_signs":
        return np.where(rng.rand(*shape) < 0.5, -1.0, 1.0)
    return rng.standard_normal(shape)


class EnsembleHead(Layer):
    """A dense layer per member, nothing shared: each member's own outputs.

    Member ``i`` computes ``Y_i = f(X_i @ W_i + b_i)``, all members in one
    batched matrix product. The estimators append ``EnsembleHead(n_outputs)``
    to a network whose samples end with a member axis.

    Parameters
    ----------
    units : int
        Outputs per member.
    activation : str or None, default=None
        One of :data:`sknet.backend.ACTIVATIONS`; ``None`` means identity.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'W'`` of shape ``(k, features, units)``, ``'b'`` of shape ``(k,
        units)``, drawn uniform in ``+-1 / sqrt(features)`` (PyTorch's, and
        TabM's, initialization). ``'W'`` is regularized.
    n_members_ : int
        The number of members.

    Notes
    -----
    Input shape: ``(batch, k, features)``. Output shape: ``(batch, k,
    units)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import EnsembleHead
    >>> layer = EnsembleHead(2)
    >>> layer.build((4, 3), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))
    (4, 2)
    >>> layer.params["W"].shape
    (4, 3, 2)
    """

    shardable = True  # rows are independent (see Layer.shardable)
    regularized = ("W",)
    _parameter_constraints: dict = {
        "units": [POSITIVE_INT],
        "activation": [ACTIVATION, None],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, units, activation=None, *, trainable=True, lr_scale=1.0, weights=None):
        self.units = units
        self.activation = activation
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        units = _check_k(self.units, "units")
        _check_activation(self.activation)
        k, d = _member_input(self, None)
        bound = d**-0.5
        self.add_param("W", rng.uniform(-bound, bound, (k, d, units)), regularized=True)
        self.add_param("b", rng.uniform(-bound, bound, (k, units)))
        self.n_members_ = k
        self.output_shape_ = (k, units)
        return self.output_shape_

    def forward(self, X, *, training):
        xp, act = self.xp, self.activation or "identity"
        Z = self.backend_.member_matmul(X, self.params["W"])
        Z += self.params["b"]
        Y = xp.empty_like(Z) if activation_needs_input(act) else Z
        if act != "identity":
            self.backend_.activation_forward(act, Z, Y)
        if training:
            self._cache = {"X": X, "Z": Z, "Y": Y}
        return Y

    def backward(self, dY):
        xp, cache, act = self.xp, self._cache, self.activation or "identity"
        if act != "identity":
            dY = self.backend_.activation_backward(act, dY, cache["Y"], cache["Z"], dY)
        if self.trainable:
            dY.sum(axis=0, out=self.grads["b"])
            xp.matmul(cache["X"].transpose(1, 2, 0), dY.transpose(1, 0, 2), out=self.grads["W"])
        if self.skip_input_grad:
            return None
        return self.backend_.member_matmul(dY, self.params["W"].transpose(0, 2, 1))


__all__ = ["EnsembleDense", "EnsembleHead", "EnsembleInput", "ensemble_size"]

"""The transformer encoder block: self attention and a feed-forward network, each residual."""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import StrOptions

from sknet.backend import activation_needs_input
from sknet.layers._attention import (
    RandomDraws,
    add_attention_params,
    attention_backward,
    attention_forward,
    attention_geometry,
    check_rate,
    dropout_factor,
)
from sknet.layers._base import Layer
from sknet.layers._constraints import POSITIVE_INT, TRAINING_CONSTRAINTS, Number
from sknet.layers._layer_norm import check_epsilon, layer_norm_rows, layer_norm_rows_backward
from sknet.layers._steps import (
    check_sequence_shape,
    padded_as_zeros,
    work_arrays,
    zero_padded_steps,
)

_ACTIVATIONS = ("relu", "gelu")


class TransformerEncoderBlock(RandomDraws, Layer):
    """One transformer encoder block: self attention, feed-forward, residuals, layer norms.

    With ``norm_first=False`` (post-norm, the original transformer's)::

        X = LayerNorm1(X + Dropout(Attention(X)))
        Y = LayerNorm2(X + Dropout(FeedForward(X)))

    and with ``norm_first=True`` (pre-norm)::

        X = X + Dropout(Attention(LayerNorm1(X)))
        Y = X + Dropout(FeedForward(LayerNorm2(X)))

    where ``FeedForward(X) = Dropout(f(X @ W1 + b1)) @ W2 + b2`` and the
    attention is :class:`MultiHeadAttention`'s (with its own dropout on the
    weights): ``torch.nn.TransformerEncoderLayer`` (``batch_first=True``)
    with the same weights gives the same outputs. Stack blocks for a
    transformer encoder; add :class:`PositionEmbedding` or
    :class:`SinusoidalPositionEmbedding` before the first.

    Parameters
    ----------
    num_heads : int
        Number of attention heads; they must divide the input's features.
    ff_units : int, default=None
        Width of the feed-forward network's hidden layer; ``None``: four times
        the input's features.
    dropout : float, default=0.1
        Dropout rate of the attention weights, of both residual branches and
        of the feed-forward hidden layer, while training (to the nearest
        1/65536: the keep-or-drop draws are 16-bit numbers).
    activation : {'relu', 'gelu'}, default='relu'
        The feed-forward network's activation (``'gelu'`` is the tanh
        approximation, PyTorch's ``approximate='tanh'``).
    norm_first : bool, default=False
        Pre-norm (True) or post-norm (False) residuals.
    causal : bool, default=False
        Step ``i`` attends only to steps ``j <= i``.
    epsilon : float, default=1e-5
        The layer norms' epsilon.
    %(trainable)s

    Attributes
    ----------
    params : dict
        The attention's ``'Wq'``, ``'bq'``, ``'Wk'``, ``'bk'``, ``'Wv'``,
        ``'bv'``, ``'Wo'``, ``'bo'`` (as in :class:`MultiHeadAttention`), the
        feed-forward ``'W1'`` ``(features, ff_units)``, ``'b1'``, ``'W2'``
        ``(ff_units, features)``, ``'b2'`` (inputs times weights, as
        :class:`Dense`), and the layer norms' ``'gamma1'``, ``'beta1'``
        (around the attention) and ``'gamma2'``, ``'beta2'`` (around the
        feed-forward network).

    See Also
    --------
    MultiHeadAttention : The attention alone, self or cross.
    LayerNorm : The normalization.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask`` (the
    estimators' ``padding_value``, or any array-like of booleans): padded
    steps enter as zeros (what they hold, NaN included, changes no output and
    no gradient) and are never attended to.
    Output shape: same as input.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import TransformerEncoderBlock
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> block = TransformerEncoderBlock(num_heads=2, ff_units=16)
    >>> block.build((5, 8), backend=backend, dtype=np.float32, rng=rng)
    (5, 8)
    >>> sorted(block.params)[:4]
    ['W1', 'W2', 'Wk', 'Wo']
    >>> block.forward(np.ones((3, 5, 8), np.float32), training=False).shape
    (3, 5, 8)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    supports_mask = True
    regularized = ("Wq", "Wk", "Wv", "Wo", "W1", "W2")

    _parameter_constraints: dict = {
        "num_heads": [POSITIVE_INT],
        "ff_units": [POSITIVE_INT, None],
        "dropout": [Number(0, 1, closed="left")],
        "activation": [StrOptions(set(_ACTIVATIONS))],
        "norm_first": ["boolean"],
        "causal": ["boolean"],
        "epsilon": [Number(0, None)],
        **TRAINING_CONSTRAINTS,
    }
    #: self attention only (the attention functions read it)
    _query_steps = None
    query_steps = None
    key_dim = None

    def __init__(
        self,
        num_heads,
        ff_units=None,
        *,
        dropout=0.1,
        activation="relu",
        norm_first=False,
        causal=False,
        epsilon=1e-5,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.num_heads = num_heads
        self.ff_units = ff_units
        self.dropout = dropout
        self.activation = activation
        self.norm_first = norm_first
        self.causal = causal
        self.epsilon = epsilon
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        T, F = check_sequence_shape(self, self.input_shape_)
        self._heads, self._key_dim, _ = attention_geometry(self, F, T)
        units = 4 * F if self.ff_units is None else self.ff_units
        if not isinstance(units, Integral) or isinstance(units, bool) or units < 1:
            raise ValueError(f"ff_units must be None or a positive integer, got {units!r}")
        self._units = int(units)
        check_rate(self.dropout)
        check_epsilon(self.epsilon)
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {_ACTIVATIONS}, got {self.activation!r}")
        if not isinstance(self.norm_first, (bool, np.bool_)):
            raise ValueError(f"norm_first must be True or False, got {self.norm_first!r}")
        add_attention_params(self, rng, F, self._heads * self._key_dim)
        bound = np.sqrt(6.0 / (F + self._units))
        self.add_param("W1", rng.uniform(-bound, bound, (F, self._units)), regularized=True)
        self.add_param("b1", np.zeros(self._units))
        self.add_param("W2", rng.uniform(-bound, bound, (self._units, F)), regularized=True)
        self.add_param("b2", np.zeros(F))
        for k in "12":
            self.add_param("gamma" + k, np.ones(F))
            self.add_param("beta" + k, np.zeros(F))
        self.start_draws(rng)
        return self.input_shape_

    def draw_shapes(self):
        if not self.dropout:
            return {}
        T, F = self.input_shape_
        return {
            "attention": (self._heads, T, T),
            "attention_out": (T, F),
            "hidden": (T, self._units),
            "ff_out": (T, F),
        }

    def values_per_sample(self):
        T, F = self.input_shape_
        return max(self._heads * T * T, T * self._units, 3 * T * F)

    # -- forward ------------------------------------------------------------------
    def forward(self, X, *, training, mask=None):
        X, mask = padded_as_zeros(self, X, mask)
        N, T, F = X.shape
        u = self.draws(N) if training else {}
        if training:
            self._cache = {"mask": mask}
        if self.norm_first:
            H1 = layer_norm_rows(self, X.reshape(N * T, F), "1", training).reshape(X.shape)
            A = attention_forward(self, H1, mask, training, u.get("attention"))
            R1 = self._residual(X, A, u.get("attention_out"), "r1", training)
            H2 = layer_norm_rows(self, R1.reshape(N * T, F), "2", training)
            return self._residual(
                R1, self._feed_forward(H2, u, training), u.get("ff_out"), "r2", training
            )
        A = attention_forward(self, X, mask, training, u.get("attention"))
        R1 = self._residual(X, A, u.get("attention_out"), "r1", training)
        H1 = layer_norm_rows(self, R1.reshape(N * T, F), "1", training)
        R2 = self._residual(
            H1, self._feed_forward(H1, u, training), u.get("ff_out"), "r2", training
        )
        return layer_norm_rows(self, R2, "2", training).reshape(X.shape)

    def _dropped(self, Z, u, key):
        """``Z`` times the kept (and rescaled) mask of uniform numbers ``u``, in place."""
        if u is None:
            return Z
        self.backend_.dropout_apply(Z, u, *dropout_factor(self.dropout), Z)
        self._cache["drawn_" + key] = u
        return Z

    def _residual(self, X, branch, u, key, training):
        """``X + Dropout(branch)``, a new array shaped like ``X`` (``branch`` overwritten)."""
        branch = self._dropped(branch.reshape(X.shape), u, key)
        out = self._buffer(key, X.shape) if training else self.xp.empty(X.shape, X.dtype)
        return self.xp.add(X, branch, out=out)

    def _feed_forward(self, H, u, training):
        """``Dropout(f(H @ W1 + b1)) @ W2 + b2`` for rows ``H`` (n, F)."""
        backend, xp, p = self.backend_, self.xp, self.params
        n = H.shape[0]
        buffer = work_arrays(self, training)
        Z = xp.matmul(H, p["W1"], out=buffer("ff_Z", (n, self._units)))
        if activation_needs_input(self.activation):
            backend.bias_activation(Z, p["b1"], "identity")
            G = buffer("ff_G", Z.shape)
            backend.activation_forward(self.activation, Z, G)
        else:
            G = backend.bias_activation(Z, p["b1"], self.activation)
        Gd = G
        if u.get("hidden") is not None:
            Gd = buffer("ff_Gd", G.shape)
            Gd[...] = G
            self._dropped(Gd, u["hidden"], "hidden")
        out = xp.matmul(Gd, p["W2"], out=buffer("ff_out", (n, H.shape[1])))
        out += p["b2"]
        if training:
            self._cache.update(ff_H=H, ff_Z=Z, ff_G=G, ff_Gd=Gd)
        return out

    # -- backward -----------------------------------------------------------------
    def backward(self, dY):
        N, T, F = dY.shape
        train, need_dX = self.trainable, not self.skip_input_grad
        if self.norm_first:
            # Y = R1 + drop(FF(LN2(R1))), R1 = X + drop(A(LN1(X)))
            dR1 = dY.reshape(N * T, F)
            dH2 = self._feed_forward_backward(self._undrop(dR1, "r2"), train)
            dR1 = dR1 + layer_norm_rows_backward(self, dH2, "2", train)
            dA = self._undrop(dR1, "r1").reshape(N, T, F)
            dH1 = attention_backward(self, dA, train, True)
            dX = layer_norm_rows_backward(self, dH1.reshape(N * T, F), "1", train)
            dX = (dX + dR1).reshape(N, T, F) if need_dX else None
            return zero_padded_steps(dX, self._cache["mask"])
        # Y = LN2(R2), R2 = H1 + drop(FF(H1)), H1 = LN1(R1), R1 = X + drop(A(X))
        dR2 = layer_norm_rows_backward(self, dY.reshape(N * T, F), "2", train)
        dH1 = self._feed_forward_backward(self._undrop(dR2, "r2"), train)
        dH1 += dR2
        dR1 = layer_norm_rows_backward(self, dH1, "1", train)
        dX = attention_backward(self, self._undrop(dR1, "r1").reshape(N, T, F), train, need_dX)
        dX = None if dX is None else dX + dR1.reshape(N, T, F)
        return zero_padded_steps(dX, self._cache["mask"])

    def _undrop(self, dZ, key):
        """The gradient through a branch's dropout (a new array when there is one)."""
        u = self._cache.get("drawn_" + key)
        if u is None:
            return dZ
        out = self._buffer("undrop_" + key, dZ.shape)
        return self.backend_.dropout_apply(dZ, u, *dropout_factor(self.dropout), out)

    def _feed_forward_backward(self, dOut, train):
        """The gradient of :meth:`_feed_forward`'s input rows; its parameters' with ``train``."""
        backend, xp, p, cache = self.backend_, self.xp, self.params, self._cache
        if train:
            xp.matmul(cache["ff_Gd"].T, dOut, out=self.grads["W2"])
            dOut.sum(axis=0, out=self.grads["b2"])
        dG = xp.matmul(dOut, p["W2"].T, out=self._buffer("ff_dG", cache["ff_G"].shape))
        if "drawn_hidden" in cache:
            backend.dropout_apply(dG, cache["drawn_hidden"], *dropout_factor(self.dropout), dG)
        act = self.activation
        if activation_needs_input(act):
            dG = backend.activation_backward(act, dG, cache["ff_G"], cache["ff_Z"], dG)
            act = "identity"
        db = self.grads["b1"] if train else None
        dZ = backend.bias_activation_grad(dG, cache["ff_G"], act, db)
        if train:
            xp.matmul(cache["ff_H"].T, dZ, out=self.grads["W1"])
        return xp.matmul(dZ, p["W1"].T, out=self._buffer("ff_dH", cache["ff_H"].shape))

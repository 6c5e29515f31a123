"""Multi-head scaled dot-product attention, self and cross, with padding and causal masks.

The attention of :class:`MultiHeadAttention` and of the transformer block
(:mod:`sknet.layers._transformer`) is written once here, as functions of a
layer holding the parameters ``Wq, bq, Wk, bk, Wv, bv, Wo, bo``. For self
attention the three input projections are one matrix product (the weights side
by side, the query's scaled by ``1 / sqrt(key_dim)``); the heads are then
strided views ``(N, heads, steps, key_dim)`` of that product, never copied, and
every head of every sample is one batched product (``xp.matmul``) for the
scores and one for the outputs, written straight into the ``(N, steps, heads *
key_dim)`` layout the output projection takes. The softmax over the keys is
fused with the masks (:meth:`sknet.backend.Backend.attention_softmax`).
"""

import math
from numbers import Integral, Real

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import POSITIVE_INT, TRAINING_CONSTRAINTS, Number
from sknet.layers._dropout import dropout_factor  # noqa: F401 (the sequence layers read it here)
from sknet.layers._steps import (
    check_sequence_shape,
    padded_as_zeros,
    work_arrays,
    zero_padded_steps,
)


class RandomDraws:
    """Dropout inside a layer: random numbers from the layer's own stream.

    A mixin listed before :class:`~sknet.layers.Layer`. The layer names what
    it draws per sample in :meth:`draw_shapes`; :meth:`draws` gives a batch's
    numbers (uniform 16-bit integers, :meth:`~sknet.backend.Backend.random_bits`),
    drawn whole and handed out by rows when the batch is split over threads
    (:meth:`~sknet.layers.Layer.split_draws`), so the model does not depend on
    the split; :func:`dropout_factor` says which are dropped.
    """

    def start_draws(self, rng):
        self._seed = int(rng.randint(0, 2**31 - 1))
        self._offset = 0
        self._generator = None

    def draw_shapes(self):
        """Per-sample shape of each array of uniform numbers a training batch needs."""
        return {}

    def draws(self, n):
        """The uniform numbers of a training batch of ``n`` rows, by name."""
        split = self.__dict__.pop("_split", None)
        if split is not None:
            return split
        return {
            name: self.backend_.random_bits(self._stream(), (n,) + shape)
            for name, shape in self.draw_shapes().items()
        }

    def _stream(self):
        """This layer's random generator (a network's copies draw from it too)."""
        if self._generator is None:
            seed = np.random.SeedSequence([self._seed, self._offset]).generate_state(1)[0]
            self._generator = self.backend_.random_generator(int(seed))
        return self._generator

    def split_draws(self, copies, bounds):
        whole = self.draws(bounds[-1])
        if whole:
            for layer, start, stop in zip(copies, bounds[:-1], bounds[1:]):
                layer._split = {name: u[start:stop] for name, u in whole.items()}

    def reseed(self, offset):
        self._offset = int(offset)
        self._generator = None
        super().reseed(offset)

    def to_backend(self, backend):
        self._generator = None
        return super().to_backend(backend)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_generator", None)
        state.pop("_split", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_seed" in state:
            self._generator = None


def check_rate(rate, name="dropout"):
    if not isinstance(rate, Real) or isinstance(rate, bool) or not 0 <= rate < 1:
        raise ValueError(f"{name} must be a float in [0, 1), got {rate!r}")


def attention_geometry(layer, features, steps):
    """Check ``num_heads``/``key_dim``/``query_steps``/``causal``; returns (heads, key_dim, Tq)."""
    heads, key_dim, query_steps = layer.num_heads, layer.key_dim, layer.query_steps
    if not isinstance(heads, Integral) or isinstance(heads, bool) or heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {heads!r}")
    if key_dim is None:
        if features % heads:
            raise ValueError(
                f"{type(layer).__name__}: the {features} input features do not split into "
                f"num_heads={heads} heads; choose num_heads dividing {features} or give key_dim"
            )
        key_dim = features // heads
    elif not isinstance(key_dim, Integral) or isinstance(key_dim, bool) or key_dim < 1:
        raise ValueError(f"key_dim must be None or a positive integer, got {key_dim!r}")
    if not isinstance(layer.causal, (bool, np.bool_)):
        raise ValueError(f"causal must be True or False, got {layer.causal!r}")
    if query_steps is not None:
        if (
            not isinstance(query_steps, Integral)
            or isinstance(query_steps, bool)
            or not 0 < query_steps < steps
        ):
            raise ValueError(
                f"query_steps must be None or an integer in [1, {steps - 1}] (the sequences "
                f"have {steps} steps), got {query_steps!r}"
            )
        if layer.causal:
            raise ValueError("causal=True is for self attention; it needs query_steps=None")
    return int(heads), int(key_dim), steps if query_steps is None else int(query_steps)


def add_attention_params(layer, rng, features, inner):
    """Glorot-uniform projections (``(in, out)``, as :class:`Dense`) and zero biases."""
    bound = np.sqrt(6.0 / (features + inner))
    for name in "qkv":
        layer.add_param(
            "W" + name, rng.uniform(-bound, bound, (features, inner)), regularized=True
        )
        layer.add_param("b" + name, np.zeros(inner))
    layer.add_param("Wo", rng.uniform(-bound, bound, (inner, features)), regularized=True)
    layer.add_param("bo", np.zeros(features))


def _rows(xp, X):
    N, T, F = X.shape
    return (X if X.flags.c_contiguous else xp.ascontiguousarray(X)).reshape(N * T, F)


def attention_forward(layer, X, key_mask, training, u=None):
    """Attention of sequences ``X`` (N, T, F) by ``layer``; returns (N, Tq, F).

    ``layer`` has ``_heads``, ``_key_dim``, ``_query_steps`` (None: self
    attention), ``causal`` and ``dropout``; ``u`` (N, heads, Tq, Tk) holds the
    uniform numbers of the dropout on the weights (None: no dropout). While
    training, what the backward pass needs goes to ``layer._cache``.
    """
    xp, backend, p = layer.xp, layer.backend_, layer.params
    N, T, F = X.shape
    H, d = layer._heads, layer._key_dim
    E, q = H * d, layer._query_steps
    scale = 1.0 / math.sqrt(d)
    buffer = work_arrays(layer, training)
    if q is None:
        Tq = Tk = T
        groups = [("qkv", _rows(xp, X), T)]
    else:
        Tq, Tk = q, T - q
        groups = [("q", _rows(xp, X[:, :q]), Tq), ("kv", _rows(xp, X[:, q:]), Tk)]
    views, kept = {}, []
    for names, rows, steps in groups:
        width = len(names) * E
        Wb = buffer("att_W" + names, (F, width), batch_first=False)
        bb = buffer("att_b" + names, (width,), batch_first=False)
        for i, name in enumerate(names):
            factor = scale if name == "q" else 1.0
            xp.multiply(p["W" + name], factor, out=Wb[:, i * E : (i + 1) * E])
            xp.multiply(p["b" + name], factor, out=bb[i * E : (i + 1) * E])
        proj = xp.matmul(rows, Wb, out=buffer("att_" + names, (rows.shape[0], width)))
        proj += bb
        heads = proj.reshape(N, steps, len(names), H, d)
        for i, name in enumerate(names):
            views[name] = heads[:, :, i].transpose(0, 2, 1, 3)  # (N, H, steps, d)
        kept.append((names, rows, Wb, proj))
    S = buffer("att_S", (N, H, Tq, Tk))
    xp.matmul(views["q"], views["k"].transpose(0, 1, 3, 2), out=S)
    P = backend.attention_softmax(S, key_mask, layer.causal)
    Pd = P
    if u is not None:
        Pd = backend.dropout_apply(P, u, *dropout_factor(layer.dropout), buffer("att_Pd", P.shape))
    O = buffer("att_O", (N, Tq, H, d))
    xp.matmul(Pd, views["v"], out=O.transpose(0, 2, 1, 3))
    O2 = O.reshape(N * Tq, E)
    Y = xp.matmul(O2, p["Wo"], out=buffer("att_Y", (N * Tq, F)))
    Y += p["bo"]
    if training:
        layer._cache.update(
            att_groups=kept, att_views=views, att_P=P, att_Pd=Pd, att_u=u, att_O2=O2
        )
    return Y.reshape(N, Tq, F)


def attention_backward(layer, dY, with_params, with_input):
    """The gradients of :func:`attention_forward`: ``grads`` (``with_params``) and dX."""
    xp, backend, p, cache = layer.xp, layer.backend_, layer.params, layer._cache
    N, Tq, F = dY.shape
    H, d = layer._heads, layer._key_dim
    E, scale = H * d, 1.0 / math.sqrt(d)
    dY2 = _rows(xp, dY)
    if with_params:
        xp.matmul(cache["att_O2"].T, dY2, out=layer.grads["Wo"])
        dY2.sum(axis=0, out=layer.grads["bo"])
    dO = xp.matmul(dY2, p["Wo"].T, out=layer._buffer("att_dO", (N * Tq, E)))
    dO = dO.reshape(N, Tq, H, d).transpose(0, 2, 1, 3)
    views, grads = cache["att_views"], {}
    for names, rows, _, proj in cache["att_groups"]:
        dproj = layer._buffer("att_d" + names, proj.shape)
        heads = dproj.reshape(N, rows.shape[0] // N, len(names), H, d)
        for i, name in enumerate(names):
            grads[name] = heads[:, :, i].transpose(0, 2, 1, 3)
    P, Pd = cache["att_P"], cache["att_Pd"]
    dP = xp.matmul(dO, views["v"].transpose(0, 1, 3, 2), out=layer._buffer("att_dP", P.shape))
    xp.matmul(Pd.transpose(0, 1, 3, 2), dO, out=grads["v"])
    if cache["att_u"] is not None:
        backend.dropout_apply(dP, cache["att_u"], *dropout_factor(layer.dropout), dP)
    dS = backend.attention_softmax_grad(dP, P)
    xp.matmul(dS, views["k"], out=grads["q"])
    xp.matmul(dS.transpose(0, 1, 3, 2), views["q"], out=grads["k"])
    parts = []
    for names, rows, Wb, _ in cache["att_groups"]:
        dproj = layer._buffer("att_d" + names, (rows.shape[0], len(names) * E))
        if with_params:
            dW = xp.matmul(
                rows.T, dproj, out=layer._buffer("att_dW" + names, Wb.shape, batch_first=False)
            )
            db = dproj.sum(axis=0)
            for i, name in enumerate(names):
                factor = scale if name == "q" else 1.0
                xp.multiply(dW[:, i * E : (i + 1) * E], factor, out=layer.grads["W" + name])
                xp.multiply(db[i * E : (i + 1) * E], factor, out=layer.grads["b" + name])
        if with_input:
            out = layer._buffer("att_dX" + names, rows.shape)
            parts.append(xp.matmul(dproj, Wb.T, out=out).reshape(N, -1, F))
    if not with_input:
        return None
    if len(parts) == 1:
        return parts[0]
    dX = layer._buffer("att_dX", (N, parts[0].shape[1] + parts[1].shape[1], F))
    dX[:, : parts[0].shape[1]] = parts[0]
    dX[:, parts[0].shape[1] :] = parts[1]
    return dX


class MultiHeadAttention(RandomDraws, Layer):
    """Multi-head scaled dot-product attention over sequences (self or cross).

    Each of ``num_heads`` heads projects the queries, keys and values to
    ``key_dim`` features, weighs the values by the softmax of the queries'
    scaled dot products with the keys, and the heads' outputs, side by side,
    are projected back to the input's features: PyTorch's
    ``torch.nn.MultiheadAttention`` (``batch_first=True``) with the same
    weights gives the same outputs.

    Self attention (``query_steps=None``): every step attends to every step.
    Cross attention takes both sequences in one input, the queries' steps
    first: with ``query_steps=q``, steps ``[:q]`` are the queries and steps
    ``[q:]`` the keys and values (join two sequences of token ids, or of
    features, along the steps; one ``Embedding`` and one padding mask cover
    both).

    Parameters
    ----------
    num_heads : int
        Number of attention heads.
    key_dim : int, default=None
        Features per head; ``None``: the input's features divided by
        ``num_heads`` (which must divide them).
    query_steps : int, default=None
        ``None``: self attention. An int: cross attention of the first
        ``query_steps`` steps (queries) to the others (keys and values).
    causal : bool, default=False
        Step ``i`` attends only to steps ``j <= i`` (self attention only).
    dropout : float, default=0.0
        Dropout rate on the attention weights while training (to the nearest
        1/65536: the keep-or-drop draws are 16-bit numbers).
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'Wq'``, ``'Wk'``, ``'Wv'`` of shape ``(features, num_heads * key_dim)``
        (inputs times weights, as :class:`Dense`; head ``h`` owns columns
        ``h * key_dim`` to ``(h + 1) * key_dim``), their biases ``'bq'``,
        ``'bk'``, ``'bv'``, and the output projection ``'Wo'``
        ``(num_heads * key_dim, features)`` with its bias ``'bo'``. PyTorch's
        ``in_proj_weight`` is ``concatenate([Wq, Wk, Wv], axis=1).T``.

    See Also
    --------
    TransformerEncoderBlock : Attention, feed-forward, residuals and layer norms.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask`` (the
    estimators' ``padding_value``, or any array-like of booleans): padded
    steps enter as zeros (what they hold, NaN included, changes no output and
    no gradient), padded keys get no weight, and a query with no key left
    gets zero weights (its output is ``bo``). With the padded steps holding
    zeros, PyTorch's ``key_padding_mask`` gives the same outputs. Output shape:
    ``(batch, timesteps, features)``, or ``(batch, query_steps, features)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import MultiHeadAttention
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = MultiHeadAttention(num_heads=2)
    >>> layer.build((5, 8), backend=backend, dtype=np.float32, rng=rng)
    (5, 8)
    >>> layer.params["Wq"].shape
    (8, 8)
    >>> X = rng.normal(size=(3, 5, 8)).astype(np.float32)
    >>> mask = np.array([[True] * 5, [True] * 5, [True] * 3 + [False] * 2])
    >>> Y = layer.forward(X, training=False, mask=mask)
    >>> X[2, 3:] = 100.0  # what padded steps hold changes no real step's output
    >>> again = layer.forward(X, training=False, mask=mask)
    >>> bool(np.allclose(again[mask], Y[mask], atol=1e-5))
    True
    """

    shardable = True  # rows are independent (see Layer.shardable)

    supports_mask = True
    regularized = ("Wq", "Wk", "Wv", "Wo")

    _parameter_constraints: dict = {
        "num_heads": [POSITIVE_INT],
        "key_dim": [POSITIVE_INT, None],
        "query_steps": [POSITIVE_INT, None],
        "causal": ["boolean"],
        "dropout": [Number(0, 1, closed="left")],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        num_heads,
        key_dim=None,
        *,
        query_steps=None,
        causal=False,
        dropout=0.0,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.query_steps = query_steps
        self.causal = causal
        self.dropout = dropout
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        T, F = check_sequence_shape(self, self.input_shape_)
        self._heads, self._key_dim, Tq = attention_geometry(self, F, T)
        self._query_steps = None if self.query_steps is None else Tq
        check_rate(self.dropout)
        add_attention_params(self, rng, F, self._heads * self._key_dim)
        self.start_draws(rng)
        self.output_shape_ = (Tq, F)
        return self.output_shape_

    def draw_shapes(self):
        if not self.dropout:
            return {}
        Tq, T = self.output_shape_[0], self.input_shape_[0]
        return {"attention": (self._heads, Tq, T if self._query_steps is None else T - Tq)}

    def values_per_sample(self):
        T, F = self.input_shape_
        Tq = self.output_shape_[0]
        return max(self._heads * Tq * T, 3 * T * self._heads * self._key_dim, T * F)

    def forward(self, X, *, training, mask=None):
        X, mask = padded_as_zeros(self, X, mask)
        key_mask = mask
        if key_mask is not None and self._query_steps is not None:
            key_mask = key_mask[:, self._query_steps :]
        u = self.draws(X.shape[0]).get("attention") if training else None
        if training:
            self._cache = {"mask": mask}
        return attention_forward(self, X, key_mask, training, u)

    def backward(self, dY):
        dX = attention_backward(self, dY, self.trainable, not self.skip_input_grad)
        return zero_padded_steps(dX, self._cache["mask"])

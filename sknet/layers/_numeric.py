"""Embeddings of numerical features: piecewise-linear encodings over bins, periodic embeddings.

The two numeric embeddings of Gorishniy, Rubachev and Babenko, "On Embeddings
for Numerical Features in Tabular Deep Learning" (NeurIPS 2022), written for
sknet's backends: :class:`PiecewiseLinearEncoding` (the paper's PLE, over
bins from :func:`quantile_bins`, optionally followed by a linear layer per
feature, the paper's Q-L and Q-LR) and :class:`PeriodicEmbedding` (PL, PLR and
PLR-lite). Each runs on a whole batch with a few array operations and one
batched matrix product over the features; the backward passes are written by
hand.
"""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import validate_params

from sknet.backend import activation_needs_input
from sknet.layers._base import Layer
from sknet.layers._constraints import ACTIVATION, POSITIVE_INT, TRAINING_CONSTRAINTS, Number
from sknet.layers._dense import _check_activation
from sknet.tabular._numeric import bin_edges


@validate_params({"X": ["array-like"]}, prefer_skip_nested_validation=True)
def quantile_bins(X, n_bins=48):
    """Bin edges for :class:`PiecewiseLinearEncoding` from quantiles of training data.

    For each column, the edges are the ``n_bins + 1`` quantiles at
    ``0, 1/n_bins, ..., 1`` of its finite values (NaN and infinities are
    ignored; NumPy's ``'averaged_inverted_cdf'`` quantiles, the edges a
    tabular estimator's plan gives in ``encoder_.bins_``), with repeated
    edges removed, so a column of few distinct values gets fewer bins. A
    column with fewer than two distinct finite values gets one bin
    ``[v - 0.5, v + 0.5]`` around its value ``v`` (``[-0.5, 0.5]`` when it
    has none): its encoding is then a constant, and the column is
    kept so that the columns of ``X`` and of the encoding stay aligned.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Training data (NumPy, or anything ``numpy.asarray`` takes).
    n_bins : int, default=48
        The most bins per column (the paper's default).

    Returns
    -------
    bins : list of ndarray
        One increasing float64 array of edges per column, of length 2 to
        ``n_bins + 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.layers import quantile_bins
    >>> X = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, np.nan], [3.0, 1.0]])
    >>> [edges.tolist() for edges in quantile_bins(X, n_bins=3)]  # the second is constant
    [[0.0, 1.0, 2.0, 3.0], [0.5, 1.5]]
    """
    if not isinstance(n_bins, Integral) or isinstance(n_bins, bool) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    X = np.asarray(X.get() if hasattr(X, "get") else X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    # The tabular plan's rule (averaged inverted-CDF quantiles, NaN skipped): one definition.
    return bin_edges(np.where(np.isinf(X), np.nan, X), int(n_bins))


def _checked_bins(bins):
    """``bins`` as a list of increasing, finite float64 arrays of at least two edges."""
    if isinstance(bins, np.ndarray) and bins.ndim == 2:
        bins = list(bins)
    if not isinstance(bins, (list, tuple)) or not bins:
        raise ValueError(
            "bins must be a non-empty list of 1-D arrays of edges, one per feature "
            f"(see quantile_bins), got {type(bins).__name__}"
        )
    checked = []
    for j, edges in enumerate(bins):
        edges = np.asarray(edges, dtype=np.float64)
        if edges.ndim != 1 or edges.size < 2:
            raise ValueError(
                f"bins[{j}] must be a 1-D array of at least 2 edges, got shape {edges.shape}"
            )
        if not np.isfinite(edges).all() or not (np.diff(edges) > 0).all():
            raise ValueError(f"bins[{j}] must be finite and strictly increasing, got {edges}")
        checked.append(edges)
    return checked


def _check_positive_int(name, value):
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_features(layer, n_features):
    if len(layer.input_shape_) != 1 or layer.input_shape_[0] != n_features:
        raise ValueError(
            f"{type(layer).__name__} has bins for {n_features} features, so it expects "
            f"rows of {n_features} features, got samples of shape {layer.input_shape_}"
        )


class _FeatureLinear:
    """A linear layer per feature, ``Y[:, f] = act(V[:, f] @ W[f] + b[f])``, for a mixin.

    ``V`` of shape ``(n, F, m)``; ``W`` ``(F, m, d)`` (or ``(m, d)`` shared by
    every feature), ``b`` ``(F, d)`` (or ``(d,)``); the output flattened to
    ``(n, F * d)``. One batched product over the features.
    """

    def _linear_forward(self, V, training):
        W, b, act = self.params["W"], self.params["b"], self.activation or "identity"
        n, F, m = V.shape
        if W.ndim == 2:  # shared: one product for every feature of every row
            Z = (V.reshape(n * F, m) @ W).reshape(n, F, -1)
        else:
            Z = self.xp.matmul(V.transpose(1, 0, 2), W).transpose(1, 0, 2)
        Z = self.xp.ascontiguousarray(Z)
        Z += b
        Y = Z = Z.reshape(n, -1)
        if activation_needs_input(act):  # keep its input for the backward pass
            Y = self.xp.empty_like(Z)
        if act != "identity":
            self.backend_.activation_forward(act, Z, Y)
        if training:
            self._cache.update(V=V, Y=Y, Z=Z)
        return Y

    def _linear_backward(self, dY):
        """Write the gradients of ``W`` and ``b``; return ``dV``."""
        V, Y, Z = self._cache["V"], self._cache["Y"], self._cache["Z"]
        act = self.activation or "identity"
        if act != "identity":
            dY = self.backend_.activation_backward(act, dY, Y, Z, dY)
        n, F, m = V.shape
        dZ = dY.reshape(n, F, -1)
        W = self.params["W"]
        if self.trainable:  # W's gradient on the helper thread, if any (Backend.defer)
            backend, overlap = self.backend_, not self.skip_input_grad
            if W.ndim == 2:
                dZ.reshape(n * F, -1).sum(axis=0, out=self.grads["b"])
                V2, dZ2 = V.reshape(n * F, m).T, dZ.reshape(n * F, -1)
                backend.defer(backend.matmul, V2, dZ2, self.grads["W"], overlap=overlap)
            else:
                dZ.sum(axis=0, out=self.grads["b"])
                Vt, dZt = V.transpose(1, 2, 0), dZ.transpose(1, 0, 2)
                backend.defer(self.xp.matmul, Vt, dZt, self.grads["W"], overlap=overlap)
        if self.skip_input_grad:
            return None
        if W.ndim == 2:
            return (dZ.reshape(n * F, -1) @ W.T).reshape(n, F, m)
        return self.xp.matmul(dZ.transpose(1, 0, 2), W.transpose(0, 2, 1)).transpose(1, 0, 2)


class PiecewiseLinearEncoding(_FeatureLinear, Layer):
    """Piecewise-linear encoding of numerical features over bins (the paper's PLE).

    Feature ``x`` with edges ``e_0 < ... < e_T`` is encoded as ``T`` values,
    one per bin: ``(x - e_{t-1}) / (e_t - e_{t-1})`` clipped to ``[0, 1]``,
    except that the first bin is not clipped below and the last not above,
    so values outside the training range extrapolate linearly. A value in bin
    ``t`` thus reads ``1, ..., 1, fraction, 0, ..., 0``. With ``d_embedding``
    each feature's encoding then goes through a linear layer of its own
    (and ``activation``): the paper's Q-L (no activation) and Q-LR (ReLU)
    embeddings.

    Parameters
    ----------
    bins : list of array-like
        One increasing array of edges per feature, e.g. from
        :func:`quantile_bins` on the training data; features may have
        different numbers of bins.
    d_embedding : int or None, default=None
        Size of each feature's embedding; ``None``: the encoding itself.
    activation : str or None, default=None
        Applied after the per-feature linear layer (``'relu'`` for Q-LR);
        only with ``d_embedding``.
    %(trainable)s

    Attributes
    ----------
    params : dict
        With ``d_embedding``: ``'W'`` of shape ``(n_features, max_bins,
        d_embedding)`` (the rows past a feature's own bins are zero and stay
        so) and ``'b'`` of shape ``(n_features, d_embedding)``. None without.
    n_bins_ : list of int
        The number of bins of each feature.

    Notes
    -----
    Input shape: ``(batch, n_features)``, finite values (impute missing
    values first). Output shape: ``(batch, sum(n_bins_))`` without
    ``d_embedding`` (each feature's bins in turn), ``(batch, n_features *
    d_embedding)`` with it (each feature's embedding in turn). Flat outputs
    join other features' with :class:`~sknet.layers.Concatenate` and feed a
    :class:`~sknet.layers.Dense` directly. The weights follow PyTorch's
    initialization, uniform in ``+-1 / sqrt(max_bins)``; ``'W'`` is
    regularized (``alpha``, AdamW's ``weight_decay``), ``'b'`` is not.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import PiecewiseLinearEncoding
    >>> layer = PiecewiseLinearEncoding([[0.0, 1.0, 2.0, 4.0]])
    >>> layer.build((1,), backend=get_backend("cpu"), dtype=np.float64,
    ...             rng=np.random.RandomState(0))
    (3,)
    >>> layer.forward(np.array([[-1.0], [1.5], [3.0], [6.0]]), training=False)
    array([[-1. ,  0. ,  0. ],
           [ 1. ,  0.5,  0. ],
           [ 1. ,  1. ,  0.5],
           [ 1. ,  1. ,  2. ]])
    """

    shardable = True  # rows are independent (see Layer.shardable)
    regularized = ("W",)
    _parameter_constraints: dict = {
        "bins": [list, tuple, np.ndarray],
        "d_embedding": [POSITIVE_INT, None],
        "activation": [ACTIVATION, None],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        bins,
        d_embedding=None,
        activation=None,
        *,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.bins = bins
        self.d_embedding = d_embedding
        self.activation = activation
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        bins = _checked_bins(self.bins)
        _check_features(self, len(bins))
        _check_activation(self.activation)
        if self.d_embedding is None and self.activation is not None:
            raise ValueError(
                f"activation={self.activation!r} needs d_embedding (the per-feature linear "
                "layer it follows); the encoding itself has no activation"
            )
        self.n_bins_ = [len(edges) - 1 for edges in bins]
        F, T = len(bins), max(self.n_bins_)
        left, width = np.zeros((F, T)), np.ones((F, T))
        low, high = np.zeros((F, T)), np.zeros((F, T))  # the clip of each bin (padding: 0)
        for f, edges in enumerate(bins):  # per feature, at build time
            count = len(edges) - 1
            left[f, :count], width[f, :count] = edges[:-1], np.diff(edges)
            low[f, 1:count], high[f, : count - 1] = 0.0, 1.0
            low[f, 0], high[f, count - 1] = -np.inf, np.inf  # linear beyond the ends
        self._tables = {
            "left": left,
            "inv_width": 1.0 / width,
            "low": low,
            "high": high,
            "valid": np.flatnonzero((np.arange(T) < np.array(self.n_bins_)[:, None]).ravel()),
        }
        self._place_tables()
        if self.d_embedding is None:
            self.output_shape_ = (int(sum(self.n_bins_)),)
            return self.output_shape_
        d = _check_positive_int("d_embedding", self.d_embedding)
        bound = T**-0.5
        W = rng.uniform(-bound, bound, (F, T, d))
        W[np.arange(T)[None, :] >= np.array(self.n_bins_)[:, None]] = 0.0  # padding rows
        self.add_param("W", W, regularized=True)
        self.add_param("b", rng.uniform(-bound, bound, (F, d)))
        self.output_shape_ = (F * d,)
        return self.output_shape_

    def _place_tables(self):
        """The bins' arrays on the layer's backend, in its dtype (the index as int64)."""
        backend = self.backend_
        self._arrays = {
            key: backend.asarray(value, np.int64 if key == "valid" else self.dtype_)
            for key, value in self._tables.items()
        }

    def encode(self, X, training=False):
        """The encoding of rows ``X``, shape ``(n, n_features, max_bins)`` (padding 0)."""
        a = self._arrays
        inside = None
        if training and not self.skip_input_grad:
            inside = self._cache["inside"] = self.xp.empty(X.shape + a["left"].shape[1:], bool)
        return self.backend_.piecewise_linear(
            X, a["left"], a["inv_width"], a["low"], a["high"], inside
        )

    def forward(self, X, *, training):
        V = self.encode(X, training)
        if self.d_embedding is not None:
            return self._linear_forward(V, training)
        n = X.shape[0]
        return self.xp.take(V.reshape(n, -1), self._arrays["valid"], axis=1)

    def backward(self, dY):
        if self.d_embedding is not None:
            dV = self._linear_backward(dY)
            if dV is None:
                return None
        elif self.skip_input_grad:
            return None
        else:
            n, (F, T) = dY.shape[0], self._tables["left"].shape
            dV = self.xp.zeros((n, F * T), dtype=dY.dtype)
            dV[:, self._arrays["valid"]] = dY
            dV = dV.reshape(n, F, T)
        dV *= self._cache["inside"]
        dV *= self._arrays["inv_width"]
        return dV.sum(axis=2)

    def to_backend(self, backend):
        super().to_backend(backend)
        if "_tables" in self.__dict__:
            self._place_tables()
        return self

    def astype(self, dtype):
        super().astype(dtype)
        if "_tables" in self.__dict__:
            self._place_tables()
        return self

    def values_per_sample(self):
        return self._tables["left"].size * 2 + super().values_per_sample()

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_arrays", None)  # made again from the host tables
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_tables" in state:
            self._place_tables()


class PeriodicEmbedding(_FeatureLinear, Layer):
    """Periodic embeddings of numerical features (the paper's PLR, PL and PLR-lite).

    Each feature ``x_f`` has ``n_frequencies`` trained frequencies ``c_f``
    (drawn from a normal of standard deviation ``sigma``, truncated at 3
    ``sigma``); ``v_f = [cos(2 pi c_f x_f), sin(2 pi c_f x_f)]`` then goes
    through a linear layer of its own (shared by every feature with
    ``lite=True``) to ``d_embedding`` values and ``activation``.

    Parameters
    ----------
    n_frequencies : int, default=48
        Frequencies per feature (the paper's ``k``).
    sigma : float, default=0.01
        Standard deviation of the initial frequencies: the most important
        setting (the paper tunes it in ``[0.01, 100]``). Small values start
        near a linear embedding; larger ones fit faster-varying functions of
        the feature. Inputs on a unit scale (standardized or
        quantile-normalized) make one value serve many features.
    d_embedding : int, default=24
        Size of each feature's embedding.
    activation : str or None, default='relu'
        After the linear layer: ``'relu'`` is PLR, ``None`` PL.
    lite : bool, default=False
        One linear layer shared by all features (PLR-lite, fewer parameters).
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'frequencies'`` of shape ``(n_features, n_frequencies)``, ``'W'`` of
        shape ``(n_features, 2 * n_frequencies, d_embedding)`` (or ``(2 *
        n_frequencies, d_embedding)`` with ``lite``), ``'b'`` of shape
        ``(n_features, d_embedding)`` (or ``(d_embedding,)``).

    Notes
    -----
    Input shape: ``(batch, n_features)``, finite values. Output shape:
    ``(batch, n_features * d_embedding)``, each feature's embedding in turn.
    ``'W'`` is regularized (``alpha``, AdamW's ``weight_decay``); the
    frequencies and ``'b'`` are not (as in the paper's code).

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import PeriodicEmbedding
    >>> layer = PeriodicEmbedding(n_frequencies=8, sigma=0.1, d_embedding=4)
    >>> layer.build((3,), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))
    (12,)
    >>> layer.params["frequencies"].shape, layer.params["W"].shape
    ((3, 8), (3, 16, 4))
    >>> layer.forward(np.ones((2, 3), np.float32), training=False).shape
    (2, 12)
    """

    shardable = True  # rows are independent (see Layer.shardable)
    regularized = ("W",)
    _parameter_constraints: dict = {
        "n_frequencies": [POSITIVE_INT],
        "sigma": [Number(0, None)],
        "d_embedding": [POSITIVE_INT],
        "activation": [ACTIVATION, None],
        "lite": ["boolean"],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        n_frequencies=48,
        sigma=0.01,
        d_embedding=24,
        activation="relu",
        *,
        lite=False,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.n_frequencies = n_frequencies
        self.sigma = sigma
        self.d_embedding = d_embedding
        self.activation = activation
        self.lite = lite
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        K = _check_positive_int("n_frequencies", self.n_frequencies)
        d = _check_positive_int("d_embedding", self.d_embedding)
        sigma = self.sigma
        if isinstance(sigma, bool) or not isinstance(sigma, Real) or not 0 < sigma < np.inf:
            raise ValueError(f"sigma must be a positive number, got {sigma!r}")
        _check_activation(self.activation)
        if len(self.input_shape_) != 1:
            raise ValueError(
                f"PeriodicEmbedding expects rows of features, got samples of shape "
                f"{self.input_shape_}"
            )
        F = self.input_shape_[0]
        frequencies = rng.normal(0.0, sigma, (F, K))
        outside = np.abs(frequencies) > 3 * sigma
        while outside.any():  # truncated at 3 sigma: redraw the few outside
            frequencies[outside] = rng.normal(0.0, sigma, int(outside.sum()))
            outside = np.abs(frequencies) > 3 * sigma
        self.add_param("frequencies", frequencies)
        bound = (2 * K) ** -0.5
        shape = (2 * K, d) if self.lite else (F, 2 * K, d)
        self.add_param("W", rng.uniform(-bound, bound, shape), regularized=True)
        self.add_param("b", rng.uniform(-bound, bound, (d,) if self.lite else (F, d)))
        self.output_shape_ = (F * d,)
        return self.output_shape_

    def forward(self, X, *, training):
        xp = self.xp
        angle = X[:, :, None] * self.params["frequencies"]
        angle *= 2 * math.pi
        K = angle.shape[2]
        V = xp.empty(angle.shape[:2] + (2 * K,), dtype=X.dtype)
        xp.cos(angle, out=V[:, :, :K])
        xp.sin(angle, out=V[:, :, K:])
        if training:
            self._cache["X"] = X
        return self._linear_forward(V, training)

    def backward(self, dY):
        skip = self.skip_input_grad
        if skip and not self.trainable:
            return None
        self.skip_input_grad = False  # the frequencies need dV
        try:
            dV = self._linear_backward(dY)
        finally:
            self.skip_input_grad = skip
        V, X, c = self._cache["V"], self._cache["X"], self.params["frequencies"]
        K = c.shape[1]
        # d/d angle of [cos, sin] = [-sin, cos]
        dangle = dV[:, :, K:] * V[:, :, :K]
        dangle -= dV[:, :, :K] * V[:, :, K:]
        dangle *= 2 * math.pi
        if self.trainable:
            self.grads["frequencies"][...] = (dangle * X[:, :, None]).sum(axis=0)
        if skip:
            return None
        dangle *= c
        return dangle.sum(axis=2)


__all__ = ["PeriodicEmbedding", "PiecewiseLinearEncoding", "quantile_bins"]

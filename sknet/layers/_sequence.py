"""Layers for sequences: token embeddings, per-step layers, pooling over time."""

import copy

import numpy as np

from sknet.backend import get_array_module
from sknet.layers._base import Layer, build_layer
from sknet.layers._constraints import POSITIVE_INT, TRAINING_CONSTRAINTS
from sknet.layers._steps import as_mask, checked_mask, padded_as_zeros


class Embedding(Layer):
    """Integer token ids to learned vectors.

    Parameters
    ----------
    input_dim : int
        Size of the vocabulary: ids run from 0 to ``input_dim - 1``.
    output_dim : int
        Length of each vector.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'E'``, the ``(input_dim, output_dim)`` table.

    Notes
    -----
    Input shape: ``(batch, timesteps)`` of integer ids (any numeric dtype
    holding whole numbers). Output shape: ``(batch, timesteps, output_dim)``.
    It is always a first layer: there is no gradient with respect to ids.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Embedding
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = Embedding(input_dim=10, output_dim=4)
    >>> layer.build((5,), backend=backend, dtype=np.float32, rng=rng)  # 5 ids a sample
    (5, 4)
    >>> ids = np.array([[1, 2, 3, 0, 0], [4, 4, 9, 9, 1]])
    >>> layer.forward(ids, training=False).shape
    (2, 5, 4)
    """

    shardable = True  # rows are independent (see Layer.shardable)
    #: Its input is integer ids: the network keeps them integers (exact), not floats.
    takes_token_ids = True

    _parameter_constraints: dict = {
        "input_dim": [POSITIVE_INT],
        "output_dim": [POSITIVE_INT],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, input_dim, output_dim, *, trainable=True, lr_scale=1.0, weights=None):
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if len(self.input_shape_) != 1:
            raise ValueError(
                "Embedding expects samples of token ids of shape (timesteps,), got "
                f"{self.input_shape_}"
            )
        self._add_params(E=rng.uniform(-0.05, 0.05, (self.input_dim, self.output_dim)))
        self.output_shape_ = (self.input_shape_[0], int(self.output_dim))
        return self.output_shape_

    def check_ids(self, X, name="token ids"):
        """``X`` as integer ids, refused (a ValueError naming ``name``) unless whole and in range.

        Integer arrays are compared as they are, exactly (an id above 2**24
        is not rounded as a float32 would round it) and returned unchanged;
        floats must hold whole numbers and are converted (``int64``).
        """
        xp = get_array_module(X)
        if X.dtype.kind == "f" and X.size:
            fractional = xp.argwhere(~(X == xp.floor(X)))  # NaN and infinity too
            if fractional.shape[0]:
                where = tuple(int(i) for i in fractional[0])
                raise ValueError(
                    f"{name} must be whole numbers (Embedding's ids), got "
                    f"{float(X[where])!r} at {where}"
                )
        elif X.dtype.kind not in "iub":
            raise ValueError(f"{name} must be integers (Embedding's ids), got dtype {X.dtype}")
        if X.size:
            low, high = X.min().item(), X.max().item()
            if low < 0 or high >= self.input_dim:
                raise ValueError(
                    f"{name} must be in [0, {self.input_dim}) (Embedding's input_dim="
                    f"{self.input_dim}), got values from {_number(low)} to {_number(high)}"
                )
        return X if X.dtype.kind in "iu" else X.astype(np.int64)

    def forward(self, X, *, training):
        if self.backend_.name == "cpu":  # on a GPU the estimator checked on the host
            X = self.check_ids(X)
        ids = X.astype(np.int64, copy=False)
        if training:
            self._cache = {"ids": ids}
        return self.params["E"][ids]

    def backward(self, dY):
        if not self.trainable:
            return None
        gE = self.grads["E"]
        gE[...] = 0
        self.backend_.scatter_add_rows(
            gE, self._cache["ids"].reshape(-1), dY.reshape(-1, gE.shape[1])
        )
        return None


def _number(value):
    """An id as people write it: ``3`` for a whole float, else the float."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class TimeDistributed(Layer):
    """Apply a layer to every step of a sequence (e.g. a Dense per step).

    Parameters
    ----------
    layer : Layer
        The layer to apply; it sees samples of the per-step shape.
    trainable : bool or None, default=None
        The inner layer's ``trainable``; ``None`` leaves it its own.
    lr_scale : float or None, default=None
        The inner layer's ``lr_scale``; ``None`` leaves it its own.
    weights : dict of str to array, default=None
        Initial values of the inner layer's arrays by name, instead of its own.

    Attributes
    ----------
    layer_ : Layer
        The built copy of ``layer`` (this layer's only sublayer).

    Notes
    -----
    Input shape: ``(batch, timesteps, ...)``. Output shape:
    ``(batch, timesteps, ...)`` with the inner layer's per-step output shape.
    The inner layer's parameters are this layer's parameters. With a padding
    mask of sequences of sequences ``(batch, timesteps, substeps)``, the inner
    layer gets each step's ``(substeps,)`` mask.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import Dense, TimeDistributed
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = TimeDistributed(Dense(2))
    >>> layer.build((5, 3), backend=backend, dtype=np.float32, rng=rng)
    (5, 2)
    >>> layer.params["W"].shape  # one Dense, shared by every step
    (3, 2)
    >>> layer.forward(np.ones((4, 5, 3), np.float32), training=False).shape
    (4, 5, 2)
    """

    sublayer_params = ("layer",)
    supports_mask = True  # each step's own mask, for sequences of sequences

    def __init__(self, layer, *, trainable=None, lr_scale=None, weights=None):
        self.layer = layer
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    @property
    def regularized(self):
        """The inner layer's (its parameters are this layer's)."""
        return self.__dict__.get("layer_", self.layer).regularized

    @property
    def shardable(self):
        """The inner layer's, unless it draws random numbers (see :meth:`Layer.split_draws`)."""
        inner = self.__dict__.get("layer_", self.layer)
        return inner.shardable and type(inner).split_draws is Layer.split_draws

    def chains(self):
        return [self.sublayers()]

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if not isinstance(self.layer, Layer):
            raise ValueError(f"layer must be an sknet Layer, got {self.layer!r}")
        if len(self.input_shape_) < 2:
            raise ValueError(
                "TimeDistributed expects sequences (timesteps, ...), got samples of "
                f"shape {self.input_shape_}"
            )
        self.layer_ = copy.deepcopy(self.layer)
        inner_shape = build_layer(
            self.layer_, self.input_shape_[1:], backend=backend, dtype=dtype, rng=rng
        )
        self._share()
        self.output_shape_ = (self.input_shape_[0],) + tuple(inner_shape)
        return self.output_shape_

    def _share(self):
        # The same dicts: views the estimator puts in place reach the inner layer.
        self.params, self.grads, self.state = (
            self.layer_.params,
            self.layer_.grads,
            self.layer_.state,
        )

    def forward(self, X, *, training, mask=None):
        N, T = X.shape[:2]
        mask = as_mask(self, mask)
        if mask is not None and mask.ndim == 2 and not self.layer_.supports_mask:
            mask = None  # the sequences' own: its steps reach the inner layer as rows, unmasked
        if mask is not None and mask.ndim == 2:  # the sequences' own: checked, as every layer's
            mask = checked_mask(self, X, mask)
        elif mask is not None and tuple(mask.shape[:2]) != (N, T):
            raise ValueError(
                f"TimeDistributed: the mask has shape {tuple(mask.shape)}, but its input "
                f"sequences have shape {tuple(X.shape)}: a mask is (batch, timesteps, ...)"
            )
        inner = None if mask is None or mask.ndim < 3 else mask.reshape((N * T,) + mask.shape[2:])
        Y = self.layer_.forward_with_mask(
            X.reshape((N * T,) + X.shape[2:]), training=training, mask=inner
        )
        return Y.reshape((N, T) + Y.shape[1:])

    def backward(self, dY):
        N, T = dY.shape[:2]
        dX = self.layer_.backward(dY.reshape((N * T,) + dY.shape[2:]))
        return None if dX is None else dX.reshape((N, T) + dX.shape[1:])

    def release(self):
        super().release()  # the inner layer too
        self._share()

    def astype(self, dtype):
        super().astype(dtype)  # the inner layer too
        self._share()
        return self

    def to_backend(self, backend):
        self.layer_.to_backend(backend)
        self.backend_ = backend
        self._share()
        self._buffers, self._cache = {}, {}
        return self

    def __setstate__(self, state):
        if "inner_" in state:  # pickled before the built layer was named layer_
            state["layer_"] = state.pop("inner_")
        super().__setstate__(state)
        if "layer_" in state:
            self._share()


class GlobalAvgPool1D(Layer):
    """Mean over the (real, with a mask) steps of a sequence.

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask``.
    Output shape: ``(batch, features)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import GlobalAvgPool1D
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = GlobalAvgPool1D()
    >>> layer.build((3, 2), backend=backend, dtype=np.float32, rng=rng)
    (2,)
    >>> X = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
    >>> layer.forward(X, training=False)
    array([[2., 3.]], dtype=float32)
    >>> layer.forward(X, training=False, mask=np.array([[True, True, False]]))
    array([[1., 2.]], dtype=float32)
    """

    shardable = True  # rows are independent (see Layer.shardable)

    supports_mask = True

    _parameter_constraints: dict = dict(TRAINING_CONSTRAINTS)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if len(self.input_shape_) != 2:
            raise ValueError(
                "GlobalAvgPool1D expects sequences of shape (timesteps, features), got "
                f"{self.input_shape_}"
            )
        self.output_shape_ = (self.input_shape_[1],)
        return self.output_shape_

    def forward(self, X, *, training, mask=None):
        xp = self.xp
        X, mask = padded_as_zeros(self, X, mask)
        if mask is None:
            weights = xp.full(X.shape[:2], 1.0 / X.shape[1], dtype=X.dtype)
        else:
            counts = xp.maximum(mask.sum(axis=1, keepdims=True), 1)
            weights = mask.astype(X.dtype) / counts.astype(X.dtype)
        if training:
            self._cache = {"weights": weights}
        return (X * weights[:, :, None]).sum(axis=1)

    def backward(self, dY):
        return dY[:, None, :] * self._cache["weights"][:, :, None]


__all__ = ["Embedding", "GlobalAvgPool1D", "TimeDistributed"]

"""Categorical features as learned vectors, and the columns of a row a branch reads.

:class:`CategoricalEmbedding` looks up one learned vector per categorical
column, with a row for missing values and one for categories unseen in
training; :class:`SelectColumns` hands a branch of a
:class:`~sknet.layers.Concatenate` the columns it embeds, so one network takes
a table's numeric and categorical columns side by side.
"""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import validate_params

from sknet.layers._base import Layer
from sknet.layers._constraints import POSITIVE_INT, TRAINING_CONSTRAINTS, Count


@validate_params({"cardinality": [Count(0)]}, prefer_skip_nested_validation=True)
def embedding_size(cardinality):
    """The embedding size :class:`CategoricalEmbedding` gives a column by default.

    ``min(50, round(1.6 * (cardinality + 1) ** 0.56))``: fastai's empirical
    rule (``1.6 * n ** 0.56`` for ``n`` categories counting the missing one),
    capped at 50 rather than fastai's 600, because a tabular network's first
    layer is a few hundred units wide and takes every column's embedding.
    A binary column gets 3 values, 10 categories 6, 100 categories 21, 1,000
    categories 77, capped to 50.

    Examples
    --------
    >>> from sknet.layers import embedding_size
    >>> [embedding_size(c) for c in (2, 10, 100, 1000)]
    [3, 6, 21, 50]
    """
    return int(min(50, round(1.6 * (int(cardinality) + 1) ** 0.56)))


def _check_columns(columns):
    if isinstance(columns, slice):
        return columns
    if not isinstance(columns, (list, tuple, np.ndarray)) or not len(columns):
        raise ValueError(f"columns must be a non-empty list of column indices, got {columns!r}")
    for c in columns:
        if not isinstance(c, (Integral, np.integer)) or isinstance(c, bool):
            raise ValueError(f"columns must hold integer column indices, got {columns!r}")
    return [int(c) for c in columns]


class SelectColumns(Layer):
    """Some columns of each row, for a branch of a network that reads only those.

    Parameters
    ----------
    columns : list of int or slice
        The columns to keep, in the order given, each once (negative indices
        count from the end).

    Notes
    -----
    Input shape: ``(batch, n_features)``. Output shape: ``(batch,
    len(columns))``. The gradient of the columns left out is zero.

    Examples
    --------
    Numeric columns 0-1 binned, categorical column 2 embedded, in one layer:

    >>> import numpy as np
    >>> from sknet.layers import (CategoricalEmbedding, Concatenate,
    ...                           PiecewiseLinearEncoding, SelectColumns, Sequential,
    ...                           quantile_bins)
    >>> X = np.column_stack([np.random.RandomState(0).normal(size=(100, 2)),
    ...                      np.arange(100) % 3 + 1])  # codes 1..3
    >>> tabular = Concatenate([
    ...     Sequential([SelectColumns([0, 1]),
    ...                 PiecewiseLinearEncoding(quantile_bins(X[:, :2], n_bins=8))]),
    ...     Sequential([SelectColumns([2]), CategoricalEmbedding([3])]),
    ... ])
    """

    shardable = True  # rows are independent (see Layer.shardable)
    _parameter_constraints: dict = {
        "columns": [list, tuple, np.ndarray, slice],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, columns):
        self.columns = columns

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        columns = _check_columns(self.columns)
        if len(self.input_shape_) != 1:
            raise ValueError(
                f"SelectColumns expects rows of features, got samples of shape {self.input_shape_}"
            )
        n = self.input_shape_[0]
        if isinstance(columns, list):
            bad = [c for c in columns if not -n <= c < n]
            if bad:
                raise ValueError(f"columns {bad} are out of range for rows of {n} features")
        index = np.arange(n)[columns]
        if index.size == 0:
            raise ValueError(f"columns={self.columns!r} selects no column of {n}")
        if np.unique(index).size != index.size:
            raise ValueError(f"columns must not repeat a column, got {self.columns!r}")
        self._index = index
        self._index_b = backend.asarray(index, np.int64)
        self.output_shape_ = (int(index.size),)
        return self.output_shape_

    def forward(self, X, *, training):
        return self.xp.take(X, self._index_b, axis=1)

    def backward(self, dY):
        if self.skip_input_grad:
            return None
        dX = self.xp.zeros((dY.shape[0],) + self.input_shape_, dtype=dY.dtype)
        dX[:, self._index_b] = dY
        return dX

    def to_backend(self, backend):
        super().to_backend(backend)
        if "_index" in self.__dict__:
            self._index_b = backend.asarray(self._index, np.int64)
        return self

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_index_b", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_index" in state:
            self._index_b = self.backend_.asarray(self._index, np.int64)


class CategoricalEmbedding(Layer):
    """One learned vector per category of each categorical column.

    Column ``j`` of cardinality ``c_j`` has a table of ``c_j + 2`` rows:
    row 0 for a missing value, rows ``1..c_j`` for its categories, row
    ``c_j + 1`` for a category not seen in training. The codes are read as
    floats, rounded to the nearest integer: 0 or NaN is missing, ``1..c_j``
    a category, anything else (negative, above ``c_j``, infinite) unknown.
    So codes may travel in the same float matrix as numeric columns; float32
    holds every integer code exactly up to ``2**24`` (16,777,216), float64
    up to ``2**53``.

    Parameters
    ----------
    cardinalities : list of int
        The number of categories of each column (missing and unknown not
        counted); 0 for a column that has none (all missing in the training
        rows, or every level rarer than a ``min_frequency``): its table then
        has the missing and the unknown rows alone.
    dims : int, list of int or None, default=None
        The size of each column's vectors: one for all, one per column, or
        ``None`` for :func:`embedding_size` of each cardinality.
    %(trainable)s

    Attributes
    ----------
    params : dict
        ``'E'``, every column's table in one array of shape ``(sum(c_j + 2),
        max(dims_))``; column ``j``'s rows start at ``offsets_[j]`` and its
        vectors use the first ``dims_[j]`` entries (the others are zero and
        stay so).
    dims_ : list of int
        The size of each column's vectors.
    offsets_ : list of int
        Where each column's table starts in ``'E'``.

    Notes
    -----
    Input shape: ``(batch, n_columns)``, the codes. Output shape: ``(batch,
    sum(dims_))``, each column's vector in turn. The vectors start uniform in
    ``+-1 / sqrt(dim)`` (PyTorch's initialization of a linear layer, as for
    one-hot inputs); ``'E'`` is regularized (``alpha``, AdamW's
    ``weight_decay``) as the weights of a one-hot input would be. The
    gradient with respect to the codes is zero (they are piecewise constant);
    it is a first layer, or follows a :class:`SelectColumns`.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import CategoricalEmbedding
    >>> layer = CategoricalEmbedding([3, 10])
    >>> layer.build((2,), backend=get_backend("cpu"), dtype=np.float32,
    ...             rng=np.random.RandomState(0))
    (9,)
    >>> layer.dims_
    [3, 6]
    >>> codes = np.array([[1, 10], [0, np.nan], [3, 11]], np.float32)  # 11: unknown
    >>> layer.forward(codes, training=False).shape
    (3, 9)
    """

    shardable = True  # rows are independent (see Layer.shardable)
    regularized = ("E",)
    _parameter_constraints: dict = {
        "cardinalities": [list, tuple, np.ndarray],
        "dims": [POSITIVE_INT, list, tuple, np.ndarray, None],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(self, cardinalities, dims=None, *, trainable=True, lr_scale=1.0, weights=None):
        self.cardinalities = cardinalities
        self.dims = dims
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def _checked_config(self):
        cards = self.cardinalities
        if isinstance(cards, np.ndarray):
            cards = cards.tolist()
        if (
            not isinstance(cards, (list, tuple))
            or not cards
            or any(
                not isinstance(c, (Integral, np.integer)) or isinstance(c, bool) or c < 0
                for c in cards
            )
        ):
            raise ValueError(
                "cardinalities must be a non-empty list of integers >= 0 (0: a column with "
                f"no category, its missing and unknown codes only), got {cards!r}"
            )
        cards = [int(c) for c in cards]
        dims = self.dims
        if dims is None:
            dims = [embedding_size(c) for c in cards]
        elif isinstance(dims, (Integral, np.integer)) and not isinstance(dims, bool):
            dims = [int(dims)] * len(cards)
        if (
            not isinstance(dims, (list, tuple, np.ndarray))
            or len(dims) != len(cards)
            or any(not isinstance(d, (Integral, np.integer)) or d < 1 for d in dims)
        ):
            raise ValueError(
                f"dims must be None, a positive integer or one per column ({len(cards)}), "
                f"got {self.dims!r}"
            )
        return cards, [int(d) for d in dims]

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        cards, dims = self._checked_config()
        if self.input_shape_ != (len(cards),):
            raise ValueError(
                f"CategoricalEmbedding has {len(cards)} cardinalities, so it expects rows of "
                f"{len(cards)} codes, got samples of shape {self.input_shape_}"
            )
        rows = np.array(cards) + 2
        self.dims_, self.offsets_ = dims, [int(o) for o in np.cumsum(rows) - rows]
        D = max(dims)
        E = np.zeros((int(rows.sum()), D))
        for j, (offset, d) in enumerate(zip(self.offsets_, dims)):  # per column, at build
            bound = d**-0.5
            E[offset : offset + rows[j], :d] = rng.uniform(-bound, bound, (rows[j], d))
        self.add_param("E", E, regularized=True)
        # positions of the real entries in the (n_columns, D) lookups, flattened
        self._valid = np.flatnonzero((np.arange(D) < np.array(dims)[:, None]).ravel())
        self._place()
        self.output_shape_ = (int(sum(dims)),)
        return self.output_shape_

    def _place(self):
        backend = self.backend_
        cards = np.array(self._checked_config()[0], dtype=np.float64)
        self._arrays = {
            "cards": backend.asarray(cards, self.dtype_),
            "offsets": backend.asarray(self.offsets_, np.int64),
            "dims": backend.asarray(self.dims_, np.int64),
            "valid": backend.asarray(self._valid, np.int64),
        }

    def rows(self, X):
        """The rows of ``'E'`` that codes ``X`` look up (int64, shape of ``X``)."""
        a = self._arrays
        return self.backend_.category_rows(X, a["cards"], a["offsets"])

    def forward(self, X, *, training):
        a = self._arrays
        rows, Y = self.backend_.embedding_lookup(
            X, self.params["E"], a["cards"], a["offsets"], a["dims"], a["valid"]
        )
        if training:
            self._cache["rows"] = rows
        return Y

    def backward(self, dY):
        if self.trainable:
            a = self._arrays
            self.backend_.embedding_grad(
                dY, self._cache["rows"], a["dims"], a["valid"], self.grads["E"]
            )
        if self.skip_input_grad:
            return None
        return self.xp.zeros((dY.shape[0],) + self.input_shape_, dtype=dY.dtype)

    def to_backend(self, backend):
        super().to_backend(backend)
        if "_valid" in self.__dict__:
            self._place()
        return self

    def astype(self, dtype):
        super().astype(dtype)
        if "_valid" in self.__dict__:
            self._place()
        return self

    def values_per_sample(self):
        return len(self.dims_) * max(self.dims_) + super().values_per_sample()

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_arrays", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_valid" in state:
            self._place()


__all__ = ["CategoricalEmbedding", "SelectColumns", "embedding_size"]

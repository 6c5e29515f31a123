"""Numeric columns: a scaling learned from training rows, medians, quantile bins.

:class:`NumericScaler` learns, per column and from the values that are not
missing, one of four maps: ``'quantile'`` (each value to the normal quantile
of its rank among the training values, as scikit-learn's
``QuantileTransformer(output_distribution='normal')`` does, ties mapped to
the middle of their ranks, those at the training minimum or maximum too,
where scikit-learn puts them at the bounds; its reference quantiles are
averaged inverted-CDF ones, which sample weights can weigh), ``'robust'``
(minus the median, over the interquartile range), ``'standard'`` (minus the mean, over the standard
deviation) or none. Missing values are put at the median (0 after the
quantile map). :func:`bin_edges` gives the edges of bins holding about
the same number of training values, for piecewise-linear encodings, with
weighted quantiles (:func:`sknet.layers.quantile_bins` is this function, for
unweighted arrays).
"""

import functools

import numpy as np
from scipy.special import ndtri

from sknet.tabular._compiled import compiled_ranks

#: The scalings :class:`NumericScaler` knows.
SCALINGS = ("quantile", "robust", "standard", None)

# Normal quantiles stop at those of 1e-7 and 1 - 1e-7 (about +-5.2), as scikit-learn's do.
_BOUND = 1e-7

#: The most bins :func:`bin_edges` makes of a column (each bin is a quantile level it
#: evaluates: more would only exhaust memory, a column having as many as distinct values).
MAX_BINS = 2**16


def weighted_quantiles(values, weights, levels):
    """Quantiles of ``values`` weighted by ``weights`` (positive), at ``levels`` in [0, 1].

    The averaged inverted CDF (NumPy's ``method='averaged_inverted_cdf'``,
    which gives the usual median), weighted: integer weights give the
    quantiles of the values repeated that many times.
    """
    order = np.argsort(values, kind="stable")
    values, cumulative = values[order], np.cumsum(weights[order])
    target = np.asarray(levels, dtype=np.float64) * cumulative[-1]
    last = values.size - 1
    low = np.minimum(np.searchsorted(cumulative, target, side="left"), last)
    high = np.minimum(np.searchsorted(cumulative, target, side="right"), last)
    return 0.5 * values[low] + 0.5 * values[high]  # no sum to overflow (+-1e308)


class NumericScaler:
    """A per-column map of numeric values, learned from the values that are not NaN.

    Parameters
    ----------
    scaling : {'quantile', 'robust', 'standard', None}
        The map (see the module's docstring).
    n_quantiles : int, default=1000
        The most reference quantiles of ``'quantile'`` (fewer for fewer rows:
        ``max(min(n_rows // 30, n_quantiles), 10)``, as the tabular-deep-learning
        references do, so a few hundred rows do not map onto a staircase).
    """

    def __init__(self, scaling, n_quantiles=1000):
        self.scaling = scaling
        self.n_quantiles = n_quantiles

    def fit(self, X, sample_weight=None):
        """Learn the map of each column of the float array ``X`` (NaN: missing).

        ``sample_weight`` (positive) weighs the rows as repeating them would:
        every statistic is a weighted quantile (or mean) of the training values.
        """
        weights = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        columns = []
        for j in range(X.shape[1]):
            seen = ~np.isnan(X[:, j])
            columns.append((X[seen, j], weights[seen]))
        return self.fit_columns(columns)

    def fit_columns(self, columns, moments=None):
        """Learn the map of each column from its values that are not missing.

        Parameters
        ----------
        columns : list of (values, weights)
            One pair of 1-D arrays a column: its training values and their
            positive weights (the rows of :meth:`fit`, or a merged summary's
            weighted points, :mod:`sknet.tabular._summaries`: the quantiles
            of a value repeated are those of one value weighing as much).
        moments : list of (mean, std) or None, default=None
            The weighted mean and standard deviation of each column, where
            they are known exactly (a summary's), for ``'standard'``.

        Returns
        -------
        self : NumericScaler
        """
        n_columns = len(columns)
        self.medians_ = np.zeros(n_columns)
        self.quantiles_ = []
        self.offsets_, self.scales_ = np.zeros(n_columns), np.ones(n_columns)
        for j, (values, w) in enumerate(columns):
            if values.size == 0:
                self.quantiles_.append(np.zeros(1))
                continue
            self.medians_[j] = weighted_quantiles(values, w, [0.5])[0]
            if self.scaling == "quantile":
                n = max(min(int(w.sum()) // 30, self.n_quantiles), 10)
                self.quantiles_.append(weighted_quantiles(values, w, np.linspace(0, 1, n)))
            elif self.scaling == "robust":
                q1, q3 = weighted_quantiles(values, w, [0.25, 0.75])
                with np.errstate(over="ignore"):  # +-1e308: a spread beyond the largest float
                    spread = min(q3 - q1 if q3 > q1 else np.ptp(values), np.finfo(np.float64).max)
                self.offsets_[j], self.scales_[j] = self.medians_[j], spread or 1.0
            elif self.scaling == "standard":
                if moments is not None:
                    mean, std = moments[j]
                else:
                    mean, std = _moments(values, w)
                self.offsets_[j], self.scales_[j] = mean, std or 1.0
        return self

    def transform(self, X, out):
        """Write the mapped columns of ``X`` into ``out`` (same shape); NaN to the median.

        The columns' ranks are taken one by one, the normal quantiles of all at once;
        a few rows' ranks (a one-row predict) in one compiled loop over every value
        (Numba's; without it, NumPy's pass over all columns at once). The same numbers."""
        if X.shape[0] > _TRANSFORM_ROWS:  # in blocks: the ranks' float64 stay small
            for start in range(0, X.shape[0], _TRANSFORM_ROWS):
                stop = start + _TRANSFORM_ROWS
                self.transform(X[start:stop], out[start:stop])
            return out
        if self.scaling == "quantile" and X.shape[0] <= _ALL_AT_ONCE_ROWS:
            compiled = compiled_ranks()
            if compiled is not None:  # a one-row predict: one compiled loop
                ranks = np.empty(X.shape)
                xp, fp, sizes, constant = self._reference_rows()
                X = np.ascontiguousarray(X, np.float64)
                compiled(X, self.medians_, xp, fp, sizes, _BOUND, ranks)
                out[...] = ndtri(ranks)
                out[:, constant] = 0.0
                return out
        missing = np.isnan(X)
        if missing.any():
            X = np.where(missing, self.medians_, X)
        if self.scaling != "quantile":
            for j in range(X.shape[1]):
                out[:, j] = self.map_column(j, X[:, j])
            return out
        ranks = np.empty(X.shape)
        if X.shape[0] <= _ALL_AT_ONCE_ROWS and X.shape[1] >= _MANY_COLUMNS:  # a one-row predict
            constant = self._rank_all(X, ranks)
        else:
            constant = [j for j in range(X.shape[1]) if not self._rank(j, X[:, j], ranks[:, j])]
        out[...] = ndtri(np.clip(ranks, _BOUND, 1 - _BOUND))
        out[:, constant] = 0.0
        return out

    def _rank(self, j, values, out):
        """Column ``j``'s quantile rank of ``values`` into ``out``; False for a column of
        one value (whose map is 0)."""
        quantiles = self.quantiles_[j]
        if quantiles.size < 2 or quantiles[0] == quantiles[-1]:
            return False
        levels = _levels(quantiles.size)
        # Forward and backward interpolation averaged: ties go to the middle.
        out[...] = 0.5 * (
            np.interp(values, quantiles, levels)
            - np.interp(-values, -quantiles[::-1], -levels[::-1])
        )
        return True

    def _rank_all(self, X, out):
        """:meth:`_rank` of every column of a few rows ``X`` at once, into ``out``; the
        columns of one value (not ranked). The same numbers: NumPy's ``interp``, step
        for step, over every column's reference quantiles side by side."""
        xp, fp, sizes, constant = self._reference_rows()
        both = _interp_columns(np.concatenate([X, -X], axis=1), xp, fp, sizes)
        n = X.shape[1]
        out[...] = 0.5 * (both[:, :n] - both[:, n:])
        return constant

    def _reference_rows(self):
        """:func:`_side_by_side` of the reference quantiles, made once a fit."""
        made = self.__dict__.get("_references")
        if made is None or made[0] is not self.quantiles_:
            made = self.__dict__["_references"] = (self.quantiles_, _side_by_side(self.quantiles_))
        return made[1]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_references", None)  # made again from quantiles_ when used
        return state

    def map_column(self, j, values):
        """Column ``j``'s map of ``values`` (no missing value among them), value by value."""
        if self.scaling == "quantile":
            rank = np.empty(values.shape)
            if not self._rank(j, values, rank):
                return np.zeros_like(values)
            return ndtri(np.clip(rank, _BOUND, 1 - _BOUND))
        if self.scaling is None:
            return values
        return (values - self.offsets_[j]) / self.scales_[j]


#: Rows mapped at a time by ``transform`` (its temporaries: a few float64 copies of them).
_TRANSFORM_ROWS = 16384
#: Rows up to which ``transform`` ranks all columns at once (each value compared with
#: each reference quantile of its column: cheap for a row or a few, not for many), for
#: tables of at least ``_MANY_COLUMNS`` (fewer are ranked as fast a column at a time).
#: One row of 36 numeric columns: 0.6 ms -> 0.2 ms; of 17: 0.33 -> 0.18 ms; of 9: level.
#: With Numba, those rows are ranked by its kernel whatever the columns (0.1 ms -> 0.02 ms).
_ALL_AT_ONCE_ROWS = 4
_MANY_COLUMNS = 8


def _side_by_side(quantiles):
    """Each column's reference quantiles and levels as rows of one array (padded with
    +inf), then the same mirrored (``-q[::-1]``, as :meth:`NumericScaler._rank`
    interpolates backward): ``(xp, fp, sizes)`` of ``2 * n_columns`` rows; and the
    columns of one value (given ``[0, 1]``)."""
    n = len(quantiles)
    width = max([q.size for q in quantiles] + [2])
    xp, fp = np.full((2 * n, width), np.inf), np.zeros((2 * n, width))
    sizes, constant = np.empty(2 * n, dtype=np.intp), []
    for j, q in enumerate(quantiles):
        if q.size < 2 or q[0] == q[-1]:
            constant.append(j)
            q = np.array([0.0, 1.0])  # ranked as any, then mapped to 0
        levels = _levels(q.size)
        xp[j, : q.size], fp[j, : q.size] = q, levels
        xp[n + j, : q.size], fp[n + j, : q.size] = -q[::-1], -levels[::-1]
        sizes[j] = sizes[n + j] = q.size
    return xp, fp, sizes, constant


def _interp_columns(X, xp, fp, sizes):
    """``np.interp(X[:, j], xp[j, :sizes[j]], fp[j, :sizes[j]])`` for every column ``j``
    of ``X`` at once, as NumPy computes it: the last reference at or below a value, its
    own level where the value is that reference or past the last, the first level below
    the first, else ``slope * (x - x0) + y0`` (and NumPy's fallbacks where that is NaN)."""
    width = xp.shape[1]
    below = (xp[None, :, :] <= X[:, :, None]).sum(axis=2) - 1  # -1: under the first
    last = sizes - 1
    row = np.arange(xp.shape[0]) * width
    at = row + np.clip(below, 0, last - 1)  # flat indices of each value's segment
    x0, x1, y0, y1 = xp.take(at), xp.take(at + 1), fp.take(at), fp.take(at + 1)
    with np.errstate(all="ignore"):
        slope = (y1 - y0) / (x1 - x0)
        values = slope * (X - x0) + y0
        undefined = np.isnan(values)
        if undefined.any():
            again = slope * (X - x1) + y1
            again = np.where(np.isnan(again) & (y0 == y1), y0, again)
            values = np.where(undefined, again, values)
    values = np.where(x0 == X, y0, values)
    values = np.where(below >= last, fp.take(row + last), values)
    values = np.where(below < 0, fp[:, 0], values)
    return np.where(np.isnan(X), X, values)


@functools.lru_cache(maxsize=64)
def _levels(n):
    """``linspace(0, 1, n)``, read-only, made once for each ``n`` (a map reads it per call)."""
    levels = np.linspace(0, 1, n)
    levels.flags.writeable = False
    return levels


def _moments(values, weights):
    """The weighted mean and standard deviation of ``values`` (finite, not empty).

    Values near the largest float (+-1e308) overflow the sums: those are then
    taken of the values divided by the largest magnitude first.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.average(values, weights=weights)
        std = np.sqrt(np.average((values - mean) ** 2, weights=weights))
        if np.isfinite(mean) and np.isfinite(std):
            return mean, std
        size = np.abs(values).max()
        mean = size * np.average(values / size, weights=weights)
        spread = np.average((values / size - mean / size) ** 2, weights=weights)
        return mean, size * np.sqrt(spread)


def bin_edges(X, n_bins, sample_weight=None):
    """Edges of bins holding about as many training values each, per column.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_columns)
        Training values (NaN: missing, skipped).
    n_bins : int
        The most bins per column, at most :data:`MAX_BINS` (65536); a column
        with fewer distinct values gets fewer (its edges are distinct quantiles).
    sample_weight : ndarray of shape (n_samples,), default=None
        Positive weights of the rows (weighted quantiles).

    Returns
    -------
    edges : list of ndarray
        One increasing array of at least two edges per column, from the
        column's minimum to its maximum (``[v - 0.5, v + 0.5]`` for a constant
        ``v``, ``[-0.5, 0.5]`` for a column with no value).
    """
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if n_bins > MAX_BINS:
        raise ValueError(
            f"n_bins must be at most {MAX_BINS} (a column has at most as many bins as "
            f"distinct values), got {n_bins!r}"
        )
    weights = np.ones(X.shape[0]) if sample_weight is None else sample_weight
    edges = []
    for j in range(X.shape[1]):
        seen = ~np.isnan(X[:, j])
        edges.append(column_bin_edges(X[seen, j], weights[seen], n_bins))
    return edges


def column_bin_edges(values, weights, n_bins):
    """:func:`bin_edges` of one column: its values that are not missing, their weights."""
    levels = np.linspace(0, 1, int(n_bins) + 1)
    column = np.unique(weighted_quantiles(values, weights, levels)) if values.size else values
    if column.size < 2:
        center = float(column[0]) if column.size else 0.0
        column = np.array([center - 0.5, center + 0.5])
    return column

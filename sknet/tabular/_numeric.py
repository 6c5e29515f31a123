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

import numpy as np
from scipy.special import ndtri

#: The scalings :class:`NumericScaler` knows.
SCALINGS = ("quantile", "robust", "standard", None)

# Normal quantiles stop at those of 1e-7 and 1 - 1e-7 (about +-5.2), as scikit-learn's do.
_BOUND = 1e-7


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
    return 0.5 * (values[low] + values[high])


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
        n_columns = X.shape[1]
        weights = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        self.medians_ = np.zeros(n_columns)
        self.quantiles_ = []
        self.offsets_, self.scales_ = np.zeros(n_columns), np.ones(n_columns)
        for j in range(n_columns):
            seen = ~np.isnan(X[:, j])
            values, w = X[seen, j], weights[seen]
            if values.size == 0:
                self.quantiles_.append(np.zeros(1))
                continue
            self.medians_[j] = weighted_quantiles(values, w, [0.5])[0]
            if self.scaling == "quantile":
                n = max(min(int(w.sum()) // 30, self.n_quantiles), 10)
                self.quantiles_.append(weighted_quantiles(values, w, np.linspace(0, 1, n)))
            elif self.scaling == "robust":
                q1, q3 = weighted_quantiles(values, w, [0.25, 0.75])
                spread = q3 - q1 if q3 > q1 else np.ptp(values)
                self.offsets_[j], self.scales_[j] = self.medians_[j], spread or 1.0
            elif self.scaling == "standard":
                mean = np.average(values, weights=w)
                std = np.sqrt(np.average((values - mean) ** 2, weights=w))
                self.offsets_[j], self.scales_[j] = mean, std or 1.0
        return self

    def transform(self, X, out):
        """Write the mapped columns of ``X`` into ``out`` (same shape); NaN to the median."""
        for j in range(X.shape[1]):
            values = X[:, j]
            missing = np.isnan(values)
            if missing.any():
                values = np.where(missing, self.medians_[j], values)
            out[:, j] = self._map(j, values)
        return out

    def _map(self, j, values):
        if self.scaling == "quantile":
            quantiles = self.quantiles_[j]
            if quantiles.size < 2 or quantiles[0] == quantiles[-1]:
                return np.zeros_like(values)
            levels = np.linspace(0, 1, quantiles.size)
            # Forward and backward interpolation averaged: ties go to the middle.
            rank = 0.5 * (
                np.interp(values, quantiles, levels)
                - np.interp(-values, -quantiles[::-1], -levels[::-1])
            )
            return ndtri(np.clip(rank, _BOUND, 1 - _BOUND))
        if self.scaling is None:
            return values
        return (values - self.offsets_[j]) / self.scales_[j]


def bin_edges(X, n_bins, sample_weight=None):
    """Edges of bins holding about as many training values each, per column.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_columns)
        Training values (NaN: missing, skipped).
    n_bins : int
        The most bins per column; a column with fewer distinct values gets
        fewer (its edges are distinct quantiles).
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
    weights = np.ones(X.shape[0]) if sample_weight is None else sample_weight
    levels = np.linspace(0, 1, int(n_bins) + 1)
    edges = []
    for j in range(X.shape[1]):
        seen = ~np.isnan(X[:, j])
        column = (
            np.unique(weighted_quantiles(X[seen, j], weights[seen], levels))
            if seen.any()
            else np.empty(0)
        )
        if column.size < 2:
            center = float(column[0]) if column.size else 0.0
            column = np.array([center - 0.5, center + 0.5])
        edges.append(column)
    return edges

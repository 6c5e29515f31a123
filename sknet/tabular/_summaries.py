"""Mergeable summaries of a table's training rows: a column plan learned partition by partition.

A :class:`TableSummary` holds what a :class:`~sknet.tabular.TabularEncoder`
learns from a table's training rows, in a form that merges: for each numeric
column a :class:`NumericSummary` (its weighted values, the rows where it is
missing, its exact weighted mean and variance), for each categorical column
a :class:`CategorySummary` (every distinct value with its weight). Each
partition of a table is summarized where it lives
(:meth:`TableSummary.of`), the summaries merge in partition order, in any
tree (:meth:`TableSummary.merge_all`), and :func:`encoder_from_summary`
turns the merged summary into a fitted encoder: the same fitted attributes
as :meth:`TabularEncoder.fit <sknet.tabular.TabularEncoder.fit>` sets, so
its ``transform`` is the encoder's own.

**Exact.** Category counts merge exactly: the categories, their order, and
which levels are rare (``min_frequency``) or unseen are those one process
learns from the same rows; so are the missing-value indicators. A numeric
column is kept exact, as its distinct values with their summed weights,
while a summary holds at most ``8 * resolution`` of them (131,072 by
default): then its median, quartiles, reference quantiles and bin edges are
the ones one process computes (the weighted quantile of a value repeated is
that of one value weighing as much; only the order in which float weights
are added differs).

**Rank error.** A column with more distinct values is compressed: runs of
neighbouring values become one point at their weighted mean, each run
weighing less than ``W / resolution`` (``W``: the column's weight in the
summary), the column's minimum, maximum and every value heavier than that
kept as they are. Each compression adds at most ``W / resolution`` to the
summary's ``error``, which a merge adds up (:attr:`NumericSummary.error`).
Every quantile ``q`` the plan takes at level ``p`` (the median, the
quartiles, the reference quantiles, the bin edges) then has a true weighted
rank within it: the training values below ``q`` weigh at most
``p * W + error``, those at or below ``q`` at least ``p * W - error``. With
the default resolution (``2**14``) and a merge tree of fan-in 8 over ``P``
partitions, ``error / W`` is at most ``(1 + ceil(log8 P)) / 16384``: below
0.0002 for up to 64 partitions, 0.0003 for 4,096. The exact weighted mean
and standard deviation (``numeric_scaling='standard'``) merge exactly, by
Chan's update, up to float rounding.

Plain NumPy (pandas only through the table adapter), no network code.
"""

import numpy as np

from sknet.tabular._categorical import count_categories, frequent_categories, sorted_categories
from sknet.tabular._codes import code_categories
from sknet.tabular._columns import categorical_mask
from sknet.tabular._numeric import NumericScaler, column_bin_edges
from sknet.tabular._table import EXACT_IN_FLOATS, as_table, check_columns

#: A compression leaves runs of values weighing less than ``W / RESOLUTION``.
RESOLUTION = 2**14
#: A column is compressed when a summary holds more than this many times RESOLUTION values.
_EXACT_FACTOR = 8


class NumericSummary:
    """One numeric column's training values, weighted, as a mergeable summary.

    Parameters
    ----------
    values : ndarray of float64
        Distinct values, increasing (the column's, or compressed points).
    weights : ndarray of float64
        The positive weight of each value.
    error : float, default=0.0
        The bound on the rank error of any quantile of the summary, in units
        of weight (0: the summary is exact).
    n_missing : int, default=0
        The rows (of positive weight) where the column is missing.
    moments : tuple of float, default=(0.0, 0.0, 0.0)
        The weight, weighted mean and weighted sum of squared deviations of
        the values, exact.
    """

    def __init__(self, values, weights, error=0.0, n_missing=0, moments=(0.0, 0.0, 0.0)):
        self.values, self.weights = values, weights
        self.error, self.n_missing = float(error), int(n_missing)
        self.moments = tuple(float(m) for m in moments)

    @classmethod
    def of(cls, values, weights=None, resolution=RESOLUTION):
        """The summary of a column's rows (NaN: missing; ``weights`` positive, or None)."""
        values = np.asarray(values, dtype=np.float64)
        weights = np.ones(values.shape[0]) if weights is None else np.asarray(weights, np.float64)
        missing = np.isnan(values)
        seen, w = values[~missing], weights[~missing]
        points, inverse = np.unique(seen, return_inverse=True)
        summed = np.bincount(inverse.ravel(), weights=w, minlength=points.size)
        total = float(w.sum())
        mean = float(np.average(seen, weights=w)) if total > 0 else 0.0
        squares = float(np.sum(w * (seen - mean) ** 2)) if total > 0 else 0.0
        summary = cls(points, summed, 0.0, int(missing.sum()), (total, mean, squares))
        return summary.compressed(resolution)

    @classmethod
    def merge_all(cls, summaries, resolution=RESOLUTION):
        """One summary of the rows of all ``summaries`` (compressed if it grows too large)."""
        summaries = list(summaries)
        points, inverse = np.unique(
            np.concatenate([s.values for s in summaries]), return_inverse=True
        )
        weights = np.bincount(
            inverse.ravel(),
            weights=np.concatenate([s.weights for s in summaries]),
            minlength=points.size,
        )
        total = mean = squares = 0.0
        for s in summaries:  # Chan et al.'s update, weighted
            other, other_mean, other_squares = s.moments
            if other <= 0:
                continue
            merged = total + other
            delta = other_mean - mean
            mean += delta * other / merged
            squares += other_squares + delta * delta * total * other / merged
            total = merged
        merged = cls(
            points,
            weights,
            sum(s.error for s in summaries),
            sum(s.n_missing for s in summaries),
            (total, mean, squares),
        )
        return merged.compressed(resolution)

    @property
    def total(self):
        """The weight of the values (missing rows not counted)."""
        return self.moments[0]

    def mean_std(self):
        """The exact weighted mean and standard deviation of the values."""
        total, mean, squares = self.moments
        return mean, float(np.sqrt(squares / total)) if total > 0 else 0.0

    def rank_error(self):
        """:attr:`error` as a fraction of the column's weight (0: exact)."""
        return self.error / self.total if self.total > 0 else 0.0

    def compressed(self, resolution=RESOLUTION):
        """This summary, or a compressed one when it holds more than ``8 * resolution``
        values (see the module: each compression adds at most ``W / resolution``)."""
        n = self.values.size
        if n <= _EXACT_FACTOR * resolution:
            return self
        values, weights = self.values, self.weights
        total = float(weights.sum())
        limit = total / (2 * resolution)  # a run starts within one limit, weighs < 2 limits
        before = np.cumsum(weights) - weights
        heavy = weights >= limit
        start = np.ones(n, dtype=bool)
        start[1:] = np.floor(before[1:] / limit) != np.floor(before[:-1] / limit)
        start[1:] |= heavy[1:] | heavy[:-1]
        start[:2] = True  # the minimum alone
        start[-1] = True  # the maximum alone
        run = np.cumsum(start) - 1
        run_weights = np.bincount(run, weights=weights)
        firsts = np.flatnonzero(start)
        lasts = np.append(firsts[1:] - 1, n - 1)
        points = np.bincount(run, weights=weights * values) / run_weights
        points = np.clip(points, values[firsts], values[lasts])  # inside its run, rounded
        alone = firsts == lasts
        points[alone] = values[firsts[alone]]  # a value alone stays exactly itself
        return NumericSummary(
            points, run_weights, self.error + total / resolution, self.n_missing, self.moments
        )


class CategorySummary:
    """One categorical column's training values: every distinct one and its weight, exact.

    Parameters
    ----------
    categories : ndarray
        The distinct values, sorted as
        :func:`~sknet.tabular._categorical.learn_categories` sorts them.
    frequencies : ndarray of float64
        The number of rows (the sum of their weights) of each.
    """

    def __init__(self, categories, frequencies):
        self.categories = categories
        self.frequencies = np.asarray(frequencies, dtype=np.float64)

    @classmethod
    def of(cls, values, weights=None, label="0"):
        """The summary of a column's rows (missing values skipped)."""
        return cls(*count_categories(values, label, weights))

    @classmethod
    def merge_all(cls, summaries):
        """One summary of the rows of all ``summaries``, merged in their order."""
        summaries = list(summaries)
        arrays = [s.categories for s in summaries]
        if all(a.dtype.kind != "O" for a in arrays) and _promoted_exactly(arrays):
            categories, inverse = np.unique(np.concatenate(arrays), return_inverse=True)
            frequencies = np.bincount(
                inverse.ravel(),
                weights=np.concatenate([s.frequencies for s in summaries]),
                minlength=categories.size,
            )
            return cls(categories, frequencies)
        counts = {}  # the first summary's value stands for equal ones (1 and True), as in fit
        for s in summaries:
            for value, frequency in zip(s.categories.tolist(), s.frequencies.tolist()):
                counts[value] = counts.get(value, 0.0) + frequency
        categories = sorted_categories(counts)
        return cls(categories, [counts[value] for value in categories.tolist()])

    def frequent(self, min_frequency):
        """The categories a plan keeps: those seen ``min_frequency`` times or more."""
        return frequent_categories(self.categories, self.frequencies, min_frequency)


def _promoted_exactly(arrays):
    """Whether NumPy's common dtype of these categories keeps every one of them: not where
    integers beyond 2**53 would become floats (two IDs one), which a dict merges exactly."""
    if np.result_type(*arrays).kind != "f":
        return True
    return all(
        a.dtype.kind not in "iu"
        or not a.size
        or max(-int(a.min()), int(a.max())) <= EXACT_IN_FLOATS
        for a in arrays
    )


class TableSummary:
    """What a table's training rows teach a column plan, in a form that merges.

    Made by :meth:`of` (one partition's rows) and :meth:`merge_all`; turned
    into a fitted encoder by :func:`encoder_from_summary`.

    Attributes
    ----------
    is_categorical : ndarray of bool
        Which columns are categorical (the columns summarized as such).
    numeric : list of NumericSummary
        One a numeric column, in order.
    categorical : list of CategorySummary
        One a categorical column, in order.
    n_rows : int
        The rows summarized.
    n_weighed : int
        Those of positive weight (the others count nowhere, as in ``fit``).
    resolution : int
        The numeric summaries' resolution (see the module).
    """

    def __init__(self, is_categorical, numeric, categorical, n_rows, n_weighed, resolution):
        self.is_categorical = np.asarray(is_categorical, dtype=bool)
        self.numeric, self.categorical = list(numeric), list(categorical)
        self.n_rows, self.n_weighed = int(n_rows), int(n_weighed)
        self.resolution = int(resolution)

    @classmethod
    def of(cls, table, is_categorical, sample_weight=None, *, why="", resolution=RESOLUTION):
        """The summary of a table's training rows.

        Parameters
        ----------
        table : DataFrame, array or Table
            The rows (any table :func:`~sknet.tabular._table.as_table` reads).
        is_categorical : ndarray of bool
            Which columns are categorical (the plan's ``is_categorical_``).
        sample_weight : ndarray of shape (n_rows,) or None
            Non-negative weights: a row weighs as in ``TabularEncoder.fit``.
        why : str, default=""
            What made the numeric columns numeric, for the error of a string among them.
        resolution : int, default=RESOLUTION

        Returns
        -------
        summary : TableSummary
        """
        table = as_table(table)
        is_categorical = np.asarray(is_categorical, dtype=bool)
        n_rows = table.shape[0]
        weights = None if sample_weight is None else np.asarray(sample_weight, np.float64)
        rows = None if weights is None else weights > 0
        kept = weights if rows is None else weights[rows]
        numbers = table.numbers(np.flatnonzero(~is_categorical), why=why)
        if rows is not None:
            numbers = numbers[rows]
        numeric = [NumericSummary.of(column, kept, resolution) for column in numbers.T]
        categorical = []
        for j in np.flatnonzero(is_categorical):
            values = table.values(j)
            values = values if rows is None else values[rows]
            categorical.append(CategorySummary.of(values, kept, label=table.label(j)))
        n_weighed = n_rows if rows is None else int(rows.sum())
        return cls(is_categorical, numeric, categorical, n_rows, n_weighed, resolution)

    @classmethod
    def merge_all(cls, summaries):
        """One summary of the rows of all ``summaries``, merged in their order."""
        summaries = list(summaries)
        first = summaries[0]
        for other in summaries[1:]:
            if not np.array_equal(other.is_categorical, first.is_categorical):
                raise ValueError(
                    "The summaries were made of tables whose columns are not the same kinds"
                )
        numeric = [
            NumericSummary.merge_all(columns, first.resolution)
            for columns in zip(*(s.numeric for s in summaries))
        ]
        categorical = [
            CategorySummary.merge_all(columns)
            for columns in zip(*(s.categorical for s in summaries))
        ]
        return cls(
            first.is_categorical,
            numeric,
            categorical,
            sum(s.n_rows for s in summaries),
            sum(s.n_weighed for s in summaries),
            first.resolution,
        )

    def merge(self, other):
        """The summary of this one's rows and ``other``'s."""
        return self.merge_all([self, other])

    def rank_errors(self):
        """Each numeric column's rank-error bound, as a fraction of its weight (0: exact)."""
        return np.array([s.rank_error() for s in self.numeric], dtype=np.float64)


def encoder_from_summary(encoder, table, summary):
    """``encoder``'s plan learned from a merged summary of ``table``'s training rows.

    Parameters
    ----------
    encoder : TabularEncoder
        Its parameters say what to learn; it is fitted in place.
    table : Table
        The table's columns (names and dtypes: a frame's, or a
        :class:`~sknet.tabular._table.RemoteTable`), recorded as ``fit``
        records them.
    summary : TableSummary
        The merged summary of the training rows.

    Returns
    -------
    encoder : TabularEncoder
        Fitted: the attributes ``fit`` sets on the same rows (see the module
        for what is exact and the rank error of the quantiles).
    """
    encoder._validate_params()
    table = as_table(table)
    check_columns(encoder, table, reset=True)
    mask = categorical_mask(table, encoder.categorical_features)
    if not np.array_equal(mask, summary.is_categorical):
        raise ValueError(
            "The summary's categorical columns are not those the encoder plans: "
            f"{np.flatnonzero(summary.is_categorical).tolist()} against "
            f"{np.flatnonzero(mask).tolist()}"
        )
    if summary.n_rows < 1:
        raise ValueError(
            f"Found array with 0 sample(s) while a minimum of 1 is required by "
            f"{type(encoder).__name__}."
        )
    if summary.n_weighed < 1:
        raise ValueError("sample_weight must have a positive sum, got all zeros")
    encoder.is_categorical_ = mask
    encoder.numeric_features_ = np.flatnonzero(~mask)
    encoder.categorical_features_ = np.flatnonzero(mask)
    numeric = summary.numeric
    scaler = NumericScaler(encoder.numeric_scaling).fit_columns(
        [(s.values, s.weights) for s in numeric], moments=[s.mean_std() for s in numeric]
    )
    has_missing = np.array([s.n_missing > 0 for s in numeric], dtype=bool)
    categories = [c.frequent(encoder.min_frequency) for c in summary.categorical]
    codes = []
    if encoder.numeric_codes:  # a code column has few values: its summary is exact
        for i, column in enumerate(numeric):
            found = code_categories(column.values, column.weights) if column.error == 0 else None
            if found is not None:
                codes.append((i, found))
    encoder._set_plan(has_missing, scaler, categories, codes)
    if encoder.n_bins is not None:
        encoder.bins_ = [
            column_bin_edges(scaler.map_column(j, s.values), s.weights, encoder.n_bins)
            for j, s in enumerate(numeric)
        ]
    return encoder

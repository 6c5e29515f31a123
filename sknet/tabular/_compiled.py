"""The quantile ranks of a prediction's few rows, compiled by Numba where it is installed.

:meth:`~sknet.tabular._numeric.NumericScaler.transform` of a row ranks each value among
its column's reference quantiles: NumPy's ``interp`` twice a column, microseconds of calls
each. This loop does that arithmetic step for step for every value in one call. It lives
here rather than among the backend's kernels because the preprocessing rooms import no
network code, and keeps their rules: compiled on first use and cached on disk, calling no
other compiled function (Numba would compile such a kernel again in every process), and
without Numba (or with ``SKNET_NUMBA=0``) the NumPy code runs, giving the same numbers.
"""

import functools
import os

import numpy as np


def _quantile_ranks(X, medians, xp, fp, sizes, bound, ranks):
    # ranks[i, c] = clip(0.5 * (interp(x) - interp_mirrored(-x)), bound, 1 - bound), where
    # x is X[i, c] or, missing, the column's median; xp, fp, sizes: rows c (forward) and
    # m + c (mirrored) of NumericScaler's side-by-side references. Each interp is
    # np.interp(v, xp[row, :size], fp[row, :size]) step for step (written out here: a
    # kernel calling another compiled function is not cached by Numba).
    n, m = X.shape
    for i in range(n):
        for c in range(m):
            x = X[i, c]
            if np.isnan(x):
                x = medians[c]
            rank = 0.0
            for side in range(2):
                row, v = (c, x) if side == 0 else (m + c, -x)
                size = sizes[row]
                # j: the last reference at or below v (NumPy's binary search finds it)
                lo, hi = 0, size
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if v >= xp[row, mid]:
                        lo = mid + 1
                    else:
                        hi = mid
                j = lo - 1
                if j < 0:
                    value = fp[row, 0]
                elif j >= size - 1:
                    value = fp[row, size - 1]
                elif xp[row, j] == v:
                    value = fp[row, j]
                else:
                    x0, x1, y0, y1 = xp[row, j], xp[row, j + 1], fp[row, j], fp[row, j + 1]
                    slope = (y1 - y0) / (x1 - x0)
                    value = slope * (v - x0) + y0
                    if np.isnan(value):
                        value = slope * (v - x1) + y1
                        if np.isnan(value) and y0 == y1:
                            value = y0
                rank = value if side == 0 else 0.5 * (rank - value)
            if rank < bound:
                rank = bound
            if rank > 1 - bound:
                rank = 1 - bound
            ranks[i, c] = rank


@functools.lru_cache(maxsize=1)
def compiled_ranks():
    """:func:`_quantile_ranks` compiled by Numba, or None (no Numba, or ``SKNET_NUMBA=0``)."""
    if os.environ.get("SKNET_NUMBA", "1") == "0":
        return None
    try:
        import numba
    except ImportError:
        return None
    options = dict(nogil=True, error_model="numpy")
    try:
        return numba.njit(cache=True, **options)(_quantile_ranks)
    except RuntimeError:  # no writable cache directory: compiled in memory each run
        return numba.njit(**options)(_quantile_ranks)

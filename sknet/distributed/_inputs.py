"""What a DataParallel fit trains on, and where the rows of ``X`` are.

NumPy (or sparse) ``X`` goes to the driver's estimator as it is; a Dask
array's blocks stay on the workers (:class:`_Inputs`), and so do a Dask
DataFrame's partitions (:mod:`~sknet.distributed._tables`: the plan is
learned and the rows encoded there). The targets, the sample weights and the
validation rows are gathered on the driver.
"""

import math

import numpy as np
from sklearn.base import is_classifier
from sklearn.model_selection import train_test_split

from sknet.distributed._frame_checks import is_dask_collection, is_dask_frame
from sknet.distributed._tables import frame_inputs
from sknet.estimators._tabular import TabularMixin


class _Inputs:
    """What the driver's estimator fits on, and where the rows of ``X`` are.

    NumPy (or sparse) ``X`` goes to the estimator as it is: its own validation
    runs on the driver, and the driver scatters the validated rows. A Dask
    ``X`` stays on the workers: the estimator gets a stand-in of the same
    shape that takes no memory (every row the same zero row), the workers
    check their blocks, and ``rows`` maps the estimator's rows to the array's
    (the early-stopping validation rows are taken out and gathered).
    """

    def __init__(self, X, y, sample_weight, fit_params, dask_X=None, rows=None, frame=None):
        self.X, self.y, self.sample_weight = X, y, sample_weight
        self.fit_params = fit_params
        self.dask_X = dask_X
        self.rows = rows
        self.frame = frame  # a Dask DataFrame's rows (FrameRows): where they are

    @classmethod
    def prepare(
        cls, estimator, X, y, sample_weight, fit_params, da, distributed, client=None, method="fit"
    ):
        fit_params = {k: _gather(v, da) for k, v in fit_params.items()}
        if is_dask_frame(X):
            given = frame_inputs(estimator, X, y, sample_weight, fit_params, client, method)
            return cls(*given[:4], frame=given[4])
        y, sample_weight = (_gather(a, da) for a in (y, sample_weight))
        if not isinstance(X, da.Array):
            return cls(X, y, sample_weight, fit_params)
        if isinstance(estimator, TabularMixin):  # (its blocks would train unencoded)
            raise TypeError(
                f"{type(estimator).__name__} learns its column plan from a Dask DataFrame "
                "where the rows live; got a Dask array. Pass dd.from_dask_array(X, "
                "columns=[...]) or the DataFrame the array came from."
            )
        if X.ndim != 2:
            raise ValueError(f"A Dask array X must be 2-D, got {X.ndim} dimension(s)")
        if any(math.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
        if y is None or len(y) != X.shape[0]:
            raise ValueError(
                f"X and y have inconsistent numbers of samples: {X.shape[0]} and "
                f"{None if y is None else len(y)}"
            )
        rows = np.arange(X.shape[0])
        if estimator.early_stopping and fit_params.get("X_val") is None:
            rows, val = _validation_rows(estimator, y)
            fit_params = {**fit_params, "X_val": X[val].compute(), "y_val": _take(y, val)}
            if sample_weight is not None:
                fit_params["sample_weight_val"] = _take(sample_weight, val)
                sample_weight = _take(sample_weight, rows)
            y = _take(y, rows)
        dtype = np.dtype(estimator.dtype)
        stand_in = np.lib.stride_tricks.as_strided(
            np.zeros(X.shape[1], dtype), (rows.shape[0], X.shape[1]), (0, dtype.itemsize)
        )
        stand_in.flags.writeable = False
        return cls(stand_in, y, sample_weight, fit_params, dask_X=X, rows=rows)


def _gather(a, da):
    return a.compute() if isinstance(a, da.Array) or is_dask_collection(a) else a


def _take(a, rows):
    """Rows of targets or weights: a list, an array, a pandas object; a scalar weight as it is."""
    if hasattr(a, "iloc"):
        return a.iloc[rows]
    a = np.asarray(a)
    return a if a.ndim == 0 else a[rows]


def _validation_rows(estimator, y):
    """The early-stopping split of a Dask fit: rows to train on and to validate on."""
    y_array = np.asarray(y)
    stratify = y_array if is_classifier(estimator) and y_array.ndim == 1 else None
    train, val = train_test_split(
        np.arange(y_array.shape[0]),
        test_size=estimator.validation_fraction,
        stratify=stratify,
        random_state=estimator.random_state,
    )
    if val.shape[0] < 2:
        raise ValueError(
            "The validation set is too small. Increase 'validation_fraction' "
            "or the size of your dataset."
        )
    return np.sort(train), np.sort(val)

"""One sknet model trained on data spread over a Dask cluster.

What it holds: the public API (:class:`DataParallel`, :class:`WorkerLostError`).

What it may import: :mod:`sknet.estimators`, :mod:`sknet.engine` and below.
Dask itself is imported only when a fit runs (``pip install
"sknet-nn[distributed]"``).
"""

from sknet.distributed._data_parallel import DataParallel, WorkerLostError

__all__ = ["DataParallel", "WorkerLostError"]

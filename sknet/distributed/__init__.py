"""One sknet model trained on data spread over a Dask cluster.

What it holds: the public API (:class:`DataParallel`, :class:`WorkerLostError`)
in :mod:`~sknet.distributed._data_parallel`, what a fit trains on
(:mod:`~sknet.distributed._inputs`), the driver that runs a fit's epochs from
the client (:mod:`~sknet.distributed._driver`) and what it sends and reads
back each epoch (:mod:`~sknet.distributed._epochs`), a Dask DataFrame fitted
where its partitions live (:mod:`~sknet.distributed._tables`, with what it
refuses in :mod:`~sknet.distributed._frame_checks`), what runs on each worker
(:mod:`~sknet.distributed._worker`), the fit's state on each worker, in a
Dask worker plugin (:mod:`~sknet.distributed._state`), how the replicas add up
their arrays, worker to worker (:mod:`~sknet.distributed._exchange`), over
their authenticated channels (:mod:`~sknet.distributed._channel`) or Dask's
comms, and NCCL between GPUs (:mod:`~sknet.distributed._nccl`).

What it may import: :mod:`sknet.estimators`, :mod:`sknet.engine`, :mod:`sknet.tabular`
and below.
Dask itself is imported only when a fit runs (``pip install
"sknet-nn[distributed]"``).
"""

from sknet.distributed._data_parallel import DataParallel
from sknet.distributed._driver import WorkerLostError

__all__ = ["DataParallel", "WorkerLostError"]

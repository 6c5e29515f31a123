"""NCCL between GPU workers: the replicas' sums on the devices, through CuPy.

When every replica of a fit trains on a CUDA device and CuPy has NCCL, the
sums of :mod:`~sknet.distributed._exchange` run as NCCL all-reduces on the
devices (GPU to GPU over NVLink, PCIe or the network, as NCCL finds them),
and the arrays no longer cross to the host. The replicas agree on it at the
start of each epoch with a one-number sum over the Dask comms, and rank 0's
NCCL id travels the same way.

Not exercised without GPUs: the CPU test suite never reaches it (every CPU
replica says no), ``tests/distributed`` has a test marked ``gpu`` for a
machine with two. Known gap: a worker lost in the middle of an all-reduce
leaves its peers blocked in NCCL, which the driver's stop cannot interrupt
(NCCL's asynchronous error checks and ``abort`` would; to do on a GPU machine).
"""

import numpy as np


def _nccl_module(backend):
    """CuPy's NCCL bindings when ``backend`` is a CUDA one that has them, else None."""
    return backend.nccl()


def collective(exchange, backend, communicators):
    """``exchange`` itself, or an :class:`NcclExchange` over it when every replica can.

    ``communicators``: the fit's on this worker (its state's), by the
    replicas' workers and rank.
    """
    if exchange.size == 1:
        return exchange
    nccl = _nccl_module(backend)
    vote = np.array([0.0 if nccl is None else 1.0])
    exchange.allreduce(("nccl", "vote"), vote)
    if vote[0] != exchange.size:
        return exchange
    key = (tuple(exchange.peers), exchange.rank)
    communicator = communicators.get(key)
    if communicator is None:
        uid = np.zeros(128, dtype=np.float64)  # rank 0's id, zeros elsewhere: the sum is the id
        if exchange.rank == 0:
            uid[:] = nccl.get_unique_id()
        exchange.allreduce(("nccl", "id"), uid)
        unique_id = tuple(int(b) for b in uid)
        with backend.device_context():
            communicator = nccl.NcclCommunicator(exchange.size, unique_id, exchange.rank)
        communicators[key] = communicator
    return NcclExchange(exchange, backend, nccl, communicator)


def release(communicators):
    """Drop the communicators of a fit that ended (abort: a peer may be gone)."""
    for communicator in communicators.values():
        getattr(communicator, "abort", communicator.destroy)()
    communicators.clear()


class NcclExchange:
    """Sums over the replicas of device arrays, by NCCL; the same interface as TcpExchange."""

    kind = "nccl"

    def __init__(self, exchange, backend, nccl, communicator):
        self.tcp, self.backend = exchange, backend
        self.nccl, self.communicator = nccl, communicator
        self.size, self.rank, self.peers = exchange.size, exchange.rank, exchange.peers
        self.bytes_sent = 0

    def buffer(self, n, dtype):
        return self.backend.xp.empty(n, dtype=dtype)

    def put(self, buffer, start, array, coefficient=None):
        part = buffer[start : start + np.size(array)]
        part[...] = self.backend.xp.asarray(array).reshape(-1)
        if coefficient is not None:
            part *= coefficient

    def get(self, buffer, start, size):
        return buffer[start : start + size]

    def allreduce(self, step, buffer):
        nccl, xp = self.nccl, self.backend.xp
        dtype = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64}
        stream = xp.cuda.get_current_stream()
        self.communicator.allReduce(
            buffer.data.ptr,
            buffer.data.ptr,
            buffer.size,
            dtype[np.dtype(buffer.dtype)],
            nccl.NCCL_SUM,
            stream.ptr,
        )
        stream.synchronize()
        self.bytes_sent += int(buffer.nbytes * 2 * (self.size - 1) // self.size)
        return buffer

    def check(self):
        self.tcp.check()

    def close(self):
        self.tcp.close()

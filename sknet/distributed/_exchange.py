"""How the replicas of a fit add up their arrays, worker to worker.

The replicas never send their arrays to the client. Each Dask worker of a fit
gets one more handler on its own server (:func:`install`, as Dask's P2P
shuffle adds its ``shuffle_receive``): a message from a peer lands in this
process's mailbox, where the replica waiting for it picks it up. A sum over
the replicas (:meth:`TcpExchange.allreduce`) is a reduce-scatter followed by
an all-gather: the buffer is cut into one chunk per replica; every replica
sends chunk ``j`` to replica ``j``, which adds the chunks it got in replica
order (in float64) and sends the sum back to every other replica. Each
replica sends and receives ``2 (K - 1) / K`` times the buffer, whatever the
number ``K`` of replicas, in two rounds of messages; every chunk is added up
once, by one replica, so all replicas end with the same bits.

Code here runs on the workers, inside a Dask worker process: it reaches Dask
through the worker object Dask hands to :func:`install` and through the
``distributed`` module that process has loaded (:func:`_distributed`),
without an import of its own.
"""

import asyncio
import sys
import threading
import time

import numpy as np

#: The worker handler that receives the replicas' messages.
HANDLER = "sknet_dataparallel_deliver"
#: Seconds between two checks, while waiting for peers, that the run is still wanted.
_TICK = 0.2

_MAIL = threading.Condition()
#: Messages received and not yet taken: ``{(fit_id, key): message}``.
_MAILBOX = {}
#: The last aborted run of each fit: messages of runs up to it are dropped.
_ABORTED = {}
#: This process's Dask workers (one per process, or several in a threaded cluster).
_WORKERS = {}


class RunAborted(RuntimeError):
    """The run of an epoch on the replicas was stopped: a peer was lost or the driver asked."""


def _distributed():
    """The ``distributed`` module of this worker process (loaded: Dask runs this code)."""
    return sys.modules["distributed"]


async def _deliver(fit_id=None, key=None, message=None):
    """Handler on a worker's event loop: file a peer's message for the replica it is for."""
    with _MAIL:
        if key[0] > _ABORTED.get(fit_id, -1):
            _MAILBOX[(fit_id, key)] = message
            _MAIL.notify_all()
    return "OK"


def install(dask_worker=None):
    """Give this worker the handler of the replicas' messages (run by ``client.run``)."""
    dask_worker.handlers[HANDLER] = _deliver
    _WORKERS[dask_worker.address] = dask_worker
    return dask_worker.address


def abort(fit_id, run):
    """Stop the replicas of ``fit_id`` that wait in run ``run`` or an earlier one."""
    with _MAIL:
        _ABORTED[fit_id] = max(run, _ABORTED.get(fit_id, -1))
        for key in [key for key in _MAILBOX if key[0] == fit_id and key[1][0] <= run]:
            del _MAILBOX[key]
        _MAIL.notify_all()


def forget(fit_id):
    """Drop the messages and the abort marks of a fit that ended."""
    with _MAIL:
        for key in [key for key in _MAILBOX if key[0] == fit_id]:
            del _MAILBOX[key]
        _ABORTED.pop(fit_id, None)
        _MAIL.notify_all()


class TcpExchange:
    """Sums of host arrays over the replicas of one run, through the workers' Dask servers.

    Parameters
    ----------
    fit_id : str
    run : int
        The driver's count of epoch runs: messages of an aborted run never
        mix with those of its retry.
    rank : int
        This replica's shard.
    peers : list of str
        The address of the worker holding each shard's replica, by shard.
    still_wanted : callable
        Returns False when the driver no longer waits for this run.
    """

    def __init__(self, fit_id, run, rank, peers, still_wanted=lambda: True):
        self.fit_id, self.run, self.rank = fit_id, run, rank
        self.peers = list(peers)
        self.size = len(self.peers)
        self.still_wanted = still_wanted
        self.bytes_sent = 0
        self._checked = time.monotonic()
        self._worker = _WORKERS[self.peers[rank]]

    def allreduce(self, step, buffer):
        """Replace ``buffer`` (1-D host array) by its sum over the replicas, in place.

        ``step`` numbers the sums of one run (the same on every replica).
        """
        if self.size == 1:
            return buffer
        bounds = [buffer.shape[0] * j // self.size for j in range(self.size + 1)]
        me = self.rank
        others = [j for j in range(self.size) if j != me]
        self._send(
            [(j, (self.run, step, 0, me, j), buffer[bounds[j] : bounds[j + 1]]) for j in others]
        )
        parts = self._receive([(self.run, step, 0, j, me) for j in others])
        parts.insert(me, buffer[bounds[me] : bounds[me + 1]])
        total = np.zeros(parts[0].shape[0], dtype=np.float64)
        for part in parts:  # in replica order, on one replica only: the same bits everywhere
            total += part
        buffer[bounds[me] : bounds[me + 1]] = total
        mine = buffer[bounds[me] : bounds[me + 1]]
        self._send([(j, (self.run, step, 1, me, j), mine) for j in others])
        for j, part in zip(others, self._receive([(self.run, step, 1, j, me) for j in others])):
            buffer[bounds[j] : bounds[j + 1]] = part
        return buffer

    def _send(self, messages):
        distributed = _distributed()
        worker = self._worker
        to_serialize = distributed.protocol.to_serialize

        async def send_all():
            await asyncio.gather(
                *(
                    getattr(worker.rpc(self.peers[j]), HANDLER)(
                        fit_id=self.fit_id, key=key, message=to_serialize(np.ascontiguousarray(a))
                    )
                    for j, key, a in messages
                )
            )

        future = asyncio.run_coroutine_threadsafe(send_all(), worker.loop.asyncio_loop)
        while True:
            try:
                future.result(timeout=_TICK)
                break
            except TimeoutError:  # a peer slow to answer: still wanted?
                if self._aborted():
                    future.cancel()
                    raise RunAborted("the driver stopped this run") from None
            except Exception as exc:  # noqa: BLE001 (a peer's worker died or closed)
                raise RunAborted(f"a peer replica could not be reached: {exc!r}") from exc
        self.bytes_sent += sum(int(a.nbytes) for _, _, a in messages)

    def _receive(self, keys):
        wanted = [(self.fit_id, key) for key in keys]
        with _MAIL:
            while True:
                if all(key in _MAILBOX for key in wanted):
                    return [_MAILBOX.pop(key) for key in wanted]
                if self._aborted():
                    raise RunAborted("the driver stopped this run")
                _MAIL.wait(_TICK)

    def _aborted(self):
        """Whether the driver stopped this run or no longer waits for it."""
        if self.run <= _ABORTED.get(self.fit_id, -1):
            return True
        now = time.monotonic()
        if now - self._checked < 1.0:
            return False
        self._checked = now
        return not self.still_wanted()

"""How the replicas of a fit add up their arrays, worker to worker.

The replicas never send their arrays to the client. A sum over the replicas
(:meth:`HostExchange.allreduce`) is a reduce-scatter followed by an
all-gather: the buffer is cut into one chunk per replica; every replica sends
chunk ``j`` to replica ``j``, which adds the chunks it got in replica order
(in float64) and sends the sum back to every other replica. Each replica
sends and receives ``2 (K - 1) / K`` times the buffer, whatever the number
``K`` of replicas, in two rounds; every chunk is added up once, by one
replica, so all replicas end with the same bits. Two replicas, or small
buffers, take one round instead: each replica sends its whole buffer to the
others and adds them all up in replica order. What a replica adds up is
always a copy that no other replica writes.

The arrays travel one of two ways, the same for every replica of a fit:

- ``'sockets'`` (a plain ``tcp://`` cluster): over the authenticated direct
  channels of :mod:`~sknet.distributed._channel`, straight from one
  replica's buffer into a new array of the other's, with no pickling and no
  event loop in between;
- ``'dask'`` (a cluster with TLS, in-process ``inproc://`` workers, any other
  comms): as messages between the workers' Dask servers, so under the
  cluster's own ``Security``; each carries the fit, the run, both ranks and an
  HMAC under the fit's secret, and the sender sends a copy (in-process comms
  pass objects by reference).

Code here runs on the workers, inside a Dask worker process.
"""

import asyncio
import contextlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sknet.distributed._channel import ChannelError, RunAborted, connect
from sknet.distributed._state import HANDLER, message_tag

__all__ = ["HostExchange", "RunAborted", "ChannelError"]

#: Up to this many bytes sent by each replica, a sum takes one round of messages, not two.
_ONE_ROUND_BYTES = 1 << 20
#: Seconds between two checks, while waiting for peers, that the run is still wanted.
_TICK = 0.2


def _distributed():
    """The ``distributed`` module of this worker process (loaded: Dask runs this code)."""
    return sys.modules["distributed"]


class HostExchange:
    """Sums of host arrays over the replicas of one run, worker to worker.

    Parameters
    ----------
    state : FitState
        The fit's state on this worker (:mod:`~sknet.distributed._state`).
    run : int
        The driver's count of epoch runs: messages of an aborted run never
        mix with those of its retry.
    rank : int
        This replica's shard.
    peers : list of str
        The Dask address of the worker holding each shard's replica, by shard.
    addresses : list of tuple or None
        Each shard's worker's channel address (``'sockets'``), by shard.
    backend : Backend
        The replica's: arrays come to the host through it.
    worker : distributed.Worker
        This replica's worker.
    still_wanted : callable
        Returns False when the driver no longer waits for this run.
    link : int
        The driver's count of failed runs: runs with the same ``link`` keep
        the channels the first of them opened.
    """

    def __init__(self, state, run, rank, peers, addresses, backend, worker, still_wanted, link=0):
        self.state, self.run, self.rank, self.link = state, run, rank, link
        self.fit_id = state.fit_id
        self.peers, self.addresses = list(peers), addresses
        self.size = len(self.peers)
        self.backend, self._worker = backend, worker
        self.still_wanted = still_wanted
        self.bytes_sent = 0
        self._checked = time.monotonic()
        self._channels = None

    # -- buffers ------------------------------------------------------------------------
    def buffer(self, n, dtype):
        """An empty buffer of ``n`` values for :meth:`allreduce` (on the host)."""
        return np.empty(n, dtype=dtype)

    def put(self, buffer, start, array, coefficient=None):
        """Copy a backend ``array`` (times ``coefficient``) into ``buffer`` from ``start``."""
        part = buffer[start : start + np.size(array)]
        values = np.reshape(self.backend.to_numpy(array), -1)
        if coefficient is None:
            part[...] = values
        else:
            np.multiply(values, coefficient, out=part)

    def get(self, buffer, start, size):
        """The values ``start:start + size`` of ``buffer`` (to copy back with ``asarray``)."""
        return buffer[start : start + size]

    # -- the run ------------------------------------------------------------------------
    def check(self):
        """Raise :class:`RunAborted` if the driver stopped this run."""
        if self._aborted():
            raise RunAborted("the driver stopped this run")

    def _aborted(self):
        """Whether the driver stopped this run or no longer waits for it."""
        state = self.state
        if state.released or self.run <= state.aborted:
            return True
        now = time.monotonic()
        if now - self._checked < 1.0:
            return False
        self._checked = now
        return not self.still_wanted()

    @property
    def kind(self):
        """How the arrays travel: ``'sockets'``, ``'dask'`` messages, ``'none'`` (one replica)."""
        return "none" if self.size == 1 else self.state.transport

    def close(self):
        """The end of the run: the channels stay open for the next one."""
        self._channels = None

    # -- sums -----------------------------------------------------------------------------
    def allreduce(self, step, buffer):
        """Replace ``buffer`` (1-D host array) by its sum over the replicas, in place.

        ``step`` names the sum within the run (the same on every replica).
        """
        if self.size == 1:
            return buffer
        me = self.rank
        others = [j for j in range(self.size) if j != me]
        if self.size == 2 or buffer.nbytes * (self.size - 1) <= _ONE_ROUND_BYTES:
            # every replica sends its whole buffer to the others and adds them all up
            parts = self._swap(step, 0, {j: buffer for j in others}, buffer)
            parts[me] = buffer
            if self.size == 2:  # one rounding, whichever the order: the same bits on both
                return np.add(parts[0], parts[1], out=buffer)
            total = np.zeros(buffer.shape[0], dtype=np.float64)
            for j in range(self.size):  # the same buffers in the same order everywhere
                total += parts[j]
            buffer[...] = total
            return buffer
        bounds = [buffer.shape[0] * j // self.size for j in range(self.size + 1)]
        chunk = {j: buffer[bounds[j] : bounds[j + 1]] for j in range(self.size)}
        parts = self._swap(step, 1, {j: chunk[j] for j in others}, chunk[me])
        parts[me] = chunk[me]
        total = np.zeros(chunk[me].shape[0], dtype=np.float64)
        for j in range(self.size):  # chunk `me` is added up here only: the same bits everywhere
            total += parts[j]
        chunk[me][...] = total
        gathered = self._swap(step, 2, {j: chunk[me] for j in others}, None, chunk)
        for j in others:
            chunk[j][...] = gathered[j]
        return buffer

    def _swap(self, step, phase, outgoing, like, into=None):
        """Send ``outgoing[j]`` to each replica ``j``; what each sent back (new arrays).

        Each incoming array has ``like``'s shape and dtype (or ``into[j]``'s).
        """
        shapes = {j: (like if into is None else into[j]) for j in outgoing}
        if self.state.transport == "sockets":
            channels = self._direct_channels()
            received, sent = channels.swap(self.run, outgoing, shapes, self._stopped)
        else:
            key = (self.run, step, phase)
            self._send([(j, key, np.array(a, copy=True)) for j, a in outgoing.items()])
            received = self._receive(key, shapes)
            sent = sum(int(a.nbytes) for a in outgoing.values())
        self.bytes_sent += sent
        return received

    def _stopped(self):
        """Raise :class:`RunAborted` if the run is no longer wanted (for the channels' reads)."""
        if self._aborted():
            raise RunAborted("the driver stopped this run")

    # -- the 'sockets' transport ------------------------------------------------------
    def _direct_channels(self):
        """This replica's connections to the others (opened once a link, kept)."""
        if self._channels is None:
            key = (self.link, self.rank)
            state = self.state
            with state.lock:
                channels = state.channels.get(key)
            if channels is None or channels.closed:
                channels = _Channels(self)
                with state.lock:
                    if state.released or self.run <= state.aborted:
                        channels.close()
                        raise RunAborted("the driver stopped this run")
                    state.channels[key] = channels
            self._channels = channels
        return self._channels

    # -- the 'dask' transport ---------------------------------------------------------
    def _send(self, messages):
        distributed, worker, state = _distributed(), self._worker, self.state
        to_serialize = distributed.protocol.to_serialize
        me = self.rank

        async def send_all():
            await asyncio.gather(
                *(
                    getattr(worker.rpc(self.peers[j]), HANDLER)(
                        fit_id=self.fit_id,
                        key=key,
                        sender=me,
                        receiver=j,
                        message=to_serialize(array),
                        tag=message_tag(
                            state.secret, self.fit_id, key, me, j, array.shape, array.dtype
                        ),
                    )
                    for j, key, array in messages
                )
            )

        future = asyncio.run_coroutine_threadsafe(send_all(), worker.loop.asyncio_loop)
        deadline = time.monotonic() + state.settings.read_seconds
        while True:
            try:
                future.result(timeout=_TICK)
                return
            except TimeoutError:  # a peer slow to answer: still wanted?
                if self._aborted() or time.monotonic() > deadline:
                    future.cancel()
                    if self._aborted():
                        raise RunAborted("the driver stopped this run") from None
                    raise ChannelError(
                        "a peer replica took no message within the deadline"
                    ) from None
            except Exception as exc:  # noqa: BLE001 (a peer's worker died or closed)
                raise RunAborted(f"a peer replica could not be reached: {exc!r}") from exc

    def _receive(self, key, shapes):
        """The arrays the peers sent for ``key``, each checked against ``shapes[j]``."""
        state, me = self.state, self.rank
        wanted = {j: (*key, j, me) for j in shapes}
        deadline = time.monotonic() + state.settings.read_seconds
        with state.lock:
            while not all(k in state.mailbox for k in wanted.values()):
                if self._aborted():
                    raise RunAborted("the driver stopped this run")
                if time.monotonic() > deadline:
                    raise ChannelError(f"no message for {key} within the deadline")
                state.lock.wait(_TICK)
            received = {j: state.mailbox.pop(k) for j, k in wanted.items()}
        for j, array in received.items():
            like = shapes[j]
            if not isinstance(array, np.ndarray) or (array.shape, array.dtype) != (
                like.shape,
                like.dtype,
            ):
                raise ChannelError(f"replica {j} sent a message of another kind for {key}")
        return received


class _Channels:
    """A replica's authenticated connections to every other replica of a link.

    It connects to the lower ranks and takes the higher ranks' connections
    from its worker's listener; a pair then talks in the order both run their
    sums.
    """

    def __init__(self, exchange):
        me, state = exchange.rank, exchange.state
        self.connections, self.closed = {}, False
        try:
            for j in range(me):  # connect to the lower ranks
                self.connections[j] = connect(
                    exchange.addresses[j],
                    state.fit_id,
                    state.secret,
                    exchange.link,
                    me,
                    j,
                    state.settings,
                    exchange._stopped,
                )
            for j in range(me + 1, exchange.size):  # and take the higher ones'
                self.connections[j] = state.listener.take(exchange.link, j, me, exchange._stopped)
        except BaseException as exc:
            self.close()
            if isinstance(exc, ChannelError):
                worker = exchange.peers[me]
                raise ChannelError(f"{exc} (replica {me} on worker {worker})") from exc
            raise
        others = max(exchange.size - 1, 1)
        self._pool = ThreadPoolExecutor(others, thread_name_prefix="sknet-send")

    def swap(self, run, outgoing, shapes, stopped):
        """Send each ``outgoing[j]`` to ``j`` while receiving ``j``'s (like ``shapes[j]``).

        Returns what came, by replica, and the bytes sent (headers included);
        ``stopped()`` raises when the run is no longer wanted.
        """
        try:
            sends = [
                self._pool.submit(self.connections[j].send, run, a, stopped)
                for j, a in outgoing.items()
            ]
            received = {
                j: self.connections[j].receive(run, like, stopped) for j, like in shapes.items()
            }
            sent = sum(send.result() for send in sends)
        except (OSError, RunAborted) as exc:
            self.close()
            if isinstance(exc, RunAborted):
                raise
            raise ChannelError(f"a peer replica could not be reached: {exc!r}") from exc
        return received, sent

    def close(self):
        self.closed = True
        for connection in self.connections.values():
            with contextlib.suppress(OSError):
                connection.close()
        self.connections = {}
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.shutdown(wait=False)

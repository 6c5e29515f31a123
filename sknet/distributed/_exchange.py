"""How the replicas of a fit add up their arrays, worker to worker.

The replicas never send their arrays to the client. Each Dask worker of a fit
gets one more handler on its own server (:func:`install`, as Dask's P2P
shuffle adds its ``shuffle_receive``): a message from a peer lands in this
process's mailbox, where the replica waiting for it picks it up. Through
these messages the replicas of an epoch's run tell each other the address of
a listening socket, and connect (:class:`_Channels`): the arrays then go
socket to socket, from one replica's buffer into the other's, with no
pickling and no event loop in between. (On a cluster whose comms are not
plain ``tcp://``, TLS for one, the arrays keep to Dask's messages.)

A sum over the replicas (:meth:`TcpExchange.allreduce`) is a reduce-scatter
followed by an all-gather: the buffer is cut into one chunk per replica;
every replica sends chunk ``j`` to replica ``j``, which adds the chunks it got
in replica order (in float64) and sends the sum back to every other replica.
Each replica sends and receives ``2 (K - 1) / K`` times the buffer, whatever
the number ``K`` of replicas, in two rounds; every chunk is added up once, by
one replica, so all replicas end with the same bits. Two replicas, or small
buffers, take one round instead: each replica sends its whole buffer to the
others and adds them all up in replica order.

Code here runs on the workers, inside a Dask worker process: it reaches Dask
through the worker object Dask hands to :func:`install` and through the
``distributed`` module that process has loaded (:func:`_distributed`),
without an import of its own.
"""

import asyncio
import contextlib
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: The worker handler that receives the replicas' messages.
HANDLER = "sknet_dataparallel_deliver"
#: Seconds between two checks, while waiting for peers, that the run is still wanted.
_TICK = 0.2
#: Up to this many bytes sent by each replica, a sum takes one round of messages, not two.
_ONE_ROUND_BYTES = 1 << 20
#: Seconds to connect to a peer replica's channel.
_CONNECT_SECONDS = 30.0

_MAIL = threading.Condition()
#: Messages received and not yet taken: ``{(fit_id, key): message}``.
_MAILBOX = {}
#: The last aborted run of each fit: messages of runs up to it are dropped.
_ABORTED = {}
#: This process's Dask workers (one per process, or several in a threaded cluster).
_WORKERS = {}
#: The open channels of this process's replicas, by (fit id, link, rank): kept from one
#: epoch to the next while the driver's runs succeed.
_CHANNELS = {}


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
    """Stop the replicas of ``fit_id`` that wait in run ``run`` or an earlier one.

    Their channels close too: the driver's next run comes with a new ``link``.
    """
    with _MAIL:
        _ABORTED[fit_id] = max(run, _ABORTED.get(fit_id, -1))
        for key in [key for key in _MAILBOX if key[0] == fit_id and key[1][0] <= run]:
            del _MAILBOX[key]
        _MAIL.notify_all()
    _close_channels(fit_id)


def forget(fit_id):
    """Drop the messages, channels and abort marks of a fit that ended."""
    with _MAIL:
        for key in [key for key in _MAILBOX if key[0] == fit_id]:
            del _MAILBOX[key]
        _ABORTED.pop(fit_id, None)
        _MAIL.notify_all()
    _close_channels(fit_id)


def _close_channels(fit_id):
    for key in [key for key in _CHANNELS if key[0] == fit_id]:
        _CHANNELS.pop(key).close()


class TcpExchange:
    """Sums of host arrays over the replicas of one run, worker to worker.

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
    backend : Backend
        The replica's: arrays come to the host through it.
    still_wanted : callable
        Returns False when the driver no longer waits for this run.
    link : int
        The driver's count of failed runs: runs with the same ``link`` keep
        the channels the first of them opened.
    """

    def __init__(self, fit_id, run, rank, peers, backend, still_wanted=lambda: True, link=0):
        self.fit_id, self.run, self.rank = fit_id, run, rank
        self.link = link
        self.backend = backend
        self.peers = list(peers)
        self.size = len(self.peers)
        self.still_wanted = still_wanted
        self.bytes_sent = 0
        self._checked = time.monotonic()
        self._worker = _WORKERS[self.peers[rank]]
        self._channels = None

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

    def check(self):
        """Raise :class:`RunAborted` if the driver stopped this run."""
        if self._aborted():
            raise RunAborted("the driver stopped this run")

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
        """Send ``outgoing[j]`` to each replica ``j``; what each sent back, by replica.

        Each incoming array has ``like``'s shape and dtype (or ``into[j]``'s).
        Through the direct channels when the replicas have them, else as
        messages through the workers' Dask servers.
        """
        shapes = {j: (like if into is None else into[j]) for j in outgoing}
        channels = self._direct_channels()
        if channels is not None:
            received = channels.swap(outgoing, shapes, self._aborted)
        else:
            me = self.rank
            self._send([(j, (self.run, step, phase, me, j), a) for j, a in outgoing.items()])
            keys = [(self.run, step, phase, j, me) for j in outgoing]
            received = dict(zip(outgoing, self._receive(keys)))
        self.bytes_sent += sum(int(a.nbytes) for a in outgoing.values())
        return received

    @property
    def kind(self):
        """How the arrays travel: ``'sockets'``, ``'dask'`` messages, ``'none'`` (one replica)."""
        if self.size == 1:
            return "none"
        return "sockets" if self._direct_allowed() else "dask"

    def _direct_allowed(self):
        return all(p.startswith("tcp://") for p in self.peers)

    def _direct_channels(self):
        """The sockets to the other replicas (None on a TLS cluster: Dask's comms)."""
        if self._channels is None and self._direct_allowed():
            key = (self.fit_id, self.link, self.rank)
            channels = _CHANNELS.get(key)
            if channels is None or not channels.sockets:
                channels = _CHANNELS[key] = _Channels(self)
            self._channels = channels
        return self._channels

    def close(self):
        """The end of the run: the channels stay open for the next one."""
        self._channels = None

    def _send(self, messages):
        distributed = _distributed()
        worker = self._worker
        to_serialize = distributed.protocol.to_serialize

        async def send_all():
            await asyncio.gather(
                *(
                    getattr(worker.rpc(self.peers[j]), HANDLER)(
                        fit_id=self.fit_id, key=key, message=to_serialize(message)
                    )
                    for j, key, message in messages
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


class _Channels:
    """Direct TCP connections from one replica to every other of a run.

    Dask's comms carry each replica's address (a listening socket on its
    worker's host); the buffers then go socket to socket, straight from one
    replica's array into the other's (no pickling, no event loop): the
    latency of a synchronization is the network's. A pair talks in the order
    both run their sums, each message headed by its number and size.
    """

    _HEADER = struct.Struct("<qq")

    def __init__(self, exchange):
        me, size = exchange.rank, exchange.size
        others = [j for j in range(size) if j != me]
        host = exchange.peers[me].split("://", 1)[1].rsplit(":", 1)[0]
        listener = socket.create_server((host, 0))
        listener.settimeout(_TICK)
        self.sockets, self.sent, self.received = {}, 0, 0
        try:
            address = (host, listener.getsockname()[1])
            run = exchange.run
            exchange._send([(j, (run, "channels", me, j), address) for j in others])
            addresses = exchange._receive([(run, "channels", j, me) for j in others])
            for j, peer in zip(others, addresses):
                if j < me:  # connect to the lower ranks, accept the higher ones
                    sock = socket.create_connection(tuple(peer), timeout=_CONNECT_SECONDS)
                    sock.sendall(struct.pack("<q", me))
                    self._keep(j, sock)
            while len(self.sockets) < len(others):
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    exchange.check()
                    continue
                sock.settimeout(_CONNECT_SECONDS)
                (j,) = struct.unpack("<q", self._read(sock, bytearray(8)))
                self._keep(j, sock)
        except (OSError, RunAborted) as exc:
            self.close()
            if isinstance(exc, RunAborted):
                raise
            raise RunAborted(f"a peer replica could not be reached: {exc!r}") from exc
        finally:
            listener.close()
        self._pool = ThreadPoolExecutor(len(others), thread_name_prefix="sknet-send")

    def _keep(self, j, sock):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(_TICK)
        self.sockets[j] = sock

    def swap(self, outgoing, shapes, aborted):
        """Send each ``outgoing[j]`` to ``j`` while receiving ``j``'s (like ``shapes[j]``)."""
        number = self.sent
        self.sent += 1
        sends = [
            self._pool.submit(self._write, j, number, a, aborted) for j, a in outgoing.items()
        ]
        try:
            received = {}
            for j, like in shapes.items():
                header = self._read(self.sockets[j], bytearray(self._HEADER.size), aborted)
                got, nbytes = self._HEADER.unpack(header)
                out = np.empty(like.shape, dtype=like.dtype)
                if got != number or nbytes != out.nbytes:
                    raise RunAborted(f"replica {j} is out of step ({got}, {nbytes} bytes)")
                self._read(self.sockets[j], memoryview(out).cast("B"), aborted)
                received[j] = out
            for send in sends:
                send.result()
        except (OSError, RunAborted) as exc:
            self.close()
            if isinstance(exc, RunAborted):
                raise
            raise RunAborted(f"a peer replica could not be reached: {exc!r}") from exc
        return received

    def _write(self, j, number, array, aborted):
        sock = self.sockets[j]
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        for view in (memoryview(self._HEADER.pack(number, data.nbytes)), data):
            sent = 0
            while sent < len(view):
                try:
                    sent += sock.send(view[sent:])
                except TimeoutError:
                    if aborted():
                        raise RunAborted("the driver stopped this run") from None

    @staticmethod
    def _read(sock, view, aborted=None):
        """Fill ``view`` from ``sock``; RunAborted if the peer closed or the run stopped."""
        view = memoryview(view)
        got = 0
        while got < len(view):
            try:
                n = sock.recv_into(view[got:])
            except TimeoutError:
                if aborted is not None and aborted():
                    raise RunAborted("the driver stopped this run") from None
                continue
            if n == 0:
                raise RunAborted("a peer replica closed its channel")
            got += n
        return view

    def close(self):
        for sock in self.sockets.values():
            with contextlib.suppress(OSError):
                sock.close()
        self.sockets = {}
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.shutdown(wait=False)

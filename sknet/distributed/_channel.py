"""The replicas' direct channel: TCP connections whose two ends proved they hold the fit's secret.

On a plain ``tcp://`` cluster the replicas' arrays go socket to socket. Each
worker of a fit listens on one port (:class:`Listener`, opened when the fit
starts); replica ``i`` connects to every lower rank ``j`` (:func:`connect`).
Nothing is trusted before both ends prove, in a challenge and response under
HMAC-SHA256, that they hold the fit's secret (32 random bytes the driver
draws and sends through Dask, never through these sockets):

1. the connecting end sends a *hello*: ``MAGIC``, the fit's tag, the link
   (the driver's count of failed runs), its rank, the rank it wants and 32
   random bytes;
2. the listener checks the magic, the fit and the ranks (a rank that is no
   peer's is dropped), and answers 32 random bytes of its own and
   ``HMAC(secret, "listener" | hello | its bytes)``;
3. the connecting end checks that (in constant time, ``hmac.compare_digest``)
   and answers ``HMAC(secret, "connector" | hello | listener's bytes)``;
4. the listener checks it and confirms with a last tag.

A connection that fails a check, stays silent past ``HANDSHAKE_SECONDS``, or
comes for a place already taken is dropped and logged (logger
``sknet.distributed``), and never counted as a peer; the listener handles
every pending handshake in one thread (a selector), so a silent connection
holds up no one. Each message on a connection is headed by the fit's tag,
the run, its number on the connection, both ranks and its size, with a tag
(keyed BLAKE2b, a MAC by design) under the connection's key, derived from
the secret and both ends' random bytes; header and payload go in one system
call. A header that fails, or names another run, number, rank or size than
the one expected, ends the run (the payload is read into an array of the
expected size, never of the size a header claims). The payload itself is not
authenticated (that would double a synchronization's cost): it relies on the
TCP connection whose ends were authenticated; on a network where someone may
rewrite packets in flight, run the cluster with TLS, and the arrays keep to
Dask's comms (:mod:`~sknet.distributed._exchange`).

Every read has a deadline and, every ``TICK`` seconds, asks whether the run
is still wanted.
"""

import collections
import contextlib
import hashlib
import hmac
import logging
import os
import selectors
import socket
import struct
import threading
import time

import numpy as np

logger = logging.getLogger("sknet.distributed")

MAGIC = b"SKNETDP1"
#: Seconds a connection may take to open (a firewall that drops packets).
CONNECT_SECONDS = 10.0
#: Seconds a handshake may take, either end.
HANDSHAKE_SECONDS = 10.0
#: Seconds a replica waits for a peer's message (or connection) before it gives up.
READ_SECONDS = 600.0
#: Seconds between two checks, while waiting, that the run is still wanted.
TICK = 0.2
#: Handshakes the listener keeps pending at once (the oldest is dropped beyond).
MAX_PENDING = 64

#: The deadlines of a fit's channels, read on the driver and sent to the workers.
Settings = collections.namedtuple("Settings", "connect_seconds handshake_seconds read_seconds")

_HELLO = struct.Struct("<8s16sqqq32s")  # magic, fit tag, link, from rank, to rank, nonce
_REPLY = struct.Struct("<32s32s")  # the listener's nonce, its proof
_PROOF_SIZE = 32
_ACCEPT_SIZE = 16
_HEADER = struct.Struct("<16sqqqqq")  # fit tag, run, number, from rank, to rank, bytes
_TAG_SIZE = 16
#: Whether sockets send and receive several buffers in one call (not on Windows).
_SCATTER = hasattr(socket.socket, "sendmsg") and hasattr(socket.socket, "recvmsg_into")


def settings():
    """The deadlines as this process's module says (the driver's, sent to the workers)."""
    return Settings(CONNECT_SECONDS, HANDSHAKE_SECONDS, READ_SECONDS)


def fit_tag(fit_id):
    """16 bytes naming a fit in every hello and header."""
    return hashlib.sha256(fit_id.encode()).digest()[:16]


def _mac(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _tag(key, header):
    """A message header's tag: keyed BLAKE2b (a MAC by design, and a few times faster)."""
    return hashlib.blake2b(header, key=key, digest_size=_TAG_SIZE).digest()


class RunAborted(RuntimeError):
    """The run of an epoch on the replicas was stopped: a peer was lost or the driver asked."""


class ChannelError(RunAborted):
    """A replica's channel failed: a peer unreachable, silent, or out of step."""


def _bind(host):
    """A listening socket on ``host`` (all interfaces if that address is not this host's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, 0), family=family)
    except OSError:  # a contact address behind NAT: listen everywhere, advertise the host
        return socket.create_server(("", 0), family=family, dualstack_ipv6=False)


class _Pending:
    """A connection in its handshake, with its deadline and what it sent so far."""

    def __init__(self, sock, peer, deadline):
        self.sock, self.peer, self.deadline = sock, peer, deadline
        self.want, self.data = _HELLO.size, b""
        self.hello = self.nonce = self.place = None


class Listener:
    """A worker's port for its replicas' peers, for one fit: authenticates who connects.

    Parameters
    ----------
    host : str
        The worker's host (its Dask address's, brackets removed).
    fit_id : str
    secret : bytes
    size : int
        The fit's number of replicas: ranks outside ``[0, size)`` are dropped.
    settings : Settings
    """

    def __init__(self, host, fit_id, secret, size, settings):
        self.tag, self.secret, self.size = fit_tag(fit_id), secret, size
        self.settings = settings
        self._sock = _bind(host)
        self._sock.setblocking(False)
        self.address = (host, self._sock.getsockname()[1])
        self._ready = {}  # (link, from rank, to rank) -> Connection
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0  # connections dropped (tests read it)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ, None)
        self._thread = threading.Thread(
            target=self._serve, name="sknet-channel-listener", daemon=True
        )
        self._thread.start()

    # -- the handshakes, in one thread ------------------------------------------------
    def _serve(self):
        pending = {}
        while not self._closed:
            try:
                events = self._selector.select(TICK)
            except (OSError, ValueError):  # closed under us
                break
            for key, _ in events:
                if key.data is None:
                    self._accept(pending)
                else:
                    self._step(pending, key.data)
            now = time.monotonic()
            for item in [p for p in pending.values() if p.deadline < now]:
                self._drop(pending, item, "stayed silent past the handshake's deadline")
        for item in list(pending.values()):
            self._drop(pending, item, "the fit ended", log=False)

    def _accept(self, pending):
        try:
            sock, peer = self._sock.accept()
        except (BlockingIOError, OSError):
            return
        sock.setblocking(False)
        item = _Pending(sock, peer, time.monotonic() + self.settings.handshake_seconds)
        if len(pending) >= MAX_PENDING:
            oldest = min(pending.values(), key=lambda p: p.deadline)
            self._drop(pending, oldest, "too many handshakes pending")
        pending[sock] = item
        self._selector.register(sock, selectors.EVENT_READ, item)

    def _step(self, pending, item):
        try:
            chunk = item.sock.recv(item.want - len(item.data))
        except BlockingIOError:
            return
        except OSError as exc:
            return self._drop(pending, item, f"failed: {exc!r}")
        if not chunk:
            return self._drop(pending, item, "closed during the handshake")
        item.data += chunk
        if len(item.data) < item.want:
            return
        try:
            if item.hello is None:
                self._check_hello(item)
            else:
                self._check_proof(item)
        except (ValueError, OSError) as exc:
            return self._drop(pending, item, str(exc))
        if item.want == 0:  # accepted: the replica takes it from here
            self._selector.unregister(item.sock)
            del pending[item.sock]

    def _check_hello(self, item):
        magic, tag, link, sender, receiver, nonce = _HELLO.unpack(item.data)
        if magic != MAGIC:
            raise ValueError("sent no DataParallel hello")
        if not hmac.compare_digest(tag, self.tag):
            raise ValueError("named another fit")
        if not (0 <= receiver < sender < self.size):
            raise ValueError(f"named ranks {sender} -> {receiver}, not peers of this fit")
        item.hello, item.place = item.data, (link, sender, receiver)
        item.nonce = os.urandom(32)
        proof = _mac(self.secret, b"listener", item.hello, item.nonce)
        item.sock.sendall(_REPLY.pack(item.nonce, proof))  # 64 bytes: fits any socket buffer
        item.want, item.data = _PROOF_SIZE, b""

    def _check_proof(self, item):
        expected = _mac(self.secret, b"connector", item.hello, item.nonce)
        if not hmac.compare_digest(item.data, expected):
            raise ValueError("failed the challenge (does not hold the fit's secret)")
        with self._cond:
            if item.place in self._ready or self._closed:
                raise ValueError(f"came for a place already taken {item.place}")
            item.sock.sendall(_mac(self.secret, b"accepted", item.hello, item.nonce)[:16])
            key = _mac(self.secret, b"key", item.hello, item.nonce)
            link, sender, receiver = item.place
            self._ready[item.place] = Connection(
                item.sock, key, self.tag, receiver, sender, self.settings
            )
            self._cond.notify_all()
        item.want = 0

    def _drop(self, pending, item, reason, log=True):
        pending.pop(item.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(item.sock)
        self.dropped += 1  # counted and logged before the other end can see it closed
        if log:
            logger.warning(
                "DataParallel channel: dropped a connection from %s:%s that %s",
                item.peer[0],
                item.peer[1],
                reason,
            )
        with contextlib.suppress(OSError):
            item.sock.close()

    # -- what the replicas take -------------------------------------------------------
    def take(self, link, sender, receiver, stopped):
        """The authenticated connection from ``sender`` to ``receiver`` of ``link``.

        Waits up to ``read_seconds``; ``stopped()`` raises if the run is no
        longer wanted. Connections of earlier links are closed.
        """
        deadline = time.monotonic() + self.settings.read_seconds
        self.drop_links(link - 1)
        while True:
            with self._cond:
                connection = self._ready.pop((link, sender, receiver), None)
                if connection is not None:
                    return connection
                if self._closed:
                    raise ChannelError("the fit's channel was closed")
                self._cond.wait(TICK)
            if time.monotonic() > deadline:
                raise ChannelError(
                    f"replica {sender} did not connect to replica {receiver}'s channel at "
                    f"{_show(self.address)} within {self.settings.read_seconds:g} s"
                )
            stopped()

    def drop_links(self, up_to):
        """Close the connections of links up to ``up_to`` not yet taken."""
        with self._cond:
            for place in [p for p in self._ready if p[0] <= up_to]:
                self._ready.pop(place).close()

    def close(self):
        with self._cond:
            self._closed = True
            for connection in self._ready.values():
                connection.close()
            self._ready.clear()
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(2 * TICK + 1)
        self._selector.close()


def _show(address):
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _advance(views, n):
    """``views`` without their first ``n`` bytes (what a call sent or received)."""
    while n:
        if n >= len(views[0]):
            n -= len(views.pop(0))
        else:
            views[0], n = views[0][n:], 0
    return views


def _read_into(sock, buffers, deadline, stopped, what):
    """Fill each of ``buffers`` in turn from ``sock`` by ``deadline`` (one call when it can);
    ``stopped()`` is asked every tick."""
    views = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
    while views:
        try:
            n = sock.recvmsg_into(views)[0] if _SCATTER else sock.recv_into(views[0])
        except TimeoutError:
            if time.monotonic() > deadline:
                raise ChannelError(f"{what}: nothing came within the deadline") from None
            stopped()
            continue
        if n == 0:
            raise ChannelError(f"{what}: the peer closed the connection")
        views = _advance(views, n)
    return buffers


def _read_exactly(sock, view, deadline, stopped, what):
    """Fill ``view`` from ``sock`` by ``deadline``; ``stopped()`` is asked every tick."""
    return _read_into(sock, [view], deadline, stopped, what)[0]


def _send_all(sock, buffers, deadline, stopped, what):
    """Send ``buffers`` one after another (one call when it can), by ``deadline``."""
    views = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
    sent = sum(v.nbytes for v in views)
    while views:
        try:
            n = sock.sendmsg(views) if _SCATTER else sock.send(views[0])
        except TimeoutError:
            if time.monotonic() > deadline:
                raise ChannelError(f"{what}: the peer took nothing within the deadline") from None
            stopped()
            continue
        views = _advance(views, n)
    return sent


def connect(address, fit_id, secret, link, sender, receiver, settings, stopped):
    """An authenticated connection from replica ``sender`` to ``receiver``'s channel.

    Raises :class:`ChannelError` naming the address when it cannot be opened
    or the other end does not prove it holds the secret.
    """
    what = f"replica {sender} -> replica {receiver}'s channel at {_show(address)}"
    try:
        sock = socket.create_connection(tuple(address), timeout=settings.connect_seconds)
    except OSError as exc:
        raise ChannelError(f"{what}: could not connect ({exc!r})") from exc
    try:
        sock.settimeout(TICK)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tag, nonce = fit_tag(fit_id), os.urandom(32)
        hello = _HELLO.pack(MAGIC, tag, link, sender, receiver, nonce)
        sock.sendall(hello)
        deadline = time.monotonic() + settings.handshake_seconds
        reply = _read_exactly(sock, bytearray(_REPLY.size), deadline, stopped, what)
        their_nonce, proof = _REPLY.unpack(reply)
        if not hmac.compare_digest(proof, _mac(secret, b"listener", hello, their_nonce)):
            raise ChannelError(f"{what}: the listener failed the challenge")
        sock.sendall(_mac(secret, b"connector", hello, their_nonce))
        accepted = _read_exactly(sock, bytearray(_ACCEPT_SIZE), deadline, stopped, what)
        if not hmac.compare_digest(
            bytes(accepted), _mac(secret, b"accepted", hello, their_nonce)[:16]
        ):
            raise ChannelError(f"{what}: the listener did not accept the connection")
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    key = _mac(secret, b"key", hello, their_nonce)
    return Connection(sock, key, tag, sender, receiver, settings)


class Connection:
    """One authenticated connection between two replicas; messages with checked headers."""

    def __init__(self, sock, key, tag, me, peer, settings):
        self.sock, self.key, self.tag = sock, key, tag
        self.me, self.peer = me, peer
        self.settings = settings
        self.sent = self.received = 0  # messages each way: both ends count the same
        sock.settimeout(TICK)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, run, array, stopped):
        """Send ``array`` (contiguous) as the next message of ``run``: header and payload
        in one call. Returns the bytes sent."""
        data = np.ascontiguousarray(array)
        header = _HEADER.pack(self.tag, run, self.sent, self.me, self.peer, data.nbytes)
        self.sent += 1
        what = f"replica {self.me} -> replica {self.peer}"
        deadline = time.monotonic() + self.settings.read_seconds
        message = (header + _tag(self.key, header), data)
        return _send_all(self.sock, message, deadline, stopped, what)

    def receive(self, run, like, stopped):
        """The next message of ``run``: a new array like ``like``.

        Read with its header in one call (into an array of the size expected,
        whatever the header says), and refused unless the header is
        authentic and names this fit, run, message number, both ranks and
        that size.
        """
        out = np.empty(like.shape, dtype=like.dtype)
        raw = bytearray(_HEADER.size + _TAG_SIZE)
        what = f"replica {self.me} <- replica {self.peer}"
        deadline = time.monotonic() + self.settings.read_seconds
        _read_into(self.sock, [raw, out], deadline, stopped, what)
        header, tag = bytes(raw[: _HEADER.size]), bytes(raw[_HEADER.size :])
        if not hmac.compare_digest(tag, _tag(self.key, header)):
            raise ChannelError(f"{what}: a message failed its authentication")
        got = _HEADER.unpack(header)
        expected = (self.tag, run, self.received, self.peer, self.me, out.nbytes)
        if got != expected:
            raise ChannelError(f"{what}: out of step (got {got[1:]}, expected {expected[1:]})")
        self.received += 1
        return out

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

"""The replicas' direct channel, alone: the handshake, the checked headers, the deadlines.

No Dask here: a listener and its peers in threads of this process, and
attackers that speak to the listener's port with raw sockets.
"""

import logging
import os
import socket
import struct
import threading

import numpy as np
import pytest

from sknet.distributed import _channel
from sknet.distributed._channel import (
    MAGIC,
    ChannelError,
    Connection,
    Listener,
    RunAborted,
    Settings,
    connect,
    fit_tag,
)

FIT, SECRET = "fit-under-test", os.urandom(32)
QUICK = Settings(connect_seconds=5.0, handshake_seconds=2.0, read_seconds=3.0)


def never_stopped():
    return None


@pytest.fixture
def listener():
    listener = Listener("127.0.0.1", FIT, SECRET, 3, QUICK)
    yield listener
    listener.close()


def hello(fit=FIT, link=0, sender=1, receiver=0, magic=MAGIC):
    return struct.pack("<8s16sqqq32s", magic, fit_tag(fit), link, sender, receiver, os.urandom(32))


def attacker(address, payload=b"", keep=False):
    """A raw connection to ``address`` that sends ``payload``, and is kept open or closed."""
    sock = socket.create_connection(address, timeout=5)
    if payload:
        sock.sendall(payload)
    if not keep:
        sock.close()
    return sock


def closed_by_the_listener(sock, n=64):
    """Whether the listener closed ``sock`` (with or without unread bytes) and sent nothing."""
    sock.settimeout(5)
    try:
        return sock.recv(n) == b""
    except ConnectionResetError:  # closed with bytes unread: a reset
        return True
    finally:
        sock.close()


def test_two_ends_holding_the_secret_exchange_arrays(listener):
    got = {}

    def accept():
        got["connection"] = listener.take(0, 1, 0, never_stopped)

    thread = threading.Thread(target=accept)
    thread.start()
    one = connect(listener.address, FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
    thread.join(10)
    zero = got["connection"]
    try:
        a, b = np.arange(5.0), np.arange(5.0) * -2
        assert one.send(7, a, never_stopped) > a.nbytes  # the payload and its header
        received = zero.receive(7, a, never_stopped)
        np.testing.assert_array_equal(received, a)
        assert received is not a  # a new array, written by no one else
        zero.send(7, b, never_stopped)
        np.testing.assert_array_equal(one.receive(7, b, never_stopped), b)
    finally:
        one.close()
        zero.close()


def test_a_connection_without_the_secret_is_refused_both_ways(listener, caplog):
    # A connecting end without the secret cannot check the listener's proof; a raw
    # attacker that answers anything fails the listener's challenge and is dropped.
    with pytest.raises(ChannelError, match="failed the challenge"):
        connect(listener.address, FIT, b"not the secret", 0, 1, 0, QUICK, never_stopped)
    sock = attacker(listener.address, hello(), keep=True)
    sock.recv(64)  # the listener's challenge
    with caplog.at_level(logging.WARNING, logger="sknet.distributed"):
        sock.sendall(b"x" * 32)  # a wrong answer
        assert closed_by_the_listener(sock, 16)  # not accepted
    assert "failed the challenge" in caplog.text
    with pytest.raises(ChannelError, match="did not connect"):
        listener.take(0, 1, 0, never_stopped)  # never counted as a peer


@pytest.mark.parametrize(
    "payload, reason",
    [
        (hello(sender=99, receiver=0), "not peers of this fit"),  # a forged rank
        (hello(sender=1, receiver=1), "not peers of this fit"),
        (hello(sender=-1, receiver=0), "not peers of this fit"),
        (hello(fit="another fit"), "named another fit"),
        (hello(magic=b"GET / HT"), "sent no DataParallel hello"),
        (os.urandom(200), "sent no DataParallel hello"),  # garbage
        (struct.pack("<q", 1), "stayed silent"),  # the previous protocol's rank
        (b"", "stayed silent"),  # idle: a port scanner
    ],
    ids=[
        "forged-rank",
        "same-rank",
        "negative-rank",
        "other-fit",
        "http",
        "garbage",
        "old-protocol",
        "idle",
    ],
)
def test_what_is_not_a_peer_is_dropped_and_logged(listener, caplog, payload, reason):
    with caplog.at_level(logging.WARNING, logger="sknet.distributed"):
        sock = attacker(listener.address, payload, keep=True)
        assert closed_by_the_listener(sock)  # dropped, without a challenge
    assert any(reason in r.getMessage() for r in caplog.records), caplog.text
    assert listener.dropped >= 1


def test_silent_connections_hold_up_no_peer(listener, monkeypatch):
    # More idle connections than the listener keeps pending, then a real peer: it is
    # served at once, and the silent ones are dropped at their deadline.
    monkeypatch.setattr(_channel, "MAX_PENDING", 8)
    idle = [attacker(listener.address, keep=True) for _ in range(12)]
    got = {}
    thread = threading.Thread(target=lambda: got.update(c=listener.take(0, 2, 0, never_stopped)))
    thread.start()
    peer = connect(listener.address, FIT, SECRET, 0, 2, 0, QUICK, never_stopped)
    thread.join(10)
    try:
        assert "c" in got
        for sock in idle:
            assert closed_by_the_listener(sock)  # each dropped, by the cap or the deadline
        assert listener.dropped >= 12
    finally:
        peer.close()
        for connection in got.values():
            connection.close()


def test_a_place_already_taken_is_refused(listener):
    first = connect(listener.address, FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
    try:
        with pytest.raises(ChannelError, match="did not accept|closed"):
            connect(listener.address, FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
        listener.take(0, 1, 0, never_stopped).close()
    finally:
        first.close()


def pair(key_a=b"k" * 32, key_b=b"k" * 32):
    """Two ends of a loopback TCP connection, as connections between ranks 0 and 1."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        a = socket.create_connection(server.getsockname())
        b, _ = server.accept()
    tag = fit_tag(FIT)
    return Connection(a, key_a, tag, 0, 1, QUICK), Connection(b, key_b, tag, 1, 0, QUICK)


@pytest.mark.parametrize(
    "sender_key, run, size, match",
    [
        (b"x" * 32, 3, 4, "failed its authentication"),  # a forged message
        (b"k" * 32, 4, 4, "out of step"),  # a message of another run
        (b"k" * 32, 3, 2**12, "out of step"),  # a peer's header, a larger payload
    ],
    ids=["forged", "other-run", "huge-payload"],
)
def test_a_message_failing_its_header_ends_the_run(sender_key, run, size, match):
    # Refused on its header, before its payload is read: nothing is allocated for it.
    zero, one = pair(key_a=sender_key)
    try:
        zero.send(run, np.ones(size), never_stopped)
        with pytest.raises(ChannelError, match=match):
            one.receive(3, np.ones(4), never_stopped)
    finally:
        zero.close()
        one.close()


def test_every_read_has_a_deadline_and_asks_whether_the_run_is_wanted(listener):
    zero, one = pair()
    calls = []

    def stopped():
        calls.append(1)
        if len(calls) > 2:
            raise RunAborted("the driver stopped this run")

    try:
        with pytest.raises(ChannelError, match="nothing came within the deadline"):
            one.receive(0, np.ones(4), never_stopped)  # read_seconds=3, a silent peer
        with pytest.raises(RunAborted, match="driver stopped"):
            one.receive(0, np.ones(4), stopped)
        with pytest.raises(ChannelError, match=r"did not connect to replica 0's channel at 127"):
            listener.take(0, 1, 0, never_stopped)
    finally:
        zero.close()
        one.close()


def test_an_unreachable_peer_is_named_with_its_address():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    address = closed.getsockname()
    closed.close()  # nothing listens there: connections are refused
    with pytest.raises(ChannelError, match=rf"127.0.0.1:{address[1]}: could not connect"):
        connect(address, FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    with pytest.raises(ChannelError, match="nothing came within the deadline"):
        connect(silent.getsockname(), FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
    silent.close()


def test_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        listener = Listener("::1", FIT, SECRET, 2, QUICK)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        peer = connect(listener.address, FIT, SECRET, 0, 1, 0, QUICK, never_stopped)
        listener.take(0, 1, 0, never_stopped).close()
        peer.close()
    finally:
        listener.close()

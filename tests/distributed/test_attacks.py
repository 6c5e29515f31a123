"""A DataParallel fit attacked from outside, and replicas that cannot reach each other.

A process cluster (2 worker processes, loopback). The attacker is a thread of
this process: as soon as the driver has opened the fit's channels on the
workers, and then again and again while the fit runs, it connects to every
port the worker processes opened for the fit (found with psutil: the ports
they listen on that were not there before) and sends nothing, garbage, the
previous protocol's rank, a hello naming the fit with a forged rank, a hello
that impersonates a real peer, or a header announcing a huge payload; or it
sends forged messages to the workers' Dask handler. The attacked fit must
end with the undisturbed model, bit for bit, and in bounded time.

The firewall: the driver hands the replicas addresses where connections are
refused, or accepted and never answered. The fit must end, after a bounded
number of runs, with a ConnectionError that names the address and says what
must be open between the workers.
"""

import asyncio
import os
import socket
import struct
import threading

import numpy as np
import psutil
import pytest

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")

from sknet.distributed import DataParallel, _channel, _driver  # noqa: E402
from sknet.distributed._state import HANDLER  # noqa: E402
from tests.conftest import local_dask_client  # noqa: E402
from tests.distributed.helpers import (  # noqa: E402
    HANG_SECONDS,
    assert_same_model,
    fit_plugins,
    mlp,
    within,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def client():
    with local_dask_client() as client:
        yield client


def listening(pids):
    """The (host, port) each of ``pids`` listens on over TCP."""
    found = set()
    for pid in pids:
        for c in psutil.Process(pid).net_connections("tcp"):
            if c.status == "LISTEN":
                found.add((c.laddr.ip, c.laddr.port))
    return found


def payloads(fit_id):
    """What the attacker sends to a port: name -> bytes (None: connect and stay silent)."""
    tag = _channel.fit_tag(fit_id)  # the attacker knows the fit's id, not its secret

    def hello(sender, receiver):
        return struct.pack(
            "<8s16sqqq32s", _channel.MAGIC, tag, 0, sender, receiver, os.urandom(32)
        )

    huge = struct.pack("<16sqqqqq", tag, 1, 0, 1, 0, 2**62) + os.urandom(16)
    return {
        "idle": None,
        "garbage": os.urandom(300),
        "old-protocol-rank": struct.pack("<q", 1),
        "forged-rank": hello(99, 0),
        "impersonates-rank-1": hello(1, 0),  # then stays silent: it cannot answer
        "impersonates-and-answers": hello(1, 0) + os.urandom(32),
        "huge-payload-header": huge,
    }


class Attacker:
    """Connects to every new listening port of the workers and sends ``payloads``."""

    def __init__(self, pids):
        self.pids, self.before = pids, listening(pids)
        self.hit, self.open, self.fit_id = {}, [], None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep_striking, daemon=True)

    def strike(self, fit_id):
        self.fit_id = fit_id
        for address in listening(self.pids) - self.before:
            for name, payload in payloads(fit_id).items():
                try:
                    sock = socket.create_connection(address, timeout=2)
                except OSError:
                    continue
                try:
                    if payload:
                        sock.sendall(payload)
                except OSError:  # already dropped
                    sock.close()
                    continue
                self.open.append(sock)  # kept open: the listener must drop it
                self.hit.setdefault(address, set()).add(name)
        if not self._thread.is_alive():
            self._thread.start()

    def _keep_striking(self):
        while not self._stop.wait(0.3):
            self.strike(self.fit_id)

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        for sock in self.open:
            sock.close()


def attack_after_install(monkeypatch, strike):
    """Call ``strike(driver)`` each time the driver has installed the fit on workers."""
    original = _driver._Driver._install

    def install(self, workers):
        original(self, workers)
        strike(self)

    monkeypatch.setattr(_driver._Driver, "_install", install)


def test_connections_to_the_fits_ports_change_nothing(client, digits, monkeypatch):
    X, y = digits
    est = mlp(dropout=0.1)
    undisturbed = DataParallel(est, client=client, sync_every=1).fit(X, y)
    attacker = Attacker(list(client.run(os.getpid).values()))
    attack_after_install(monkeypatch, lambda driver: attacker.strike(driver.fit_id))
    try:
        attacked = within(HANG_SECONDS, DataParallel(est, client=client, sync_every=1).fit, X, y)
    finally:
        attacker.stop()
    assert len(attacker.hit) == 2  # each worker's channel
    assert all(names == set(payloads("")) for names in attacker.hit.values())
    assert_same_model(attacked.estimator_, undisturbed.estimator_)
    assert {e["transport"] for e in attacked.epoch_history_} == {"sockets"}
    assert [e["retries"] for e in attacked.epoch_history_] == [0, 0, 0]  # not even slowed
    assert not any(fit_plugins(client).values())


async def forge_messages(addresses, fit_id, n_values):
    """Messages for every run and batch of a short fit, from and to both ranks, unsigned."""
    forged = np.full(n_values, 1e6)
    for address in addresses:
        async with distributed.rpc(address) as worker:
            handler = getattr(worker, HANDLER)
            for run in range(1, 4):
                for b in range(9):
                    for sender, receiver in ((0, 1), (1, 0)):
                        for tag in (b"x" * 16, None):
                            await handler(
                                fit_id=fit_id,
                                key=(run, ("gradients", b), 0),
                                sender=sender,
                                receiver=receiver,
                                message=distributed.protocol.to_serialize(forged),
                                tag=tag,
                            )
            await handler(fit_id="not-a-fit", key=(1, 2, 3), sender=0, receiver=1, message=0)


def test_forged_dask_messages_change_nothing(client, digits, monkeypatch):
    # The 'dask' transport (a TLS cluster's, here forced on plain TCP): messages that
    # do not carry the fit's HMAC are dropped, whatever fit, run and rank they name.
    X, y = digits
    est = mlp()
    monkeypatch.setattr(_driver, "_transport", lambda client, workers: "dask")
    undisturbed = DataParallel(est, client=client, sync_every=1).fit(X, y)
    n_values = sum(w.size for w in undisturbed.estimator_.network_.params()) + 1
    workers = sorted(client.nthreads())

    def strike(driver):
        asyncio.run(forge_messages(workers, driver.fit_id, n_values))

    attack_after_install(monkeypatch, strike)
    attacked = within(HANG_SECONDS, DataParallel(est, client=client, sync_every=1).fit, X, y)
    assert {e["transport"] for e in attacked.epoch_history_} == {"dask"}
    assert_same_model(attacked.estimator_, undisturbed.estimator_)


def refused_address():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    address = sock.getsockname()
    sock.close()  # nothing listens there: connections are refused
    return address


@pytest.mark.parametrize("wall", ["refused", "silent"])
def test_replicas_that_cannot_reach_each_other_fail_clearly(client, digits, monkeypatch, wall):
    # A firewall between the workers' ports: connections refused, or accepted by
    # something that never answers. Bounded: a few runs, each within the deadlines.
    X, y = digits
    monkeypatch.setattr(_driver, "_STOPPED_SECONDS", 1.0)
    monkeypatch.setattr(_channel, "HANDSHAKE_SECONDS", 1.0)  # sent to the workers
    silent = socket.create_server(("127.0.0.1", 0))
    blocked = refused_address() if wall == "refused" else silent.getsockname()
    original = _driver._Driver._install

    def install(self, workers):
        original(self, workers)
        for worker in workers:
            self._addresses[worker] = blocked

    monkeypatch.setattr(_driver._Driver, "_install", install)
    parallel = DataParallel(mlp(), client=client, sync_every=1)
    try:
        with pytest.raises(ConnectionError) as info:
            within(HANG_SECONDS, parallel.fit, X, y)
    finally:
        silent.close()
    message = str(info.value)
    assert f"127.0.0.1:{blocked[1]}" in message
    assert "in 4 run(s)" in message  # the first run and 3 retries, then the error
    assert "must accept TCP connections from the other workers" in message
    assert ("could not connect" if wall == "refused" else "nothing came") in message
    assert parallel.estimator_.history_ == [] and parallel.epoch_history_ == []
    assert not any(fit_plugins(client).values())

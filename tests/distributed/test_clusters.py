"""The same model on every kind of Dask cluster, and what a fit leaves on the workers.

Each kind of cluster is started once for this module (threads in this process,
so they start quickly): in-process workers on ``inproc://`` (the
``processes=False`` default) and on TCP, an IPv6 loopback cluster, and a TLS
cluster (certificates made with ``openssl``, skipped without it). The
process cluster is the one of ``test_data_parallel``.
"""

import shutil
import subprocess
import time

import numpy as np
import psutil
import pytest

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")

from sklearn.base import clone  # noqa: E402

from sknet.callbacks import Callback  # noqa: E402
from sknet.distributed import DataParallel  # noqa: E402
from tests.distributed.helpers import (  # noqa: E402
    assert_same_model,
    cluster_client,
    fit_plugins,
    mlp,
    within,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def tls_security(directory):
    """A Security object for a TLS-only cluster: one self-signed certificate for all."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    files = dict(tls_ca_file=str(cert), tls_client_key=str(key), tls_client_cert=str(cert))
    return distributed.Security(
        **files,
        tls_scheduler_key=str(key),
        tls_scheduler_cert=str(cert),
        tls_worker_key=str(key),
        tls_worker_cert=str(cert),
        require_encryption=True,
    )


def ipv6_loopback():
    import socket

    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")


CLUSTERS = {
    "threads-inproc": dict(processes=False),
    "threads-tcp": dict(processes=False, protocol="tcp://", host="127.0.0.1"),
    "ipv6-loopback": dict(processes=False, protocol="tcp://", host="[::1]"),
    "tls": dict(processes=False, protocol="tls://", host="127.0.0.1"),
}
TRANSPORT = {"threads-inproc": "dask", "threads-tcp": "sockets", "ipv6-loopback": "sockets",
             "tls": "dask"}  # fmt: skip


@pytest.fixture(scope="module", params=list(CLUSTERS))
def kind_and_client(request, tmp_path_factory):
    kind = request.param
    options = dict(CLUSTERS[kind])
    if kind == "ipv6-loopback":
        ipv6_loopback()
    if kind == "tls":
        options["security"] = tls_security(tmp_path_factory.mktemp("tls"))
    with cluster_client(**options) as client:
        yield kind, client


def listening_ports():
    """This process's listening TCP ports (the threaded clusters' workers are here)."""
    return {c.laddr.port for c in psutil.Process().net_connections("tcp") if c.status == "LISTEN"}


#: What the callbacks saw, by name (a callback is cloned with its estimator: no lists in it).
SEEN = {}


class Watch(Callback):
    """Runs ``SEEN[name]["look"]()`` after each epoch, on the driver, and keeps what it says."""

    def __init__(self, name="ports"):
        self.name = name

    def on_epoch_end(self, state, epoch, logs):
        record = SEEN[self.name]
        record["seen"].append(record["look"]())


@pytest.mark.parametrize("sync_every", [1, 2])
def test_every_kind_of_cluster_trains_the_model(kind_and_client, digits, sync_every):
    # sync_every=1: one process's model (before: a threaded cluster summed buffers
    # its peer was still writing, IPv6 failed on the bracketed host); sync_every=2:
    # the same model on every cluster (the sums are the same bits).
    kind, client = kind_and_client
    X, y = digits
    est = mlp(dropout=0.2) if sync_every == 1 else mlp()
    SEEN["ports"] = {"look": listening_ports, "seen": []}
    before = listening_ports()
    watched = clone(est).set_params(callbacks=[Watch("ports")])
    parallel = within(300, DataParallel(watched, client=client, sync_every=sync_every).fit, X, y)
    seen = SEEN.pop("ports")["seen"]
    assert {e["transport"] for e in parallel.epoch_history_} == {TRANSPORT[kind]}
    if sync_every == 1:
        assert_same_model(parallel.estimator_, clone(est).fit(X, y), rtol=1e-10)
    opened = set().union(*seen) - before
    if TRANSPORT[kind] == "dask":  # nothing but Dask's own comms
        assert not opened
    else:
        assert len(opened) == 2  # one listener a worker, for the fit's time
        assert not opened & listening_ports()
    assert not any(fit_plugins(client).values())  # released: no state left


def worker_states(client):
    """Each in-process worker's DataParallel states: ``{address: [FitState, ...]}``."""
    return {
        address: [p.state for n, p in worker.plugins.items() if hasattr(p, "state")]
        for address, worker in ((w.address, w) for w in client.cluster.workers.values())
    }


def test_each_worker_holds_its_own_state_and_lets_it_go(digits):
    # A threaded cluster: both workers in this process. Each holds its own state for
    # the fit (its replicas only, its own lock), and none is left once the fit ended,
    # or failed; nothing lives in a process-wide table.
    from sknet.distributed import _exchange, _state, _worker

    X, y = digits
    with cluster_client(**CLUSTERS["threads-tcp"]) as client:

        def look():
            return {a: [(s, sorted(s.replicas)) for s in found]
                    for a, found in worker_states(client).items()}  # fmt: skip

        SEEN["states"] = {"look": look, "seen": []}
        est = mlp(max_iter=2, callbacks=[Watch("states")])
        parallel = DataParallel(est, client=client, sync_every=1).fit(X, y)
        during = SEEN.pop("states")["seen"][-1]
        assert all(len(found) == 1 for found in during.values())
        states = {address: found[0][0] for address, found in during.items()}
        assert len({id(s) for s in states.values()}) == 2
        assert len({id(s.lock) for s in states.values()}) == 2
        ranks = {address: found[0][1] for address, found in during.items()}
        assert ranks == {w: [k] for k, w in enumerate(parallel.workers_)}
        assert all(s.released and not s.replicas and not s.channels for s in states.values())
        assert worker_states(client) == {w: [] for w in parallel.workers_}
        # a fit that fails on the workers lets its state go too
        with pytest.raises(ValueError, match="NaN"):
            bad = X.copy()
            bad[3, 3] = np.nan
            DataParallel(mlp(), client=client).fit(distributed_array(bad), y)
        assert worker_states(client) == {w: [] for w in parallel.workers_}
    for module in (_exchange, _state, _worker):
        tables = [n for n, v in vars(module).items() if isinstance(v, dict) and n.isupper()]
        assert not [n for n in tables if n.startswith("_")], module.__name__


def distributed_array(X):
    import dask.array as da

    return da.from_array(X, chunks=600)


class ClosesTheClient(Callback):
    """Closes ``SEEN[name]["client"]`` at the end of epoch ``epoch``."""

    def __init__(self, name="closes", epoch=1):
        self.name, self.epoch = name, epoch

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.epoch:
            SEEN[self.name]["client"].close()


def test_a_client_closed_mid_fit_leaves_the_model_it_promises(digits):
    # The error says estimator_ holds the last complete epoch's model: it does. The
    # workers, whose client is gone, let go of the fit's state by themselves (their
    # lease on the fit's data ends with the client).
    X, y = digits
    with cluster_client(**CLUSTERS["threads-tcp"]) as client:
        second = distributed.Client(client.scheduler.address, set_as_default=False)
        SEEN["closes"] = {"client": second}
        est = mlp(max_iter=4, callbacks=[ClosesTheClient("closes", epoch=1)])
        parallel = DataParallel(est, client=second, sync_every=1)
        with pytest.raises(RuntimeError, match="client was closed during epoch 2") as info:
            within(300, parallel.fit, X, y)
        assert "history_ has 1 epoch(s)" in str(info.value)
        assert len(parallel.estimator_.history_) == 1
        one_epoch = DataParallel(clone(est).set_params(max_iter=1, callbacks=None),
                                 client=client, sync_every=1).fit(X, y)  # fmt: skip
        assert_same_model(parallel.estimator_, one_epoch.estimator_)
        deadline = time.monotonic() + 60
        while any(worker_states(client).values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(worker_states(client).values())

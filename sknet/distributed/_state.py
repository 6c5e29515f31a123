"""What a DataParallel fit keeps on each of its workers, and only there: a Dask worker plugin.

Each worker of a fit gets one :class:`FitState`, held by a Dask
``WorkerPlugin`` added to that worker alone (:func:`install`, run by the
driver with ``client.run``). The state holds the fit's secret, its replicas,
their channels (a :class:`~sknet.distributed._channel.Listener` on a
``'sockets'`` fit), the mailbox of the messages its replicas receive through
Dask (a ``'dask'`` fit), and the NCCL communicators, all guarded by the
state's lock. Nothing is shared with another worker of the same process (a
threaded cluster) or with another fit. The state goes when the fit ends
(:func:`uninstall`), when the worker closes, or when the driver's client lets
go of the fit's data on the worker (the plugin holds a lease on those keys: a
client closed mid-fit, a driver that died).

Code here runs on the workers: it reaches Dask through the worker object it
is handed.
"""

import functools
import hashlib
import hmac
import logging
import sys
import threading

from sknet.distributed._channel import ChannelError, Listener
from sknet.distributed._nccl import release as release_communicators

logger = logging.getLogger("sknet.distributed")

#: The worker handler that receives the replicas' Dask messages (one per worker).
HANDLER = "sknet_dataparallel_deliver"
_PREFIX = "sknet-dataparallel-"


def plugin_name(fit_id):
    return _PREFIX + fit_id


def message_tag(secret, fit_id, key, sender, receiver, shape, dtype):
    """The HMAC a Dask message carries: the fit, the run's key, both ranks, the array's kind."""
    text = repr((fit_id, tuple(key), sender, receiver, tuple(shape), str(dtype)))
    return hmac.new(secret, text.encode(), hashlib.sha256).digest()[:16]


class FitState:
    """One fit's state on one worker: replicas, channels, mailbox, communicators.

    Parameters
    ----------
    fit_id : str
    secret : bytes
        The fit's secret (from the driver, through Dask).
    size : int
        The number of replicas.
    transport : {'sockets', 'dask'}
    settings : Settings
        The channels' deadlines.
    """

    def __init__(self, fit_id, secret, size, transport, settings):
        self.fit_id, self.secret, self.size = fit_id, secret, size
        self.transport, self.settings = transport, settings
        self.lock = threading.Condition()
        self.mailbox = {}  # (run, step, phase, from, to) -> array, for the 'dask' transport
        self.aborted = -1  # the last run the driver stopped
        self.replicas = {}  # rank -> _Replica
        self.channels = {}  # (link, rank) -> the rank's connections to its peers
        self.communicators = {}  # NCCL, by (the replicas' workers, rank)
        self.lease = set()  # keys of the fit's data on this worker
        self.listener = None
        self.released = False

    def open(self, host):
        """Open the listener for the replicas' channels (a ``'sockets'`` fit); its address."""
        if self.transport == "sockets" and self.listener is None:
            self.listener = Listener(host, self.fit_id, self.secret, self.size, self.settings)
        return None if self.listener is None else self.listener.address

    def deliver(self, key, sender, receiver, message, tag):
        """File a peer's Dask message, if it proves it comes from the fit."""
        shape, dtype = getattr(message, "shape", None), getattr(message, "dtype", None)
        expected = message_tag(self.secret, self.fit_id, key, sender, receiver, shape, dtype)
        if not isinstance(tag, bytes) or not hmac.compare_digest(tag, expected):
            logger.warning(
                "DataParallel: dropped a message for fit %s that failed its check", self.fit_id
            )
            return
        with self.lock:
            if key[0] > self.aborted and not self.released:
                self.mailbox[(*key, sender, receiver)] = message
                self.lock.notify_all()

    def abort(self, run):
        """Stop the replicas waiting in run ``run`` or an earlier one; close their channels."""
        with self.lock:
            self.aborted = max(run, self.aborted)
            for key in [key for key in self.mailbox if key[0] <= run]:
                del self.mailbox[key]
            channels, self.channels = self.channels, {}
            self.lock.notify_all()
        for connections in channels.values():
            connections.close()

    def release(self):
        """Everything the fit holds here goes: channels, listener, replicas, communicators."""
        with self.lock:
            self.released = True
            self.aborted = sys.maxsize
            channels, self.channels = self.channels, {}
            communicators, self.communicators = self.communicators, {}
            self.mailbox.clear()
            self.replicas.clear()
            self.lock.notify_all()
        for connections in channels.values():
            connections.close()
        if self.listener is not None:
            self.listener.close()
        release_communicators(communicators)

    def check(self):
        if self.released:
            raise ChannelError(f"DataParallel fit {self.fit_id} ended on this worker")


@functools.cache
def _plugin_class():
    """The worker plugin's class (Dask is imported only where a fit runs)."""
    distributed = sys.modules["distributed"]

    class FitPlugin(distributed.WorkerPlugin):
        """Holds a :class:`FitState` on one worker; releases it on teardown or lost lease."""

        def __init__(self, state):
            self.state = state
            self.worker = None

        def setup(self, worker):
            self.worker = worker
            if HANDLER not in worker.handlers:  # one handler a worker, for every fit
                worker.handlers[HANDLER] = _handler(worker)

        def teardown(self, worker):
            self.state.release()

        def transition(self, key, start, finish, **kwargs):
            lease = self.state.lease
            if key in lease and finish in ("released", "forgotten"):
                lease.discard(key)
                if not lease:  # the driver let go of the fit's data here: it ended or died
                    self.worker.loop.add_callback(uninstall, self.state.fit_id, self.worker)

    return FitPlugin


def _handler(worker):
    """The worker's handler of the replicas' Dask messages (Dask names handlers by function)."""

    async def sknet_dataparallel_deliver(**message):
        return await _deliver(worker, **message)

    return sknet_dataparallel_deliver


async def _deliver(
    worker, fit_id=None, key=None, sender=None, receiver=None, message=None, tag=None
):
    """Handler on a worker's event loop: file a peer's message with the fit it is for."""
    plugin = worker.plugins.get(plugin_name(str(fit_id)))
    if plugin is None or not hasattr(plugin, "state"):
        logger.warning("DataParallel: dropped a message for a fit not on this worker")
        return "unknown"
    try:
        plugin.state.deliver(tuple(key), int(sender), int(receiver), message, tag)
    except (TypeError, ValueError):
        logger.warning("DataParallel: dropped a malformed message")
    return "OK"


async def install(fit_id, secret, size, transport, settings, leases, dask_worker=None):
    """On a worker (``client.run``): the fit's state here, created once; its channel address.

    ``leases[address]``: the keys of the fit's data put on each worker; the
    state goes when the driver lets go of all of this worker's.
    """
    name = plugin_name(fit_id)
    plugin = dask_worker.plugins.get(name)
    if plugin is None:
        plugin = _plugin_class()(FitState(fit_id, secret, size, transport, settings))
        await dask_worker.plugin_add(plugin, name=name, catch_errors=False)
    state = plugin.state
    state.lease.update(leases.get(dask_worker.address, ()))
    if transport != "sockets":
        return None
    distributed = sys.modules["distributed"]
    location = distributed.comm.parse_address(dask_worker.address)[1]
    host, _ = distributed.comm.parse_host_port(location)
    return state.open(host)


async def uninstall(fit_id, dask_worker=None):
    """On a worker: drop the fit's state (the fit ended)."""
    if plugin_name(fit_id) in dask_worker.plugins:
        await dask_worker.plugin_remove(plugin_name(fit_id))


def abort(fit_id, run, dask_worker=None):
    """On a worker: stop the replicas of ``fit_id`` waiting in run ``run`` or an earlier one."""
    state = state_of(dask_worker, fit_id, missing_ok=True)
    if state is not None:
        state.abort(run)


def state_of(worker, fit_id, missing_ok=False):
    """The fit's state on ``worker``."""
    plugin = worker.plugins.get(plugin_name(fit_id))
    if plugin is None or plugin.state.released:
        if missing_ok:
            return None
        raise ChannelError(f"DataParallel fit {fit_id} has no state on worker {worker.address}")
    return plugin.state

"""The driver of a DataParallel fit: shards, epochs on the workers, failures.

The driver runs in the process that calls ``fit``; it is the epoch runner the
estimator's own fit hands its batches to (``batches_run_by``). It draws the
fit's id and secret, installs the fit's state on each worker
(:mod:`~sknet.distributed._state`: every worker at once, through Dask), cuts
the rows into one shard per worker once (:meth:`_Driver._place`), and for
every epoch cuts the driver's permutation into the global batches one process
would train on (:func:`~sknet.distributed._epochs.plan_epoch`) and runs the
epoch on all the replicas at once (:func:`~sknet.distributed._worker._run_epoch`).
The replicas synchronize with each other, worker to worker
(:mod:`~sknet.distributed._exchange`); the client sends each epoch's plan (and
the model, only when it changed on the driver: a callback, a warm start, a
retry) and reads the synchronized model back from one replica after the
epoch. The driver waits on the futures' own callbacks, and looks at the
workers every ``_POLL_SECONDS``.

A run that cannot complete runs again, at most ``_MAX_RETRIES`` times: a lost
worker's shard goes to another worker (or the fit stops with
:class:`WorkerLostError`); replicas that cannot reach each other with every
worker alive end the fit with a ``ConnectionError`` naming the address and
what must be open between the workers. Either way ``estimator_`` keeps the
model of the last complete epoch.
"""

import secrets
import threading
import time

import numpy as np

from sknet.distributed._channel import ChannelError, RunAborted
from sknet.distributed._channel import settings as channel_settings
from sknet.distributed._epochs import (
    _keys,
    _load,
    _nbytes,
    _same_state,
    _template,
    history_rows,
    plan_epoch,
)
from sknet.distributed._state import abort, install, uninstall
from sknet.distributed._tables import frame_shards, submit_shard
from sknet.distributed._worker import (
    RunInfo,
    _dask_shard,
    _run_epoch,
    replica_state,
    training_flags,
)
from sknet.engine._callbacks import overrides
from sknet.engine._types import StopTraining

#: Seconds between checks that the workers of a running epoch are alive.
_POLL_SECONDS = 0.25
#: How long to wait for a worker to run a lost shard on, in seconds.
_WAIT_FOR_WORKER_SECONDS = 60.0
#: Times one epoch may run again (a worker lost, or the replicas unable to finish).
_MAX_RETRIES = 3
#: How long a replica may have stopped (a peer unreachable) before the epoch runs again
#: with no worker known to be lost, in seconds.
_STOPPED_SECONDS = 10.0
#: What must be open between the workers, by transport.
OPEN_BETWEEN_WORKERS = {
    "sockets": (
        "each worker must accept TCP connections from the other workers on the port its "
        "DataParallel channel listens on (a free port on the host of the worker's Dask "
        "address, opened when a fit starts), as well as on the workers' Dask ports; or run "
        "the cluster with TLS, and the arrays travel on the workers' Dask ports"
    ),
    "dask": "each worker must reach the other workers' Dask ports",
}


class WorkerLostError(RuntimeError):
    """A Dask worker died during a fit and its shard could not be trained elsewhere.

    Attributes
    ----------
    workers : list of str
        The addresses of the workers that were lost.
    """

    def __init__(self, message, workers):
        super().__init__(message)
        self.workers = list(workers)


class _Shard:
    """Rows ``[start, stop)`` of the driver's estimator, on one worker."""

    def __init__(self, index, start, stop, worker):
        self.index, self.start, self.stop = index, start, stop
        self.worker = worker
        self.data = self.template = None  # futures on the worker
        self.dask_blocks = self.keep = None  # Dask input: which blocks, which of their rows
        self.frame_parts = None  # a Dask DataFrame's: which partitions

    @property
    def n_rows(self):
        return self.stop - self.start


class _Waiter:
    """Wakes the driver when one of a run's futures is done: no polling of the futures."""

    def __init__(self, futures):
        self._event = threading.Event()
        for future in futures:
            future.add_done_callback(self._done)

    def _done(self, _future):
        self._event.set()

    def wait(self, timeout):
        self._event.wait(timeout)
        self._event.clear()


def _wait_for(futures, timeout=None):
    """Wait until no future is pending, or ``timeout`` seconds (whichever client they have).

    ``distributed.wait`` would use the default client, which need not be the fit's.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    waiter = _Waiter(futures)
    while any(f.status == "pending" for f in futures):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        waiter.wait(left)


class _Driver:
    """Runs each epoch's batches on the workers: the epoch runner of ``batches_run_by``."""

    def __init__(self, client, distributed, estimator, inputs, workers, meta):
        self.client, self.distributed = client, distributed
        self.estimator, self.inputs = estimator, inputs
        self.workers = workers
        self.mode = "gradients" if meta.sync_every == 1 else "average"
        self.sync_every = None if meta.sync_every == "epoch" else int(meta.sync_every)
        self.retry = meta.on_worker_loss == "retry"
        self.device = estimator.device
        self.fit_id = secrets.token_hex(16)
        self._secret = secrets.token_bytes(32)  # travels to the workers through Dask only
        self.transport = _transport(client, workers)
        self.shards, self.devices = [], []
        self.history, self.epochs = [], []
        self.failure = None
        self._epoch = self._run = self._link = 0
        self._synced = None  # the model read back after the last epoch
        self._pending = {}
        self._addresses = {}  # worker -> its channel's address ('sockets')

    # -- the epoch runner ---------------------------------------------------------
    def __call__(self, trainer, data, optimizer, *, batch_size, rows, w, sw_sums, on_batch):
        self._epoch += 1
        try:
            return self._epoch_on_workers(trainer, data, optimizer, batch_size, rows, w, on_batch)
        except StopTraining:
            raise
        except Exception as exc:
            if self._client_running():
                raise
            self.failure = RuntimeError(
                f"The Dask client was closed during epoch {self._epoch} of DataParallel.fit "
                f"(status {self.client.status!r}); estimator_ holds the model of the last "
                f"complete epoch (history_ has {len(self.estimator.history_)} epoch(s))."
            )
            self.failure.__cause__ = exc
            raise StopTraining from exc

    def _client_running(self):
        return getattr(self.client, "status", "running") == "running"

    def _epoch_on_workers(self, trainer, data, optimizer, batch_size, rows, w, on_batch):
        if not self._client_running():
            raise RuntimeError("the client is closed")
        if not self.shards:
            self._place(trainer, data)
        started = time.perf_counter()
        # The model's first epoch synchronizes every batch, whatever sync_every: local
        # steps from the initial weights drift apart the most (the warm-up of post-local
        # SGD, Lin et al. 2020); measured, it takes 'epoch' from -0.30 to +0.02 points.
        mode = "gradients" if not self.estimator.history_ else self.mode
        plans, sums, sizes = plan_epoch(
            self.shards, rows, w, batch_size, mode=mode, sync_every=self.sync_every
        )
        rates = batch_learning_rates(trainer, len(sizes))
        if rates is not None:  # a per-batch schedule: the workers step with its rates
            plans = [plan._replace(rates=rates) for plan in plans]
        start = replica_state(trainer, optimizer)
        push = self._synced is None or not _same_state(start, self._synced)
        retries, sent = 0, 0
        while True:
            results, nbytes, lost, errors = self._try_epoch(plans, start if push else None, start)
            sent += nbytes
            if results is not None:
                break
            if lost:
                if not self.retry or retries >= _MAX_RETRIES:
                    self._give_up([self.shards[k].worker for k in lost])
                self._move(lost)
            elif retries >= _MAX_RETRIES:  # no worker lost: the replicas cannot finish a run
                self._unreachable(errors, retries + 1)
            retries += 1
            push = True  # every replica starts the epoch again from the driver's model
        state = results[0]["state"]
        _load(trainer, optimizer, state)
        self._synced = {**state, "flags": training_flags(trainer.network)}
        syncs, epoch_row = history_rows(results, self._epoch, retries, sent, started)
        self.history.extend(syncs)
        self.epochs.append(epoch_row)
        for r in results:
            if r["device"] not in self.devices:
                self.devices.append(r["device"])
        if on_batch is not None:
            for b in np.flatnonzero(sums):
                on_batch(int(b), int(sizes[b]))
        return sum(r["loss"] for r in results)

    # -- placing the shards -------------------------------------------------------
    def _place(self, trainer, data):
        n = data.X.shape[0]
        k = min(len(self.workers), n)
        if self.inputs.dask_X is not None:
            self.shards, self._dask_X = _dask_block_shards(
                self.client, self.distributed, self.inputs, self.workers, k
            )
        elif self.inputs.frame is not None:  # encoded where the partitions are, by the plan
            self.inputs.frame.plan = getattr(self.estimator, "encoder_", None)
            self.shards = []
            for parts, start, stop, worker in frame_shards(self.inputs.frame, self.workers, k):
                self.shards.append(_Shard(len(self.shards), start, stop, worker))
                self.shards[-1].frame_parts = parts
        else:
            bounds = [round(i * n / k) for i in range(k + 1)]
            self.shards = [_Shard(i, bounds[i], bounds[i + 1], self.workers[i]) for i in range(k)]
        self._template = _template(self.estimator, trainer, self.device, self.mode)
        self._data = data
        workers = [shard.worker for shard in self.shards]
        self._install(workers)  # every worker at once: each loads sknet, opens its channel
        for shard in self.shards:
            self._put(shard, shard.worker)
        self._install([shard.worker for shard in self.shards])  # the lease on the shards' keys

    def _install(self, workers):
        """The fit's state on ``workers``, with a lease on their shards' keys; their channels."""
        workers = sorted(set(workers))
        leases = {
            w: [key for s in self.shards if s.worker == w for key in _keys((s.data, s.template))]
            for w in workers
        }
        found = self.client.run(
            install,
            self.fit_id,
            self._secret,
            len(self.shards),
            self.transport,
            channel_settings(),
            leases,
            workers=workers,
        )
        self._addresses.update(found)

    def _put(self, shard, worker):
        """The shard's rows and the replica's template on ``worker``, or another if it died."""
        for attempt in range(_MAX_RETRIES + 1):
            try:
                return self._put_on(shard, worker)
            except Exception:
                if worker in self.client.nthreads() or attempt == _MAX_RETRIES:
                    raise
                if not self.retry:
                    self._give_up([worker])
                worker = self._replacement({worker})

    def _put_on(self, shard, worker):
        client, data = self.client, self._data
        sl = slice(shard.start, shard.stop)
        Y = np.asarray(data.Y[sl])
        w = None if data.w is None else np.asarray(data.w[sl])
        if shard.frame_parts is not None:
            frame, dtype = self.inputs.frame, self._template.dtype
            shard.data = submit_shard(client, frame, shard.frame_parts, Y, w, dtype, worker)
        elif shard.dask_blocks is None:
            shard.data = client.scatter((data.X[sl], Y, w), workers=[worker], hash=False)
        else:
            shard.data = client.submit(
                _dask_shard,
                shard.keep,
                Y,
                w,
                self._template.dtype,
                *shard.dask_blocks,
                workers=[worker],
                allow_other_workers=False,
                pure=False,
            )
        shard.template = client.scatter(self._template, workers=[worker], hash=False)
        shard.worker = worker

    # -- one epoch ------------------------------------------------------------------
    def _try_epoch(self, plans, state, start):
        """Run the epoch on every replica: their results, or None, the lost shards and
        the replicas' errors when it must run again."""
        self._run += 1
        client = self.client
        peers = [shard.worker for shard in self.shards]
        addresses = [self._addresses.get(worker) for worker in peers]
        sent = sum(_nbytes(tuple(plan)) for plan in plans)
        payload = None
        if state is not None:  # once through the client; the other workers fetch it from there
            (payload,) = client.scatter([state], workers=[peers[0]], hash=False, direct=True)
            sent += _nbytes(state)
        scalars = start["optimizer"][1]
        self._pending = {
            k: client.submit(
                _run_epoch,
                shard.data,
                shard.template,
                RunInfo(self.fit_id, self._run, self._link, k, peers, addresses),
                plans[k],
                payload,
                scalars,
                k == 0,
                workers=[shard.worker],
                allow_other_workers=False,
                pure=False,
            )
            for k, shard in enumerate(self.shards)
        }
        waiter = _Waiter(self._pending.values())
        results, lost, errors, stopped_at = {}, [], {}, None
        while self._pending:
            finished, lost, stopped = self._wait(self._pending, waiter)
            results.update(finished)
            errors.update(stopped)
            for k in [*finished, *stopped]:
                del self._pending[k]
            if lost:
                break
            if errors:  # a replica stopped: the scheduler may soon say which worker was lost
                stopped_at = stopped_at or time.monotonic()
                if time.monotonic() - stopped_at > _STOPPED_SECONDS:
                    break
        if not errors and not lost:
            return [results[k] for k in range(len(self.shards))], sent, [], {}
        self._stop_run()
        alive = set(client.nthreads())  # workers that died together are all known by now
        lost = sorted(set(lost) | {k for k, s in enumerate(self.shards) if s.worker not in alive})
        return None, sent, lost, errors

    def _move(self, lost):
        """Each lost shard, with its rows and template, to another worker."""
        dead = {self.shards[k].worker for k in lost}
        for k in lost:
            self._put(self.shards[k], self._replacement(dead))
        self._install([self.shards[k].worker for k in lost])

    def _wait(self, pending, waiter):
        """Results that came back, shards whose worker died, and the replicas that stopped
        (with their errors)."""
        if not self._client_running():
            raise RuntimeError("the client is closed")
        waiter.wait(_POLL_SECONDS)  # the epoch's end, a loss or an error, or a look at the workers
        alive = set(self.client.nthreads())
        finished, gone, stopped = {}, [], {}
        for k, future in pending.items():
            if future.status == "finished":
                finished[k] = future.result()
                continue
            error = future.exception() if future.status == "error" else None
            if isinstance(error, RunAborted):
                stopped[k] = error  # a peer lost (then in `gone` soon) or unreachable
            elif error is not None and not self._is_worker_loss(error):
                self._stop_run()  # the other replicas wait for this one: stop them first
                raise error  # a real error (bad data, a bug)
            elif future.status in ("error", "cancelled", "lost") or (
                self.shards[k].worker not in alive
            ):
                gone.append(k)
        return finished, gone, stopped

    def _stop_run(self):
        """Stop the replicas of the current run and wait until none is still training."""
        client, futures = self.client, self._pending
        self._link += 1  # the next run opens new channels between the replicas
        workers = sorted({s.worker for s in self.shards} & set(client.nthreads()))
        client.run(abort, self.fit_id, self._run, workers=workers, on_error="ignore")
        deadline = time.monotonic() + _WAIT_FOR_WORKER_SECONDS
        waiter = _Waiter(futures.values())
        while time.monotonic() < deadline:
            alive = set(client.nthreads())
            running = [
                f
                for k, f in futures.items()
                if f.status == "pending" and self.shards[k].worker in alive
            ]
            if not running:
                break
            waiter.wait(_POLL_SECONDS)
        client.cancel(list(futures.values()))
        self._pending = {}

    def _is_worker_loss(self, exc):
        lost = (self.distributed.KilledWorker, self.distributed.comm.CommClosedError)
        return isinstance(exc, lost)

    def _replacement(self, dead):
        """A live worker for a lost shard (none of the ``dead``): one holding no shard if
        possible."""
        deadline = time.monotonic() + _WAIT_FOR_WORKER_SECONDS
        while True:
            alive = sorted(set(self.client.nthreads()) - set(dead))
            if alive:
                load = {w: sum(s.worker == w for s in self.shards) for w in alive}
                return min(alive, key=lambda w: (load[w], alive.index(w)))
            if time.monotonic() > deadline:
                self._give_up(sorted(dead))
            time.sleep(_POLL_SECONDS)  # a nanny restarting a worker

    def _give_up(self, lost):
        self.failure = _worker_lost(lost, self._epoch, self.estimator, self.retry)
        raise StopTraining

    def _unreachable(self, errors, runs):
        """The replicas could not finish a run, with no worker lost: a ConnectionError."""
        self.failure = _unreachable(errors, runs, self._epoch, self.estimator, self.transport)
        raise StopTraining

    def close(self):
        """Stop what still runs and release the fit's state on the workers."""
        futures = [f for s in self.shards for f in (s.data, s.template) if f is not None]
        futures += list(self._pending.values())
        if futures and self._client_running():
            workers = list(self.client.nthreads())
            for step in (
                lambda: self.client.run(abort, self.fit_id, self._run, workers=workers),
                lambda: self.client.cancel(futures),
                lambda: self.client.run(uninstall, self.fit_id, workers=workers),
            ):
                try:
                    step()
                except Exception:  # noqa: BLE001,PERF203 (a closing cluster: nothing to free)
                    pass
        self._data = self._dask_X = None


def _worker_lost(lost, epoch, estimator, retry):
    names = ", ".join(sorted(set(lost)))
    return WorkerLostError(
        f"Dask worker(s) {names} died during epoch {epoch} of DataParallel.fit; estimator_ "
        f"holds the model of the last epoch (history_ has {len(estimator.history_)} "
        "epoch(s)). "
        + (
            "on_worker_loss='raise': the shard was not retrained elsewhere."
            if not retry
            else f"Retrying on another worker failed {_MAX_RETRIES} times."
        ),
        sorted(set(lost)),
    )


def _unreachable(errors, runs, epoch, estimator, transport):
    reasons = [str(e) for e in errors.values() if isinstance(e, ChannelError)]
    reasons = reasons or [str(e) for e in errors.values()]
    return ConnectionError(
        f"The replicas of DataParallel.fit could not complete epoch {epoch} in {runs} "
        f"run(s), with every worker alive: {'; '.join(sorted(set(reasons)))}. Between the "
        f"workers, {OPEN_BETWEEN_WORKERS[transport]}. estimator_ holds the model of the last "
        f"complete epoch (history_ has {len(estimator.history_)} epoch(s))."
    )


def _transport(client, workers):
    """``'sockets'`` between plain ``tcp://`` workers, else Dask's comms (TLS, in-process)."""
    security = getattr(client, "security", None)
    encrypted = bool(getattr(security, "require_encryption", False))
    plain = all(w.startswith("tcp://") for w in workers)
    return "sockets" if plain and not encrypted else "dask"


def _dask_block_shards(client, distributed, inputs, workers, k):
    """Contiguous groups of a Dask X's blocks, one a shard, each where most of it lives."""
    X = inputs.dask_X
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    if X.numblocks[0] < k:
        X = X.rechunk({0: -(-X.shape[0] // k)})
    X = client.persist(X)
    keys = [key[0] for key in X.__dask_keys__()]
    futures = {f.key: f for f in distributed.futures_of(X)}
    _wait_for(list(futures.values()))
    who_has = client.who_has(list(futures.values()))
    edges = np.concatenate([[0], np.cumsum(X.chunks[0])])
    n_global = int(edges[-1])
    cuts = [int(np.argmin(np.abs(edges - i * n_global / k))) for i in range(k + 1)]
    cuts = sorted(set(cuts))
    rows = inputs.rows
    free = list(workers)
    shards = []
    for i in range(len(cuts) - 1):
        lo, hi = int(edges[cuts[i]]), int(edges[cuts[i + 1]])
        start, stop = np.searchsorted(rows, [lo, hi])
        blocks = [futures[key] for key in keys[cuts[i] : cuts[i + 1]]]
        held = {}
        for block in blocks:
            for worker in who_has.get(block.key, ()):
                held[worker] = held.get(worker, 0) + 1
        worker = max(free, key=lambda w: (held.get(w, 0), -free.index(w)))
        free.remove(worker)
        shard = _Shard(len(shards), int(start), int(stop), worker)
        shard.dask_blocks, shard.keep = blocks, rows[start:stop] - lo
        shards.append(shard)
    return shards, X  # X keeps the blocks (and their graph) alive


def batch_learning_rates(trainer, n_batches):
    """The epoch's per-batch learning rates a callback schedules, or None (see
    :meth:`~sknet.callbacks.Callback.batch_learning_rates`)."""
    rates = None
    for callback in trainer.callbacks:
        if overrides(callback, "batch_learning_rates"):
            given = callback.batch_learning_rates(trainer.state, n_batches)
            if given is not None:
                rates = np.asarray(given, dtype=np.float64)
                if rates.shape != (n_batches,) or not np.isfinite(rates).all():
                    raise ValueError(
                        f"{type(callback).__name__}.batch_learning_rates must return one "
                        f"finite rate for each of the epoch's {n_batches} batches, got "
                        f"{given!r:.80}"
                    )
    return rates


def check_batch_callbacks(callbacks):
    """Refuse, before a DataParallel fit, a callback whose ``on_batch_end`` must run
    where the batches run: the workers, which run no callback."""
    changing = [
        callback
        for callback in callbacks or ()
        if overrides(callback, "on_batch_end")
        and not getattr(callback, "observes_batches", False)
        and not overrides(callback, "batch_learning_rates")
    ]
    if changing:
        name = type(changing[0]).__name__
        raise ValueError(
            f"DataParallel runs each epoch's batches on the workers, but {name}.on_batch_end "
            "would run on the driver, after the epoch's batches: too late to change them. "
            f"A callback whose on_batch_end only reads the fit sets {name}.observes_batches "
            "= True; one that schedules the learning rate batch by batch gives its rates "
            "by batch_learning_rates(state, n_batches), as LRScheduler does; or act in "
            "on_epoch_begin / on_epoch_end."
        )

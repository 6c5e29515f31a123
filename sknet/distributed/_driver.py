"""The driver of a DataParallel fit: shards, periods, averages, worker losses.

The driver runs in the process that calls ``fit``. :class:`_Inputs` decides
where the rows of ``X`` are (NumPy scattered once, a Dask array's blocks left
on the workers); :class:`_Driver` is the epoch runner the estimator's own fit
hands its batches to: it cuts each epoch's permutation into one order per
shard, runs periods of ``sync_every`` batches on the workers
(:mod:`~sknet.distributed._worker`), averages their states, and retries or
reports a lost worker.
"""

import itertools
import math
import time
import types

import numpy as np
from sklearn.base import is_classifier
from sklearn.model_selection import train_test_split

from sknet.distributed._worker import (
    _dask_shard,
    _forget,
    _train_period,
    layer_states,
    replica_state,
)
from sknet.engine._types import StopTraining

#: Seconds between checks that the workers of a running period are alive.
_POLL_SECONDS = 0.25
#: How long to wait for a worker to run a lost shard on, in seconds.
_WAIT_FOR_WORKER_SECONDS = 60.0
#: States larger than this are scattered to the workers before a period (not sent per task).
_SCATTER_BYTES = 4 << 20
#: Times one period may lose a worker before the fit gives up.
_MAX_RETRIES = 3
#: The estimator's parameters the workers need to make its optimizer.
_OPTIMIZER_PARAMETERS = (
    "solver",
    "learning_rate_init",
    "learning_rate",
    "momentum",
    "nesterovs_momentum",
    "power_t",
    "beta_1",
    "beta_2",
    "epsilon",
)


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


class _Inputs:
    """What the driver's estimator fits on, and where the rows of ``X`` are.

    NumPy (or sparse) ``X`` goes to the estimator as it is: its own validation
    runs on the driver, and the driver scatters the validated rows. A Dask
    ``X`` stays on the workers: the estimator gets a stand-in of the same
    shape that takes no memory (every row the same zero row), the workers
    check their blocks, and ``rows`` maps the estimator's rows to the array's
    (the early-stopping validation rows are taken out and gathered).
    """

    def __init__(self, X, y, sample_weight, fit_params, dask_X=None, rows=None):
        self.X, self.y, self.sample_weight = X, y, sample_weight
        self.fit_params = fit_params
        self.dask_X = dask_X
        self.rows = rows

    @classmethod
    def prepare(cls, estimator, X, y, sample_weight, fit_params, da, distributed):
        y, sample_weight = (_gather(a, da) for a in (y, sample_weight))
        fit_params = {k: _gather(v, da) for k, v in fit_params.items()}
        if not isinstance(X, da.Array):
            return cls(X, y, sample_weight, fit_params)
        if X.ndim != 2:
            raise ValueError(f"A Dask array X must be 2-D, got {X.ndim} dimension(s)")
        if any(math.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
        if y is None or len(y) != X.shape[0]:
            raise ValueError(
                f"X and y have inconsistent numbers of samples: {X.shape[0]} and "
                f"{None if y is None else len(y)}"
            )
        rows = np.arange(X.shape[0])
        if estimator.early_stopping and fit_params.get("X_val") is None:
            rows, val = _validation_rows(estimator, y)
            fit_params = {**fit_params, "X_val": X[val].compute(), "y_val": _take(y, val)}
            if sample_weight is not None:
                fit_params["sample_weight_val"] = sample_weight[val]
            y = _take(y, rows)
            sample_weight = None if sample_weight is None else sample_weight[rows]
        dtype = np.dtype(estimator.dtype)
        stand_in = np.lib.stride_tricks.as_strided(
            np.zeros(X.shape[1], dtype), (rows.shape[0], X.shape[1]), (0, dtype.itemsize)
        )
        stand_in.flags.writeable = False
        return cls(stand_in, y, sample_weight, fit_params, dask_X=X, rows=rows)


def _gather(a, da):
    return a.compute() if isinstance(a, da.Array) else a


def _take(y, rows):
    return y.iloc[rows] if hasattr(y, "iloc") else np.asarray(y)[rows]


def _validation_rows(estimator, y):
    """The early-stopping split of a Dask fit: rows to train on and to validate on."""
    y_array = np.asarray(y)
    stratify = y_array if is_classifier(estimator) and y_array.ndim == 1 else None
    train, val = train_test_split(
        np.arange(y_array.shape[0]),
        test_size=estimator.validation_fraction,
        stratify=stratify,
        random_state=estimator.random_state,
    )
    if val.shape[0] < 2:
        raise ValueError(
            "The validation set is too small. Increase 'validation_fraction' "
            "or the size of your dataset."
        )
    return np.sort(train), np.sort(val)


class _Shard:
    """Rows ``[start, stop)`` of the driver's estimator, on one worker."""

    def __init__(self, index, start, stop, worker):
        self.index, self.start, self.stop = index, start, stop
        self.worker = worker
        self.data = self.template = None  # futures on the worker
        self.dask_blocks = self.keep = None  # Dask input: which blocks, which of their rows

    @property
    def n_rows(self):
        return self.stop - self.start


class _Driver:
    """Runs each epoch's batches on the workers: the epoch runner of ``batches_run_by``."""

    _ids = itertools.count()

    def __init__(self, client, distributed, estimator, inputs, workers, meta):
        self.client, self.distributed = client, distributed
        self.estimator, self.inputs = estimator, inputs
        self.workers = workers
        self.sync_every = meta.sync_every
        self.retry = meta.on_worker_loss == "retry"
        self.device = estimator.device
        self.fit_id = f"sknet-dataparallel-{time.time_ns()}-{next(self._ids)}"
        self.shards, self.devices, self.history = [], [], []
        self.failure = None
        self._epoch = 0

    # -- the epoch runner ---------------------------------------------------------
    def __call__(self, trainer, data, optimizer, *, batch_size, rows, w, sw_sums, on_batch):
        if not self.shards:
            self._place(trainer, data)
        self._epoch += 1
        plans = self._plan_epoch(rows, w, batch_size)
        n_batches = max((len(p[1]) for p in plans.values()), default=0)
        period = n_batches if self.sync_every == "epoch" else self.sync_every
        total, done = 0.0, 0
        for first in range(0, max(n_batches, 1), max(period, 1)):
            tasks = {
                k: (
                    order[first * batch_size : (first + period) * batch_size],
                    sums[first : first + period],
                )
                for k, (order, sums) in plans.items()
                if first < len(sums)
            }
            if not tasks:
                break
            total += self._run_period(trainer, optimizer, tasks, batch_size, period)
            if on_batch is not None:
                for order, _ in tasks.values():
                    for start in range(0, len(order), batch_size):
                        on_batch(done, min(batch_size, len(order) - start))
                        done += 1
        return total

    def _plan_epoch(self, rows, w, batch_size):
        """Each shard's rows in the driver's order (local indices) and its batches' weight sums."""
        bounds = np.array([shard.start for shard in self.shards])
        owner = np.searchsorted(bounds, rows, side="right") - 1
        plans = {}
        for shard in self.shards:
            mine = rows[owner == shard.index]
            starts = np.arange(0, mine.shape[0], batch_size)
            if w is None:
                sums = np.minimum(batch_size, mine.shape[0] - starts).astype(np.float64)
            else:
                sums = np.add.reduceat(w[mine], starts) if mine.shape[0] else np.zeros(0)
            plans[shard.index] = ((mine - shard.start).astype(np.int64), sums)
        return plans

    # -- placing the shards -------------------------------------------------------
    def _place(self, trainer, data):
        n = data.X.shape[0]
        k = min(len(self.workers), n)
        if self.inputs.dask_X is not None:
            self._place_dask_blocks(data, k)
        else:
            bounds = [round(i * n / k) for i in range(k + 1)]
            self.shards = [_Shard(i, bounds[i], bounds[i + 1], self.workers[i]) for i in range(k)]
        self._template = _template(self.estimator, trainer, self.device, len(self.shards))
        self._data = data
        for shard in self.shards:
            self._put(shard, shard.worker)

    def _place_dask_blocks(self, data, k):
        """Contiguous groups of blocks, one a shard, each built where most of it lives."""
        X = self.inputs.dask_X
        if X.numblocks[1] > 1:
            X = X.rechunk({1: -1})
        if X.numblocks[0] < k:
            X = X.rechunk({0: -(-X.shape[0] // k)})
        X = self.client.persist(X)
        keys = [key[0] for key in X.__dask_keys__()]
        futures = {f.key: f for f in self.distributed.futures_of(X)}
        self.distributed.wait(list(futures.values()))
        who_has = self.client.who_has(list(futures.values()))
        edges = np.concatenate([[0], np.cumsum(X.chunks[0])])
        n_global = int(edges[-1])
        cuts = [int(np.argmin(np.abs(edges - i * n_global / k))) for i in range(k + 1)]
        cuts = sorted(set(cuts))
        rows = self.inputs.rows
        free = list(self.workers)
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
            shard = _Shard(len(self.shards), int(start), int(stop), worker)
            shard.dask_blocks, shard.keep = blocks, rows[start:stop] - lo
            self.shards.append(shard)
        self._dask_X = X  # keeps the blocks (and their graph) alive

    def _put(self, shard, worker):
        """The shard's rows and the replica's template, on ``worker``."""
        client, data = self.client, self._data
        sl = slice(shard.start, shard.stop)
        Y = np.asarray(data.Y[sl])
        w = None if data.w is None else np.asarray(data.w[sl])
        if shard.dask_blocks is None:
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

    # -- one period ------------------------------------------------------------------
    def _run_period(self, trainer, optimizer, tasks, batch_size, period):
        started = time.perf_counter()
        state = replica_state(trainer, optimizer)
        payload = state
        if _nbytes(state) > _SCATTER_BYTES:  # large models: one copy a worker, not a task
            (payload,) = self.client.scatter(
                [state],  # one object (a dict would be scattered item by item)
                workers=[self.shards[k].worker for k in tasks],
                broadcast=True,
                hash=False,
                direct=True,
            )
        results, retries, lost = {}, 0, []
        pending = {k: self._submit(k, payload, tasks[k], batch_size) for k in tasks}
        while pending:
            finished, gone = self._wait(pending)
            results.update(finished)
            for k in finished:
                del pending[k]
            if not gone:
                continue
            lost += [self.shards[k].worker for k in gone]
            if not self.retry or retries >= _MAX_RETRIES:
                self._give_up(lost, pending)
            retries += 1
            for k in gone:
                self._put(self.shards[k], self._replacement(self.shards[k].worker))
                pending[k] = self._submit(k, state, tasks[k], batch_size)  # not the scattered
        self._average(trainer, optimizer, [results[k] for k in sorted(results)])
        self.history.append(
            {
                "epoch": self._epoch,
                "batches": min(period, max(-(-len(o) // batch_size) for o, _ in tasks.values())),
                "rows": sum(r["rows"] for r in results.values()),
                "bytes_sent": _nbytes(state) * len(tasks),
                "bytes_received": sum(_nbytes(r["state"]) for r in results.values()),
                "seconds": time.perf_counter() - started,
                "compute_seconds": max(r["seconds"] for r in results.values()),
                "retries": retries,
            }
        )
        return sum(r["loss"] for r in results.values())

    def _submit(self, k, state, task, batch_size):
        shard = self.shards[k]
        order, sums = task
        return self.client.submit(
            _train_period,
            shard.data,
            shard.template,
            self.fit_id,
            k,
            state,
            order,
            sums,
            batch_size,
            workers=[shard.worker],
            allow_other_workers=False,
            pure=False,
        )

    def _wait(self, pending):
        """Results that came back, and shards whose worker died, since the last call."""
        from distributed.client import FuturesCancelledError

        distributed = self.distributed
        try:
            distributed.wait(list(pending.values()), timeout=_POLL_SECONDS)
        except (TimeoutError, distributed.TimeoutError, FuturesCancelledError):
            pass  # a worker died or the period is not over: see below
        alive = set(self.client.nthreads())
        finished, gone = {}, []
        for k, future in pending.items():
            if future.status == "finished":
                finished[k] = future.result()
            elif future.status == "error" and not _is_worker_loss(future.exception()):
                future.result()  # a real error (bad data, a bug): raise it here
            elif future.status in ("error", "cancelled", "lost") or (
                self.shards[k].worker not in alive
            ):
                future.cancel()
                gone.append(k)
        return finished, gone

    def _replacement(self, dead):
        """A live worker for a lost shard: one holding no shard if possible."""
        deadline = time.monotonic() + _WAIT_FOR_WORKER_SECONDS
        while True:
            alive = sorted(set(self.client.nthreads()) - {dead})
            if alive:
                load = {w: sum(s.worker == w for s in self.shards) for w in alive}
                return min(alive, key=lambda w: (load[w], alive.index(w)))
            if time.monotonic() > deadline:
                self._give_up([dead], {})
            time.sleep(_POLL_SECONDS)

    def _give_up(self, lost, pending):
        for future in pending.values():
            future.cancel()
        names = ", ".join(sorted(set(lost)))
        self.failure = WorkerLostError(
            f"Dask worker(s) {names} died during epoch {self._epoch} of "
            f"DataParallel.fit; estimator_ holds the model of the last synchronization "
            f"(history_ has {len(self.estimator.history_)} epoch(s)). "
            + (
                "on_worker_loss='raise': the shard was not retrained elsewhere."
                if not self.retry
                else f"Retrying on another worker failed {_MAX_RETRIES} times."
            ),
            sorted(set(lost)),
        )
        raise StopTraining

    def _average(self, trainer, optimizer, results):
        """Load the rows-weighted average of the replicas' states into the driver's model."""
        weights = np.array([r["rows"] for r in results], dtype=np.float64)
        weights /= weights.sum()
        states = [r["state"] for r in results]
        backend = trainer.backend
        mean = (
            _mean([s["params"] for s in states], weights)
            if len(states) > 1
            else states[0]["params"]
        )
        trainer.parameters.flat_params[...] = backend.asarray(mean)
        for i, target in enumerate(layer_states(trainer.network)):
            target[...] = backend.asarray(_mean([s["layer_states"][i] for s in states], weights))
        arrays = {
            name: [
                _mean([s["optimizer"][0][name][j] for s in states], weights)
                for j in range(len(states[0]["optimizer"][0][name]))
            ]
            for name in states[0]["optimizer"][0]
        }
        most = max(range(len(results)), key=lambda i: (results[i]["batches"], -i))
        optimizer.restore((arrays, states[most]["optimizer"][1]))
        for r in results:
            if r["device"] not in self.devices:
                self.devices.append(r["device"])

    def close(self):
        """Forget the shards and the replicas (the workers free their memory)."""
        futures = [f for s in self.shards for f in (s.data, s.template) if f is not None]
        if futures:
            try:
                self.client.cancel(futures)
                self.client.run(_forget, self.fit_id, workers=list(self.client.nthreads()))
            except Exception:  # noqa: BLE001 (a closing cluster: nothing left to free)
                pass
        self._data = self._dask_X = None


def _mean(arrays, weights):
    if len(arrays) == 1:
        return arrays[0]
    total = np.zeros(arrays[0].shape, dtype=np.float64)
    for array, weight in zip(arrays, weights):
        total += weight * array
    return total.astype(arrays[0].dtype)


def _nbytes(obj):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def _is_worker_loss(exc):
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    return isinstance(exc, (KilledWorker, CommClosedError))


def _template(estimator, trainer, device, n_shards):
    """What a worker builds its replica from (the network travels with its weights)."""
    return types.SimpleNamespace(
        network=trainer.network,
        loss=estimator._loss,
        alpha=trainer.alpha,
        clip_norm=trainer.clip_norm,
        hyper={name: getattr(estimator, name) for name in _OPTIMIZER_PARAMETERS},
        device=device,
        dtype=np.dtype(estimator.dtype),
        seed_offset=(estimator.t_, n_shards),
    )

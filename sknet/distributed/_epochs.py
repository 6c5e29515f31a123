"""What the driver sends the replicas each epoch and what it reads back.

:func:`plan_epoch` cuts an epoch's permutation into the global batches one
process trains on and tells each shard which of its rows are in which batch;
:func:`history_rows` turns the replicas' records into the rows of
``sync_history_`` and ``epoch_history_``; :func:`_template` is what a worker
builds its replica from. Plain NumPy: no Dask here.
"""

import time
import types

import numpy as np

from sknet.distributed._worker import EpochPlan, layer_states

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
    "weight_decay",
)


def _keys(futures):
    """The keys of the futures in ``futures`` (nested tuples: a scattered tuple's)."""
    if isinstance(futures, (tuple, list)):
        return [key for f in futures for key in _keys(f)]
    return [] if futures is None else [futures.key]


def _load(trainer, optimizer, state):
    """Put a replica's state (read back after an epoch) into the driver's model."""
    backend = trainer.backend
    trainer.parameters.flat_params[...] = backend.asarray(state["params"])
    for target, value in zip(layer_states(trainer.network), state["layer_states"]):
        target[...] = backend.asarray(value)
    optimizer.restore(state["optimizer"])


def _same_state(a, b):
    """Whether two :func:`replica_state` dicts hold the same arrays and flags."""
    if a["flags"] != b["flags"]:
        return False
    pairs = [(a["params"], b["params"]), *zip(a["layer_states"], b["layer_states"])]
    moments_a, moments_b = a["optimizer"][0], b["optimizer"][0]
    if moments_a.keys() != moments_b.keys():
        return False
    for name in moments_a:
        pairs += list(zip(moments_a[name], moments_b[name]))
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in pairs)


def _index_dtype(n):
    return np.int32 if n < 2**31 else np.int64


def _nbytes(obj):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def _optimizer_parameters(estimator):
    """The estimator's optimizer parameters, its initial rate as the fit resolved it
    (``learning_rate_init='auto'`` of the tabular estimators)."""
    hyper = {name: getattr(estimator, name) for name in _OPTIMIZER_PARAMETERS}
    optimizer = getattr(estimator, "_optimizer", None)
    if optimizer is not None:
        hyper["learning_rate_init"] = optimizer.learning_rate_init
    return hyper


def _template(estimator, trainer, device, mode):
    """What a worker builds its replica from (the network travels with its weights)."""
    return types.SimpleNamespace(
        network=trainer.network,
        loss=estimator._loss,
        alpha=trainer.alpha,
        clip_norm=trainer.clip_norm,
        hyper=_optimizer_parameters(estimator),
        device=device,
        dtype=np.dtype(estimator.dtype),
        samples_seen=estimator.t_,
        mode=mode,
    )


def plan_epoch(shards, rows, w, batch_size, *, mode, sync_every):
    """One :class:`EpochPlan` a shard: its rows of each global batch of the epoch."""
    n = rows.shape[0]
    starts = np.arange(0, n, batch_size)
    sizes = np.minimum(batch_size, n - starts)
    if w is None:
        sums = sizes.astype(np.float64)
    else:  # what one process divides each batch by (Trainer.run_epochs)
        sums = np.add.reduceat(w[rows], starts) if n else np.zeros(0)
    several = len(shards) > 1
    plans = []
    for shard in shards:  # a few bytes a row at a time: the driver of a large table holds them
        mine = np.flatnonzero((rows >= shard.start) & (rows < shard.stop))
        batch = mine // batch_size
        counts = np.bincount(batch, minlength=starts.shape[0])
        if not several:
            local_sums = sums
        elif w is None:
            local_sums = counts.astype(np.float64)
        else:
            local_sums = np.bincount(batch, weights=w[rows[mine]], minlength=starts.shape[0])
        positions = None
        if mode == "gradients" and several:
            positions = (mine - batch * batch_size).astype(np.int32)
        order = (rows[mine] - shard.start).astype(_index_dtype(shard.n_rows))
        plans.append(
            EpochPlan(order, counts, sizes, sums, local_sums, positions, sync_every, mode)
        )
    return plans, sums, sizes


def history_rows(results, epoch, retries, sent, started):
    """Rows of ``sync_history_`` (one a synchronization, from the replicas' records) and of
    ``epoch_history_`` (one for the epoch) for an epoch's ``results``."""
    records = np.stack([r["records"] for r in results])  # (replicas, syncs, fields)
    syncs = []
    for i in range(records.shape[1]):
        rows = records[:, i]
        syncs.append(
            {
                "epoch": epoch,
                "batches": int(rows[0, 0]),
                "rows": int(rows[:, 1].sum()),
                "bytes_between_workers": int(rows[:, 5].max()),
                "seconds": float(rows[:, 4].max() - rows[:, 3].max()),
                "compute_seconds": float(rows[:, 2].max()),
                "retries": retries,
            }
        )
    epoch_row = {
        "epoch": epoch,
        "syncs": int(records.shape[1]),
        "bytes_sent": int(sent),
        "bytes_received": int(sum(_nbytes(r) for r in results)),
        "seconds": time.perf_counter() - started,
        "compute_seconds": float(max(r["seconds"] for r in results)),
        "retries": retries,
        "transport": results[0]["transport"],
    }
    return syncs, epoch_row

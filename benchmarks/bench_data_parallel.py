"""Benchmark DataParallel: accuracy, speed-up, bytes and time per synchronization,
and a cost model of how many workers each ``sync_every`` keeps busy.

MLP 784-256-128-10 (ReLU, Adam, batch 128, float32) on a stratified 8,000/2,000
split of the MNIST test file, the same number of epochs everywhere:

- one process, one BLAS thread (``est.fit``);
- one process, two BLAS threads;
- ``DataParallel`` on a LocalCluster of 2 worker processes x 1 thread, with
  ``sync_every='epoch'`` and with ``sync_every=8`` (and any others given).

For every DataParallel run it reports the test accuracy (and its difference
from the one-process fit), the fit time and the speed-ups, the bytes one
synchronization moves (the averaged state out to each worker, each worker's
state back), the time the driver spends per synchronization outside the
workers' compute, and the compute per batch on a worker. The cost model then
says, for a 10 Gbit/s network, how many workers each ``sync_every`` would keep
at least half busy: the driver is a parameter server, so one synchronization
with K workers moves 2 K S bytes through its link (S: the state of one
replica) and costs ``latency + 2 K S / bandwidth``, against
``sync_every x compute per batch`` of training (per epoch: the shard's batches,
which shrink as K grows at a fixed data size).

    python benchmarks/bench_data_parallel.py --mnist-dir DIR [--epochs 15]
        [--sync-every epoch,8] [--json PATH]

Without the MNIST files (``--mnist-dir`` or ``SKNET_MNIST_DIR``), random pixels
stand in: the timings and bytes hold, the accuracies mean nothing (and say so).
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

try:
    import sknet  # noqa: F401
except ImportError:  # run as `python benchmarks/bench_data_parallel.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sknet import MLPClassifier
from sknet.datasets import MNIST_ENV_VAR, load_mnist

SEED = 0
NETWORK_BANDWIDTH = 10e9 / 8  # 10 Gbit/s in bytes per second
WORKER_COUNTS = (2, 4, 8, 16, 32, 64)
#: 2 worker processes x 1 thread on the loopback interface, no dashboard
CLUSTER = {
    "n_workers": 2,
    "threads_per_worker": 1,
    "processes": True,
    "host": "127.0.0.1",
    "dashboard_address": None,
}


def load_data(mnist_dir):
    """(X_train, y_train, X_test, y_test, source): 8,000/2,000 of the MNIST test file."""
    try:
        X, y = load_mnist(mnist_dir or os.environ.get(MNIST_ENV_VAR), subset="test")
        source = "MNIST test file, stratified 8,000/2,000 split"
    except (FileNotFoundError, ValueError) as exc:
        print(f"note: no MNIST ({exc}); random pixels stand in, accuracies mean nothing.")
        rng = np.random.RandomState(SEED)
        X, y = rng.rand(10000, 784).astype(np.float32), rng.randint(0, 10, 10000)
        source = "random pixels (no MNIST file)"
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=8000, test_size=2000, stratify=y, random_state=SEED
    )
    return X_train, y_train, X_test, y_test, source


def network(epochs):
    return MLPClassifier(
        hidden_layer_sizes=(256, 128),
        batch_size=128,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=epochs + 1,
        random_state=SEED,
        device="cpu",
    )


def fit_local(est, X, y, threads):
    with threadpool_limits(threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        est.fit(X, y)
        return time.perf_counter() - start


def fit_parallel(client, est, X, y, sync_every):
    from sknet.distributed import DataParallel

    model = DataParallel(est, client=client, sync_every=sync_every)
    with threadpool_limits(1), warnings.catch_warnings():  # the driver: one thread too
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        return model, time.perf_counter() - start


def sync_figures(model):
    """Per synchronization: bytes, the driver's time outside compute, compute per batch."""
    rows = model.sync_history_
    n = len(model.shard_rows_)
    return {
        "n_syncs": len(rows),
        "bytes_out": float(np.mean([r["bytes_sent"] for r in rows])),
        "bytes_back": float(np.mean([r["bytes_received"] for r in rows])),
        "state_bytes": float(np.mean([r["bytes_received"] for r in rows])) / n,
        "sync_s": float(np.median([r["seconds"] - r["compute_seconds"] for r in rows])),
        "compute_per_batch_s": float(
            np.sum([r["compute_seconds"] for r in rows]) / np.sum([r["batches"] for r in rows])
        ),
    }


def cost_model(figures, sync_every, n_rows, batch_size):
    """Workers kept busy on a 10 Gbit/s network, per count of workers K.

    Per synchronization: compute ``b(K) x t_batch`` (``b`` = sync_every, or the
    shard's batches per epoch), sync ``latency + 2 K S / bandwidth``; the
    latency is the per-sync time measured here, loopback transfer included (an
    upper bound).
    """
    t_batch, latency, state = (
        figures["compute_per_batch_s"],
        figures["sync_s"],
        figures["state_bytes"],
    )
    table = []
    for k in WORKER_COUNTS:
        shard_rows = -(-n_rows // k)
        per_worker = -(-shard_rows // batch_size)  # batches an epoch on one shard
        batches = per_worker if sync_every == "epoch" else min(int(sync_every), per_worker)
        compute = batches * t_batch
        sync = latency + 2 * k * state / NETWORK_BANDWIDTH
        busy = compute / (compute + sync)
        table.append(
            {"workers": k, "compute_s": compute, "sync_s": sync, "busy": busy, "speedup": k * busy}
        )
    kept = [row["workers"] for row in table if row["busy"] >= 0.5]
    return table, (max(kept) if kept else 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--sync-every", default="epoch,8")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    from dask.distributed import Client, LocalCluster

    X_train, y_train, X_test, y_test, source = load_data(args.mnist_dir)
    print(f"data: {source}; MLP 784-256-128-10, Adam, batch 128, {args.epochs} epochs")
    results = {"source": source, "epochs": args.epochs, "runs": {}}

    local = {}
    for threads in (1, 2):
        est = network(args.epochs)
        seconds = fit_local(est, X_train, y_train, threads)
        local[threads] = {"fit_s": seconds, "accuracy": est.score(X_test, y_test)}
        print(
            f"1 process x {threads} thread(s):      fit {seconds:6.1f} s, "
            f"test accuracy {local[threads]['accuracy']:.4f}"
        )
    results["local"] = local

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # start-up messages of the cluster
        cluster = LocalCluster(**CLUSTER)
        client = Client(cluster)
    try:
        for value in args.sync_every.split(","):
            sync_every = value if value == "epoch" else int(value)
            model, seconds = fit_parallel(
                client, network(args.epochs), X_train, y_train, sync_every
            )
            accuracy = model.score(X_test, y_test)
            figures = sync_figures(model)
            table, kept = cost_model(figures, sync_every, len(X_train), 128)
            results["runs"][value] = {
                "fit_s": seconds,
                "accuracy": accuracy,
                "speedup_vs_1x1": local[1]["fit_s"] / seconds,
                "speedup_vs_1x2": local[2]["fit_s"] / seconds,
                **figures,
                "cost_model": table,
                "workers_kept_busy": kept,
            }
            report(value, results["runs"][value], local[1]["accuracy"])
    finally:
        client.close()
        cluster.close()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


def report(value, run, local_accuracy):
    print(
        f"2 workers x 1 thread, sync_every={value}: fit {run['fit_s']:6.1f} s, test accuracy "
        f"{run['accuracy']:.4f} ({100 * (run['accuracy'] - local_accuracy):+.2f} points); "
        f"speed-up {run['speedup_vs_1x1']:.2f}x over 1x1, {run['speedup_vs_1x2']:.2f}x over 1x2"
    )
    print(
        f"  {run['n_syncs']} synchronizations: {run['bytes_out'] / 1e6:.2f} MB out, "
        f"{run['bytes_back'] / 1e6:.2f} MB back each ({run['state_bytes'] / 1e6:.2f} MB a "
        f"replica); {1e3 * run['sync_s']:.1f} ms each outside compute; compute "
        f"{1e3 * run['compute_per_batch_s']:.2f} ms a batch"
    )
    print("  cost model, 10 Gbit/s:  K  compute/sync  sync     busy  speed-up")
    for row in run["cost_model"]:
        print(
            f"  {row['workers']:>24}  {1e3 * row['compute_s']:9.1f} ms  "
            f"{1e3 * row['sync_s']:6.1f} ms  {row['busy']:5.0%}  {row['speedup']:6.1f}x"
        )
    print(
        f"  -> sync_every={value} keeps up to {run['workers_kept_busy']} workers "
        "at least half busy"
    )


if __name__ == "__main__":
    main()

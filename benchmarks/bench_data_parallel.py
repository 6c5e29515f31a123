"""Benchmark DataParallel: accuracy against one process, time and bytes per
synchronization, and a cost model of how many workers each ``sync_every``
keeps busy.

Accuracy, with the same epochs everywhere, on 2 worker processes x 1 thread
of a loopback LocalCluster against ``est.fit`` in one process (one BLAS
thread), for ``sync_every`` = 1, 8 and ``'epoch'`` (or those given):

- MNIST: the first 8,000 images of the MNIST test file to train, the last
  2,000 to test; MLP 784-256-128-10 (ReLU, Adam, batch 128, float32), 8 and
  15 epochs;
- the digits as a new user would try them: ``MLPClassifier(max_iter=20)``
  (100 hidden units, Adam, batch 200) on 75% of ``load_digits``, tested on the
  other 25%.

Each row gives the test accuracy and its difference from one process (the
mean over ``--seeds``; ``sync_every=1`` trains one process's model, so its
difference is 0 up to float rounding), and for DataParallel the fit time and,
after the first epoch (which synchronizes every batch whatever the setting),
the synchronizations an epoch, their median cost (``sync_history_['seconds']``:
from the last replica ready to all replicas done), the bytes one replica
sends the others per synchronization and the bytes through the client per
synchronization (``epoch_history_``: the epoch's plan out, one model back).

The sum over the replicas alone (the synchronization's primitive) is timed
for 10 values, the MLP's gradient and its averaged state, each way the
arrays travel: ``sockets`` (the authenticated channel of a plain TCP
cluster) and ``dask`` (Dask's messages, what a TLS cluster uses); with
``--baseline REV`` also the exchange of git revision ``REV`` (its
``sknet/distributed/_exchange.py``, loaded on the workers as a module of its
own and timed last, on the same cluster, in the same run), with the bytes a
replica sends for one sum, headers included. The cost model
(MNIST MLP): a synchronization with K workers costs
``latency + 2 (K - 1) / K x S / bandwidth`` (the fixed latency measured for
10 values; a reduce-scatter and an all-gather over a 10 Gbit/s network; S =
the gradient for ``sync_every=1``, the averaged state otherwise), against the
training between two synchronizations (a batch of B/K rows per worker,
``sync_every`` of them, or the epoch's). The driver of the previous design, a
parameter server on the client, moved ``2 K x state`` through one link per
synchronization with a measured ~45 ms of fixed latency; it is printed
alongside.

    python benchmarks/bench_data_parallel.py --mnist-dir DIR [--seeds 0,1,2]
        [--sync-every 1,8,epoch] [--epochs N] [--baseline REV] [--latency-only]
        [--json PATH]

Without the MNIST files (``--mnist-dir`` or ``SKNET_MNIST_DIR``) only the
digits rows run (and the cost model is the digits MLP's). ``--epochs N`` runs
every data set N epochs, once: a quick check; ``--latency-only`` times the
sums alone, for the MNIST MLP's sizes (no data needed).
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

try:
    import sknet  # noqa: F401
except ImportError:  # run as `python benchmarks/bench_data_parallel.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sknet import MLPClassifier
from sknet.datasets import MNIST_ENV_VAR, load_mnist

NETWORK_BANDWIDTH = 10e9 / 8  # 10 Gbit/s in bytes per second
WORKER_COUNTS = (2, 4, 8, 16, 32, 64)
#: The previous driver's fixed cost per synchronization, measured on this loopback cluster.
PARAMETER_SERVER_LATENCY = 0.045
#: 2 worker processes x 1 thread on the loopback interface, no dashboard
CLUSTER = {
    "n_workers": 2,
    "threads_per_worker": 1,
    "processes": True,
    "host": "127.0.0.1",
    "dashboard_address": None,
}


def mnist(mnist_dir):
    """(X_train, y_train, X_test, y_test): the first 8,000 and last 2,000 test images."""
    X, y = load_mnist(mnist_dir or os.environ.get(MNIST_ENV_VAR), subset="test")
    return X[:8000], y[:8000], X[8000:], y[8000:]


def digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.25, stratify=y, random_state=0
    )
    return X_train, y_train, X_test, y_test


def mnist_mlp(epochs, seed):
    return MLPClassifier(
        hidden_layer_sizes=(256, 128),
        batch_size=128,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=epochs + 1,
        random_state=seed,
        device="cpu",
    )


def mnist_mlp_parameters(sizes=(784, 256, 128, 10)):
    """The number of parameters of the MNIST MLP (weights and biases)."""
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


def digits_mlp(epochs, seed):
    return MLPClassifier(max_iter=epochs, random_state=seed, device="cpu")


def fit_local(est, X, y):
    with threadpool_limits(1), warnings.catch_warnings():
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
    """Per synchronization after the first epoch: its cost, bytes between workers and
    through the client (the first epoch synchronizes every batch and sends the model out)."""
    epochs = model.epoch_history_
    later = epochs[1:] or epochs
    steady = {e["epoch"] for e in later}
    syncs = [r for r in model.sync_history_ if r["epoch"] in steady]
    n_syncs = max(len(syncs), 1)
    client = sum(e["bytes_sent"] + e["bytes_received"] for e in later)
    batches = sum(r["batches"] for r in syncs) or 1
    return {
        "n_syncs": len(syncs),
        "sync_s": float(np.median([r["seconds"] for r in syncs])) if syncs else 0.0,
        "bytes_between_workers": float(np.mean([r["bytes_between_workers"] for r in syncs]))
        if syncs
        else 0.0,
        "client_bytes_per_sync": client / max(sum(e["syncs"] for e in later), 1),
        "client_bytes_per_epoch": client / len(later),
        "compute_per_batch_s": float(np.sum([r["compute_seconds"] for r in syncs]) / batches),
        "syncs_per_epoch": n_syncs / len(later),
    }


def accuracy_rows(client, name, data, make, epochs, sync_values, seeds):
    """One process and DataParallel for each ``sync_every``, over ``seeds``."""
    X_train, y_train, X_test, y_test = data
    rows = {"one process": []}
    figures = {}
    for seed in seeds:
        est = make(epochs, seed)
        seconds = fit_local(est, X_train, y_train)
        rows["one process"].append((est.score(X_test, y_test), seconds))
        for value in sync_values:
            model, seconds = fit_parallel(client, make(epochs, seed), X_train, y_train, value)
            rows.setdefault(value, []).append((model.score(X_test, y_test), seconds))
            figures.setdefault(value, sync_figures(model))
    local = np.array([a for a, _ in rows["one process"]])
    print(f"\n{name}, {epochs} epochs, seeds {list(seeds)}:")
    print(
        "  setting            accuracy  vs one  fit (s)  syncs/epoch  sync (ms)  "
        "worker->workers/sync  client/sync"
    )
    table = []
    for key, runs in rows.items():
        accuracy = np.array([a for a, _ in runs])
        fit_s = float(np.mean([s for _, s in runs]))
        diff = 100 * float(np.mean(accuracy - local))
        f = figures.get(key)
        label = "one process" if f is None else f"sync_every={key}"
        line = f"  {label:17}  {accuracy.mean():.4f}  {diff:+6.2f}  {fit_s:7.1f}"
        if f is not None:
            line += (
                f"  {f['syncs_per_epoch']:11.0f}  {1e3 * f['sync_s']:9.2f}  "
                f"{f['bytes_between_workers'] / 1e3:17.0f} kB  "
                f"{f['client_bytes_per_sync'] / 1e3:8.1f} kB"
            )
        print(line)
        table.append(
            {
                "setting": label,
                "accuracy": accuracy.tolist(),
                "difference_points": diff,
                "fit_s": fit_s,
                **(f or {}),
            }
        )
    return table


def _time_allreduce(fit_id, rank, peers, addresses, n_values, repeats, run):
    """On a worker: the median seconds of a sum of ``n_values`` float32 over the replicas,
    and the bytes one replica sends for one sum."""
    import distributed

    from sknet.backend import get_backend
    from sknet.distributed._exchange import HostExchange
    from sknet.distributed._state import state_of

    worker = distributed.get_worker()
    state = state_of(worker, fit_id)
    exchange = HostExchange(
        state, run, rank, peers, addresses, get_backend("cpu"), worker, lambda: True
    )
    buffer = np.ones(n_values, dtype=np.float32)
    distributed.secede()  # waits for its peer
    seconds = []
    try:
        for step in range(repeats):
            start = time.perf_counter()
            exchange.allreduce(step, buffer)
            seconds.append(time.perf_counter() - start)
    finally:
        exchange.close()
    return float(np.median(seconds[1:])), exchange.bytes_sent / repeats


def allreduce_latency(client, sizes, repeats=50, transport="sockets"):
    """The sum over two replicas, alone: the median seconds and the bytes a replica sends,
    for each buffer size."""
    import secrets

    from sknet.distributed._channel import settings
    from sknet.distributed._state import install, uninstall

    peers = sorted(client.nthreads())
    fit_id = "bench-" + secrets.token_hex(8)
    found = client.run(
        install, fit_id, secrets.token_bytes(32), len(peers), transport, settings(), {}
    )
    addresses = [found[p] for p in peers]
    times = {}
    try:
        for run, n in enumerate(sizes):
            futures = [
                client.submit(
                    _time_allreduce,
                    fit_id,
                    k,
                    peers,
                    addresses,
                    n,
                    repeats,
                    run,
                    workers=[peers[k]],
                    pure=False,
                )
                for k in range(len(peers))
            ]
            results = [f.result() for f in futures]
            times[n] = (max(r[0] for r in results), results[0][1])
    finally:
        client.run(uninstall, fit_id)
    return times


#: The name the baseline's exchange module takes on the workers.
BASELINE_MODULE = "sknet_bench_baseline_exchange"
#: The previous protocol's header: a message number and a size, 8 bytes each.
BASELINE_HEADER_BYTES = 16
#: The baseline's run numbers: a new one for every timing (its channels are per run).
_BASELINE_RUNS = itertools.count()


def baseline_source(revision):
    """``sknet/distributed/_exchange.py`` as it was at ``revision`` (git, in this checkout)."""
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(
        ["git", "show", f"{revision}:sknet/distributed/_exchange.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _load_baseline(source, dask_worker=None):
    """On a worker: an earlier revision's exchange, as a module of its own, installed."""
    module = types.ModuleType(BASELINE_MODULE)
    exec(compile(source, f"<{BASELINE_MODULE}>", "exec"), module.__dict__)  # noqa: S102
    module.HANDLER = "sknet_bench_baseline_deliver"  # beside this checkout's handler
    sys.modules[BASELINE_MODULE] = module
    module.install(dask_worker)


def _time_baseline(rank, peers, n_values, repeats, run):
    """On a worker: :func:`_time_allreduce` for the baseline's exchange (its sockets)."""
    import distributed

    from sknet.backend import get_backend

    module = sys.modules[BASELINE_MODULE]
    exchange = module.TcpExchange("sknet-bench-baseline", run, rank, peers, get_backend("cpu"))
    buffer = np.ones(n_values, dtype=np.float32)
    distributed.secede()
    seconds = []
    try:
        for step in range(repeats):
            start = time.perf_counter()
            exchange.allreduce(step, buffer)
            seconds.append(time.perf_counter() - start)
    finally:
        exchange.close()
    # its count is the payload: add the header of its one message a sum (2 replicas)
    return float(np.median(seconds[1:])), exchange.bytes_sent / repeats + BASELINE_HEADER_BYTES


def baseline_latency(client, sizes, repeats=50):
    """The sum over two replicas with the baseline's exchange (loaded): seconds, bytes a sum."""
    peers = sorted(client.nthreads())
    times = {}
    for n in sizes:
        run = next(_BASELINE_RUNS)
        futures = [
            client.submit(
                _time_baseline, k, peers, n, repeats, run, workers=[peers[k]], pure=False
            )
            for k in range(len(peers))
        ]
        results = [f.result() for f in futures]
        times[n] = (max(r[0] for r in results), results[0][1])
    return times


def latency_rows(client, sizes, labels, baseline=None, rounds=3):
    """Each way of summing over the 2 replicas, for each size: median seconds, bytes sent.

    ``'sockets'`` (the authenticated channel) and ``'dask'`` (Dask's messages,
    what a TLS cluster uses) are this checkout's; ``baseline`` is the source of
    an earlier revision's exchange. The ways take turns, ``rounds`` times, on
    the same cluster (a machine whose load drifts weighs on each alike); each
    figure is the median of its rounds' medians.
    """
    timers = {
        "sockets": lambda: allreduce_latency(client, sizes, transport="sockets"),
        "dask": lambda: allreduce_latency(client, sizes, transport="dask"),
    }
    if baseline is not None:
        client.run(_load_baseline, baseline)
        timers["baseline"] = lambda: baseline_latency(client, sizes)
    found = {way: [] for way in timers}
    for _ in range(rounds):
        for way, timer in timers.items():
            found[way].append(timer())
    ways = {
        way: {n: (float(np.median([r[n][0] for r in runs])), runs[0][n][1]) for n in sizes}
        for way, runs in found.items()
    }
    print(
        f"\nA sum over the 2 replicas, alone (median of {rounds} rounds of 50 sums; "
        "bytes one replica sends):"
    )
    print("  " + " " * 30 + "".join(f"{way:>22}" for way in ways))
    for n, label in zip(sizes, labels):
        cells = "".join(f"{1e3 * ways[w][n][0]:9.3f} ms {ways[w][n][1]:9.0f} B" for w in ways)
        print(f"  {label:20} {4 * n / 1e6:6.3f} MB {cells}")
    if "baseline" in ways:
        for way in ("sockets", "dask"):
            ratios = ", ".join(
                f"{label} x{ways[way][n][0] / ways['baseline'][n][0]:.2f}"
                for n, label in zip(sizes, labels)
            )
            print(f"  {way} / baseline (time): {ratios}")
    return {
        way: {str(n): {"seconds": t, "bytes": b} for n, (t, b) in by_size.items()}
        for way, by_size in ways.items()
    }


def cost_model(figures, sync_every, n_rows, batch_size):
    """Workers kept at least half busy on a 10 Gbit/s network, per count of workers K.

    The compute between two synchronizations shrinks with K (each worker
    trains B/K rows of each batch); the synchronization costs the fixed
    latency measured here (a sum of a few values over the replicas) and the
    transfer of a reduce-scatter and an all-gather. The previous driver's row:
    ``PARAMETER_SERVER_LATENCY + 2 K state / bandwidth`` per synchronization.
    """
    t_batch_two = figures["compute_per_batch_s"]  # a batch's part on one of 2 workers
    latency, payload = figures["fixed_latency_s"], figures["bytes_between_workers"]
    per_epoch = -(-n_rows // batch_size)
    steps = per_epoch if sync_every == "epoch" else int(sync_every)
    table = []
    for k in WORKER_COUNTS:
        compute = steps * t_batch_two * 2 / k
        sync = latency + 2 * (k - 1) / k * payload / NETWORK_BANDWIDTH
        busy = compute / (compute + sync)
        server = PARAMETER_SERVER_LATENCY + 2 * k * figures["state_bytes"] / NETWORK_BANDWIDTH
        table.append(
            {
                "workers": k,
                "compute_s": compute,
                "sync_s": sync,
                "busy": busy,
                "speedup": k * busy,
                "parameter_server_busy": compute / (compute + server),
            }
        )
    kept = [row["workers"] for row in table if row["busy"] >= 0.5]
    return table, (max(kept) if kept else 1)


def print_cost_model(value, table, kept):
    print(f"\n  cost model, 10 Gbit/s, sync_every={value}:")
    print("       K  compute/sync     sync    busy  speed-up   (parameter server: busy)")
    for row in table:
        print(
            f"  {row['workers']:>6}  {1e3 * row['compute_s']:9.2f} ms  "
            f"{1e3 * row['sync_s']:6.2f} ms  {row['busy']:5.0%}  {row['speedup']:7.1f}x"
            f"   ({row['parameter_server_busy']:4.0%})"
        )
    print(f"  -> keeps up to {kept} workers at least half busy")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--sync-every", default="1,8,epoch")
    parser.add_argument(
        "--epochs", type=int, default=None, help="every row this many epochs (a quick run)"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--baseline",
        default=None,
        help="a git revision: also time its exchange's sum, on the same cluster, last",
    )
    parser.add_argument(
        "--latency-only", action="store_true", help="only the sums over the replicas, alone"
    )
    args = parser.parse_args(argv)
    baseline = None if args.baseline is None else baseline_source(args.baseline)
    from dask.distributed import Client, LocalCluster

    seeds = [int(s) for s in args.seeds.split(",")]
    sync_values = [v if v == "epoch" else int(v) for v in args.sync_every.split(",")]
    try:
        mnist_data = mnist(args.mnist_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"note: no MNIST ({exc}); only the digits rows run.")
        mnist_data = None
    digits_run = ("digits, MLPClassifier(max_iter=20)", digits(), digits_mlp, 20, 200)
    runs = [digits_run]
    if mnist_data is not None:
        name = "MNIST 8,000/2,000, MLP 784-256-128-10"
        runs = [(name, mnist_data, mnist_mlp, 8, 128), (name, mnist_data, mnist_mlp, 15, 128)]
        runs.append(digits_run)
    if args.epochs is not None:  # one row a data set
        names = [run[0] for run in runs]
        runs = [
            (*run[:3], args.epochs, run[4])
            for i, run in enumerate(runs)
            if run[0] not in names[:i]
        ]
    results = {"seeds": seeds, "accuracy": {}, "runs": {}, "cost_model": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # start-up messages of the cluster
        cluster = LocalCluster(**CLUSTER)
        client = Client(cluster)
    try:
        if args.latency_only:
            n_params = mnist_mlp_parameters()  # no data needed: sizes only
            sizes = (10, n_params + 1, 5 * n_params)
            labels = ("10 values", "the gradient", "the averaged state")
            print(f"The MNIST MLP 784-256-128-10: {n_params} parameters")
            results["latency"] = latency_rows(client, sizes, labels, baseline)
        else:
            run_all(client, results, runs, sync_values, seeds, baseline)
    finally:
        client.close()
        cluster.close()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float))
    return results


def run_all(client, results, runs, sync_values, seeds, baseline):
    """The accuracy rows, the sums over the replicas alone and the cost model."""
    for name, data, make, epochs, _ in runs:
        table = accuracy_rows(client, name, data, make, epochs, sync_values, seeds)
        results["accuracy"][f"{name}, {epochs} epochs"] = table
    for value, row in zip(sync_values, results["accuracy"][next(iter(results["accuracy"]))][1:]):
        results["runs"][str(value)] = {
            "fit_s": row["fit_s"],
            "accuracy": float(np.mean(row["accuracy"])),
        }
    name, data, make, _, batch_size = runs[0]  # the cost model's network
    X_train, y_train = data[:2]
    models = {
        v: fit_parallel(client, make(3, seeds[0]), X_train, y_train, v)[0] for v in sync_values
    }
    n_params = sum(int(p.size) for p in next(iter(models.values())).estimator_.network_.params())
    sizes = (10, n_params + 1, 5 * n_params)
    labels = ("10 values", "the gradient", "the averaged state")
    results["latency"] = latency = latency_rows(client, sizes, labels, baseline)
    results["allreduce_seconds"] = {k: v["seconds"] for k, v in latency["sockets"].items()}
    results["allreduce_bytes"] = {k: v["bytes"] for k, v in latency["sockets"].items()}
    for value, model in models.items():
        figures = sync_figures(model)
        figures["state_bytes"] = 3 * 4 * n_params  # parameters and Adam's two moments
        figures["fixed_latency_s"] = latency["sockets"]["10"]["seconds"]
        table, kept = cost_model(figures, value, len(X_train), batch_size)
        print_cost_model(value, table, kept)
        results["cost_model"][str(value)] = {
            **figures,
            "table": table,
            "workers_kept_busy": kept,
        }


if __name__ == "__main__":
    main()

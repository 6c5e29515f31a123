"""A table on the cluster: DataParallel(TabularClassifier) on parquet files, against one process.

Writes a generated table (``--rows``, 10 million by default) as ``--files``
parquet files: twelve numeric columns (four with 2% to 20% missing values,
one of 72 distinct values), a category of 1,000 levels (Zipf-distributed,
the same categories in every file) and a binary target of most of them,
plus a test file of ``--test-rows`` rows. Then, for each seed of
``--seeds``, on a fresh ``LocalCluster`` of ``--workers`` worker processes
x 1 thread (each limited to ``--memory-limit``), once the workers have
imported sknet:

    X = dd.read_parquet(directory); y = X.pop("target")
    model = DataParallel(TabularClassifier(...), sync_every=1).fit(X, y)

(``--sync-every``), measuring the driver's peak resident memory during the
fit (sampled every 20 ms, against its resident memory before), each
worker's peak (``ru_maxrss``: the workers are fresh), the time of the pass
over the partitions (checks, validation rows, the summaries merged into the
plan), of the encoding of the shards on the workers, and of the epochs; rows
a second over the epochs and over the whole fit; the test accuracy and log
loss. And, in a fresh process each (``--local-seeds``), the one-process
fit of the first ``--local-rows`` rows (by default one worker's share of
the table: what one machine of the cluster holds) with its peak memory,
times and test scores. The report compares the rows a second, the peaks
against the table's size (in memory, as pandas holds it), and the cluster's
scores against the spread of the one-process seeds.

    python benchmarks/bench_dask_tables.py [--rows 10000000] [--files 40]
        [--dir DIR] [--workers 2] [--memory-limit 6GiB] [--epochs 2]
        [--sync-every 1] [--seeds 0] [--local-seeds 0,1,2] [--local-rows N]
        [--json PATH]
    python benchmarks/bench_dask_tables.py --rows 20000 --files 4   # a smoke run

The files are written once per ``--rows``/``--files`` into ``--dir`` (by
default under the system's temporary directory) and reused.
"""

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

#: The category's levels.
LEVELS = 1000
#: The estimator's parameters, cluster and one process alike (random_state aside).
PARAMS = dict(
    hidden_layer_sizes=(64, 64),
    n_members=1,
    n_bins=16,
    d_embedding=8,
    batch_size=4096,
    validation_fraction=0.05,
    dropout=0.1,  # the tabular default when the Dask guide's figures were recorded
    device="cpu",
    dtype="float32",
)


def _table(rows, seed):
    """``rows`` rows of the generated table (pandas), from ``seed``."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    columns = {f"x{i}": rng.normal(size=rows) for i in range(4)}
    columns["x4"] = rng.lognormal(size=rows)
    columns["x5"] = rng.uniform(-1, 1, size=rows).round(2)
    columns["x6"] = rng.integers(18, 90, size=rows).astype(np.float64)  # few distinct values
    columns.update({f"x{i}": rng.standard_t(3, size=rows) for i in range(7, 12)})
    frame = pd.DataFrame(columns)
    for column, share in (("x0", 0.10), ("x4", 0.05), ("x7", 0.20), ("x10", 0.02)):
        frame.loc[rng.random(rows) < share, column] = np.nan
    level = (rng.zipf(1.2, rows) - 1) % LEVELS
    names = np.array([f"c{i:04d}" for i in range(LEVELS)])
    frame["cat"] = pd.Categorical.from_codes(level, categories=names)
    effect = np.random.default_rng(12345).normal(size=LEVELS)[level]  # the same in every file
    signal = (
        np.sin(2 * frame["x1"])
        + frame["x2"] * frame["x3"]
        + 0.5 * np.log(frame["x4"].fillna(1.0))
        + np.where(frame["x0"].isna(), 0.8, frame["x0"])
        + effect
        + frame["x5"] ** 2
        + 0.02 * (frame["x6"] - 50)
        + 0.3 * np.tanh(frame["x7"].fillna(0.0) * frame["x8"])
    )
    frame["target"] = (signal + rng.normal(scale=0.8, size=rows) > 0.4).astype(np.int64)
    return frame


def generate(directory, rows, files):
    """Write the table's files (once) and the test file; their sizes."""
    directory.mkdir(parents=True, exist_ok=True)
    done = directory / "sizes.json"
    if done.exists():
        return json.loads(done.read_text())
    bounds = np.linspace(0, rows, files + 1).astype(np.int64)
    memory = 0
    for i in range(files):
        frame = _table(int(bounds[i + 1] - bounds[i]), seed=i)
        frame.index = np.arange(bounds[i], bounds[i + 1])
        memory += int(frame.drop(columns="target").memory_usage(deep=True).sum())
        frame.to_parquet(directory / f"part.{i:04d}.parquet")
    sizes = {"rows": rows, "files": files, "table_bytes": memory}
    sizes["disk_bytes"] = sum(p.stat().st_size for p in directory.glob("part.*.parquet"))
    done.write_text(json.dumps(sizes))
    return sizes


def _test_set(directory, rows):
    path = directory / "test.parquet"
    if not path.exists():
        _table(rows, seed=10**6).to_parquet(path)
    import pandas as pd

    frame = pd.read_parquet(path)
    return frame.drop(columns="target"), frame["target"].to_numpy()


def _scores(model, X, y):
    from sklearn.metrics import accuracy_score, log_loss

    proba = model.predict_proba(X)
    return {
        "accuracy": float(accuracy_score(y, model.classes_[proba.argmax(axis=1)])),
        "log_loss": float(log_loss(y, proba, labels=model.classes_)),
    }


class _Peak:
    """The peak resident memory of this process while the block runs (sampled)."""

    def __init__(self, every=0.02):
        import psutil

        self._process, self._every = psutil.Process(), every
        self.before = self.peak = self.rss()

    def rss(self):
        return self._process.memory_info().rss

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            self._stop.wait(self._every)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _timed(owner, name, clock, key, after=None):
    """Wrap ``owner.name`` so that ``clock[key]`` adds up the seconds its calls take."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            result = original(*args, **kwargs)
            if after is not None:
                after(*args)
            return result
        finally:
            clock[key] = clock.get(key, 0.0) + time.perf_counter() - started

    setattr(owner, name, wrapper)
    return original


def cluster_fit(directory, args, seed, X_test, y_test):
    """One DataParallel fit on a fresh cluster: peaks, times, scores."""
    import dask.dataframe as dd
    import distributed

    from sknet import TabularClassifier
    from sknet.distributed import DataParallel, _driver, _inputs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            memory_limit=args.memory_limit,
            dashboard_address=None,
            host="127.0.0.1",
        )
        client = distributed.Client(cluster)
    clock = {}
    driver_memory = _Peak()

    def shards_encoded(driver, *rest):  # the encoding timed apart from the first epoch
        distributed.wait([shard.data for shard in driver.shards])

    def passed(*args):  # the driver's peak until the plan: the pass's share
        clock["pass_peak"] = driver_memory.peak

    saved = [
        (_inputs, "frame_inputs", _timed(_inputs, "frame_inputs", clock, "pass", passed)),
        (
            _driver._Driver,
            "_place",
            _timed(_driver._Driver, "_place", clock, "encode", shards_encoded),
        ),
    ]
    try:
        X = dd.read_parquet(str(directory / "part.*.parquet"))
        y = X.pop("target")
        client.run(importlib.import_module, "sknet.distributed._tables")  # as one process has
        est = TabularClassifier(max_iter=args.epochs, random_state=seed, **PARAMS)
        every = args.sync_every if args.sync_every == "epoch" else int(args.sync_every)
        model = DataParallel(est, client=client, sync_every=every)
        driver_memory.before = driver_memory.peak = driver_memory.rss()
        started = time.perf_counter()
        with driver_memory:
            model.fit(X, y)
        seconds = time.perf_counter() - started
        workers = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            cluster.close()
    fitted = model.estimator_
    epochs = sum(row["duration"] for row in fitted.history_)
    n_train = sum(model.shard_rows_)
    return {
        "seed": seed,
        "train_rows": n_train,
        "validation_rows": args.rows - n_train,
        "fit_s": seconds,
        "pass_s": clock.get("pass", 0.0),
        "encode_s": clock.get("encode", 0.0),
        "epochs_s": epochs,
        "epochs": len(fitted.history_),
        "rows_per_s_epochs": n_train * len(fitted.history_) / epochs,
        "rows_per_s_fit": n_train * len(fitted.history_) / seconds,
        "driver_peak_bytes": driver_memory.peak,
        "driver_growth_bytes": driver_memory.peak - driver_memory.before,
        "driver_growth_in_pass_bytes": clock.get("pass_peak", 0) - driver_memory.before,
        "worker_peak_bytes": sorted(workers.values()),
        "plan_rank_error": [float(e) for e in model.plan_rank_error_],
        **_scores(fitted, X_test, y_test),
    }


def local_fit(directory, rows, epochs, seed, test_rows):
    """In this (fresh) process: the one-process fit of the table's first ``rows`` rows."""
    import pandas as pd

    from sknet import TabularClassifier

    frames, have = [], 0
    for path in sorted(directory.glob("part.*.parquet")):
        if have >= rows:
            break
        frame = pd.read_parquet(path)
        frames.append(frame.iloc[: rows - have])
        have += len(frames[-1])
    table = pd.concat(frames)
    del frames
    y = table.pop("target").to_numpy()
    X_test, y_test = _test_set(directory, test_rows)
    est = TabularClassifier(max_iter=epochs, random_state=seed, **PARAMS)
    started = time.perf_counter()
    est.fit(table, y)
    seconds = time.perf_counter() - started
    epochs_s = sum(row["duration"] for row in est.history_)
    n_train = len(y) - int(np.ceil(PARAMS["validation_fraction"] * len(y)))
    return {
        "seed": seed,
        "rows": len(y),
        "train_rows": n_train,
        "fit_s": seconds,
        "epochs_s": epochs_s,
        "epochs": len(est.history_),
        "rows_per_s_epochs": n_train * len(est.history_) / epochs_s,
        "rows_per_s_fit": n_train * len(est.history_) / seconds,
        "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **_scores(est, X_test, y_test),
    }


def _local_in_a_fresh_process(directory, args, seed):
    command = [
        sys.executable,
        __file__,
        "--local-run",
        str(seed),
        "--dir",
        str(directory),
        "--rows",
        str(args.rows),
        "--files",
        str(args.files),
        "--local-rows",
        str(args.local_rows),
        "--epochs",
        str(args.epochs),
        "--test-rows",
        str(args.test_rows),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SKNET_DEVICE": "cpu"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gib(n):
    return f"{n / 2**30:.2f} GiB"


def report(sizes, runs, locals_):
    """The comparison, as markdown lines."""
    lines = [
        f"table: {sizes['rows']:,} rows in {sizes['files']} parquet files, "
        f"{_gib(sizes['table_bytes'])} in memory (pandas), {_gib(sizes['disk_bytes'])} on disk",
        "",
        "| fit | rows | fit s | pass s | encode s | epochs s | rows/s (epochs) | rows/s (fit) "
        "| peak memory | accuracy | log loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        peaks = ", ".join(_gib(p) for p in r["worker_peak_bytes"])
        lines.append(
            f"| cluster, seed {r['seed']} | {r['train_rows']:,} | {r['fit_s']:.1f} | "
            f"{r['pass_s']:.1f} | {r['encode_s']:.1f} | {r['epochs_s']:.1f} | "
            f"{r['rows_per_s_epochs']:,.0f} | {r['rows_per_s_fit']:,.0f} | driver "
            f"{_gib(r['driver_peak_bytes'])} (+{_gib(r['driver_growth_bytes'])}), workers "
            f"{peaks} | {r['accuracy']:.4f} | {r['log_loss']:.4f} |"
        )
    for r in locals_:
        lines.append(
            f"| one process, seed {r['seed']} | {r['train_rows']:,} | {r['fit_s']:.1f} | - | - | "
            f"{r['epochs_s']:.1f} | {r['rows_per_s_epochs']:,.0f} | {r['rows_per_s_fit']:,.0f} "
            f"| {_gib(r['peak_bytes'])} | {r['accuracy']:.4f} | {r['log_loss']:.4f} |"
        )
    if runs and locals_:
        accuracy = np.array([r["accuracy"] for r in locals_])
        spread = accuracy.std(ddof=1) if accuracy.size > 1 else float("nan")
        cluster = np.mean([r["accuracy"] for r in runs])
        speed = np.mean([r["rows_per_s_epochs"] for r in runs]) / np.mean(
            [r["rows_per_s_epochs"] for r in locals_]
        )
        lines += [
            "",
            f"rows/s over the epochs, cluster / one process: {speed:.2f}x",
            f"driver's peak growth / table in memory: "
            f"{runs[0]['driver_growth_bytes'] / sizes['table_bytes']:.3f} "
            f"({runs[0]['driver_growth_bytes'] / sizes['rows']:.0f} bytes a row, "
            f"{runs[0]['driver_growth_in_pass_bytes'] / sizes['rows']:.0f} until the plan; "
            f"the table: {sizes['table_bytes'] / sizes['rows']:.0f} bytes a row)",
            f"accuracy: cluster {cluster:.4f}, one process {accuracy.mean():.4f} "
            f"+- {spread:.4f} (std over {accuracy.size} seeds)",
        ]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=None, help="default: 1 per 250,000 rows")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="6GiB", help="each worker's")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--sync-every", default="1")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--local-seeds", default="0,1,2")
    parser.add_argument("--local-rows", type=int, default=None, help="default: rows / workers")
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--local-run", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.files = args.files or max(2, args.rows // 250_000)
    args.local_rows = args.local_rows or args.rows // args.workers
    directory = Path(args.dir or Path(tempfile.gettempdir()) / f"sknet_table_{args.rows}")
    if args.local_run is not None:
        warnings.simplefilter("ignore")
        result = local_fit(directory, args.local_rows, args.epochs, args.local_run, args.test_rows)
        print(json.dumps(result))
        return result
    sizes = generate(directory, args.rows, args.files)
    X_test, y_test = _test_set(directory, args.test_rows)
    runs = []
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs.append(cluster_fit(directory, args, seed, X_test, y_test))
        print(f"cluster, seed {seed}: {json.dumps(runs[-1])}", flush=True)
    locals_ = []
    for seed in [int(s) for s in args.local_seeds.split(",") if s]:
        locals_.append(_local_in_a_fresh_process(directory, args, seed))
        print(f"one process, seed {seed}: {json.dumps(locals_[-1])}", flush=True)
    lines = report(sizes, runs, locals_)
    print("\n".join(lines))
    results = {"sizes": sizes, "cluster": runs, "one_process": locals_, "args": vars(args)}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()

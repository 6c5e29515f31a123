"""Tables under load: how much a fit slows when other work shares the cores.

A practitioner's machine is rarely idle: a search runs fits side by side, a
notebook trains while a browser renders. For sknet's tabular estimators and
the boosting peers (LightGBM and CatBoost at their defaults, the same thread
count), on tables of ``bench_tabular.py``, one seed, it measures:

- ``quiet``: the fit alone on an idle machine;
- ``loaded``: the same fit while ``--load`` other processes each keep a core
  busy (a single-threaded float32 matrix-product loop each), started before
  and stopped after;
- ``search``: the four fits of a 4-fold search run two at a time (joblib's
  worker processes, as ``cross_val_score(n_jobs=2)`` runs them, each fit on
  ``threads // 2`` threads), each fit's time as the search's wall time times
  2 over 4, against the same four fits one after the other (``n_jobs=1``).

It prints each peer's slowdown factors (loaded over quiet; a fit within the
search over a fit alone) side by side: the goal of the tabular estimators is
to slow by no more than CatBoost does.

Run it from the repository root on a quiet machine::

    pip install -e ".[bench-tabular]"
    python benchmarks/bench_tabular_load.py [--tables hotel,flights] [--threads 2] [--load 2]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")  # before NumPy loads its BLAS; --threads limits it

import argparse
import multiprocessing
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, StratifiedKFold
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tabular  # noqa: E402 (tables, peers, their inputs)

PEERS = ("tabular", "lightgbm", "catboost")


def _busy(stop):
    """A core kept busy until ``stop`` is set: single-threaded matrix products."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).standard_normal((256, 256), dtype=np.float32)
    with threadpool_limits(limits=1):
        while not stop.is_set():
            for _ in range(50):
                a @ a


class Load:
    """Within the block, ``n`` other processes each keep a core busy."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.processes = [context.Process(target=_busy, args=(self.stop,)) for _ in range(self.n)]
        for process in self.processes:
            process.start()
        time.sleep(2.0)  # the loaders running before the fit starts
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for process in self.processes:
            process.join()


def make_model(peer, task, seed, threads, X):
    """An unfitted peer and the frame it takes (boosting's inputs as bench_tabular makes them)."""
    import sknet

    if peer == "tabular":
        cls = sknet.TabularRegressor if task == "regression" else sknet.TabularClassifier
        return cls(random_state=seed, device="cpu"), X
    model, frame, _ = bench_tabular.boosting_model(peer, task, seed, threads, X, X.head(1))
    return model, frame


def timed_fit(peer, task, threads, X, y):
    model, frame = make_model(peer, task, 0, threads, X)
    start = time.perf_counter()
    with threadpool_limits(limits=threads):
        model.fit(frame, y)
    return time.perf_counter() - start


def _fit_fold(peer, task, threads, X, y, rows):
    model, frame = make_model(peer, task, 0, threads, X.iloc[rows])
    with threadpool_limits(limits=threads):
        model.fit(frame, y[rows])


def timed_search(peer, task, threads, X, y, n_jobs):
    """Seconds a fit of a 4-fold search run ``n_jobs`` at a time: its wall time * n_jobs / 4.

    Each fit gets ``threads // n_jobs`` threads (at least one), as joblib's workers limit
    their libraries' threads; the fits are made in the workers (CatBoost's estimator does
    not clone).
    """
    from joblib import Parallel, delayed

    cv = KFold(4) if task == "regression" else StratifiedKFold(4)
    folds = [train for train, _ in cv.split(X, y)]
    inner = max(1, threads // n_jobs)
    start = time.perf_counter()
    Parallel(n_jobs=n_jobs)(delayed(_fit_fold)(peer, task, inner, X, y, rows) for rows in folds)
    return (time.perf_counter() - start) * n_jobs / 4


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="hotel,flights,credit")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--load", type=int, default=2, help="busy processes of the loaded run")
    config = parser.parse_args(argv)
    peers = [p for p in config.peers.split(",") if bench_tabular.available(p)]
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{config.threads} thread(s) per fit, {config.load} busy process(es) in the loaded run")
    factors = {peer: {"loaded": [], "search": []} for peer in peers}
    for name in config.tables.split(","):
        X, y, task = bench_tabular.load_table(name)
        print(f"\n{name}: {len(X)} rows, {task}")
        head = ("quiet s", 8), ("loaded s", 9), ("x", 6), ("alone s", 8), ("search s", 9), ("x", 6)
        print(f"  {'peer':<10}" + "".join(f" {text:>{width}}" for text, width in head))
        for peer in peers:
            quiet = timed_fit(peer, task, config.threads, X, y)
            with Load(config.load):
                loaded = timed_fit(peer, task, config.threads, X, y)
            alone = timed_search(peer, task, config.threads, X, y, n_jobs=1)
            search = timed_search(peer, task, config.threads, X, y, n_jobs=2)
            factors[peer]["loaded"].append(loaded / quiet)
            factors[peer]["search"].append(search / alone)
            print(
                f"  {peer:<10} {quiet:>8.2f} {loaded:>9.2f} {loaded / quiet:>6.2f} "
                f"{alone:>8.2f} {search:>9.2f} {search / alone:>6.2f}"
            )
    print("\nslowdown, geometric mean over the tables (loaded / quiet, in a search / alone):")
    for peer, f in factors.items():
        loaded = float(np.exp(np.mean(np.log(f["loaded"]))))
        search = float(np.exp(np.mean(np.log(f["search"]))))
        print(f"  {peer:<10} loaded {loaded:.2f}x, in a search {search:.2f}x")
    return factors


if __name__ == "__main__":
    main()

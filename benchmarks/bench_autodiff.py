"""Benchmark what automatic differentiation costs: an MLP whose hidden layers are
written as forward-only layers, against the same MLP with the built-in ``Dense``.

Both networks are 784-256-128-10 with ReLU (Adam, batch 128, float32), from the
same initial weights, trained on the same rows in one run: the built-in ``Dense``
layers (hand-written backward, fused bias and activation kernels) and
``ForwardDense``, whose whole definition is ``relu(X @ W + b)`` and whose
backward is derived by :mod:`sknet.autodiff`. Median seconds per epoch (from
``history_``) after a warm-up epoch, and the ratio (target <= 1.3 on the CPU,
<= 1.5 on a GPU).

    python benchmarks/bench_autodiff.py --mnist-dir DIR [--rows 8000] [--threads 2]
                                        [--device cpu]

Without MNIST files (``--mnist-dir`` or ``SKNET_MNIST_DIR``), random pixels stand
in (the timings hold).
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

try:
    import sknet  # noqa: F401
except ImportError:  # run as `python benchmarks/bench_autodiff.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sknet import ConvNetClassifier
from sknet import autodiff as ad
from sknet.datasets import load_mnist
from sknet.layers import Dense, Flatten, Layer
from sknet.layers._init import initial_weights


class ForwardDense(Layer):
    """``relu(X @ W + b)``, initialized as the built-in ``Dense`` (same draws)."""

    regularized = ("W",)  # the L2 penalty alpha applies to W, as for Dense

    def __init__(self, units, *, trainable=True, lr_scale=1.0, weights=None):
        self.units = units
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n_in, units = input_shape[0], self.units
        W, b = initial_weights("glorot_uniform", rng, (n_in, units), units, n_in, units, "relu")
        self.add_param("W", W, regularized=True)
        self.add_param("b", b)
        return (self.units,)

    def forward(self, X, *, training):
        return ad.relu(X @ self.params["W"] + self.params["b"])


def hidden_layers(forward_only):
    if forward_only:
        return [Flatten(), ForwardDense(256), ForwardDense(128)]
    return [Flatten(), Dense(256, activation="relu"), Dense(128, activation="relu")]


def fit(X, y, forward_only, epochs, device):
    clf = ConvNetClassifier(
        layers=hidden_layers(forward_only),
        input_shape=(1, 28, 28),
        batch_size=128,
        max_iter=epochs + 1,
        tol=0.0,
        n_iter_no_change=epochs + 2,
        random_state=0,
        device=device,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    return clf


def seconds_per_epoch(clf):
    return float(np.median([row["duration"] for row in clf.history_[1:]]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        X, y = load_mnist(args.mnist_dir, subset="test")
        source = "MNIST test file"
    except (FileNotFoundError, ValueError):
        rng = np.random.RandomState(0)
        X, y = rng.rand(args.rows, 784), rng.randint(0, 10, args.rows)
        source = "random pixels"
    X, y = X[: args.rows].astype(np.float32), y[: args.rows]
    with threadpool_limits(args.threads):
        builtin = fit(X, y, False, args.epochs, args.device)
        recorded = fit(X, y, True, args.epochs, args.device)
    t_builtin, t_recorded = seconds_per_epoch(builtin), seconds_per_epoch(recorded)
    ratio = t_recorded / t_builtin
    gap = max(
        abs(a["train_loss"] - b["train_loss"]) for a, b in zip(builtin.history_, recorded.history_)
    )
    target = 1.3 if args.device == "cpu" else 1.5
    print(
        f"{len(X)} rows ({source}), MLP 784-256-128-10, batch 128, device {args.device}, "
        f"{args.threads} threads"
    )
    print(
        f"| hidden layers | s/epoch |\n|---|---:|\n| built-in Dense | {t_builtin:.4f} |\n"
        f"| forward-only (autodiff) | {t_recorded:.4f} |"
    )
    print(
        f"forward-only / built-in: {ratio:.2f} (target <= {target}: "
        f"{'met' if ratio <= target else 'MISSED'}); largest train-loss difference "
        f"per epoch: {gap:.2e}"
    )
    return {"builtin_s": t_builtin, "forward_only_s": t_recorded, "ratio": ratio, "gap": gap}


if __name__ == "__main__":
    main()

"""Benchmark what freezing saves: an epoch of the default ConvNet with every layer
below the output frozen, against the same network unfrozen, in one run.

Backward stops at the lowest trainable layer, so with the convolutions and the
hidden dense layer frozen only the output layer runs backward; the forward pass
is unchanged. Median seconds per epoch (from ``history_``) after a warm-up
epoch, same data, same initial weights, batch 64.

    python benchmarks/bench_frozen.py --mnist-dir DIR [--images 4000] [--threads 2]

Without MNIST files (``--mnist-dir`` or ``SKNET_MNIST_DIR``), random images
stand in (the timings hold).
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
except ImportError:  # run as `python benchmarks/bench_frozen.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sknet import ConvNetClassifier
from sknet.datasets import load_mnist
from sknet.layers import Conv2D, Dense, Flatten, MaxPool2D


def default_convnet_layers(trainable):
    """The layers ConvNetClassifier builds by default, with ``trainable`` set."""
    return [
        Conv2D(32, 3, padding="same", activation="relu", trainable=trainable),
        MaxPool2D(2),
        Conv2D(64, 3, padding="same", activation="relu", trainable=trainable),
        MaxPool2D(2),
        Flatten(),
        Dense(128, activation="relu", init="he_uniform", trainable=trainable),
    ]


def seconds_per_epoch(X, y, trainable, epochs):
    clf = ConvNetClassifier(
        layers=default_convnet_layers(trainable),
        batch_size=64,
        max_iter=epochs + 1,
        tol=0.0,
        n_iter_no_change=epochs + 2,
        random_state=0,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    return float(np.median([row["duration"] for row in clf.history_[1:]]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        X, y = load_mnist(args.mnist_dir, subset="test", flatten=False)
        source = "MNIST test file"
    except (FileNotFoundError, ValueError):
        rng = np.random.RandomState(0)
        X, y = rng.rand(args.images, 28, 28), rng.randint(0, 10, args.images)
        source = "random images"
    X, y = X[: args.images].astype(np.float32), y[: args.images]
    with threadpool_limits(args.threads):
        unfrozen = seconds_per_epoch(X, y, True, args.epochs)
        frozen = seconds_per_epoch(X, y, False, args.epochs)
    ratio = frozen / unfrozen
    print(f"{len(X)} images ({source}), default ConvNet, batch 64, {args.threads} threads")
    print(
        f"| network | s/epoch |\n|---|---:|\n| all layers trained | {unfrozen:.3f} |\n"
        f"| all but the output layer frozen | {frozen:.3f} |"
    )
    print(
        f"frozen / unfrozen epoch: {ratio:.2f} (target <= 0.5: "
        f"{'met' if ratio <= 0.5 else 'MISSED'})"
    )
    return {"unfrozen_s": unfrozen, "frozen_s": frozen, "ratio": ratio}


if __name__ == "__main__":
    main()

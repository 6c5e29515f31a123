"""Benchmark an LSTM(128) or GRU(128) on MNIST read row by row: sknet against PyTorch.

Both train the same network (one LSTM or GRU layer of 128 units over 28 steps of 28
pixels, then a linear layer to 10 classes) with Adam (lr 1e-3), batch 128 and
gradient-norm clipping at 5, for the same number of epochs on the same
stratified split of the MNIST test file, on the CPU with the same number of
threads, in one run, each after a short warm-up. It prints the median seconds
of their epochs, test accuracy and the ratio.

    python benchmarks/bench_rnn.py --mnist-dir DIR [--cell lstm|gru] [--epochs 3] [--threads 2]

Without MNIST files (``--mnist-dir`` or ``SKNET_MNIST_DIR``), random images
stand in (the timings hold; the accuracies mean nothing).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

try:
    import sknet
except ImportError:  # run as `python benchmarks/bench_rnn.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sknet

from sknet import RNNClassifier
from sknet.datasets import load_mnist


def load(mnist_dir, rows):
    try:
        X, y = load_mnist(mnist_dir, subset="test", flatten=False)
        source = "MNIST test file"
    except (FileNotFoundError, ValueError):
        rng = np.random.RandomState(0)
        X, y = rng.rand(rows, 28, 28).astype(np.float32), rng.randint(0, 10, rows)
        source = "random images"
    n_train = min(8000, int(0.8 * len(X)))
    split = train_test_split(
        X, y, train_size=n_train, test_size=len(X) - n_train, stratify=y, random_state=0
    )
    return split, source


def time_sknet(X_train, y_train, X_test, y_test, epochs, batch_size, cell="lstm"):
    """Median seconds of sknet's training epochs (from ``history_``) and test accuracy."""

    def fit(X, y, n_epochs):
        clf = RNNClassifier(
            units=(128,),
            cell=cell,
            batch_size=batch_size,
            max_iter=n_epochs,
            tol=0.0,
            n_iter_no_change=n_epochs + 1,
            clip_norm=5.0,
            random_state=0,
            device="cpu",
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return clf.fit(X, y)

    fit(X_train[: 2 * batch_size], y_train[: 2 * batch_size], 1)  # warm-up: compiled kernels
    clf = fit(X_train, y_train, epochs)
    seconds = float(np.median([row["duration"] for row in clf.history_]))
    return seconds, float(clf.score(X_test, y_test))


def time_torch(X_train, y_train, X_test, y_test, epochs, batch_size, cell="lstm"):
    """Median seconds of the same training epochs in PyTorch, and test accuracy."""
    try:
        import torch
    except ImportError:
        return None, None
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
            self.rnn = layer(28, 128, batch_first=True)
            self.out = torch.nn.Linear(128, 10)

        def forward(self, x):
            _, state = self.rnn(x)
            h = state[0] if cell == "lstm" else state
            return self.out(h[-1])

    net = Net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    X = torch.as_tensor(X_train)
    y = torch.as_tensor(y_train, dtype=torch.long)

    def epoch(rows):
        order = torch.randperm(rows)
        total = torch.zeros(())
        for i in range(0, rows, batch_size):
            idx = order[i : i + batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(X[idx]), y[idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            optimizer.step()
            total += loss.detach()
        return float(total)  # the loss read once per epoch, as sknet does

    epoch(2 * batch_size)  # warm-up
    durations = []
    for _ in range(epochs):
        start = time.perf_counter()
        epoch(len(X))
        durations.append(time.perf_counter() - start)
    with torch.no_grad():
        accuracy = float((net(torch.as_tensor(X_test)).argmax(1).numpy() == y_test).mean())
    return float(np.median(durations)), accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--rows", type=int, default=10000, help="random stand-in rows when MNIST is absent"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    (X_train, X_test, y_train, y_test), source = load(args.mnist_dir, args.rows)
    split = (X_train, y_train, X_test, y_test)
    print(
        f"{args.cell.upper()}(128) on {source} read row by row: {len(X_train)} train / "
        f"{len(X_test)} test, batch {args.batch_size}, {args.epochs} epochs, "
        f"{args.threads} threads; sknet {sknet.__version__}"
    )
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        print("PyTorch is not installed: timing sknet alone")
    with threadpool_limits(args.threads):
        ours = time_sknet(*split, args.epochs, args.batch_size, args.cell)
    theirs = time_torch(*split, args.epochs, args.batch_size, args.cell)
    print(f"{'peer':>8} {'s/epoch':>9} {'test acc':>9}")
    print(f"{'sknet':>8} {ours[0]:9.3f} {ours[1]:9.4f}")
    result = {"sknet_s_per_epoch": ours[0], "sknet_accuracy": ours[1]}
    if theirs[0] is not None:
        print(f"{'torch':>8} {theirs[0]:9.3f} {theirs[1]:9.4f}")
        ratio = ours[0] / theirs[0]
        print(f"sknet / PyTorch seconds per epoch: {ratio:.2f} (target <= 1.5)")
        result.update(torch_s_per_epoch=theirs[0], torch_accuracy=theirs[1], ratio=ratio)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""Sequence networks on the CPU: sknet against PyTorch, side by side, in one run.

Both train the same networks on the same token sequences, with the same
optimizer (Adam, lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay), batch
size and epochs, in float32, with the same number of threads:

- a small text transformer: ``Embedding(V, 64)``, learned positions, 2
  post-norm encoder blocks (4 heads, feed-forward 128, ReLU, dropout 0.1), the
  mean over the real steps, a linear layer to the classes; padded steps masked
  (sknet's ``padding_value=0``, PyTorch's ``src_key_padding_mask`` and a
  masked mean), against :class:`torch.nn.TransformerEncoder`;
- a 1-D convolutional network: ``Embedding(V, 64)``, ``Conv1D(128, 5,
  'same', relu)``, ``MaxPool1D(2)``, ``Conv1D(128, 3, 'same', relu)``, the
  maximum over steps, a linear layer; no mask (as text CNNs usually run),
  against :class:`torch.nn.Conv1d`.

Data: synthetic "text": 4,000 training and 1,000 test sequences of 16 to 64
tokens (Zipf-distributed ids below 5,000, 0 the padding), in 4 classes given
by which of 4 sets of marker tokens occurs most often. Each peer's time per
epoch is the median of its epochs after a warm-up fit. sknet runs on
``--threads`` threads (splitting each batch over them); PyTorch on as many and
on one (``--torch-threads`` to choose), and the faster counts (on a loaded
machine its OpenMP threads can wait on each other longer than they compute).
The peers take turns
(``--repeats`` rounds, the best round of each counts) so that a shared
machine's slow spells hit them alike. Run from the repository root::

    python benchmarks/bench_sequence.py [--threads 2] [--repeats 3] [--json PATH]

``--quick`` shrinks every size for a smoke test.
"""

import argparse
import functools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

try:
    import sknet
except ImportError:  # run as `python benchmarks/bench_sequence.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sknet

from sknet import NeuralNetClassifier
from sknet.layers import (
    Conv1D,
    Embedding,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    MaxPool1D,
    PositionEmbedding,
    TransformerEncoderBlock,
)

try:
    import torch
except Exception:  # not installed, or a broken install failing at import
    torch = None

VOCAB, STEPS, CLASSES, WIDTH = 5000, 64, 4, 64
HEADS, FF_UNITS, DROPOUT = 4, 128, 0.1
LR, BETAS, EPS, SEED = 1e-3, (0.9, 0.999), 1e-8, 0
TARGET = 1.0  # at most PyTorch's time per epoch, as the MLP


# -- data -------------------------------------------------------------------------
def make_data(n_train, n_test, steps=STEPS, vocab=VOCAB, seed=SEED):
    """Token ids (n, steps) padded with 0 at the end, and labels in ``range(CLASSES)``."""
    rng = np.random.RandomState(seed)
    n = n_train + n_test
    ids = np.minimum(rng.zipf(1.3, (n, steps)), vocab - 1).astype(np.int64)
    ids[ids < 1] = 1
    markers = rng.choice(np.arange(50, vocab), (CLASSES, 20), replace=False)
    lengths = rng.randint(steps // 4, steps + 1, n)
    y = rng.randint(0, CLASSES, n)
    for i in range(n):  # a few markers of the class, and one of another
        k = lengths[i]
        ids[i, rng.randint(k, size=3)] = rng.choice(markers[y[i]], 3)
        ids[i, rng.randint(k)] = rng.choice(markers[rng.randint(CLASSES)])
        ids[i, k:] = 0
    X = ids.astype(np.float32)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


# -- sknet ------------------------------------------------------------------------
def sknet_transformer():
    return [
        Embedding(VOCAB, WIDTH),
        PositionEmbedding(),
        TransformerEncoderBlock(HEADS, FF_UNITS, dropout=DROPOUT),
        TransformerEncoderBlock(HEADS, FF_UNITS, dropout=DROPOUT),
        GlobalAvgPool1D(),
    ]


def sknet_convnet():
    return [
        Embedding(VOCAB, WIDTH),
        Conv1D(128, 5, padding="same", activation="relu"),
        MaxPool1D(2),
        Conv1D(128, 3, padding="same", activation="relu"),
        GlobalMaxPool1D(),
    ]


def time_sknet(layers, padding_value, X, y, X_test, y_test, epochs, batch_size):
    """Median seconds of sknet's epochs (from ``history_``) and the test accuracy.

    ``layers()`` gives the network's layers.
    """
    clf = NeuralNetClassifier(
        layers(),
        padding_value=padding_value,
        alpha=0.0,
        batch_size=batch_size,
        learning_rate_init=LR,
        beta_1=BETAS[0],
        beta_2=BETAS[1],
        epsilon=EPS,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=epochs + 1,
        random_state=SEED,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    seconds = float(np.median([row["duration"] for row in clf.history_]))
    return {"s_per_epoch": seconds, "test_acc": float(clf.score(X_test, y_test))}


# -- PyTorch ----------------------------------------------------------------------
def torch_transformer():
    nn = torch.nn

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH)
            self.positions = nn.Parameter(torch.empty(STEPS, WIDTH).uniform_(-0.05, 0.05))
            block = nn.TransformerEncoderLayer(
                WIDTH, HEADS, FF_UNITS, dropout=DROPOUT, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(block, 2, enable_nested_tensor=False)
            self.out = nn.Linear(WIDTH, CLASSES)

        def forward(self, ids):
            real = ids != 0
            h = self.encoder(self.embed(ids) + self.positions, src_key_padding_mask=~real)
            weights = real.to(h.dtype) / real.sum(1, keepdim=True).clamp(min=1)
            return self.out((h * weights[:, :, None]).sum(1))

    return Transformer()


def torch_convnet():
    nn = torch.nn

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH)
            self.conv1 = nn.Conv1d(WIDTH, 128, 5, padding="same")
            self.conv2 = nn.Conv1d(128, 128, 3, padding="same")
            self.out = nn.Linear(128, CLASSES)

        def forward(self, ids):
            h = self.embed(ids).transpose(1, 2)  # (n, C, steps): PyTorch's layout
            h = nn.functional.max_pool1d(torch.relu(self.conv1(h)), 2)
            h = torch.relu(self.conv2(h))
            return self.out(h.amax(2))

    return ConvNet()


def time_torch(build, X, y, X_test, y_test, epochs, batch_size, threads):
    """Median seconds of the same training epochs in PyTorch eager on ``threads`` threads,
    and the test accuracy."""
    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS, fused=True)
    Xt = torch.from_numpy(X.astype(np.int64))
    yt = torch.from_numpy(y.astype(np.int64))
    generator = torch.Generator().manual_seed(SEED)
    durations = []
    model.train()
    for _ in range(epochs):
        start = time.perf_counter()
        order = torch.randperm(len(Xt), generator=generator)
        total = torch.zeros(())
        for i in range(0, len(Xt), batch_size):
            idx = order[i : i + batch_size]
            loss = torch.nn.functional.cross_entropy(model(Xt[idx]), yt[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        float(total)  # the loss read once per epoch, as sknet does
        durations.append(time.perf_counter() - start)
    model.eval()
    with torch.inference_mode():
        pred = model(torch.from_numpy(X_test.astype(np.int64))).argmax(1).numpy()
    return {"s_per_epoch": float(np.median(durations)), "test_acc": float(np.mean(pred == y_test))}


# -- the run ----------------------------------------------------------------------
NETWORKS = {
    "transformer": (sknet_transformer, 0, "torch_transformer"),
    "conv1d": (sknet_convnet, None, "torch_convnet"),
}


def run(args):
    n_train, n_test = (256, 64) if args.quick else (4000, 1000)
    epochs = 1 if args.quick else args.epochs
    X, y, X_test, y_test = make_data(n_train, n_test)
    results = {}
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for name, (layers, padding_value, torch_build) in NETWORKS.items():
            runs = {
                "sknet": functools.partial(
                    time_sknet,
                    layers,
                    padding_value,
                    X,
                    y,
                    X_test,
                    y_test,
                    epochs,
                    args.batch_size,
                )
            }
            if torch is not None:  # its own threads, and one (better on a loaded machine)
                for threads in args.torch_threads or sorted({args.threads, 1}, reverse=True):
                    runs[f"torch {threads} threads"] = functools.partial(
                        time_torch,
                        globals()[torch_build],
                        *(X, y, X_test, y_test, epochs, args.batch_size, threads),
                    )
            # warm-up: compiled kernels, BLAS buffers, PyTorch's first-call setup
            time_sknet(layers, padding_value, X[:128], y[:128], X_test, y_test, 1, 64)
            if torch is not None:
                time_torch(
                    globals()[torch_build], X[:128], y[:128], X_test, y_test, 1, 64, args.threads
                )
            best = {}
            for _ in range(args.repeats):
                for peer, timed in runs.items():
                    time.sleep(args.settle)
                    result = timed()
                    if peer not in best or result["s_per_epoch"] < best[peer]["s_per_epoch"]:
                        best[peer] = result
            if torch is not None:
                fastest = min(
                    (k for k in best if k != "sknet"), key=lambda k: best[k]["s_per_epoch"]
                )
                best["torch"] = {**best[fastest], "setting": fastest}
            results[name] = best
            print(
                f"  {name}: "
                + ", ".join(f"{k} {v['s_per_epoch']:.3f} s/epoch" for k, v in best.items()),
                flush=True,
            )
    table = []
    if torch is not None:
        for name in NETWORKS:
            ratio = results[name]["sknet"]["s_per_epoch"] / results[name]["torch"]["s_per_epoch"]
            verdict = "met" if ratio <= TARGET else "MISSED"
            table.append(
                {
                    "key": f"{name}_vs_torch",
                    "value": ratio,
                    "target": f"<= {TARGET:g}: {verdict}",
                }
            )
    return {
        "config": {
            "train_rows": n_train,
            "test_rows": n_test,
            "steps": STEPS,
            "vocab": VOCAB,
            "epochs": epochs,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "sknet": sknet.__version__,
            "torch": torch.__version__ if torch is not None else None,
        },
        "results": results,
        "table": table,
    }


def print_results(results):
    print("| network | peer | s/epoch | test acc |")
    print("|---|---|---:|---:|")
    for name, peers in results["results"].items():
        for peer, r in peers.items():
            print(f"| {name} | {peer} | {r['s_per_epoch']:.3f} | {r['test_acc']:.3f} |")
    if results["table"]:
        print()
        print("| ratio | value | target |")
        print("|---|---:|---|")
        for row in results["table"]:
            key, value, target = row["key"], row["value"], row["target"]
            print(f"| {key} (sknet / PyTorch s/epoch) | {value:.2f} | {target} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--torch-threads",
        type=int,
        nargs="+",
        default=None,
        help="PyTorch's thread counts to try (default: --threads and 1)",
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--settle", type=float, default=1.0, help="idle seconds before a run")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.settle = 0.0
    print(
        f"sknet {sknet.__version__}, numpy {np.__version__}, "
        f"torch {torch.__version__ if torch else 'not installed'}; {args.threads} threads"
    )
    results = run(args)
    print_results(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()

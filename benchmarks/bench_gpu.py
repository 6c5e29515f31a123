"""Benchmark sknet on a CUDA GPU against PyTorch CUDA (eager), in one run.

For each network and batch size of issue-7's table (MLP 784-256-128-10 at batch
128 and 1024; the default ConvNetClassifier, two 3x3 convolution blocks of 32
and 64 filters with 2x2 max pooling and a 128-unit dense layer, at batch 64
and 256) it times, on MNIST-shaped data:

- sknet on the GPU (``device="cuda"``), seconds per epoch;
- PyTorch on the GPU with the same network, initialisation scheme, Adam
  settings, batch size and per-epoch shuffling, data resident on the device;
- sknet on the CPU, on a subset of the rows, scaled to the full epoch;

and prints the ratios with the targets (sknet/PyTorch <= 1.2 for the MLP and
<= 1.5 for the ConvNet; GPU >= 20x sknet's CPU for the MLP at batch 1024).
Each measurement follows a one-epoch warm-up (CUDA context, cuBLAS handles,
CuPy kernel compilation).

Run from the repository root on a GPU machine::

    python benchmarks/bench_gpu.py --results results

``--device cpu --rows 1024 --epochs 2 --cpu-rows 256`` runs the same code on
the CPU (a smoke test; PyTorch is skipped when it is not installed). Data: the
MNIST training files from ``--mnist-dir`` or ``SKNET_MNIST_DIR`` when present,
else the MNIST test file tiled to ``--rows`` rows, else random pixels.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

try:
    import sknet
except ImportError:  # run as `python benchmarks/bench_gpu.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import sknet

from sknet import ConvNetClassifier, MLPClassifier
from sknet.datasets import load_mnist

CONFIGS = [  # (network, batch size, target ratio sknet/torch)
    ("mlp", 128, 1.2),
    ("mlp", 1024, 1.2),
    ("convnet", 64, 1.5),
    ("convnet", 256, 1.5),
]
CPU_SPEEDUP_TARGET = ("mlp", 1024, 20.0)


def load_data(rows, mnist_dir):
    """MNIST-shaped float32 images (rows, 784) in [0, 1] and digit labels."""
    for subset in ("train", "test"):
        try:
            X, y = load_mnist(mnist_dir, subset=subset)
        except (FileNotFoundError, ValueError):
            continue
        reps = -(-rows // len(X))
        return np.tile(X, (reps, 1))[:rows], np.tile(y, reps)[:rows], f"MNIST {subset}"
    rng = np.random.RandomState(0)
    X = rng.rand(rows, 784).astype(np.float32)
    return X, rng.randint(0, 10, size=rows), "random pixels"


def make_sknet(network, batch_size, epochs, device):
    common = dict(
        batch_size=batch_size,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=epochs + 1,
        random_state=0,
        device=device,
    )
    if network == "mlp":
        return MLPClassifier(hidden_layer_sizes=(256, 128), **common)
    return ConvNetClassifier(**common)


def fit_seconds(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)  # fit ends with a device synchronization (finite-weights check)
        return time.perf_counter() - start


def time_sknet(network, batch_size, X, y, epochs, device):
    """Median seconds of one training epoch, and the fit's time outside its epochs.

    Each epoch's duration comes from ``history_`` (the loss is read once per
    epoch, which synchronizes the device). The rest of ``fit`` (input
    validation, the one copy of the data to the device, building the network)
    is reported apart: it does not grow with the number of epochs.
    """
    warm = max(len(X) // 4, min(len(X), 4 * batch_size))
    fit_seconds(make_sknet(network, batch_size, 1, device), X[:warm], y[:warm])  # warm-up
    model = make_sknet(network, batch_size, epochs, device)
    seconds = fit_seconds(model, X, y)
    durations = [row["duration"] for row in model.history_]
    return float(np.median(durations)), seconds - sum(durations), model


def torch_model(network, torch):
    nn = torch.nn
    if network == "mlp":
        layers = [
            nn.Linear(784, 256),
            nn.ReLU(),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        ]
    else:
        layers = [
            nn.Unflatten(1, (1, 28, 28)),
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        ]
    return nn.Sequential(*layers)


def time_torch(network, batch_size, X, y, epochs, device):
    """Seconds per epoch of the same training in PyTorch eager, or None."""
    try:
        import torch
    except ImportError:
        return None
    dev = torch.device("cuda" if device.startswith("cuda") else "cpu")
    torch.manual_seed(0)
    model = torch_model(network, torch).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = torch.nn.CrossEntropyLoss()
    X_dev = torch.as_tensor(X, device=dev)
    y_dev = torch.as_tensor(y, device=dev, dtype=torch.long)

    def run(n_epochs, n_rows):
        durations = []
        for _ in range(n_epochs):
            started = time.perf_counter()
            order = torch.randperm(n_rows, device=dev)
            total = torch.zeros((), device=dev)
            for start in range(0, n_rows, batch_size):
                idx = order[start : start + batch_size]
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(X_dev[idx]), y_dev[idx])
                loss.backward()
                optimizer.step()
                total += loss.detach() * idx.shape[0]
            float(total)  # the loss read once per epoch (a synchronization), as sknet does
            durations.append(time.perf_counter() - started)
        return durations

    run(1, min(len(X), 4 * batch_size))  # warm-up
    return float(np.median(run(epochs, len(X))))


def measure(args):
    X, y, source = load_data(args.rows, args.mnist_dir)
    print(
        f"data: {len(X)} rows of 784 from {source}; {args.epochs} epoch(s) per timing; "
        f"device {args.device}; sknet {sknet.__version__}"
    )
    results = []
    for network, batch_size, target in CONFIGS:
        gpu_s, overhead_s, model = time_sknet(network, batch_size, X, y, args.epochs, args.device)
        torch_s = time_torch(network, batch_size, X, y, args.epochs, args.device)
        cpu_rows = min(len(X), max(args.cpu_rows, 4 * batch_size))
        cpu_s, _, _ = time_sknet(network, batch_size, X[:cpu_rows], y[:cpu_rows], 1, "cpu")
        cpu_s *= len(X) / cpu_rows  # per full epoch
        results.append(
            dict(
                network=network,
                batch_size=batch_size,
                device=model.device_,
                sknet_s_per_epoch=gpu_s,
                sknet_fit_overhead_s=overhead_s,
                torch_s_per_epoch=torch_s,
                ratio_to_torch=None if torch_s is None else gpu_s / torch_s,
                target_ratio=target,
                sknet_cpu_s_per_epoch=cpu_s,
                speedup_over_cpu=cpu_s / gpu_s,
                train_accuracy=float(model.score(X[:10000], y[:10000])),
            )
        )
        print(
            f"  {network:8s} batch {batch_size:5d}: sknet {gpu_s:.3f} s/epoch "
            f"(+ {overhead_s:.3f} s per fit), "
            f"torch {'-' if torch_s is None else f'{torch_s:.3f}'}, "
            f"sknet cpu {cpu_s:.2f}",
            flush=True,
        )
    return results


def table(results):
    lines = [
        "| network | batch | sknet s/epoch | PyTorch s/epoch | sknet/PyTorch (target) "
        "| sknet CPU s/epoch | GPU speed-up over CPU | sknet s per fit outside epochs "
        "| train acc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ratio = (
            "-"
            if r["ratio_to_torch"] is None
            else (
                f"{r['ratio_to_torch']:.2f} (<= {r['target_ratio']}) "
                f"{'met' if r['ratio_to_torch'] <= r['target_ratio'] else 'MISSED'}"
            )
        )
        torch_s = "-" if r["torch_s_per_epoch"] is None else f"{r['torch_s_per_epoch']:.3f}"
        lines.append(
            f"| {r['network']} | {r['batch_size']} | {r['sknet_s_per_epoch']:.3f} | {torch_s} "
            f"| {ratio} | {r['sknet_cpu_s_per_epoch']:.2f} | {r['speedup_over_cpu']:.1f}x "
            f"| {r['sknet_fit_overhead_s']:.3f} | {r['train_accuracy']:.3f} |"
        )
    network, batch_size, target = CPU_SPEEDUP_TARGET
    for r in results:
        if (r["network"], r["batch_size"]) == (network, batch_size):
            verdict = "met" if r["speedup_over_cpu"] >= target else "MISSED"
            lines.append(
                f"\nGPU speed-up over sknet's CPU, {network} batch {batch_size}: "
                f"{r['speedup_over_cpu']:.1f}x (target >= {target:g}x) {verdict}"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--cpu-rows", type=int, default=6000, help="rows timed on the CPU, scaled to a full epoch"
    )
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument(
        "--results", default=None, help="directory for bench_gpu.json and bench_gpu.md"
    )
    args = parser.parse_args(argv)
    results = measure(args)
    text = table(results)
    print(text)
    if args.results:
        out = Path(args.results)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_gpu.json").write_text(json.dumps(results, indent=2))
        (out / "bench_gpu.md").write_text(text + "\n")
    return results


if __name__ == "__main__":
    main()

"""Streaming training data from host memory, and the memory estimate, measured.

For an MLP and a ConvNet it trains on data 1.5x the room a device limit
(``max_device_memory``) leaves for them, once with the data on the device and
once streamed, and prints the median epoch time of each and their ratio
(target on a GPU: streamed <= 1.3x in-memory). For an MLP, a ConvNet and an
LSTM it prints :func:`sknet.utils.estimate_memory` against the measured peak:
CuPy's memory pool on a GPU, the traced NumPy allocations on the CPU (target:
within 20%).

Run from the repository root::

    python benchmarks/bench_streaming.py              # the GPU
    python benchmarks/bench_streaming.py --device cpu --scale 0.1
"""

import argparse
import gc
import json
import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

try:
    import sknet  # noqa: F401
except ImportError:  # run as `python benchmarks/bench_streaming.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sknet import ConvNetClassifier, MLPClassifier, RNNClassifier
from sknet.layers import Conv2D, Dense, Flatten, MaxPool2D
from sknet.utils import estimate_memory


def _networks(device):
    conv = [Conv2D(16, 3, padding="same"), MaxPool2D(2), Flatten(), Dense(64)]
    common = dict(max_iter=3, random_state=0, device=device, tol=0.0)
    return {
        "mlp": (MLPClassifier(hidden_layer_sizes=(512, 512), batch_size=512, **common), 784),
        "convnet": (
            ConvNetClassifier(layers=conv, input_shape=(1, 28, 28), batch_size=256, **common),
            784,
        ),
        "lstm": (RNNClassifier(units=(128,), input_shape=(50, 16), batch_size=256, **common), 800),
    }


def _data(rows, features, seed=0):
    rng = np.random.RandomState(seed)
    return rng.rand(rows, features).astype(np.float32), rng.randint(10, size=rows)


def epoch_times(est, X, y):
    """Median seconds per epoch after the first (warm-up) epoch, and the placement."""
    fitted = clone(est).fit(X, y)
    durations = [row["duration"] for row in fitted.history_[1:]]
    return float(np.median(durations)), fitted.data_placement_


def streaming(est, rows, features):
    X, y = _data(rows, features)
    estimate = estimate_memory(est, X, y)
    data = X.nbytes + rows * 10 * 4
    # Data 1.5x the room the limit leaves them, after the model (the margin the
    # estimate names is kept free of a GPU's memory, not of max_device_memory).
    limit = int(estimate.total - estimate["data"] + data / 1.5)
    device_s, where = epoch_times(est, X, y)
    streamed_s, streamed_where = epoch_times(clone(est).set_params(max_device_memory=limit), X, y)
    return {
        "rows": rows,
        "limit_bytes": limit,
        "data_bytes": data,
        "in_memory_s": device_s,
        "in_memory_placement": where,
        "streamed_s": streamed_s,
        "streamed_placement": streamed_where,
        "ratio": streamed_s / device_s,
    }


def measured_peak(est, X, y):
    """Peak bytes a fit allocates: CuPy's pool on a GPU, traced NumPy on the CPU."""
    clone(est).set_params(max_iter=1).fit(X[:600], y[:600])  # kernels, handles
    gc.collect()
    if est.device.startswith("cuda"):
        import cupy as cp

        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        base, peak = pool.used_bytes(), [0]

        class Peak(cp.cuda.MemoryHook):
            name = "bench-peak"

            def malloc_postprocess(self, **kw):
                peak[0] = max(peak[0], pool.used_bytes() - base)

        with Peak():
            clone(est).set_params(max_iter=1).fit(X, y)
        return peak[0]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        clone(est).set_params(max_iter=1).fit(X, y)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every row count")
    parser.add_argument("--results", default=None, help="folder for streaming.json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    networks = _networks(args.device)
    report = {"device": args.device, "streaming": {}, "estimate": {}}
    for name in ("mlp", "convnet"):
        est, features = networks[name]
        rows = int({"mlp": 200_000, "convnet": 60_000}[name] * args.scale)
        result = report["streaming"][name] = streaming(est, rows, features)
        print(
            f"{name:8s} {rows} rows, data {result['data_bytes'] / 2**20:.0f} MiB, limit "
            f"{result['limit_bytes'] / 2**20:.0f} MiB: in memory "
            f"{result['in_memory_s']:.3f} s/epoch, streamed {result['streamed_s']:.3f} "
            f"s/epoch ({result['streamed_placement']}), "
            f"ratio {result['ratio']:.2f} (target <= 1.3)"
        )
    for name, (est, features) in networks.items():
        X, y = _data(int(20_000 * args.scale), features)
        estimate = estimate_memory(est, X, y).total
        peak = measured_peak(est, X, y)
        report["estimate"][name] = {"estimate": estimate, "measured": peak}
        print(
            f"{name:8s} estimate {estimate / 2**20:.1f} MiB, measured peak "
            f"{peak / 2**20:.1f} MiB ({100 * (estimate - peak) / peak:+.1f}%, target within 20%)"
        )
    if args.results:
        path = Path(args.results) / "streaming.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()

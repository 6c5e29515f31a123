"""
==========================================
MNIST: an MLP on real handwritten digits
==========================================

Train :class:`~sknet.MLPClassifier` on MNIST read from the standard IDX files
and compare it with scikit-learn's own MLP with the same parameters. Give the
directory of the files on the command line, or in ``SKNET_MNIST_DIR``::

    python examples/mnist_mlp.py path/to/mnist

With only the 10,000-image test file, the example uses a stratified 80/20
split of it; with the training files too, it trains on the 60,000 training
images and tests on the 10,000 test images.
"""

import sys
import time
import warnings

from sklearn import neural_network
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import MLPClassifier
from sknet.datasets import load_mnist

directory = sys.argv[1] if len(sys.argv) > 1 else None
try:
    X_train, y_train = load_mnist(directory, subset="train")
    X_test, y_test = load_mnist(directory, subset="test")
except FileNotFoundError as exc:
    if "train-" not in str(exc):
        raise SystemExit(f"{exc}\nusage: python examples/mnist_mlp.py MNIST_DIR") from None
    X, y = load_mnist(directory, subset="test")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=0
    )
print(f"MNIST: {len(X_train)} training and {len(X_test)} test images")

params = dict(hidden_layer_sizes=(256, 128), batch_size=128, max_iter=15, random_state=0)
for name, model in [
    ("sknet", MLPClassifier(**params)),
    ("scikit-learn", neural_network.MLPClassifier(**params)),
]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 15 epochs on purpose
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    print(
        f"{name:>12}: test accuracy {model.score(X_test, y_test):.4f}, "
        f"fit {seconds:.1f} s ({seconds / model.n_iter_:.2f} s/epoch)"
    )

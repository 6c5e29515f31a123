"""
================================================
MNIST: a convolutional network on real digits
================================================

Train :class:`~sknet.ConvNetClassifier` on MNIST read from the standard IDX
files. Give the directory of the files on the command line, or in
``SKNET_MNIST_DIR``::

    python examples/convnet_mnist.py path/to/mnist [epochs]

With only the 10,000-image test file, the example trains on a stratified 80%
of it and tests on the rest; with the training files too, it trains on the
60,000 training images and tests on the 10,000 test images. The network is
the estimator's default: two 3x3 convolution blocks (32 and 64 filters, each
followed by 2x2 max pooling) and a 128-unit dense layer.
"""

import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import ConvNetClassifier
from sknet.datasets import load_mnist

directory = sys.argv[1] if len(sys.argv) > 1 else None
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
try:
    X_train, y_train = load_mnist(directory, subset="train", flatten=False)
    X_test, y_test = load_mnist(directory, subset="test", flatten=False)
except FileNotFoundError as exc:
    if "train-" not in str(exc):
        usage = "usage: python examples/convnet_mnist.py MNIST_DIR [epochs]"
        raise SystemExit(f"{exc}\n{usage}") from None
    X, y = load_mnist(directory, subset="test", flatten=False)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=0
    )
print(f"MNIST: {len(X_train)} training and {len(X_test)} test images of {X_train.shape[1:]}")

clf = ConvNetClassifier(batch_size=64, max_iter=epochs, verbose=True, random_state=0)
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed number of epochs
    clf.fit(X_train, y_train)
seconds = time.perf_counter() - start
print(f"Trained on {clf.device_!r}: {seconds / clf.n_iter_:.2f} s per epoch")
print(f"Test accuracy: {clf.score(X_test, y_test):.4f}")

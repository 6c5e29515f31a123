"""
==================================================
Sequential MNIST: an LSTM reads digits row by row
==================================================

Each 28x28 MNIST image becomes a sequence of 28 steps of 28 pixels, and
:class:`~sknet.RNNClassifier` with one LSTM layer of 128 units classifies it
from the last state. Give the directory of the IDX files on the command line,
or in ``SKNET_MNIST_DIR``::

    python examples/rnn_sequential_mnist.py path/to/mnist [epochs]

With only the 10,000-image test file, it trains on a stratified 8,000 and
tests on the other 2,000 (about 96% after 15 epochs, a second or so per epoch
on a laptop CPU).
"""

import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import RNNClassifier
from sknet.callbacks import PrintLog, ProgressBar
from sknet.datasets import load_mnist

directory = sys.argv[1] if len(sys.argv) > 1 else None
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
try:
    X, y = load_mnist(directory, subset="test", flatten=False)  # (n, 28, 28): rows are steps
except FileNotFoundError as exc:
    raise SystemExit(f"{exc}\nusage: python examples/rnn_sequential_mnist.py MNIST_DIR") from None
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=8000, test_size=2000, stratify=y, random_state=0
)

clf = RNNClassifier(
    cell="lstm",
    units=(128,),
    batch_size=128,
    max_iter=epochs,
    clip_norm=5.0,
    random_state=0,
    callbacks=[PrintLog(), ProgressBar()],
)
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed number of epochs
    clf.fit(X_train, y_train, X_val=X_test, y_val=y_test)
seconds = time.perf_counter() - start
print(
    f"LSTM(128) over {clf.input_shape_[0]} rows of {clf.input_shape_[1]} pixels, "
    f"trained on {clf.device_!r}: {seconds / clf.n_iter_:.2f} s per epoch"
)
print(f"Test accuracy: {clf.score(X_test, y_test):.4f}")

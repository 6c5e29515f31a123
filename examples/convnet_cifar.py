"""
=====================================================
CIFAR-10: a convolutional network on colour images
=====================================================

Train :class:`~sknet.ConvNetClassifier` on CIFAR-10, read by
:func:`sknet.datasets.load_cifar10` from the "CIFAR-10 python version"
archive (``cifar-10-python.tar.gz`` from the CIFAR page at the University of
Toronto; sknet downloads nothing) or the directory it extracts to::

    python examples/convnet_cifar.py path/to/cifar-10-python.tar.gz [epochs] [n_train]

or with ``SKNET_CIFAR10_DIR`` set. The network: three blocks of two 3x3
convolutions with batch normalization (32, 64, 128 filters, each block ending
in 2x2 max pooling), a 256-unit dense layer with dropout; Adam, batch 128,
early stopping on 5,000 held-out training images.

Time, measured on random images of CIFAR-10's shape (the time does not depend on
the pixels): on a 2-core x86-64 CPU an epoch over the 45,000 training images
takes about 3.5 minutes (4.8 ms an image, batch 128), so 20 epochs about 70
minutes; prediction runs at about 650 images a second. On a GPU it was not
measured yet. Accuracy was not measured either (no CIFAR-10 copy where this
example was written): networks of this size usually reach 0.75-0.80 test
accuracy in about 20 epochs. Give ``n_train`` to try it on fewer images.

.. note::

   The documentation build does not run this example: it needs the CIFAR-10
   archive (sknet downloads nothing), and its 20 epochs take over an hour on
   a CPU. No output is shown because it has not been run on the real data yet;
   ``tests/test_examples.py`` runs it on a few fake batches of CIFAR-10's format.
"""

import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from sknet import ConvNetClassifier
from sknet.datasets import load_cifar10
from sknet.layers import BatchNorm, Conv2D, Dense, Dropout, Flatten, MaxPool2D

path = sys.argv[1] if len(sys.argv) > 1 else None
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
n_train = int(sys.argv[3]) if len(sys.argv) > 3 else None
try:
    X_train, y_train, classes = load_cifar10(path, subset="train")
    X_test, y_test, _ = load_cifar10(path, subset="test")
except FileNotFoundError as exc:
    raise SystemExit(
        f"{exc}\nusage: python examples/convnet_cifar.py CIFAR10_PATH [epochs] [n_train]"
    ) from None
if n_train is not None:
    X_train, y_train = X_train[:n_train], y_train[:n_train]


def block(filters):
    return [
        Conv2D(filters, 3, padding="same", use_bias=False),
        BatchNorm(),
        Conv2D(filters, 3, padding="same", activation="relu"),
        MaxPool2D(2),
    ]


clf = ConvNetClassifier(
    layers=[
        *block(32),
        *block(64),
        *block(128),
        Flatten(),
        Dense(256, activation="relu", init="he_uniform"),
        Dropout(0.3),
    ],
    batch_size=128,
    max_iter=epochs,
    early_stopping=True,
    validation_fraction=min(0.1, 5000 / len(X_train)) if len(X_train) > 100 else 0.2,
    n_iter_no_change=5,
    random_state=0,
)
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    clf.fit(X_train, y_train)
seconds = time.perf_counter() - start
print(
    f"Trained on {len(X_train)} CIFAR-10 images on {clf.device_!r}: {clf.n_iter_} "
    f"epochs, {seconds / clf.n_iter_:.1f} s per epoch"
)
print(
    f"Test accuracy: {clf.score(X_test, y_test):.4f} "
    f"(best validation accuracy {clf.best_validation_score_:.4f})"
)
print("First test images:", [classes[label] for label in clf.predict(X_test[:5])])

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

.. note::

   The documentation build runs this example only when it has the MNIST files
   (``SKNET_MNIST_DIR``). Otherwise this page shows the code, and here is what
   ``python examples/convnet_mnist.py MNIST_DIR`` printed with the 10,000-image
   test file alone, on a 2-core machine that other jobs were using at the same
   time, so its times say little
   (:doc:`/user_guide/performance` has controlled measurements)::

       MNIST: 8000 training and 2000 test images of (28, 28)
       Iteration 1, loss = 0.35359836
       Iteration 2, loss = 0.08011097
       Iteration 3, loss = 0.04033871
       Iteration 4, loss = 0.02814507
       Iteration 5, loss = 0.01022237
       Trained on 'cpu': 41.70 s per epoch
       Test accuracy: 0.9780

   and the figure it drew:

   .. image:: /_static/gallery/convnet_mnist.png
      :alt: the 32 first-layer filters and 16 misclassified test digits
"""

# sphinx_gallery_thumbnail_path = "_static/gallery/convnet_mnist.png"

import sys
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
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

# %%
# What the first layer learned, and the test digits it gets wrong
# ----------------------------------------------------------------
# The 32 filters of the first convolution (3x3 weights), and the first misclassified test
# images with the predicted label (and the true one).
W = clf.network_.backend.to_numpy(clf.layers_[0].params["W"])  # (32, 1, 3, 3)
predicted = clf.predict(X_test)
wrong = np.flatnonzero(predicted != y_test)[:16]
fig, axes = plt.subplots(3, 16, figsize=(10, 2.8))
for ax, w in zip(axes[:2].ravel(), W[:, 0]):
    ax.imshow(w, cmap="RdBu_r", vmin=-np.abs(W).max(), vmax=np.abs(W).max())
for ax, row in zip(axes[2], wrong):
    ax.imshow(X_test[row].reshape(28, 28), cmap="gray_r")
    ax.set_title(f"{predicted[row]} ({y_test[row]})", fontsize=8)
for ax in axes.ravel():
    ax.set_axis_off()
fig.suptitle("First-layer filters (top two rows); misclassified test digits: predicted (true)")

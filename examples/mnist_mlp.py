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

.. note::

   The documentation build runs this example only when it has the MNIST files
   (``SKNET_MNIST_DIR``). Otherwise this page shows the code, and here is what
   ``python examples/mnist_mlp.py MNIST_DIR`` printed with the 10,000-image test
   file alone, on a 2-core machine that other jobs were using at the same time,
   so its times say little (:doc:`/user_guide/performance` has controlled
   measurements: sknet's epochs take 0.43x scikit-learn's there)::

       MNIST: 8000 training and 2000 test images
              sknet: test accuracy 0.9555, fit 145.5 s (9.70 s/epoch)
       scikit-learn: test accuracy 0.9570, fit 159.3 s (10.62 s/epoch)

   and the figure it drew (the two training losses nearly coincide):

   .. image:: /_static/gallery/mnist_mlp.png
      :alt: the training loss of both MLPs over 15 epochs
"""

# sphinx_gallery_thumbnail_path = "_static/gallery/mnist_mlp.png"

import sys
import time
import warnings

import matplotlib.pyplot as plt
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
results = {}
for name, model in [
    ("sknet", MLPClassifier(**params)),
    ("scikit-learn", neural_network.MLPClassifier(**params)),
]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 15 epochs on purpose
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    results[name] = (model.score(X_test, y_test), seconds / model.n_iter_, model.loss_curve_)
    print(
        f"{name:>12}: test accuracy {results[name][0]:.4f}, "
        f"fit {seconds:.1f} s ({results[name][1]:.2f} s/epoch)"
    )

# %%
# The two training losses, epoch by epoch
fig, ax = plt.subplots(figsize=(6, 3.8))
for name, (accuracy, _, curve) in results.items():
    ax.plot(range(1, len(curve) + 1), curve, label=f"{name}: test accuracy {accuracy:.4f}")
ax.set(xlabel="epoch", ylabel="training loss", yscale="log")
ax.set_title("MLP 784-256-128-10, same parameters, same data")
ax.legend()
fig.tight_layout()

"""
=====================================================================
Transfer learning: new classes with a few labels, from a trained net
=====================================================================

A network trained on the digits 0-4 is reused for the digits 5-9, of which
only 10, 20 or 50 labelled images per class are available. That is the usual
shape of a real transfer: the classes you care about arrived later, or are
costly to label, while a related task with plenty of labels taught the
network strokes, loops and edges that the new classes share.

Three ways to train the same architecture on the few labels, over 5 random
draws of the labelled images (mean and spread of test accuracy on the new
classes):

- from scratch, every layer trained from random weights;
- frozen: :func:`sknet.layers.from_estimator` copies the trained
  convolutional base with its weights, frozen, and only a new dense layer and
  the output layer are trained;
- fine-tuned: the same copies, trainable with ``lr_scale=0.1`` (small steps
  for what was learned, full steps for the new head).

With MNIST (the IDX files, at least the 10,000-image test file, in a directory
given on the command line or in ``SKNET_MNIST_DIR``) it uses the test file
split 8,000/2,000 (stratified, ``random_state=0``) and the estimator's default
ConvNet; without MNIST, scikit-learn's 8x8 digits and a smaller network::

    python examples/transfer_learning.py [MNIST_DIR]
"""

import os
import sys
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import ConvNetClassifier
from sknet.datasets import load_mnist
from sknet.layers import Dense, from_estimator

warnings.simplefilter("ignore", ConvergenceWarning)  # fixed epoch budgets
directory = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SKNET_MNIST_DIR")
try:
    X, y = load_mnist(directory, subset="test", flatten=False)  # pixels in [0, 1]
    source_params, epochs, data = {}, 60, "MNIST test file, 8,000/2,000 split"
except (FileNotFoundError, ValueError):
    X, y = load_digits(return_X_y=True)
    X = X.reshape(-1, 8, 8) / 16.0
    source_params, epochs = dict(conv_filters=(16,), dense_units=(64,)), 60
    data = "scikit-learn's digits (no MNIST given), 80/20 split"
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=0.8, stratify=y, random_state=0
)
old_train, new_train = y_train < 5, y_train >= 5
new_test = y_test >= 5

source = ConvNetClassifier(
    max_iter=10, learning_rate_init=0.002, random_state=0, **source_params
).fit(X_train[old_train], y_train[old_train])
print(
    f"{data}; source network trained on the digits 0-4 "
    f"({old_train.sum()} images): test accuracy "
    f"{source.score(X_test[y_test < 5], y_test[y_test < 5]):.3f}"
)


def few_labels(n_per_class, seed):
    rng = np.random.RandomState(seed)
    rows = np.flatnonzero(new_train)
    picked = [
        rng.choice(rows[y_train[rows] == c], n_per_class, replace=False) for c in range(5, 10)
    ]
    return np.concatenate(picked)


def model(kind, seed):
    """The same architecture each time: the source's convolutional base (its layers
    up to the Flatten) and a new dense layer (the estimator adds the output layer)."""
    common = dict(max_iter=epochs, random_state=seed)
    if kind == "from scratch":  # unfitted copies: random weights, all trained
        layers = [clone(layer) for layer in source.layers_[:-2]]
    else:
        layers = from_estimator(source, upto=-2, trainable=kind != "frozen")
    if kind == "fine-tuned":
        for layer in layers:
            if layer.get_params().get("lr_scale") is not None:
                layer.set_params(lr_scale=0.1)
    return ConvNetClassifier(layers=[*layers, Dense(64, activation="relu")], **common)


kinds = ["from scratch", "frozen", "fine-tuned"]
label_counts = (10, 20, 50)
results = {kind: [] for kind in kinds}
print(
    f"\nAccuracy on the digits 5-9 ({new_test.sum()} test images), 5 draws of the labelled images:"
)
print(f"{'labels per class':>16}  " + "  ".join(f"{kind:>15}" for kind in kinds))
for n_per_class in label_counts:
    cells = []
    for kind in kinds:
        scores = []
        for seed in range(5):
            rows = few_labels(n_per_class, seed)
            clf = model(kind, seed).fit(X_train[rows], y_train[rows])
            scores.append(clf.score(X_test[new_test], y_test[new_test]))
        results[kind].append((np.mean(scores), np.std(scores)))
        cells.append(f"{np.mean(scores):.3f} +- {np.std(scores):.3f}")
    print(f"{n_per_class:>16}  " + "  ".join(f"{cell:>15}" for cell in cells))

# %%
# Accuracy against the number of labels
# -------------------------------------
# Mean and spread over the five draws; the source network never saw the digits 5-9.
fig, ax = plt.subplots(figsize=(6, 3.8))
for kind, points in results.items():
    means, spreads = np.array(points).T
    ax.errorbar(label_counts, means, yerr=spreads, marker="o", capsize=3, label=kind)
ax.set(
    xscale="log",
    xticks=label_counts,
    xticklabels=label_counts,
    xlabel="labelled images per new class",
    ylabel="test accuracy on the digits 5-9",
    title=data,
)
ax.minorticks_off()
ax.legend()
fig.tight_layout()

"""
=====================================================
Layers and losses written as their forward pass alone
=====================================================

A gated linear unit and layer normalization as layers, a swish activation as a
:class:`~sknet.layers.Lambda`, and a label-smoothed cross-entropy as a loss: each
is a few lines of forward computation with the functions of
:mod:`sknet.autodiff`, and sknet derives every gradient. The script checks each
against finite differences, then trains them on the digits next to the same
network built from the stock ``Dense`` layers and log-loss.

    python examples/forward_only_layers.py
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import ConvNetClassifier
from sknet import autodiff as ad
from sknet.layers import Dense, Flatten, Lambda, Layer
from sknet.losses import Loss
from sknet.utils import check_layer_gradients, check_loss_gradients

warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed epoch budget


class GatedLinearUnit(Layer):
    """``a * sigmoid(g)`` where ``[a | g] = X @ W + b``."""

    def __init__(self, units=64, *, trainable=True, lr_scale=1.0, weights=None):
        self.units = units
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        n = input_shape[0]
        W = rng.uniform(-((6 / n) ** 0.5), (6 / n) ** 0.5, (n, 2 * self.units))
        self.add_param("W", W, regularized=True)  # alpha's L2 penalty applies to W
        self.add_param("b", np.zeros(2 * self.units))
        return (self.units,)

    def forward(self, X, *, training):
        A = X @ self.params["W"] + self.params["b"]
        return A[:, : self.units] * ad.sigmoid(A[:, self.units :])


class LayerNorm(Layer):
    """Each sample's features standardized, then scaled and shifted (learned)."""

    def __init__(self, epsilon=1e-5, *, trainable=True, lr_scale=1.0, weights=None):
        self.epsilon = epsilon
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("gamma", np.ones(input_shape))
        self.add_param("beta", np.zeros(input_shape))
        return input_shape

    def forward(self, X, *, training):
        centered = X - ad.mean(X, axis=1, keepdims=True)
        scale = ad.sqrt(ad.var(X, axis=1, keepdims=True) + self.epsilon)
        return centered / scale * self.params["gamma"] + self.params["beta"]


def swish(X):
    return X * ad.sigmoid(X)


class SmoothedCrossEntropy(Loss):
    """Cross-entropy against targets mixed with the uniform distribution."""

    out_activation = "softmax"

    def __init__(self, smoothing=0.1):
        self.smoothing = smoothing

    def output(self, Z):
        return ad.softmax(Z)

    def value(self, Z, Y):
        targets = Y * (1 - self.smoothing) + self.smoothing / Y.shape[1]
        return -ad.sum(targets * ad.log_softmax(Z), axis=1)


# %%
# Every gradient against finite differences (float64)
# ----------------------------------------------------
for name, errors in [
    ("GatedLinearUnit", check_layer_gradients(GatedLinearUnit(4), (6,))),
    ("LayerNorm", check_layer_gradients(LayerNorm(), (6,))),
    ("Lambda(swish)", check_layer_gradients(Lambda(swish), (6,))),
    ("SmoothedCrossEntropy", {"Z": check_loss_gradients(SmoothedCrossEntropy())}),
]:
    print(f"{name:>22}: largest relative error {max(errors.values()):.1e}")

# %%
# Trained next to the stock layers
# --------------------------------
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, random_state=0)
networks = {
    "Dense(64, relu) x 2, log-loss": (
        [Flatten(), Dense(64, "relu"), Dense(64, "relu")],
        "log_loss",
    ),
    "GLU, LayerNorm, GLU, swish, smoothed": (
        [Flatten(), GatedLinearUnit(64), LayerNorm(), GatedLinearUnit(64), Lambda(swish)],
        SmoothedCrossEntropy(0.1),
    ),
}
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, (layers, loss) in networks.items():
    clf = ConvNetClassifier(
        layers=layers, loss=loss, max_iter=40, random_state=0, device="cpu"
    ).fit(X_train, y_train)
    seconds = sum(row["duration"] for row in clf.history_)
    accuracy = clf.score(X_test, y_test)
    print(f"{name:>38}: test accuracy {accuracy:.3f} ({seconds:.2f} s)")
    ax.plot(range(1, clf.n_iter_ + 1), clf.loss_curve_, label=f"{name}: {accuracy:.3f} on test")
ax.set(xlabel="epoch", ylabel="training loss (each its own)", yscale="log")
ax.set_title("Stock layers against forward-only ones")
ax.legend(fontsize=8)
fig.tight_layout()

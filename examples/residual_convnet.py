"""
=======================================================
A residual ConvNet: blocks that add, branches that join
=======================================================

Networks beyond a plain stack, from container layers: two
:class:`~sknet.layers.Residual` blocks (two 3x3 convolutions with batch
normalization, added to their input; the second halves the image, so its
shortcut is a learned 1x1 projection), then a
:class:`~sknet.layers.Concatenate` of two heads (a dense layer on the
flattened maps, and global average pooling). Trained on scikit-learn's digits
against the same budget of a plain stack, in seconds.

    python examples/residual_convnet.py
"""

import warnings

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import ConvNetClassifier
from sknet.layers import (
    Activation,
    BatchNorm,
    Concatenate,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    Residual,
    Sequential,
)

warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed epoch budget
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, stratify=y, random_state=0)


def residual_block(filters, stride=1):
    return Residual(
        [
            Conv2D(filters, 3, stride=stride, padding="same", use_bias=False),
            BatchNorm(),
            Activation("relu"),
            Conv2D(filters, 3, padding="same", use_bias=False),
            BatchNorm(),
        ]
    )


residual = ConvNetClassifier(
    layers=[
        Conv2D(16, 3, padding="same", activation="relu"),
        residual_block(16),
        Activation("relu"),
        residual_block(32, stride=2),  # 8x8 -> 4x4: the shortcut is a 1x1 projection
        Activation("relu"),
        Concatenate([Sequential([Flatten(), Dense(32, activation="relu")]), GlobalAvgPool2D()]),
    ],
    max_iter=12,
    learning_rate_init=0.005,
    random_state=0,
)
plain = ConvNetClassifier(
    conv_filters=(16, 32), dense_units=(32,), max_iter=12, learning_rate_init=0.005, random_state=0
)
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, clf in [("residual ConvNet", residual), ("plain ConvNet", plain)]:
    clf.fit(X_train, y_train)
    n_params = sum(p.size for layer in clf.layers_ for p in layer.params.values())
    accuracy = clf.score(X_test, y_test)
    print(f"{name:17s} {n_params:6d} parameters, test accuracy {accuracy:.4f}")
    ax.plot(range(1, clf.n_iter_ + 1), clf.loss_curve_, label=f"{name} ({accuracy:.3f} on test)")
ax.set(xlabel="epoch", ylabel="training loss", yscale="log", title="Same budget, two networks")
ax.legend()
fig.tight_layout()

# %%
# Every entry of the nested lists is a parameter, for grid searches
print(
    "grid-searchable:",
    "layers__1__layers__0__filters =",
    residual.get_params()["layers__1__layers__0__filters"],
)

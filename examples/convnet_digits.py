"""
=============================================
Digits as images: a small convolutional net
=============================================

scikit-learn's digits are 8x8 grey images. :class:`~sknet.ConvNetClassifier`
takes them as images, ``(n, 8, 8)``, or as the flat 64 columns (it infers the
square shape), and trains a small convolutional network in a few seconds on a
CPU. We compare it with :class:`~sknet.MLPClassifier` on the same split, then
grid-search one entry of a hand-written layer list.
"""

import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split

from sknet import ConvNetClassifier, MLPClassifier
from sknet.layers import Conv2D, Dense, Dropout, Flatten, MaxPool2D

X, y = load_digits(return_X_y=True)
images = X.reshape(-1, 8, 8) / 16.0
X_train, X_test, y_train, y_test = train_test_split(
    images, y, test_size=0.25, stratify=y, random_state=0
)

models = {
    "ConvNetClassifier": ConvNetClassifier(
        conv_filters=(16, 32),
        dense_units=(64,),
        learning_rate_init=0.003,
        early_stopping=True,
        random_state=0,
    ),
    "MLPClassifier": MLPClassifier(
        hidden_layer_sizes=(64,),
        learning_rate_init=0.003,
        early_stopping=True,
        random_state=0,
    ),
}
for name, model in models.items():
    data = X_train if name == "ConvNetClassifier" else X_train.reshape(len(X_train), -1)
    test = X_test if name == "ConvNetClassifier" else X_test.reshape(len(X_test), -1)
    start = time.perf_counter()
    model.fit(data, y_train)
    seconds = time.perf_counter() - start
    print(
        f"{name:>18}: test accuracy {model.score(test, y_test):.4f} "
        f"({model.n_iter_} epochs, {seconds:.1f} s on {model.device_})"
    )

# %%
# What the first convolution learned
# ----------------------------------
# Its 16 filters (3x3 weights), and what each makes of one test digit: the maps
# the next layer sees.
cnn = models["ConvNetClassifier"]
W = cnn.network_.backend.to_numpy(cnn.layers_[0].params["W"])[:, 0]  # (16, 3, 3)
b = cnn.network_.backend.to_numpy(cnn.layers_[0].params["b"])
image = np.pad(X_test[0], 1)
maps = np.maximum(
    np.einsum("fij,hwij->fhw", W, np.lib.stride_tricks.sliding_window_view(image, (3, 3)))
    + b[:, None, None],
    0,
)
fig, axes = plt.subplots(2, 17, figsize=(11, 2.2))
axes[0, 0].imshow(X_test[0], cmap="gray_r")
axes[0, 0].set_title("input", fontsize=8)
limit = np.abs(W).max()
for f in range(16):
    axes[0, f + 1].imshow(W[f], cmap="RdBu_r", vmin=-limit, vmax=limit)
    axes[1, f + 1].imshow(maps[f], cmap="gray_r")
for ax in axes.ravel():
    ax.set_axis_off()
fig.suptitle("First-layer filters (top) and their ReLU maps of a test digit (bottom)")

# %%
# Grid search reaches into a layer list
# -------------------------------------
# A network written layer by layer; ``layers__0__filters`` is the first layer's
# ``filters``.
layers = [
    Conv2D(16, 3, padding="same", activation="relu"),
    MaxPool2D(2),
    Flatten(),
    Dense(64, activation="relu"),
    Dropout(0.25),
]
search = GridSearchCV(
    ConvNetClassifier(layers=layers, learning_rate_init=0.003, max_iter=12, random_state=0),
    {"layers__0__filters": [8, 16], "layers__4__rate": [0.0, 0.25]},
    cv=2,
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # 12 epochs on purpose
    search.fit(X_train, y_train)
print(
    f"Grid search over the layer list: best {search.best_params_}, "
    f"CV accuracy {search.best_score_:.4f}, "
    f"test accuracy {search.score(X_test, y_test):.4f}"
)

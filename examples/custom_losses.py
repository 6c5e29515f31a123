"""
=========================================================
Losses beyond the log-loss: focal, Huber, quantile, yours
=========================================================

Three problems where the loss is the choice that matters, each against the
default loss on the same data and network, over five seeds:

- a 95/5 imbalanced classification: log-loss against the focal loss and
  against class weights (balanced accuracy at the default threshold);
- a regression whose training targets carry 5% gross outliers: squared error
  against Huber's loss (mean absolute error on clean test targets);
- a 90% upper bound: the pinball loss at ``quantile=0.9`` (the share of test
  targets below the prediction should be 0.9);

and a loss of your own (log-cosh), written against :class:`sknet.losses.Loss`
and checked with :func:`sknet.utils.check_loss_gradients`.

    python examples/custom_losses.py
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score, mean_absolute_error
from sklearn.model_selection import train_test_split

from sknet import MLPClassifier, MLPRegressor
from sknet.backend import get_array_module
from sknet.losses import FocalLoss, Huber, Loss, Quantile
from sknet.utils import check_loss_gradients

warnings.simplefilter("ignore", ConvergenceWarning)  # fixed epoch budgets
SEEDS = range(5)


def summary(values):
    return f"{np.mean(values):.3f} +- {np.std(values):.3f}"


# -- imbalanced classes: log-loss vs focal loss ------------------------------------------
# Trained two ways: with early stopping on a 10% validation split (what one does
# to avoid overfitting), and for a fixed 100 epochs, long enough for both losses to
# fit the training set.
settings = {
    "early stopping": dict(early_stopping=True, max_iter=200),
    "100 epochs": dict(max_iter=100),
}
choices = {
    "log_loss": dict(loss="log_loss"),
    "focal (gamma=2)": dict(loss=FocalLoss(gamma=2.0)),
    "log_loss, balanced": dict(class_weight="balanced"),
}
scores = {(setting, name): [] for setting in settings for name in choices}
for seed in SEEDS:
    X, y = make_classification(
        n_samples=3000,
        n_features=20,
        n_informative=5,
        weights=[0.95, 0.05],
        class_sep=0.8,
        random_state=seed,
    )
    X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
    for setting, params in settings.items():
        for name, choice in choices.items():
            clf = MLPClassifier((64,), random_state=0, device="cpu", **params, **choice)
            clf.fit(X_train, y_train)
            scores[setting, name].append(balanced_accuracy_score(y_test, clf.predict(X_test)))
print("95/5 classes, balanced accuracy on test:")
for (setting, name), values in scores.items():
    print(f"  {setting:15s} {name:19s} {summary(values)}")

# -- outliers: squared error vs Huber ----------------------------------------------------
errors = {"squared_error": [], "huber (delta=1)": []}
for seed in SEEDS:
    X, y = make_regression(n_samples=1500, n_features=10, noise=5.0, random_state=seed)
    y = y / y.std()
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    rng = np.random.RandomState(seed)
    outlier = rng.rand(len(y_train)) < 0.05
    y_train = y_train.copy()
    y_train[outlier] += rng.choice([-1, 1], outlier.sum()) * rng.uniform(10, 20, outlier.sum())
    for name, loss in [("squared_error", "squared_error"), ("huber (delta=1)", Huber(1.0))]:
        reg = MLPRegressor(
            loss, hidden_layer_sizes=(64,), max_iter=150, random_state=0, device="cpu"
        )
        errors[name].append(mean_absolute_error(y_test, reg.fit(X_train, y_train).predict(X_test)))
print("5% gross outliers in training, MAE on clean test targets:")
for name, values in errors.items():
    print(f"  {name:18s} {summary(values)}")

# -- an upper bound: the 0.9 quantile ----------------------------------------------------
below = []
for seed in SEEDS:
    X, y = make_regression(n_samples=2000, n_features=5, noise=20.0, random_state=seed)
    y = y / y.std()
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    reg = MLPRegressor(
        Quantile(0.9), hidden_layer_sizes=(64,), max_iter=200, random_state=0, device="cpu"
    ).fit(X_train, y_train)
    below.append(np.mean(y_test <= reg.predict(X_test)))
print(f"Quantile(0.9): share of test targets below the prediction {summary(below)}")

# %%
# The three comparisons, mean and spread over the five seeds
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), width_ratios=[3, 1.2, 1])
positions = np.arange(len(choices))
for offset, setting in [(-0.2, "early stopping"), (0.2, "100 epochs")]:
    values = [scores[setting, name] for name in choices]
    axes[0].bar(
        positions + offset,
        np.mean(values, axis=1),
        0.4,
        yerr=np.std(values, axis=1),
        label=setting,
    )
axes[0].set_xticks(positions, list(choices))
axes[0].set(ylabel="balanced accuracy (test)", ylim=(0.4, 0.85), title="95/5 classes")
axes[0].legend()
axes[1].bar(
    list(errors), [np.mean(v) for v in errors.values()], yerr=[np.std(v) for v in errors.values()]
)
axes[1].set(ylabel="MAE on clean test targets", title="5% outliers")
axes[1].tick_params(axis="x", labelsize=8)
axes[2].scatter(np.zeros(len(below)), below)
axes[2].axhline(0.9, color="grey", linestyle="--", label="target 0.9")
axes[2].set(xticks=[], ylim=(0.8, 1.0), ylabel="share below the prediction", title="Quantile(0.9)")
axes[2].legend()
fig.tight_layout()


# -- your own loss -------------------------------------------------------------------------
class LogCosh(Loss):
    """log(cosh(z - y)): squared error near 0, absolute error far away."""

    def loss_and_gradient(self, Z, Y):
        xp = get_array_module(Z)  # NumPy on the CPU, CuPy on a GPU
        R = Z - Y
        return xp.log(xp.cosh(R)).mean(axis=1), xp.tanh(R) / Z.shape[1]


print(f"LogCosh gradient check: worst relative error {check_loss_gradients(LogCosh()):.1e}")
X, y = make_regression(n_samples=500, n_features=5, noise=1.0, random_state=0)
reg = MLPRegressor(
    LogCosh(),
    hidden_layer_sizes=(32,),
    learning_rate_init=0.01,
    max_iter=200,
    random_state=0,
    device="cpu",
).fit(X, y / y.std())
print(f"LogCosh regressor: R^2 on its training data {reg.score(X, y / y.std()):.3f}")

"""
=========================================================
A network as a feature step, and networks in an ensemble
=========================================================

:class:`~sknet.FeatureExtractor` turns a network's last hidden layer into
features for any scikit-learn model; scikit-learn's own
:class:`~sklearn.ensemble.VotingClassifier` and
:class:`~sklearn.ensemble.StackingClassifier` combine sknet networks with
other models. On scikit-learn's digits, test accuracy of each:

    python examples/features_and_ensembles.py
"""

import warnings

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.ensemble import StackingClassifier, VotingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from sknet import ConvNetClassifier, FeatureExtractor, MLPClassifier

warnings.simplefilter("ignore", ConvergenceWarning)  # fixed epoch budgets
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, stratify=y, random_state=0)

mlp = MLPClassifier(hidden_layer_sizes=(64,), max_iter=60, random_state=0)
cnn = ConvNetClassifier(
    conv_filters=(8,), dense_units=(32,), learning_rate_init=0.01, max_iter=30, random_state=0
)
logistic = LogisticRegression(max_iter=2000)
models = {
    "MLPClassifier": mlp,
    "ConvNetClassifier": cnn,
    "LogisticRegression": logistic,
    # the ConvNet's 32 hidden features, then an SVM (the network is fitted inside)
    "FeatureExtractor(ConvNet) + SVC": make_pipeline(FeatureExtractor(cnn), SVC()),
    "soft voting (MLP, ConvNet, logistic)": VotingClassifier(
        [("mlp", mlp), ("cnn", cnn), ("lr", logistic)], voting="soft"
    ),
    "stacking (MLP, ConvNet, logistic)": StackingClassifier(
        [("mlp", mlp), ("cnn", cnn), ("lr", logistic)],
        final_estimator=LogisticRegression(max_iter=2000),
        cv=3,
    ),
}
scores = {}
for name, model in models.items():
    scores[name] = model.fit(X_train, y_train).score(X_test, y_test)
    print(f"{name:46s} {scores[name]:.4f}")

# A network fitted once, reused as a frozen feature step (not refitted by the pipeline).
fitted = models["ConvNetClassifier"]
reuse = make_pipeline(FeatureExtractor(FrozenEstimator(fitted)), SVC()).fit(X_train, y_train)
scores["FeatureExtractor(frozen fitted ConvNet) + SVC"] = reuse.score(X_test, y_test)
print(f"{'FeatureExtractor(frozen fitted ConvNet) + SVC':46s} {reuse.score(X_test, y_test):.4f}")

# %%
# Test accuracy of each, on the same split
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.barh(list(scores)[::-1], list(scores.values())[::-1])
for i, value in enumerate(list(scores.values())[::-1]):
    ax.text(value, i, f" {value:.3f}", va="center", fontsize=8)
ax.set(xlim=(0.9, 1.0), xlabel="test accuracy")
fig.tight_layout()

"""
================================================
Digits: a pipeline, a grid search and joblib
================================================

Train sknet's :class:`~sknet.MLPClassifier` the way a scikit-learn user would:
inside a :class:`~sklearn.pipeline.Pipeline` after a
:class:`~sklearn.preprocessing.StandardScaler`, tuned with a small
:class:`~sklearn.model_selection.GridSearchCV`, saved with :mod:`joblib`,
reloaded, and scored on held-out digits. Runs in seconds on a laptop CPU; on a
machine with a CUDA GPU and CuPy it trains there (``device="auto"``).
"""

import tempfile
import time
from pathlib import Path

import joblib
from sklearn import neural_network
from sklearn.datasets import load_digits
from sklearn.metrics import ConfusionMatrixDisplay
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sknet import MLPClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.2, stratify=y, random_state=0
)

# %%
# A pipeline and a grid search
# ----------------------------
pipe = make_pipeline(
    StandardScaler(),
    MLPClassifier(max_iter=100, early_stopping=True, random_state=0),
)
grid = GridSearchCV(
    pipe,
    {"mlpclassifier__hidden_layer_sizes": [(64,), (128, 64)]},
    cv=3,
)

start = time.perf_counter()
grid.fit(X_train, y_train)
search_seconds = time.perf_counter() - start
best = grid.best_estimator_
mlp = best[-1]
print(
    f"Grid search: {len(grid.cv_results_['params'])} candidates x 3 folds "
    f"in {search_seconds:.1f} s"
)
print(f"Best parameters: {grid.best_params_} (CV accuracy {grid.best_score_:.3f})")
print(
    f"Trained on {mlp.device_!r} for {mlp.n_iter_} epochs, "
    f"best validation accuracy {mlp.best_validation_score_:.3f}"
)

# %%
# The same network with scikit-learn's own MLP
# --------------------------------------------
# One fit each, with the parameters the search chose, on the same rows. On 1,400 small
# images either takes about a second; sknet's edge grows with the data (see the
# performance page).
best_params = {
    name.split("__")[1]: value
    for name, value in grid.best_params_.items()
    if name.startswith("mlpclassifier__")
}
seconds = {}
for name, model in [
    ("sknet", MLPClassifier(max_iter=100, early_stopping=True, random_state=0)),
    (
        "scikit-learn",
        neural_network.MLPClassifier(max_iter=100, early_stopping=True, random_state=0),
    ),
]:
    one = make_pipeline(StandardScaler(), model.set_params(**best_params))
    start = time.perf_counter()
    one.fit(X_train, y_train)
    seconds[name] = time.perf_counter() - start
    print(
        f"{name:>12}: fit in {seconds[name]:.2f} s ({model.n_iter_} epochs), "
        f"test accuracy {one.score(X_test, y_test):.4f}"
    )
faster, slower = sorted(seconds, key=seconds.get)
print(f"{faster} was {seconds[slower] / seconds[faster]:.1f} times as fast as {slower} here")

# %%
# Save, reload, score
# -------------------
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "digits_mlp.joblib"
    joblib.dump(best, path)
    size_kb = path.stat().st_size / 1024
    reloaded = joblib.load(path)

start = time.perf_counter()
accuracy = reloaded.score(X_test, y_test)
predict_ms = (time.perf_counter() - start) * 1000
assert (reloaded.predict(X_test) == best.predict(X_test)).all()
print(f"Saved and reloaded with joblib ({size_kb:.0f} kB): identical predictions")
print(
    f"Test accuracy of the reloaded pipeline: {accuracy:.4f} "
    f"({len(X_test)} digits scored in {predict_ms:.1f} ms)"
)

# %%
# Which digits it confuses
# ------------------------
# Rows are the true digits, columns the predicted ones: off the diagonal are the
# mistakes of the reloaded pipeline on the held-out digits (drawn with matplotlib, the
# ``plot`` extra; ``make demo`` installs sknet alone, so the demo skips the figure).
try:
    import matplotlib  # noqa: F401
except ImportError:
    print("(matplotlib is not installed: no confusion matrix)")
else:
    display = ConfusionMatrixDisplay.from_estimator(reloaded, X_test, y_test, colorbar=False)
    display.ax_.set_title(f"Held-out digits: test accuracy {accuracy:.3f}")
    display.figure_.set_size_inches(5, 5)

"""What the logger tests share: a small model and data, the fits of a search, MLflow's switch."""

import numpy as np
from sklearn.model_selection import GridSearchCV

from sknet import MLPClassifier

#: the candidates of the searches: 2 x 2 folds + the refit = 5 fits
GRID = {"alpha": [1e-4, 1e-2]}
N_FITS = 2 * 2 + 1


def data(n=120, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.rand(n, 4)
    return X, (X[:, 0] + X[:, 1] > 1).astype(int)


def mlp(callbacks, **params):
    """A small MLP that converges (no warning) in a few epochs."""
    defaults = dict(
        hidden_layer_sizes=(8,),
        tol=1.0,
        n_iter_no_change=1,
        random_state=0,
        device="cpu",
    )
    return MLPClassifier(callbacks=callbacks, **{**defaults, **params})


def search(estimator, n_jobs=2):
    """GridSearchCV over GRID with 2 folds and ``n_jobs`` processes, fitted."""
    X, y = data()
    return GridSearchCV(estimator, GRID, cv=2, n_jobs=n_jobs, error_score="raise").fit(X, y)


def allow_mlflow_model_loading(monkeypatch):
    """Let MLflow load a cloudpickled model back (the variable's name changed in MLflow 3.18)."""
    import mlflow.environment_variables as env

    new = "MLFLOW_ALLOW_MODEL_CODE_EXECUTION"
    monkeypatch.setenv(new if hasattr(env, new) else "MLFLOW_ALLOW_PICKLE_DESERIALIZATION", "true")

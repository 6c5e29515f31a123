"""
======================================================
Grid search and incremental training on a Dask cluster
======================================================

Two ways to spread sknet work over Dask workers:

1. a scikit-learn :class:`~sklearn.model_selection.GridSearchCV` whose fits
   run on the workers through joblib's ``"dask"`` backend;
2. :class:`dask_ml.wrappers.Incremental`, which trains one sknet estimator by
   ``partial_fit`` over the blocks of a Dask array that need not fit in memory.

Here the cluster is a :class:`~dask.distributed.LocalCluster` of two worker
processes; on a real cluster, connect the client to its scheduler instead
(``Client("tcp://scheduler:8786")``). Needs ``pip install "sknet-nn[distributed]"``.

.. note::

   The documentation build does not run this example: it starts a Dask
   cluster of worker processes, which the build does not install or start.
   Here is what ``python examples/dask_grid_search.py`` printed on a 2-core
   machine that other jobs were using at the same time (so its seconds say
   little)::

       Dask cluster with 2 workers
       GridSearchCV on Dask: 6 candidates x 3 folds in 1.5 s, test accuracy 0.9711
       best parameters: {'alpha': 0.01, 'hidden_layer_sizes': (128,)}
       Incremental: 10 passes over 6 blocks, test accuracy 0.9711

   and the figure it drew:

   .. image:: /_static/gallery/dask_grid_search.png
      :alt: the cross-validated accuracy of each candidate of the grid search
"""

# sphinx_gallery_thumbnail_path = "_static/gallery/dask_grid_search.png"

import time
import warnings

import dask.array as da
import joblib
import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster
from dask_ml.wrappers import Incremental
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split

from sknet import MLPClassifier

if __name__ == "__main__":  # worker processes re-import this file
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.25, stratify=y, random_state=0
    )
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    client = Client(cluster)
    print(f"Dask cluster with {len(client.scheduler_info()['workers'])} workers")

    grid = GridSearchCV(
        MLPClassifier(max_iter=60, random_state=0),
        {"hidden_layer_sizes": [(32,), (64,), (128,)], "alpha": [1e-4, 1e-2]},
        cv=3,
        n_jobs=-1,
    )
    start = time.perf_counter()
    with warnings.catch_warnings(), joblib.parallel_backend("dask"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid.fit(X_train, y_train)
    print(
        f"GridSearchCV on Dask: {len(grid.cv_results_['params'])} candidates x 3 folds "
        f"in {time.perf_counter() - start:.1f} s, test accuracy {grid.score(X_test, y_test):.4f}"
    )
    print(f"best parameters: {grid.best_params_}")

    results = grid.cv_results_
    labels = [
        f"{p['hidden_layer_sizes'][0]} units\nalpha={p['alpha']:g}" for p in results["params"]
    ]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar(labels, results["mean_test_score"], yerr=results["std_test_score"], color="C0")
    ax.set_ylim(0.9, 1.0)
    ax.set_ylabel("cross-validated accuracy")
    ax.set_title("GridSearchCV on two Dask workers")
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    plt.show()

    X_blocks = da.from_array(X_train.astype(np.float32), chunks=(250, 64))
    y_blocks = da.from_array(y_train, chunks=250)
    incremental = Incremental(
        MLPClassifier(learning_rate_init=0.01, random_state=0), scoring="accuracy"
    )
    for _ in range(10):
        incremental.partial_fit(X_blocks, y_blocks, classes=np.arange(10))
    print(
        f"Incremental: 10 passes over {X_blocks.numblocks[0]} blocks, "
        f"test accuracy {incremental.score(X_test, y_test):.4f}"
    )
    client.close()
    cluster.close()

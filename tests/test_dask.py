"""Distributed training on Dask: joblib's dask backend and dask-ml's Incremental.

Skipped with a reason when the ``distributed`` extra (dask, distributed,
dask-ml) is not installed; ``make test`` installs it.
"""

import numpy as np
import pytest

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")
pytest.importorskip("dask_ml", reason="needs dask-ml (the distributed extra)")

import dask.array as da  # noqa: E402
import joblib  # noqa: E402
from dask_ml.wrappers import Incremental  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402

from sknet import ConvNetClassifier, MLPClassifier  # noqa: E402
from tests.conftest import local_dask_client  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def client():
    with local_dask_client() as client:
        yield client


def test_grid_search_on_the_dask_joblib_backend(client, digits):
    X, y = digits
    grid = GridSearchCV(
        MLPClassifier(max_iter=30, random_state=0, device="cpu"),
        {"hidden_layer_sizes": [(16,), (32,)], "alpha": [1e-4, 1e-2]},
        cv=2,
        n_jobs=-1,
    )
    ran_on = client.run(lambda: True)
    assert len(ran_on) == 2  # two worker processes
    with joblib.parallel_backend("dask"):
        grid.fit(X, y)
    assert len(grid.cv_results_["params"]) == 4
    assert grid.best_score_ > 0.8
    assert grid.best_estimator_.device_ == "cpu"
    tasks = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.task_prefixes))
    assert tasks > 0  # the fits went through the scheduler


@pytest.mark.parametrize("Estimator", [MLPClassifier, ConvNetClassifier])
def test_incremental_partial_fit_over_blocks(client, digits, Estimator):
    X, y = digits
    X_dask = da.from_array(X.astype(np.float32), chunks=(300, 64))
    y_dask = da.from_array(y, chunks=300)
    assert X_dask.numblocks[0] > 1
    kw = dict(conv_filters=(4,), dense_units=(16,)) if Estimator is ConvNetClassifier else {}
    inc = Incremental(
        Estimator(learning_rate_init=0.01, random_state=0, device="cpu", **kw), scoring="accuracy"
    )
    for _ in range(4):  # four passes over the blocks
        inc.partial_fit(X_dask, y_dask, classes=np.arange(10))
    fitted = inc.estimator_
    assert len(fitted.loss_curve_) == 4 * X_dask.numblocks[0]  # one call per block
    assert fitted.t_ == 4 * len(X)
    assert inc.score(X_dask, y_dask) > 0.7

"""DataParallel with the layers and the model selection that broke it: the model is one
process's.

A threaded cluster over TCP (the replicas' own channels, started quickly):
``TimeDistributed(Dropout)``, a frozen ``BatchNorm`` under every
``sync_every``, and ``DataParallel(client=...)`` in ``clone``, ``pickle`` and
``cross_val_score``.
"""

import pickle

import numpy as np
import pytest

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402

from sknet import NeuralNetClassifier  # noqa: E402
from sknet.distributed import DataParallel  # noqa: E402
from sknet.layers import (  # noqa: E402
    BatchNorm,
    Dense,
    Dropout,
    GlobalAvgPool1D,
    Sequential,
    TimeDistributed,
)
from tests.distributed.helpers import assert_same_model, cluster_client, mlp  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def client():
    with cluster_client(processes=False, protocol="tcp://", host="127.0.0.1") as client:
        yield client


def network(layers, **params):
    defaults = dict(max_iter=2, random_state=0, device="cpu", dtype="float64")
    return NeuralNetClassifier(layers, **{**defaults, **params})


def test_time_distributed_dropout_trains_the_model_fit_trains(client, digits):
    # Before: the workers drew one mask row a sample for a layer that sees one row a
    # step, and crashed. Each step's row now gets the draw one process gives it.
    X, y = digits
    sequences = X.reshape(-1, 8, 8)
    est = network(
        [
            TimeDistributed(Dense(16, activation="relu")),
            TimeDistributed(Sequential([Dropout(0.3), Dense(8)])),
            GlobalAvgPool1D(),
        ],
    )
    parallel = DataParallel(est, client=client, sync_every=1).fit(sequences, y)
    assert_same_model(parallel.estimator_, clone(est).fit(sequences, y), rtol=1e-10)


@pytest.mark.parametrize("sync_every", [1, 2, "epoch"])
def test_a_frozen_batchnorm_stays_bit_identical(client, digits, sync_every):
    # Before: the replicas averaged a frozen layer's running statistics too, and the
    # average of equal numbers rounded them (by 2e-16 here) at every synchronization.
    X, y = digits
    rng = np.random.RandomState(0)
    frozen = {
        "gamma": rng.uniform(0.5, 2, 32),
        "beta": rng.randn(32),
        "running_mean": rng.randn(32),
        "running_var": rng.uniform(0.3, 3, 32),
    }
    est = network(
        [Dense(32, activation="relu"), BatchNorm(trainable=False, weights=frozen), BatchNorm()],
        max_iter=3,
    )
    fitted = DataParallel(est, client=client, sync_every=sync_every).fit(X, y).estimator_
    layer = fitted.network_.layers[1]
    for name, value in frozen.items():
        np.testing.assert_array_equal(np.asarray({**layer.params, **layer.state}[name]), value)
    trained = fitted.network_.layers[2].state["running_mean"]
    assert not np.array_equal(np.asarray(trained), 0)  # the trainable one still learns


def test_a_client_parameter_clones_pickles_and_cross_validates(client, digits):
    # Before: clone deep-copied the client and failed, and so did cross_val_score.
    X, y = digits
    model = DataParallel(mlp(max_iter=2), client=client, sync_every=1)
    twin = clone(model)
    assert twin.client is client and twin.estimator is not model.estimator
    scores = cross_val_score(model, X, y, cv=2)
    assert scores.shape == (2,) and np.all(scores > 0.3)
    fitted = model.fit(X, y)
    loaded = pickle.loads(pickle.dumps(fitted))
    assert loaded.client is None and fitted.client is client  # a connection is not saved
    np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))
    refit = loaded.set_params(client=client).fit(X, y)
    assert_same_model(refit.estimator_, fitted.estimator_)

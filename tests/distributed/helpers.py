"""What the distributed tests share: small clusters, the model to compare, deadlines."""

import contextlib
import threading
import warnings

import numpy as np
import pytest

from sknet import MLPClassifier

#: Seconds after which a fit under attack counts as hung (a bound, not a speed test).
HANG_SECONDS = 300


@contextlib.contextmanager
def cluster_client(**kwargs):
    """A Client (not the default one) of a LocalCluster of 2 workers x 1 thread, no dashboard."""
    import distributed

    options = dict(n_workers=2, threads_per_worker=1, dashboard_address=None)
    security = kwargs.get("security")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cluster start-up chatter
        cluster = distributed.LocalCluster(**{**options, **kwargs})
        client = distributed.Client(cluster, set_as_default=False, security=security)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            cluster.close()


def mlp(**params):
    defaults = dict(
        hidden_layer_sizes=(16,),
        learning_rate_init=0.01,
        max_iter=3,
        random_state=0,
        device="cpu",
        dtype="float64",
    )
    return MLPClassifier(**{**defaults, **params})


def weights(estimator):
    return [np.asarray(w) for w in estimator.network_.weights()]


def assert_same_model(a, b, rtol=0.0):
    assert a.loss_curve_ == pytest.approx(b.loss_curve_, rel=rtol, abs=0)
    for wa, wb in zip(weights(a), weights(b)):
        np.testing.assert_allclose(wa, wb, rtol=rtol, atol=0)


def within(seconds, function, *args, **kwargs):
    """``function(*args, **kwargs)`` in a thread: its result or error; a failure if it hangs."""
    outcome = {}

    def target():
        try:
            outcome["result"] = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s: a hang")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def fit_plugins(client):
    """The DataParallel plugins each worker holds (none once every fit ended)."""
    from sknet.distributed._state import plugin_name

    prefix = plugin_name("")
    return client.run(
        lambda dask_worker: sorted(n for n in dask_worker.plugins if n.startswith(prefix))
    )

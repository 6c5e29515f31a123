"""Fixtures running array tests on every available backend.

``cpu`` always runs. ``generic`` is the array-module-agnostic reference
backend (the code the CuPy backend inherits) running on NumPy, so the CPU
suite exercises the shared code body. ``cuda`` runs when CuPy sees a GPU and
is marked ``gpu`` (select with ``pytest -m gpu``).
"""

import contextlib
import warnings

import numpy as np
import pytest

from sknet.backend import Backend, cuda_device_count, get_backend

HAVE_GPU = cuda_device_count() > 0
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA GPU with CuPy")


class GenericBackend(Backend):
    """The reference kernels of :class:`Backend` on NumPy, as a device named 'cpu'."""

    def __init__(self):
        super().__init__("cpu", np)


BACKEND_PARAMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("generic", id="generic"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, needs_gpu]),
]

DEVICE_PARAMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, needs_gpu]),
]


def make_backend(name):
    return GenericBackend() if name == "generic" else get_backend(name)


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request):
    """Every backend: NumPy, the generic reference on NumPy, and CUDA if present."""
    return make_backend(request.param)


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


@pytest.fixture(params=DEVICE_PARAMS)
def device(request):
    """Every device an estimator can train on here."""
    return request.param


@contextlib.contextmanager
def local_dask_client():
    """A Client of a LocalCluster: 2 worker processes x 1 thread, loopback, no dashboard."""
    import distributed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cluster start-up chatter
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            cluster.close()

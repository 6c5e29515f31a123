"""Device behaviour: GPU failures, CuPy in and out, the same model on CPU and GPU.

The tests marked ``gpu`` need CuPy and a CUDA device and are skipped without
them (``pytest -m gpu`` or ``make gpu-check`` on a GPU machine runs them).
"""

import gc
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor
from sknet.backend import get_backend
from sknet.backend._numpy import NumpyBackend
from sknet.layers import Dense
from tests.conftest import needs_gpu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


class FakeOutOfMemory(Exception):
    """Stands for cupy.cuda.memory.OutOfMemoryError in the CPU suite."""


@pytest.fixture
def out_of_memory_after(monkeypatch):
    """Make the CPU backend 'run out of memory' after a number of Dense forwards."""

    def arm(n_calls):
        calls = []
        original = Dense.forward

        def forward(self, X, *, training):
            calls.append(1)
            if training and len(calls) > n_calls:
                raise FakeOutOfMemory("out of memory allocating 1 GB")
            return original(self, X, training=training)

        monkeypatch.setattr(NumpyBackend, "out_of_memory_errors", lambda self: (FakeOutOfMemory,))
        monkeypatch.setattr(Dense, "forward", forward)

    return arm


def test_out_of_memory_is_a_memory_error_naming_the_batch_size(digits, out_of_memory_after):
    X, y = digits
    out_of_memory_after(5)
    clf = MLPClassifier(batch_size=256, device="cpu")
    with pytest.raises(MemoryError, match=r"batch_size=256.*smaller batch_size.*device='cpu'"):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):  # no half-trained model left
        clf.predict(X)


def test_out_of_memory_in_partial_fit_keeps_the_previous_model(digits, out_of_memory_after):
    X, y = digits
    clf = MLPClassifier(random_state=0, device="cpu").partial_fit(X, y, classes=np.unique(y))
    proba = clf.predict_proba(X)
    out_of_memory_after(3)
    with pytest.raises(MemoryError, match="batch_size=200"):
        clf.partial_fit(X, y)
    assert_array_equal(clf.predict_proba(X), proba)


# -- on a GPU -------------------------------------------------------------------


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("Estimator", [MLPClassifier, ConvNetClassifier])
@pytest.mark.parametrize("params", [dict(), dict(solver="sgd"), dict(dtype="float64")])
def test_same_start_and_same_predictions_on_cpu_and_gpu(Estimator, params, digits):
    X, y = digits
    kw = dict(random_state=0, max_iter=5, shuffle=True, **params)
    if Estimator is ConvNetClassifier:
        kw.update(conv_filters=(8,), dense_units=(32,))
    first_cpu = Estimator(device="cpu", **{**kw, "max_iter": 1, "learning_rate_init": 1e-30})
    first_gpu = Estimator(device="cuda", **{**kw, "max_iter": 1, "learning_rate_init": 1e-30})
    first_cpu.fit(X, y)
    first_gpu.fit(X, y)
    for a, b in zip(first_cpu.layers_, first_gpu.layers_):
        for key in a.params:
            assert_allclose(
                a.backend_.to_numpy(a.params[key]),
                b.backend_.to_numpy(b.params[key]),
                rtol=1e-6,
                atol=1e-7,
            )
    cpu = Estimator(device="cpu", **kw).fit(X, y)
    cuda = Estimator(device="cuda", **kw).fit(X, y)
    assert cuda.device_ == "cuda:0"
    assert_allclose(cuda.predict_proba(X), cpu.predict_proba(X), atol=2e-3)
    assert (cuda.predict(X) == cpu.predict(X)).mean() > 0.99


@pytest.mark.gpu
@needs_gpu
def test_cupy_in_cupy_out(digits):
    import cupy as cp

    X, y = digits
    clf = MLPClassifier(max_iter=5, random_state=0, device="cuda").fit(X, y)
    X_gpu = cp.asarray(X)
    proba = clf.predict_proba(X_gpu)
    assert isinstance(proba, cp.ndarray) and proba.shape == (len(X), 10)
    labels = clf.predict(X_gpu)
    assert isinstance(labels, cp.ndarray)
    assert_array_equal(cp.asnumpy(labels), clf.predict(X))
    assert isinstance(clf.predict_log_proba(X_gpu), cp.ndarray)
    # string classes cannot live on the device: NumPy labels
    names = np.array(list("abcdefghij"))[y]
    assert isinstance(
        MLPClassifier(max_iter=2, device="cuda").fit(X, names).predict(X_gpu), np.ndarray
    )
    reg = MLPRegressor(max_iter=5, device="cuda").fit(X, y.astype(float))
    assert isinstance(reg.predict(X_gpu), cp.ndarray)
    conv = ConvNetClassifier(conv_filters=(4,), dense_units=(8,), max_iter=2, device="cuda").fit(
        X, y
    )
    assert isinstance(conv.predict_proba(X_gpu.reshape(-1, 8, 8)), cp.ndarray)
    # fit takes CuPy data too (validated on the host, one round trip)
    MLPClassifier(max_iter=2, device="cuda").fit(X_gpu, cp.asarray(y))


@pytest.mark.gpu
@needs_gpu
def test_gpu_model_pickles_to_numpy_and_predicts_on_cpu(digits):
    X, y = digits
    clf = MLPClassifier(max_iter=5, random_state=0, device="cuda").fit(X, y)
    assert all(type(c) is np.ndarray for c in clf.coefs_)
    restored = pickle.loads(pickle.dumps(clf))
    restored.network_.to_backend(get_backend("cpu"))
    assert_allclose(restored.predict_proba(X), clf.predict_proba(X), atol=1e-5)


@pytest.mark.gpu
@needs_gpu
def test_gpu_memory_is_released_after_fit(digits):
    import cupy as cp

    X, y = digits
    X_big, y_big = np.tile(X, (60, 1)).astype(np.float32), np.tile(y, 60)  # 27.6 MB
    pool = cp.get_default_memory_pool()
    gc.collect()
    pool.free_all_blocks()
    before = pool.used_bytes()  # what other tests in this process still hold
    clf = MLPClassifier(hidden_layer_sizes=(512, 512), max_iter=3, device="cuda")
    clf.fit(X_big, y_big)
    gc.collect()
    held = sum(int(p.nbytes) for layer in clf.layers_ for p in layer.params.values())
    # the pool keeps the model and the optimizer state (a few copies of the
    # parameters, 1.2 MB each here), not the training data or batch buffers
    grown = pool.total_bytes() - before
    assert grown < 8 * held + (1 << 20) < X_big.nbytes

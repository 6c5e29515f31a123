"""Tests for sknet/backend: device strings, data movement, the shared kernels."""

import pickle
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose

import sknet.backend as backend_module
from sknet.backend import ACTIVATIONS, Backend, get_backend
from sknet.backend._numpy import NumpyBackend
from tests.conftest import HAVE_GPU, GenericBackend


@pytest.fixture
def no_cupy(monkeypatch):
    """Pretend CuPy is not installed."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    backend_module.cuda_device_count.cache_clear()
    yield
    backend_module.cuda_device_count.cache_clear()


def test_cpu_backend():
    backend = get_backend("cpu")
    assert isinstance(backend, NumpyBackend)
    assert backend.name == "cpu" and backend.xp is np
    assert get_backend("CPU") is backend


def test_auto_falls_back_to_cpu_without_a_gpu(no_cupy, monkeypatch):
    monkeypatch.delenv("SKNET_DEVICE", raising=False)
    assert get_backend("auto").name == "cpu"
    assert backend_module.CUPY_AVAILABLE is False


def test_environment_variable_steers_auto(monkeypatch):
    monkeypatch.setenv("SKNET_DEVICE", "cpu")
    assert get_backend("auto").name == "cpu"
    monkeypatch.setenv("SKNET_DEVICE", "tpu")
    with pytest.raises(ValueError, match="SKNET_DEVICE='tpu'"):
        get_backend("auto")


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "gpu", "cuda:3"])
def test_cuda_without_cupy_is_a_clear_error(device, no_cupy):
    with pytest.raises(ValueError, match="CuPy is not installed.*device='cpu'"):
        get_backend(device)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:-1", "", "metal"])
def test_unknown_device_strings_are_rejected(device):
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"):
        get_backend(device)


@pytest.mark.parametrize("device", [0, None, 1.5])
def test_non_string_device_is_a_type_error(device):
    with pytest.raises(TypeError, match="device must be a string"):
        get_backend(device)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA GPU with CuPy")
def test_cuda_backend_and_out_of_range_device():
    backend = get_backend("cuda")
    assert backend.name == "cuda:0"
    with pytest.raises(ValueError, match="only .* device"):
        get_backend("cuda:99")


def test_backend_pickles_by_name():
    backend = get_backend("cpu")
    assert pickle.loads(pickle.dumps(backend)) is backend


def test_asarray_keeps_float32_without_copy():
    X = np.ones((3, 2), dtype=np.float32)
    assert get_backend("cpu").asarray(X, np.float32) is X
    converted = get_backend("cpu").asarray(X, np.float64)
    assert converted.dtype == np.float64


def test_sparse_stays_sparse_as_csr():
    import scipy.sparse as sp

    backend = get_backend("cpu")
    X = sp.random(4, 3, density=0.5, format="csc", random_state=0)
    Xb = backend.asarray(X, np.float32)
    assert backend.is_sparse(Xb) and Xb.format == "csr" and Xb.dtype == np.float32


def test_take_rows_into_buffer(backend):
    X = backend.asarray(np.arange(12.0).reshape(6, 2))
    out = backend.xp.empty((3, 2))
    rows = backend.take_rows(X, backend.asarray(np.array([4, 0, 2])), out=out)
    assert rows is out
    assert_allclose(backend.to_numpy(rows), [[8, 9], [0, 1], [4, 5]])


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_every_backend_computes_the_same_activations(name, backend):
    z = np.random.RandomState(0).standard_normal((4, 5)).astype(np.float32) * 4
    dy = np.random.RandomState(1).standard_normal((4, 5)).astype(np.float32)
    reference = GenericBackend()
    y_ref = reference.activation_forward(name, z, np.empty_like(z))
    dz_ref = reference.activation_backward(name, dy, y_ref, z, np.empty_like(z))
    Z = backend.asarray(z)
    Y = backend.activation_forward(name, Z, backend.xp.empty_like(Z))
    dZ = backend.activation_backward(name, backend.asarray(dy), Y, Z, backend.xp.empty_like(Z))
    assert_allclose(backend.to_numpy(Y), y_ref, rtol=1e-5, atol=1e-6)
    # Derivatives such as gelu's are differences of O(1) terms: a float32 ulp of
    # those (CUDA's tanh differs from NumPy's by one) is the absolute tolerance.
    assert_allclose(backend.to_numpy(dZ), dz_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_work_in_place(name, backend):
    z = np.random.RandomState(0).standard_normal((3, 4))
    expected = GenericBackend().activation_forward(name, z.copy(), np.empty_like(z))
    Z = backend.asarray(z.copy())
    backend.activation_forward(name, Z, Z)
    assert_allclose(backend.to_numpy(Z), expected, rtol=1e-12)


def test_adam_update_matches_the_formula(backend):
    rng = np.random.RandomState(0)
    p, g, m, v = (rng.standard_normal(5) for _ in range(4))
    v = np.abs(v)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    m_new = b1 * m + (1 - b1) * g
    v_new = b2 * v + (1 - b2) * g * g
    p_new = p - lr * m_new / (np.sqrt(v_new) + eps)
    P, M, V = backend.asarray(p.copy()), backend.asarray(m.copy()), backend.asarray(v.copy())
    backend.adam_update(P, backend.asarray(g), M, V, lr, b1, b2, eps, backend.xp.empty(5))
    assert_allclose(backend.to_numpy(M), m_new, rtol=1e-12)
    assert_allclose(backend.to_numpy(V), v_new, rtol=1e-12)
    assert_allclose(backend.to_numpy(P), p_new, rtol=1e-12)


@pytest.mark.parametrize("nesterov", [True, False])
def test_sgd_update_matches_the_formula(nesterov, backend):
    rng = np.random.RandomState(0)
    p, g, vel = (rng.standard_normal(5) for _ in range(3))
    lr, mom = 0.1, 0.9
    vel_new = mom * vel - lr * g
    p_new = p + (mom * vel_new - lr * g if nesterov else vel_new)
    P, VEL = backend.asarray(p.copy()), backend.asarray(vel.copy())
    backend.sgd_update(P, backend.asarray(g), VEL, lr, mom, nesterov, backend.xp.empty(5))
    assert_allclose(backend.to_numpy(VEL), vel_new, rtol=1e-12)
    assert_allclose(backend.to_numpy(P), p_new, rtol=1e-12)


def test_base_backend_equality_is_by_name():
    assert GenericBackend() == get_backend("cpu")
    assert Backend("cuda:0", np) != get_backend("cpu")
    assert len({GenericBackend(), get_backend("cpu")}) == 1


def test_importing_sknet_does_not_import_cupy():
    import subprocess

    code = "import sys, sknet; sknet.MLPClassifier(); print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_row_stream_keeps_integer_token_ids_exact(backend):
    """One dtype per array: ``None`` keeps the array's own (ids above 2**24 stay distinct)."""
    ids = (2**24 + np.arange(12)).reshape(6, 2)
    Y = np.arange(6, dtype=np.float64).reshape(6, 1)
    stream = backend.row_stream((ids, Y, None), (None, np.float32, np.float32), max_rows=4)
    rows = [np.array([5, 0, 3]), np.array([1, 2, 4])]
    for (X_chunk, Y_chunk, w_chunk), order in zip(stream.chunks(rows), rows):
        assert X_chunk.dtype == ids.dtype and Y_chunk.dtype == np.float32 and w_chunk is None
        np.testing.assert_array_equal(backend.to_numpy(X_chunk), ids[order])
    one = backend.row_stream((ids,), np.float32, max_rows=6)  # one dtype for all, as before
    (X_chunk,) = next(one.chunks([np.arange(6)]))
    assert X_chunk.dtype == np.float32

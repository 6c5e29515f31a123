"""The optional Numba kernels of the NumPy backend against its NumPy code."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend._numpy import NumpyBackend
from tests.conftest import GenericBackend

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
def test_numpy_backend_uses_the_numba_kernels_when_installed():
    assert NumpyBackend().kernels is not None


def _state(dtype, n=1001):
    rng = np.random.RandomState(0)
    return [rng.standard_normal(n).astype(dtype) for _ in range(3)] + [
        rng.random_sample(n).astype(dtype)
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_updates_agree_with_the_numpy_code(dtype):
    fused, plain = NumpyBackend(), GenericBackend()
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    for name, extra in [
        ("adam_update", (1e-3, 0.9, 0.999, 1e-8)),
        ("sgd_update", (0.1, 0.9, False)),
        ("sgd_update", (0.1, 0.9, True)),
    ]:
        a, b = _state(dtype), _state(dtype)
        n_state = 2 if name == "adam_update" else 1
        for _ in range(3):
            args_a = (a[0], a[1], *a[2 : 2 + n_state], *extra, np.empty_like(a[0]))
            args_b = (b[0], b[1], *b[2 : 2 + n_state], *extra, np.empty_like(b[0]))
            getattr(fused, name)(*args_a)
            getattr(plain, name)(*args_b)
        for x, y in zip(a, b):
            assert x.dtype == dtype
            assert_allclose(x, y, rtol=rtol, atol=rtol)
    y, x = _state(dtype)[:2]
    expected = y + 0.25 * x
    assert fused.add_scaled(y, x, 0.25) is y
    assert_allclose(y, expected, rtol=rtol)


def test_non_flat_arrays_take_the_numpy_code():
    backend = NumpyBackend()
    P = np.ones((3, 4))
    backend.add_scaled(P[:, ::2], np.ones((3, 2)), 2.0)  # strided view: NumPy path
    assert_allclose(P[:, ::2], 3.0)
    assert_allclose(P[:, 1::2], 1.0)


def test_sknet_numba_0_runs_the_numpy_code(tmp_path):
    """``SKNET_NUMBA=0`` switches the kernels off; training still works."""
    code = (
        "import numpy as np\n"
        "from sknet import MLPClassifier\n"
        "from sknet.backend._numpy import NumpyBackend\n"
        "assert NumpyBackend().kernels is None\n"
        "rng = np.random.RandomState(0)\n"
        "X, y = rng.rand(60, 4), rng.randint(0, 2, 60)\n"
        "MLPClassifier((8,), max_iter=3, random_state=0).fit(X, y)\n"
    )
    env = dict(os.environ, SKNET_NUMBA="0", PYTHONWARNINGS="ignore")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path)

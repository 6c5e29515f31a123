"""The Numba kernels of the NumPy backend against its NumPy code, and that they are there.

Numba is a dependency of sknet where it has wheels (``pyproject.toml``'s markers):
there, the default install runs the kernels, and a fit gives the same model whichever
extras are installed.
"""

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import _cpu_kernels
from sknet.backend._numpy import NumpyBackend
from sknet.backend._tabular_kernels import TabularKernels
from tests.conftest import GenericBackend

ROOT = Path(__file__).resolve().parents[2]


def _requirements():
    """The installed sknet-nn's requirements (pyproject.toml's, as pip installed them)."""
    from packaging.requirements import Requirement

    return [Requirement(r) for r in importlib.metadata.requires("sknet-nn") or []]


def numba_is_a_dependency_here():
    """Whether ``pip install sknet-nn`` installs Numba on this interpreter and machine."""
    numba = [r for r in _requirements() if r.name == "numba"]
    assert numba, "sknet-nn no longer lists numba among its dependencies"
    return any(r.marker is None or r.marker.evaluate() for r in numba)


@pytest.mark.skipif(os.environ.get("SKNET_NUMBA") == "0", reason="SKNET_NUMBA=0 turns them off")
def test_the_default_install_has_the_kernels_where_numba_has_wheels():
    if not numba_is_a_dependency_here():
        pytest.skip("Numba has no wheels here: the NumPy code runs (as documented)")
    assert importlib.util.find_spec("numba") is not None, "numba is a dependency here"
    assert _cpu_kernels.KERNELS is not None
    assert NumpyBackend().kernels is not None


def test_the_numba_extra_is_kept_and_installs_nothing_more():
    metadata = importlib.metadata.metadata("sknet-nn")
    assert "numba" in metadata.get_all("Provides-Extra")  # old install commands still work
    added = [
        r
        for r in _requirements()
        if r.marker and r.marker.evaluate({"extra": "numba"}) and not r.marker.evaluate()
    ]
    assert added == []


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_tabular_kernels_compute_what_the_numpy_code_computes(dtype):
    fused, plain = NumpyBackend(), GenericBackend()
    if fused.kernels is None:
        pytest.skip("numba is not installed: no compiled kernel to compare")
    rng = np.random.RandomState(0)
    X = rng.standard_normal((37, 5)).astype(dtype)
    X[3, 2] = np.nan  # a missing value the encoding passes through, as NumPy does
    left = np.sort(rng.standard_normal((5, 4)), axis=1).astype(dtype)
    inv_width = rng.random_sample((5, 4)).astype(dtype) + 0.5
    low = np.zeros((5, 4), dtype)
    low[:, 0] = -np.inf  # the first bin is open below, the last above
    high = np.ones((5, 4), dtype)
    high[:, -1] = np.inf
    masks = [np.empty((37, 5, 4), bool) for _ in range(2)]
    V_fused = fused.piecewise_linear(X, left, inv_width, low, high, masks[0])
    V_plain = plain.piecewise_linear(X, left, inv_width, low, high, masks[1])
    np.testing.assert_array_equal(V_fused, V_plain)  # the same operations: bit for bit
    np.testing.assert_array_equal(*masks)
    assert 0 < masks[0].mean() < 1
    np.testing.assert_array_equal(fused.piecewise_linear(X, left, inv_width, low, high), V_plain)

    dZ, U = (rng.standard_normal((37, 3, 6)).astype(dtype) for _ in range(2))
    s = rng.standard_normal((3, 6)).astype(dtype)
    totals = [np.empty((3, 6), dtype) for _ in range(2)]
    a, b = dZ.copy(), dZ.copy()
    assert fused.scale_and_sum(a, U, s, totals[0]) is a
    plain.scale_and_sum(b, U, s, totals[1])
    np.testing.assert_array_equal(a, b)
    assert_allclose(totals[0], totals[1], rtol=1e-6 if dtype == np.float32 else 1e-14)
    assert_allclose(totals[0], (dZ.astype(np.float64) * U).sum(0), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="scale_and_sum"):
        fused.scale_and_sum(a, U[:, :2].copy(), s, totals[0])
    with pytest.raises(ValueError, match="piecewise_linear"):
        fused.piecewise_linear(X, left[:4].copy(), inv_width, low, high)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3])
def test_member_products_one_member_at_a_time_are_the_stacked_product(dtype, m):
    # NumPy's loop over members (each product in BLAS, an outer product broadcast)
    # against the shared xp code's one stacked product, on strided views as the
    # ensemble head passes them (its weights transposed).
    fused, plain = NumpyBackend(), GenericBackend()
    rng = np.random.RandomState(0)
    A = rng.standard_normal((29, 4, 7)).astype(dtype)
    B = rng.standard_normal((4, m, 7)).astype(dtype).transpose(0, 2, 1)  # (4, 7, m), strided
    ours, theirs = fused.member_matmul(A, B), plain.member_matmul(A, B)
    assert ours.shape == theirs.shape == (29, 4, m) and ours.flags.c_contiguous
    assert ours.dtype == dtype
    expected = np.einsum("nkd,kdm->nkm", A.astype(np.float64), B.astype(np.float64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_allclose(ours, expected, rtol=tol, atol=tol)
    assert_allclose(theirs, expected, rtol=tol, atol=tol)


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
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path)


# What the fits of the next test train, in a fresh interpreter: an MLP, a ConvNet and an
# LSTM, each model's weights, epochs and losses as a digest. With ``dask`` as argument,
# the distributed extra's libraries are imported first (dask-ml brings Numba).
_FITS = """
import hashlib, json, sys
import numpy as np
if sys.argv[1] == "dask":
    import dask.array, distributed, dask_ml.model_selection  # noqa: F401
from sknet import ConvNetClassifier, MLPClassifier, RNNClassifier
from sknet.backend import _cpu_kernels
rng = np.random.RandomState(0)
X, y = rng.rand(240, 64), rng.randint(0, 3, 240)
models = {
    "mlp": MLPClassifier((32,), max_iter=4, random_state=0),
    "convnet": ConvNetClassifier(conv_filters=(4,), dense_units=(16,), input_shape=(1, 8, 8),
                                 max_iter=2, random_state=0),
    "lstm": RNNClassifier(units=(8,), input_shape=(8, 8), max_iter=2, random_state=0),
}
out = {"kernels": _cpu_kernels.KERNELS is not None}
for name, model in models.items():
    model.fit(X, y)
    digest = hashlib.sha256(repr((model.n_iter_, model.loss_curve_)).encode())
    for w in model.network_.weights():
        digest.update(np.ascontiguousarray(model.network_.backend.to_numpy(w)).tobytes())
    out[name] = digest.hexdigest()
print(json.dumps(out))
"""


def _fit_in_a_fresh_interpreter(mode, tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore", SKNET_DEVICE="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", _FITS, mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_distributed_extras_imports_change_no_model(tmp_path):
    """Importing dask and dask-ml (which bring Numba) before a fit changes nothing."""
    pytest.importorskip("dask_ml", reason="the distributed extra is not installed")
    alone = _fit_in_a_fresh_interpreter("alone", tmp_path)
    with_dask = _fit_in_a_fresh_interpreter("dask", tmp_path)
    assert alone == with_dask


def _fused_and_plain():
    fused, plain = NumpyBackend(), GenericBackend()
    if fused.kernels is None:
        pytest.skip("numba is not installed: no compiled kernel to compare")
    return fused, plain


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_category_lookups_are_the_numpy_code_bit_for_bit(dtype):
    fused, plain = _fused_and_plain()
    rng = np.random.RandomState(0)
    cards, dims = np.array([3, 0, 7], dtype), np.array([2, 1, 4], np.int64)
    rows_per_column = cards.astype(np.int64) + 2
    offsets = (np.cumsum(rows_per_column) - rows_per_column).astype(np.int64)
    D = int(dims.max())
    E = rng.standard_normal((int(rows_per_column.sum()), D)).astype(dtype)
    valid = np.flatnonzero((np.arange(D) < dims[:, None]).ravel())
    # every kind of code: categories, halves (rounded to even), 0 and NaN (missing),
    # negative, above the cardinality and infinite (unknown)
    codes = [1, 2, 3, 2.5, 0.4, 0, np.nan, -1, 4, 8, np.inf, -np.inf, 6.6]
    X = rng.choice(np.array(codes, dtype), size=(41, 3))
    rows, Y = fused.embedding_lookup(X, E, cards, offsets, dims, valid)
    rows_plain, Y_plain = plain.embedding_lookup(X, E, cards, offsets, dims, valid)
    np.testing.assert_array_equal(rows, rows_plain)
    np.testing.assert_array_equal(Y, Y_plain)
    assert Y.shape == (41, int(dims.sum())) and Y.dtype == dtype
    assert set(np.unique(rows[:, 1])) <= {offsets[1], offsets[1] + 1}  # no category: 2 rows

    dY = rng.standard_normal(Y.shape).astype(dtype)
    gE, gE_plain = np.full_like(E, 7.0), np.full_like(E, 7.0)  # overwritten, not added to
    fused.embedding_grad(dY, rows, dims, valid, gE)
    plain.embedding_grad(dY, rows, dims, valid, gE_plain)
    np.testing.assert_array_equal(gE, gE_plain)
    expected = np.zeros((len(E), D))
    for i in range(len(X)):
        parts = np.split(dY[i].astype(np.float64), np.cumsum(dims)[:-1])
        for c, part in enumerate(parts):
            expected[rows[i, c], : dims[c]] += part
    assert_allclose(gE, expected, rtol=1e-5, atol=1e-5)

    with pytest.raises(ValueError, match="embedding_lookup"):
        fused.embedding_lookup(X, E[:-1].copy(), cards, offsets, dims, valid)  # rows short
    with pytest.raises(ValueError, match="embedding_grad"):
        fused.embedding_grad(dY[:, :-1].copy(), rows, dims, valid, gE)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", ["relu", "identity"])
def test_fused_adapter_bias_and_activation_are_the_numpy_code_bit_for_bit(dtype, activation):
    fused, plain = _fused_and_plain()
    rng = np.random.RandomState(1)
    U = rng.standard_normal((33, 3, 10)).astype(dtype)
    s, b = (rng.standard_normal((3, 10)).astype(dtype) for _ in range(2))
    Z, Z_plain = np.empty_like(U), np.empty_like(U)
    assert fused.scale_bias_activation(U, s, b, activation, Z) is Z
    plain.scale_bias_activation(U, s, b, activation, Z_plain)
    np.testing.assert_array_equal(Z, Z_plain)
    want = U.astype(np.float64) * s + b
    assert_allclose(Z, np.maximum(want, 0) if activation == "relu" else want, rtol=1e-5, atol=1e-6)

    # the gradient: one pass, against the two kernels it fuses (the bias's and the
    # adapter's) bit for bit, and the NumPy code (whose sums run in another order)
    dY = rng.standard_normal(U.shape).astype(dtype)
    out = [(dY.copy(), np.empty_like(s), np.empty_like(s)) for _ in range(3)]
    fused.scale_bias_activation_grad(out[0][0], Z, activation, U, s, out[0][1], out[0][2])
    TabularKernels.scale_bias_activation_grad(fused, out[1][0], Z, activation, U, s, *out[1][1:])
    plain.scale_bias_activation_grad(out[2][0], Z, activation, U, s, out[2][1], out[2][2])
    for ours, two_kernels, numpy_code in zip(*out):
        np.testing.assert_array_equal(ours, two_kernels)
        assert_allclose(ours, numpy_code, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
    g = dY.astype(np.float64) * ((Z > 0) if activation == "relu" else 1)
    assert_allclose(out[0][0], g * s, rtol=1e-5, atol=1e-6)
    assert_allclose(out[0][1], g.sum(0), rtol=1e-4, atol=1e-5)
    assert_allclose(out[0][2], (g * U).sum(0), rtol=1e-4, atol=1e-5)

    with pytest.raises(ValueError, match="scale_bias_activation"):
        fused.scale_bias_activation(U, s[:2].copy(), b, activation, Z)
    with pytest.raises(ValueError, match="scale_bias_activation_grad"):
        fused.scale_bias_activation_grad(dY, Z, activation, U, s, out[0][1][:2].copy(), s)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_member_sum_and_outer_products_are_the_numpy_code(dtype):
    fused, plain = _fused_and_plain()
    rng = np.random.RandomState(2)
    X = rng.standard_normal((31, 4, 9)).astype(dtype)
    np.testing.assert_array_equal(fused.member_sum(X), plain.member_sum(X))
    np.testing.assert_array_equal(fused.member_sum(X), X.sum(axis=1))
    # an inner dimension of one: the ensemble head's input gradient for one output,
    # its weights transposed (strided)
    A = rng.standard_normal((31, 4, 1)).astype(dtype)
    B = rng.standard_normal((4, 9, 1)).astype(dtype).transpose(0, 2, 1)
    ours = fused.member_matmul(A, B)
    assert ours.shape == (31, 4, 9) and ours.flags.c_contiguous and ours.dtype == dtype
    np.testing.assert_array_equal(ours, plain.member_matmul(A, B))
    np.testing.assert_array_equal(ours, A * B[:, 0][None])


@pytest.mark.skipif(
    _cpu_kernels.KERNELS is None, reason="Numba is not installed (or SKNET_NUMBA=0)"
)
def test_no_kernel_calls_another_so_every_kernel_is_cached_on_disk(tmp_path):
    # Numba's disk cache keys a function on its closure too, and a compiled function in a
    # closure pickles differently in every process: such a kernel would be compiled again
    # by each process (each joblib worker of a search), seconds each, and leave a new file
    # in the cache every time.
    from numba.core.dispatcher import Dispatcher

    for name, kernel in _cpu_kernels.KERNELS.items():
        cells = [cell.cell_contents for cell in kernel.py_func.__closure__ or ()]
        assert not [c for c in cells if isinstance(c, Dispatcher)], name
    # and one that was compiled here loads from the cache in a new process
    script = (
        "import numpy as np\n"
        "from sknet.backend._cpu_kernels import KERNELS\n"
        "k = KERNELS['max_pool_2x2']\n"
        "X = np.arange(16.0).reshape(1, 1, 4, 4)\n"
        "Y, A = np.empty((1, 1, 2, 2)), np.empty((1, 1, 2, 2), np.int32)\n"
        "k(X, Y, A)\n"
        "print(len(k.stats.cache_hits), len(k.stats.cache_misses), Y.ravel().tolist())\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][:2] == ["0", "1"]  # compiled, and written to the cache
    assert runs[1][:2] == ["1", "0"]  # read back
    assert runs[1][2:] == ["[5.0,", "7.0,", "13.0,", "15.0]"]

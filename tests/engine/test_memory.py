"""Streaming training data from host memory, and estimating what a fit needs.

The CPU suite runs the streaming path with a device limit
(``max_device_memory``, which the NumPy backend honours like a GPU's free
memory). On the CPU the limit bounds what the fit allocates, and data already
of the fit's dtype are used in place, so these tests give float64 data to a
float32 fit: its float32 copy is what streams. The GPU-marked tests do the
same with CuPy's memory-pool limit.
"""

import gc
import json
import os
import re
import subprocess
import sys
import textwrap
import tracemalloc
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor, RNNClassifier
from sknet.backend import RowStream, get_backend
from sknet.engine._bytes import format_bytes, parse_bytes
from sknet.engine._memory import PARTS
from sknet.exceptions import DeviceMemoryError
from sknet.layers import Conv2D, Dense, Flatten, MaxPool2D
from sknet.utils import MemoryEstimate, estimate_memory
from tests.conftest import needs_gpu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _mlp(**kw):
    params = dict(hidden_layer_sizes=(32,), max_iter=3, batch_size=64, random_state=0)
    return MLPClassifier(**{**params, "device": "cpu", **kw})


def _convnet(**kw):
    layers = [Conv2D(4, 3, padding="same"), MaxPool2D(2), Flatten(), Dense(16)]
    params = dict(layers=layers, max_iter=2, batch_size=50, random_state=0, device="cpu")
    return ConvNetClassifier(**{**params, **kw})


def _rnn(**kw):
    params = dict(units=(8,), input_shape=(8, 8), max_iter=2, batch_size=50, random_state=0)
    return RNNClassifier(**{**params, "device": "cpu", **kw})


def _device_row_bytes(X, y, sample_weight=None):
    """Bytes of one row of the data as float32 arrays on a device."""
    outputs = len(np.unique(y)) if len(np.unique(y)) > 2 else 1
    return 4 * (np.prod(X.shape[1:]) + outputs + (sample_weight is not None))


def _streaming_limit(est, X, y, **fit_params):
    """A limit the model fits in with a few batches of data, but not with all of it."""
    estimate = estimate_memory(est, X, y, **fit_params)
    data = X.shape[0] * _device_row_bytes(X, y, fit_params.get("sample_weight"))
    return int(estimate.total - estimate["data"] + data // 3), estimate


@pytest.fixture
def recorded_streams(monkeypatch):
    """Every RowStream the CPU backend makes, with the bytes of each chunk it yields."""
    streams = []
    backend = get_backend("cpu")
    original = type(backend).row_stream

    def row_stream(self, arrays, dtype, max_rows):
        stream = original(self, arrays, dtype, max_rows)
        chunks, record = stream.chunks, {"stream": stream, "chunks": []}

        def recorded(row_chunks):
            for chunk in chunks(row_chunks):
                record["chunks"].append(sum(a.nbytes for a in chunk if a is not None))
                yield chunk

        stream.chunks = recorded
        streams.append(record)
        return stream

    monkeypatch.setattr(type(backend), "row_stream", row_stream)
    return streams


def _assert_same_model(a, b):
    assert a.loss_curve_ == b.loss_curve_
    for wa, wb in zip(a.network_.weights(), b.network_.weights()):
        assert_array_equal(wa, wb)


# -- streaming: the same model, within the limit --------------------------------------
#: a schedule that anneals within the few epochs of these fits
_ANNEAL = dict(learning_rate="anneal", tol=0.05, max_iter=12)


@pytest.mark.parametrize(
    "make, fit_kw",
    [
        (_mlp, {}),
        (lambda **kw: _mlp(shuffle=False, **kw), {}),
        (lambda **kw: _mlp(solver="sgd", dropout=0.2, **kw), {"sample_weight": True}),
        (lambda **kw: _mlp(early_stopping=True, n_iter_no_change=2, **kw), {}),
        (lambda **kw: _mlp(early_stopping=True, n_iter_no_change=1, **_ANNEAL, **kw), {}),
        (_convnet, {}),
        (_rnn, {}),
    ],
    ids=[
        "mlp",
        "no-shuffle",
        "sgd-dropout-weights",
        "early-stopping",
        "anneal",
        "convnet",
        "lstm",
    ],  # fmt: skip
)
def test_streamed_fit_is_the_in_memory_fit(digits, recorded_streams, make, fit_kw):
    X, y = digits  # float64: the float32 fit copies them (see the module docstring)
    if fit_kw.get("sample_weight"):
        fit_kw = {"sample_weight": np.random.RandomState(0).uniform(0.5, 2, len(y))}
    limit, estimate = _streaming_limit(make(), X, y, **fit_kw)
    in_memory = make().fit(X, y, **fit_kw)
    streamed = make(max_device_memory=limit).fit(X, y, **fit_kw)
    assert in_memory.data_placement_ == "device"
    assert streamed.data_placement_ == "streamed"
    _assert_same_model(in_memory, streamed)
    if in_memory.early_stopping:
        assert in_memory.validation_scores_ == streamed.validation_scores_
    assert_array_equal(in_memory.predict_proba(X), streamed.predict_proba(X))
    assert in_memory.t_ == streamed.t_  # the anneal's half epochs too
    if in_memory.learning_rate == "anneal":  # it annealed: back to the best, lower rates
        rates = [row["learning_rate"] for row in streamed.history_]
        assert (
            rates[-2:]
            == [rates[0] / 4, rates[0] / 16]
            == [row["learning_rate"] for row in in_memory.history_][-2:]
        )
    # The chunks: several per epoch, and with the model they stay within the limit.
    (record,) = recorded_streams
    stream, chunks = record["stream"], record["chunks"]
    assert len(chunks) > in_memory.n_iter_
    assert max(chunks) <= stream.nbytes
    model = estimate["parameters"] + estimate["gradients"] + estimate["optimizer_state"]
    gathered = estimate.batch_size * _device_row_bytes(X, y, fit_kw.get("sample_weight"))
    batch = estimate["activations"] - gathered + estimate["workspace"]  # no gathered batch
    assert model + batch + stream.nbytes <= limit
    assert X.shape[0] * _device_row_bytes(X, y) > 2 * stream.nbytes


def test_streamed_regressor_and_string_limit(digits):
    X, y = digits
    est = MLPRegressor(hidden_layer_sizes=(16,), max_iter=3, random_state=0, device="cpu")
    limit, _ = _streaming_limit(est, X, y)
    streamed = clone(est).set_params(max_device_memory=f"{limit / 1024:.3f}KiB").fit(X, y)
    assert streamed.data_placement_ == "streamed"
    _assert_same_model(clone(est).fit(X, y), streamed)


def test_partial_fit_follows_the_same_rule(digits):
    X, y = digits
    limit, _ = _streaming_limit(_mlp(), X, y)
    a, b = _mlp(), _mlp(max_device_memory=limit)
    for part in np.array_split(np.arange(len(y)), 2):
        a.partial_fit(X[part], y[part], classes=np.unique(y))
        b.partial_fit(X[part], y[part], classes=np.unique(y))
        assert b.data_placement_ == "streamed"
        assert a.data_placement_ == "device"
    _assert_same_model(a, b)


def test_large_validation_set_is_streamed_too(digits):
    X, y = digits
    X_val, y_val = np.tile(X, (3, 1)), np.tile(y, 3)
    est = _mlp(hidden_layer_sizes=(8,))
    limit, _ = _streaming_limit(est, X, y)
    in_memory = clone(est).fit(X, y, X_val=X_val, y_val=y_val)
    streamed = clone(est).set_params(max_device_memory=limit)
    streamed.fit(X, y, X_val=X_val, y_val=y_val)
    assert streamed.data_placement_ == "streamed"
    _assert_same_model(in_memory, streamed)
    valid = [row["valid_loss"] for row in in_memory.history_]
    assert_allclose([row["valid_loss"] for row in streamed.history_], valid, rtol=1e-5)


def test_verbose_says_the_data_are_streamed(digits, capsys):
    X, y = digits
    limit, _ = _streaming_limit(_mlp(), X, y)
    _mlp(max_device_memory=limit, verbose=True, max_iter=1).fit(X, y)
    out = capsys.readouterr().out
    assert "Data: streamed from host memory in chunks of" in out
    assert "Iteration 1, loss =" in out


def test_no_limit_on_the_cpu_keeps_the_data_in_place(digits):
    X, y = digits
    clf = _mlp(max_iter=1).fit(X, y)
    assert clf.data_placement_ == "device"
    lbfgs = _mlp(solver="lbfgs", max_iter=2).fit(X, y)
    assert lbfgs.data_placement_ == "device"


def test_not_even_one_batch_fits(digits):
    X, y = digits
    estimate = estimate_memory(_mlp(), X, y)
    with pytest.raises(MemoryError, match=r"Not even one batch fits on cpu"):
        _mlp(max_device_memory=int(estimate.total - estimate["data"] * 0.99)).fit(X, y)
    with pytest.raises(MemoryError, match="solver='lbfgs' trains on all 1797 rows"):
        _mlp(solver="lbfgs", max_device_memory=estimate["parameters"]).fit(X, y)


@pytest.mark.parametrize("value", [0, -1, "lots", "12 parsecs", 1.5])
def test_bad_limits_are_refused(digits, value):
    X, y = digits
    with pytest.raises(ValueError, match="max_device_memory"):
        _mlp(max_device_memory=value).fit(X, y)


def test_parse_and_format_bytes():
    assert parse_bytes(1000) == 1000
    assert parse_bytes("8GB") == 8 * 10**9
    assert parse_bytes("512 MiB") == 512 * 2**20
    assert parse_bytes("1.5e3") == 1500
    assert parse_bytes("2k") == 2000
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 2**30) == "3.0 GiB"


def test_row_stream_gathers_rows_in_order():
    backend = get_backend("cpu")
    X = np.arange(20, dtype=np.float64).reshape(10, 2)
    w = np.arange(10.0)
    stream = backend.row_stream((X, None, w), np.float32, max_rows=4)
    order = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5])
    seen = []
    for Xc, none, wc in stream.chunks(order[i : i + 4] for i in range(0, 9, 4)):
        assert none is None and Xc.dtype == np.float32 and Xc.shape[0] <= 4
        seen.append((Xc.copy(), wc.copy()))
    assert_array_equal(np.concatenate([s[0] for s in seen]), X[order])
    assert_array_equal(np.concatenate([s[1] for s in seen]), w[order])
    assert stream.nbytes == 4 * 2 * 4 + 4 * 4
    # The reference stream (the code CuPy falls back on) gives the same rows.
    generic = RowStream(get_backend("cpu"), (X,), np.float32, 4)
    (chunk,) = next(generic.chunks([order[:4]]))
    assert_array_equal(chunk, X[order[:4]])


def test_sparse_data_stream(digits):
    import scipy.sparse as sp

    X, y = digits
    X = sp.csr_matrix(X)
    limit, _ = _streaming_limit(_mlp(), X, y)
    streamed = _mlp(max_device_memory=limit).fit(X, y)
    assert streamed.data_placement_ == "streamed"
    _assert_same_model(_mlp().fit(X, y), streamed)


# -- the estimate --------------------------------------------------------------------
def test_estimate_parts_and_repr(digits):
    X, y = digits
    estimate = estimate_memory(_mlp(hidden_layer_sizes=(64,)), X, y)
    assert isinstance(estimate, MemoryEstimate)
    assert tuple(estimate) == PARTS
    n_params = 64 * 64 + 64 + 64 * 10 + 10
    assert estimate["parameters"] == estimate["gradients"] == n_params * 4
    assert estimate["optimizer_state"] == 3 * n_params * 4  # Adam's m, v and a scratch
    assert estimate["data"] >= X.size * 4  # float64 digits become a float32 copy
    assert estimate.total == sum(estimate.values())
    text = repr(estimate)
    assert "MemoryEstimate(cpu, batch_size=64)" in text and "total" in text
    assert estimate.batch_size_that_fits(estimate.total) == 64
    assert estimate.batch_size_that_fits(estimate.total - estimate["data"]) < 64


def test_estimate_follows_the_estimator(digits):
    X, y = digits
    base = estimate_memory(_mlp(), X, y)
    assert estimate_memory(_mlp(solver="sgd"), X, y)["optimizer_state"] * 3 == (
        base["optimizer_state"] * 2
    )
    bigger = estimate_memory(_mlp(batch_size=256), X, y)
    assert bigger["activations"] > base["activations"]
    stopping = estimate_memory(_mlp(early_stopping=True), X, y)
    assert stopping["parameters"] == 2 * base["parameters"]  # the best weights' copy
    fitted = _mlp(max_iter=1).fit(X, y)
    assert estimate_memory(clone(fitted), X, y)["parameters"] == base["parameters"]
    # A refit keeps the previous model until it completes (to put it back if it fails).
    again = estimate_memory(fitted, X)
    assert again["parameters"] == 2 * base["parameters"]
    assert again["optimizer_state"] == 2 * base["optimizer_state"]
    assert "network_" not in _mlp().__dict__  # nothing fitted by estimating


def test_sorted_float_labels_give_every_class(digits):
    """The classes come from all of y, however its rows are sorted."""
    X = np.random.RandomState(0).rand(300, 5)
    y = np.sort(np.repeat([0.0, 1.0, 2.0], 100))
    sorted_labels = estimate_memory(_mlp(), X, y)
    shuffled = estimate_memory(_mlp(), X, np.random.RandomState(0).permutation(y).astype(int))
    assert sorted_labels["parameters"] == (5 * 32 + 32 + 32 * 3 + 3) * 4
    assert dict(sorted_labels) == dict(shuffled)
    strings = np.sort(np.repeat(["a", "b", "c"], 100))
    assert estimate_memory(_mlp(), X, strings)["parameters"] == sorted_labels["parameters"]


def test_estimate_refuses_other_estimators(digits):
    from sklearn.neural_network import MLPClassifier as SklearnMLP

    X, y = digits
    expected = r"sknet estimator.*got sklearn\.neural_network\..*MLPClassifier"
    with pytest.raises(TypeError, match=expected):
        estimate_memory(SklearnMLP(), X, y)
    with pytest.raises(TypeError, match="the class sknet.*MLPClassifier, not an instance"):
        estimate_memory(MLPClassifier, X, y)


def test_estimate_checks_the_numbers_of_rows(digits):
    X, y = digits
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[1797, 100\]"):
        estimate_memory(_mlp(), X, y[:100])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        estimate_memory(_mlp(), X, y, sample_weight=np.ones(10))
    with pytest.raises(ValueError, match="sample_weight must be a 1D array"):
        estimate_memory(_mlp(), X, y, sample_weight=np.ones((1797, 2)))
    with pytest.raises(ValueError, match="X_val and y_val must be given together, got only X_val"):
        estimate_memory(_mlp(), X, y, X_val=X)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        estimate_memory(_mlp(), X, y, X_val=X, y_val=y[:5])


def test_estimate_of_lbfgs_ignores_early_stopping(digits):
    """L-BFGS trains on every row and keeps no best weights, early_stopping or not."""
    X, y = digits
    plain = estimate_memory(_mlp(solver="lbfgs"), X, y)
    stopping = estimate_memory(_mlp(solver="lbfgs", early_stopping=True), X, y)
    assert dict(stopping) == dict(plain)
    assert stopping.batch_size == len(y)


def test_estimate_counts_the_weights_class_weight_makes(digits):
    X, y = digits
    base = estimate_memory(_mlp(), X, y)
    weighted = estimate_memory(_mlp(class_weight="balanced"), X, y)
    assert weighted["data"] == base["data"] + len(y) * 4  # their float32 copy


def test_estimate_takes_any_sparse_format(digits):
    import scipy.sparse as sp

    X, y = digits
    coo = estimate_memory(_mlp(), sp.coo_matrix(X), y)
    csr = estimate_memory(_mlp(), sp.csr_matrix(X), y)
    for part in PARTS:  # SciPy's products allocate a few bytes more or less from call to call
        assert coo[part] == pytest.approx(csr[part], rel=0.01)


def test_batch_size_that_fits_is_at_most_the_rows(digits):
    X, y = digits
    estimate = estimate_memory(_mlp(), X, y)
    assert estimate.batch_size_that_fits(10 * estimate.total) == len(y)
    assert estimate.batch_size_that_fits(0) == 0
    for available in np.linspace(estimate.at_batch_size(1).total, estimate.total, 7):
        fits = estimate.batch_size_that_fits(available)
        assert estimate.at_batch_size(fits).total <= available
        assert estimate.at_batch_size(fits + 1).total > available


def test_batch_size_that_fits_takes_bytes_as_people_write_them(digits):
    X, y = digits
    estimate = estimate_memory(_mlp(), X, y)
    by_int = estimate.batch_size_that_fits(2_000_000)
    assert 0 < by_int < len(y)  # a limit that binds: the string must be read, not ignored
    assert estimate.batch_size_that_fits("2MB") == by_int  # before: a comparison TypeError
    assert estimate.batch_size_that_fits(" 2 MB ") == by_int
    assert estimate.batch_size_that_fits(np.int64(2_000_000)) == by_int
    kib = estimate.total // 1024
    assert estimate.batch_size_that_fits(f"{kib}KiB") == estimate.batch_size_that_fits(kib * 1024)
    assert estimate.batch_size_that_fits("10GB") == len(y)
    assert estimate.batch_size_that_fits("1B") == 0


NO_BYTES = "available must be a number of bytes or a string such as '8GB' or '512MiB'"


@pytest.mark.parametrize(
    "available, error, message",
    [
        ("lots", ValueError, "available must be a number of bytes or a string such as '8GB'"),
        ("-2MB", ValueError, "available must be at least 1 byte, got '-2MB'"),
        (-1, ValueError, "available must be a non-negative number of bytes, got -1"),
        (float("nan"), ValueError, "available must be a non-negative number of bytes, got nan"),
        (None, TypeError, f"{NO_BYTES}, got None"),
        (True, TypeError, f"{NO_BYTES}, got True"),
        ([2], TypeError, rf"{NO_BYTES}, got \[2\]"),
    ],
)
def test_batch_size_that_fits_refuses_what_is_not_bytes(digits, available, error, message):
    X, y = digits
    estimate = estimate_memory(_mlp(), X[:200], y[:200])
    with pytest.raises(error, match=message):
        estimate.batch_size_that_fits(available)


# -- the estimate is what the fit plans with -----------------------------------------
@pytest.fixture
def plans(monkeypatch):
    """Every Placement the fits of the test decide on."""
    from sknet.engine import _placement

    made, plan = [], _placement.plan_placement

    def recorded(*args, **kwargs):
        made.append(plan(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(_placement, "plan_placement", recorded)
    return made


def _small_convnet(**kw):
    params = dict(conv_filters=(4,), dense_units=(8,), max_iter=1, random_state=0)
    return ConvNetClassifier(**{**params, "device": "cpu", **kw})


@pytest.mark.parametrize(
    "make, fit_kw",
    [
        (lambda **kw: _mlp(hidden_layer_sizes=(256, 256), max_iter=1, **kw), {}),
        (_small_convnet, {}),
        (_rnn, {}),
        (lambda **kw: _mlp(early_stopping=True, max_iter=1, **kw), {"sample_weight": True}),
        (lambda **kw: _mlp(class_weight="balanced", max_iter=1, **kw), {}),
        (lambda **kw: MLPRegressor(max_iter=1, dtype="float64", device="cpu", **kw), {}),
    ],
    ids=["mlp", "convnet", "lstm", "early-stopping-weights", "class-weight", "regressor-float64"],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_limit_of_the_estimate_keeps_the_data_on_the_device(digits, plans, make, fit_kw, dtype):
    X, y = digits
    X = X.astype(dtype)
    if fit_kw.get("sample_weight"):
        fit_kw = {"sample_weight": np.random.RandomState(0).uniform(0.5, 2, len(y))}
    estimate = estimate_memory(make(), X, y, **fit_kw)
    for limit in (estimate.total, int(1.05 * estimate.total), f"{estimate.total}B"):
        assert make(max_device_memory=limit).fit(X, y, **fit_kw).data_placement_ == "device"
        _assert_same_estimate(plans[-1].estimate, estimate)
    # Below it (by more than the measurement varies), the data do not stay on the device.
    limit = estimate.total - 2 * estimate.tolerance
    try:
        fitted = make(max_device_memory=limit).fit(X, y, **fit_kw)
    except DeviceMemoryError:  # data used in place: streaming them would need more
        assert X.dtype == np.float64 and make().dtype == "float64"
    else:
        assert fitted.data_placement_ == "streamed"
        assert plans[-1].estimate.total <= limit  # a streamed plan keeps to the limit


def _assert_same_estimate(planned, estimated):
    """The fit's plan and estimate_memory: the same numbers, the measured ones within
    what a measurement varies by."""
    for part in ("data", "parameters", "gradients", "optimizer_state"):
        assert planned[part] == estimated[part], part
    measured = planned["activations"] + planned["workspace"]
    expected = estimated["activations"] + estimated["workspace"]
    assert abs(measured - expected) <= estimated.tolerance - 4096


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lbfgs_takes_a_limit_of_the_estimate(digits, dtype):
    X, y = digits
    X = X.astype(dtype)
    estimate = estimate_memory(_mlp(solver="lbfgs", max_iter=2), X, y)
    fitted = _mlp(solver="lbfgs", max_iter=2, max_device_memory=estimate.total).fit(X, y)
    assert fitted.data_placement_ == "device"
    limit = estimate.total - 2 * estimate.tolerance
    with pytest.raises(DeviceMemoryError, match="max_device_memory='[0-9.]+[KMG]iB' or more"):
        _mlp(solver="lbfgs", max_iter=2, max_device_memory=limit).fit(X, y)


def test_the_message_of_a_fit_that_does_not_fit_says_what_would(digits):
    X, y = digits
    estimate = estimate_memory(_mlp(), X, y)
    limit = int(estimate.total - estimate["data"] * 0.99)
    with pytest.raises(DeviceMemoryError) as info:
        _mlp(max_device_memory=limit).fit(X, y)
    message = str(info.value)
    assert "Not even one batch fits on cpu: with batch_size=64 the fit needs about" in message
    assert f"max_device_memory={limit} allows" in message
    assert "max_device_memory=None (no limit on the CPU)" in message
    batch_size = int(re.search(r"batch_size=(\d+)", message.split("Use ")[1]).group(1))
    needed = re.search(r"max_device_memory='([^']+)' or more", message).group(1)
    assert _mlp(max_device_memory=limit, batch_size=batch_size).fit(X, y)
    assert _mlp(max_device_memory=needed).fit(X, y).data_placement_ == "streamed"


# -- max_device_memory as people write it -------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [("1e3", 1000), (" 8 GiB ", 8 * 2**30), ("1.5kB", 1500), ("2 mib", 2 * 2**20), ("7", 7)],
)
def test_parse_bytes_reads_what_people_write(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e400GB", "is too large: '1e400GB' is not a finite number of bytes"),
        ("infGB", "is too large"),
        ("nanGB", r"must be a number of bytes, got 'nanGB' \(not a number\)"),
        ("-1GB", "must be at least 1 byte, got '-1GB'"),
        ("0.5", "must be at least 1 byte"),
        ("1e-3", "must be at least 1 byte"),
        ("8iB", "must be a number of bytes or a string such as '8GB'"),
        ("1..2GB", "must be a number of bytes or a string"),
        ("GB", "must be a number of bytes or a string"),
    ],
)
def test_parse_bytes_refuses_odd_strings(text, message):
    with pytest.raises(ValueError, match="max_device_memory " + message):
        parse_bytes(text)


def test_parse_bytes_refuses_other_types():
    for value in (1.5, True, None, [8]):
        with pytest.raises(TypeError, match="max_device_memory must be an int or a string"):
            parse_bytes(value)


def test_fit_refuses_an_infinite_limit(digits):
    X, y = digits
    with pytest.raises(ValueError, match="max_device_memory is too large: '1e400GB'"):
        _mlp(max_device_memory="1e400GB").fit(X, y)


def _traced_fit_peak(est, X, y):
    """Peak bytes NumPy allocates during ``est.fit(X, y)`` (after a warm-up fit)."""
    clone(est).set_params(max_iter=1, batch_size=50).fit(X[:100], y[:100])  # compiled kernels
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        est.fit(X, y)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "est, shape",
    [
        (MLPClassifier(hidden_layer_sizes=(256, 256), batch_size=256), (1500, 128)),
        (ConvNetClassifier(batch_size=100), (600, 16 * 16)),
        (RNNClassifier(units=(32,), input_shape=(30, 8), batch_size=128), (1024, 240)),
    ],
    ids=["mlp", "convnet", "lstm"],
)
def test_estimate_within_20_percent_of_the_measured_peak(est, shape):
    rng = np.random.RandomState(0)
    X = rng.rand(*shape).astype(np.float32)
    y = rng.randint(5, size=shape[0])
    est = clone(est).set_params(max_iter=1, random_state=0, device="cpu")
    if isinstance(est, ConvNetClassifier):
        est.set_params(input_shape=(1, 16, 16))
    estimate = estimate_memory(est, X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        peak = _traced_fit_peak(est, X, y)
    assert abs(estimate.total - peak) <= 0.2 * peak, (estimate, format_bytes(peak))


_RSS_SCRIPT = """
import gc, json, resource, warnings
import numpy as np, psutil
from sknet import MLPClassifier
from sknet.utils import estimate_memory
warnings.simplefilter("ignore")
rng = np.random.RandomState(0)
X = rng.rand(20000, 256).astype(np.float32)
y = rng.randint(10, size=20000)
est = MLPClassifier(hidden_layer_sizes=(1024, 1024), batch_size=2000, max_iter=1,
                    random_state=0, device="cpu")
estimate = estimate_memory(est, X, y)
MLPClassifier(hidden_layer_sizes=(8,), max_iter=1, device="cpu").fit(X[:50], y[:50])
gc.collect()
try:  # reset the peak, so that only the fit's own peak counts (Linux)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
before = psutil.Process().memory_info().rss
est.fit(X, y)
if reset:
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))
else:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"estimate": estimate.total, "growth": peak - before}))
"""


def test_estimate_against_peak_rss_growth():
    """The process's peak RSS grows by the estimate (a fresh process, big arrays mapped)."""
    pytest.importorskip("psutil")
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_RSS_SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert abs(figures["estimate"] - figures["growth"]) <= 0.2 * figures["growth"], figures


def test_out_of_memory_message_uses_the_estimate(digits, monkeypatch):
    """A MemoryError during fit says what was needed, what was free, what would fit."""
    from sknet.layers import Dense as DenseLayer

    X, y = digits
    forward = DenseLayer.forward

    def failing(self, X, *, training):
        if training and X.shape[0] > 50:  # fit's batches, not the estimate's probes
            raise MemoryError("Unable to allocate 1.0 GiB")
        return forward(self, X, training=training)

    monkeypatch.setattr(DenseLayer, "forward", failing)
    with pytest.raises(MemoryError) as info:
        _mlp(batch_size=64).fit(X, y)
    message = str(info.value)
    assert "cpu ran out of memory while training with batch_size=64" in message
    assert "The fit needs about" in message and "activations" in message
    limit, _ = _streaming_limit(_mlp(), X, y)
    with pytest.raises(MemoryError, match="streamed from host memory already"):
        _mlp(batch_size=64, max_device_memory=limit).fit(X, y)


# -- on a GPU: CuPy's pool limit below the data ------------------------------------------
@pytest.fixture
def pool_limit():
    """Set CuPy's memory-pool limit for the test; restore it after."""
    import cupy as cp

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    previous = pool.get_limit()
    yield pool
    pool.set_limit(size=previous)
    pool.free_all_blocks()


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("make", [_mlp, _convnet], ids=["mlp", "convnet"])
def test_gpu_streams_below_the_pool_limit(make, pool_limit):
    rng = np.random.RandomState(0)
    shape = (20000, 64)
    X, y = rng.rand(*shape).astype(np.float32), rng.randint(10, size=shape[0])
    if make is _convnet:
        make = lambda **kw: _convnet(input_shape=(1, 8, 8), **kw)  # noqa: E731
    in_memory = make(device="cuda").fit(X, y)
    estimate = estimate_memory(make(device="cuda"), X, y)
    pool_limit.set_limit(size=int(estimate.total - estimate["data"] // 2))
    assert X.nbytes > pool_limit.get_limit() - (estimate.total - estimate["data"])
    streamed = make(device="cuda").fit(X, y)
    assert streamed.data_placement_ == "streamed"
    assert pool_limit.total_bytes() <= pool_limit.get_limit()
    for wa, wb in zip(in_memory.network_.weights(), streamed.network_.weights()):
        assert_allclose(wa.get(), wb.get(), rtol=1e-4, atol=1e-6)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(
    "est, shape",
    [
        (MLPClassifier(hidden_layer_sizes=(1024, 1024), batch_size=512), (20000, 256)),
        (ConvNetClassifier(batch_size=256, input_shape=(1, 28, 28)), (5000, 784)),
        (RNNClassifier(units=(128,), input_shape=(50, 16), batch_size=256), (5000, 800)),
    ],
    ids=["mlp", "convnet", "lstm"],
)
def test_gpu_estimate_within_20_percent_of_the_pool_peak(est, shape):
    import cupy as cp

    rng = np.random.RandomState(0)
    X, y = rng.rand(*shape).astype(np.float32), rng.randint(5, size=shape[0])
    est = clone(est).set_params(max_iter=1, random_state=0, device="cuda")
    estimate = estimate_memory(est, X, y)
    clone(est).fit(X[:300], y[:300])  # compiled kernels, cuBLAS handles
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    base, peak = pool.used_bytes(), [0]

    class Peak(cp.cuda.MemoryHook):
        name = "sknet-peak"

        def malloc_postprocess(self, **kw):
            peak[0] = max(peak[0], pool.used_bytes() - base)

    with Peak():
        est.fit(X, y)
    assert abs(estimate.total - peak[0]) <= 0.2 * peak[0], (estimate, format_bytes(peak[0]))


# -- sizing a GPU without CuPy -----------------------------------------------------------
@pytest.fixture
def without_cupy(monkeypatch):
    """A machine without CuPy: ``import cupy`` fails and no CUDA device is seen."""
    from sknet import backend

    monkeypatch.setitem(sys.modules, "cupy", None)
    backend.cuda_device_count.cache_clear()
    yield
    backend.cuda_device_count.cache_clear()


def _blocks(nbytes):
    """``nbytes`` in CuPy's memory pool: whole blocks of 512 bytes (by hand)."""
    return (nbytes + 511) // 512 * 512


def test_a_gpu_is_sized_without_cupy(without_cupy):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)  # int64 pixels: the fit's float32 copy counts
    with pytest.raises(ValueError, match="CuPy is not installed"):
        get_backend("cuda")
    clf = MLPClassifier(hidden_layer_sizes=(100,), batch_size=200, device="cuda")
    on_gpu = estimate_memory(clf, X, y)
    assert on_gpu.device == "cuda:0"
    assert estimate_memory(clf.set_params(device="cuda:1"), X, y).device == "cuda:1"
    n_params = 64 * 100 + 100 + 100 * 10 + 10  # one flat array of float32 parameters
    n_rows = X.shape[0]
    assert on_gpu["parameters"] == _blocks(4 * n_params)
    assert on_gpu["gradients"] == _blocks(4 * n_params)
    assert on_gpu["optimizer_state"] == 3 * _blocks(4 * n_params)  # Adam's m, v, work array
    # X and the one-hot Y in float32, and the epoch's row order (int64)
    assert on_gpu["data"] == _blocks(n_rows * 64 * 4) + _blocks(n_rows * 10 * 4) + _blocks(
        n_rows * 8
    )
    on_cpu = estimate_memory(clf.set_params(device="cpu"), X, y)
    assert on_cpu["parameters"] == 4 * n_params  # the host's allocator: no blocks
    # The fit's own objects, L-BFGS's state and threads' copies are the host's alone.
    assert on_gpu["workspace"] < on_cpu["workspace"]
    lbfgs = estimate_memory(clf.set_params(device="cuda", solver="lbfgs"), X, y)
    assert lbfgs["optimizer_state"] == 0


def test_float32_data_are_free_on_the_cpu_only(without_cupy, digits):
    X, y = digits
    X = X.astype(np.float32)
    clf = _mlp(hidden_layer_sizes=(16,))
    on_cpu = estimate_memory(clf, X, y)
    on_gpu = estimate_memory(clf.set_params(device="cuda"), X, y)
    n_rows = X.shape[0]
    # The CPU uses X in place: its part is the one-hot Y and the row order with its copy.
    assert on_cpu["data"] == n_rows * 10 * 4 + 2 * n_rows * 8
    assert on_gpu["data"] == _blocks(X.nbytes) + _blocks(n_rows * 10 * 4) + _blocks(n_rows * 8)


def test_auto_and_sknet_device_choose_the_rules(without_cupy, monkeypatch):
    from sknet.backend import memory_rules

    assert memory_rules("auto").name == "cpu"  # no GPU seen
    monkeypatch.setenv("SKNET_DEVICE", "cuda:2")
    rules = memory_rules("auto")
    assert (rules.name, rules.separate_memory, rules.allocated(1)) == ("cuda:2", True, 512)
    assert memory_rules(get_backend("cpu")).allocated(1) == 1
    monkeypatch.setenv("SKNET_DEVICE", "tpu")
    with pytest.raises(ValueError, match="SKNET_DEVICE='tpu'"):
        memory_rules("auto")


@pytest.mark.gpu
@needs_gpu
def test_the_rules_are_cupys_and_give_the_estimate_of_the_real_backend(monkeypatch):
    import cupy as cp

    from sknet.backend import memory_rules
    from sknet.engine import _estimate

    pool, rules = cp.get_default_memory_pool(), memory_rules("cuda")
    for n in (1, 400, 512, 513, 100_000):
        pool.free_all_blocks()
        before = pool.used_bytes()
        a = cp.empty(n, dtype=cp.uint8)
        assert pool.used_bytes() - before == rules.allocated(n), n
        del a
    rng = np.random.RandomState(0)
    X, y = rng.rand(2000, 64).astype(np.float32), rng.randint(10, size=2000)
    for est in (_mlp(device="cuda"), _convnet(device="cuda", input_shape=(1, 8, 8))):
        by_rules = estimate_memory(est, X, y)
        monkeypatch.setattr(_estimate, "_device_of", lambda device: get_backend(device))
        by_backend = estimate_memory(est, X, y)
        monkeypatch.undo()
        assert dict(by_rules) == dict(by_backend)
        assert by_rules.device == by_backend.device == get_backend("cuda").name

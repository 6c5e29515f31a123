"""A sweep of bad and odd inputs over the tabular, sequence, ONNX and logger surfaces.

Every case is *handled*: the call works (and, where a reference exists, agrees
with it: the same rows through another kind of table, ONNX Runtime against
``predict``, a CSV file against ``history_``), or it raises an allowed exception
(``ValueError``, ``TypeError``, ``NotFittedError``, sknet's own, an ``ImportError``
naming an extra) whose message names what was wrong. Anything else fails with
the category it falls in, first in its message, so that a run's failures count
by category:

- ``UNHELPFUL CRASH``: another exception, or an allowed one naming none of the
  case's words (the parameter, the column, the argument);
- ``HANG``: no answer within :data:`TIMEOUT` seconds;
- ``SILENT WRONG``: an input accepted that should have been refused, a result
  that disagrees with its reference, a model changed by a failed call;
- ``REFUSED VALID``: a valid input refused.

Data are tiny and fits one or two epochs of small networks, fitted once per
module where cases only read them. Count a run's outcomes with
``pytest tests/test_bad_input_sweep.py -rf | grep -c "Failed: SILENT WRONG"`` (and
the other categories).
"""
# The tables of cases keep one case per line (``# fmt: skip``), however long.
# ruff: noqa: E501

import contextlib
import os
import resource
import signal
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

import sknet
from sknet import (
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    RNNClassifier,
    TabularClassifier,
    TabularRegressor,
)
from sknet.backend import get_backend
from sknet.callbacks import (
    Callback,
    CSVLogger,
    EarlyStopping,
    LRScheduler,
    MLflowLogger,
    ProgressBar,
    TensorBoardLogger,
)
from sknet.layers import (
    GRU,
    LSTM,
    Conv1D,
    Dense,
    Embedding,
    Flatten,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    Lambda,
    LayerNorm,
    MultiHeadAttention,
    PositionEmbedding,
    Residual,
    Sequential,
    SimpleRNN,
    SinusoidalPositionEmbedding,
    TimeDistributed,
    TransformerEncoderBlock,
)
from sknet.tabular import TabularEncoder

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

TIMEOUT = 30
OK, ERROR, EITHER = "ok", "error", "either"
SKNET_ERRORS = tuple(
    cls
    for cls in vars(sknet.exceptions).values()
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, Warning)
)
ALLOWED = (ValueError, TypeError, NotFittedError, *SKNET_ERRORS)


class Hang(BaseException):
    """The alarm of a case that ran past :data:`TIMEOUT`."""


class Wrong(AssertionError):
    """A result that disagrees with its reference (raised by the cases' checks)."""


@pytest.fixture(autouse=True, scope="module")
def _bounded_memory():
    """A huge parameter fails to allocate here instead of swapping the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def handled(call, words=(), expect=EITHER):
    """Run ``call()`` and fail with its category unless it is handled (see the module)."""

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except Hang:
        pytest.fail(f"HANG: no answer within {TIMEOUT} s")
    except Wrong as exc:
        pytest.fail(f"SILENT WRONG: {exc}")
    except Exception as exc:
        named = "pip install" in str(exc) if isinstance(exc, ImportError) else True
        if not isinstance(exc, ALLOWED + (ImportError,)) or not named:
            pytest.fail(f"UNHELPFUL CRASH: {type(exc).__name__}: {exc}")
        if expect == OK:
            pytest.fail(f"REFUSED VALID: {type(exc).__name__}: {exc}")
        text = str(exc).lower()
        if words and not any(str(word).lower() in text for word in words):
            pytest.fail(f"UNHELPFUL CRASH (names none of {words}): {type(exc).__name__}: {exc}")
    else:
        if expect == ERROR:
            pytest.fail("SILENT WRONG: accepted an input that should be refused")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def agree(got, expected=None, n_rows=None, atol=1e-5, what="output"):
    """``got`` finite, of ``n_rows`` rows, and close to ``expected`` (when given)."""
    got = np.asarray(got, dtype=np.float64)
    if n_rows is not None and got.shape[0] != n_rows:
        raise Wrong(f"{what} has {got.shape[0]} rows, expected {n_rows}")
    if not np.isfinite(got).all():
        raise Wrong(f"{what} holds NaN or infinity: {got.ravel()[:6]}")
    if expected is not None:
        expected = np.asarray(expected, dtype=np.float64)
        if got.shape != expected.shape or not np.allclose(got, expected, atol=atol, rtol=atol):
            diff = np.abs(got - expected).max() if got.shape == expected.shape else got.shape
            raise Wrong(f"{what} disagrees with its reference (max difference {diff})")


def case(id, *values, xfail=None):
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(*values, id=id, marks=marks)


# ======================================================================================
# Tabular
# ======================================================================================
N = 24
SMALL = dict(
    max_iter=2,
    hidden_layer_sizes=(4,),
    n_members=2,
    n_bins=4,
    d_embedding=2,
    batch_size=8,
    early_stopping=False,
    random_state=0,
    device="cpu",
)
Y_CLF = np.arange(N) % 2
Y_REG = np.random.RandomState(1).normal(size=N)


def frame(n=N):
    """Numbers with NaN, strings with None, ints, bools, a category with an unused one."""
    rng = np.random.RandomState(0)
    a = rng.normal(size=n)
    a[::5] = np.nan
    b = np.array(rng.choice(["x", "y", "z"], n), dtype=object)
    b[rng.rand(n) < 0.2] = None
    return pd.DataFrame(
        {
            "a": a,
            "b": b,
            "c": rng.randint(0, 4, n),
            "d": rng.rand(n) < 0.5,
            "e": pd.Categorical(rng.choice(["p", "q"], n), categories=["p", "q", "unused"]),
        }
    )


F = frame()


def output(model, X):
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)
    if hasattr(model, "transform"):
        return model.transform(X)
    return model.predict(X)


def make_tabular(kind, **params):
    if kind == "enc":
        return TabularEncoder(n_bins=4, **params)
    cls = TabularClassifier if kind == "clf" else TabularRegressor
    return cls(**{**SMALL, **params})


def fit_tabular(model, X, y=None, **kwargs):
    if isinstance(model, TabularEncoder):
        return model.fit(X, **kwargs)
    if y is None:
        n = X.shape[0] if hasattr(X, "shape") else len(X) if hasattr(X, "__len__") else N
        y = (Y_CLF if isinstance(model, TabularClassifier) else Y_REG)[:n]
    return model.fit(X, y, **kwargs)


@pytest.fixture(scope="module")
def tabular():
    """Models fitted on :data:`F` once, with their outputs on it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = {kind: fit_tabular(make_tabular(kind), F) for kind in ("clf", "reg", "enc")}
    return models, {kind: output(model, F) for kind, model in models.items()}


def _col(name, values, base=None):
    X = (F if base is None else base).copy()
    X[name] = values
    return X


def _obj(values):
    values = list(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _mixed_missing():
    b = F["b"].to_numpy(dtype=object).copy()
    spellings = [None, np.nan, pd.NA, pd.NaT]
    for k, i in enumerate(np.flatnonzero(pd.isna(b))):
        b[i] = spellings[k % 4]
    return _col("b", b)


def _cell(column, value, row=0):
    X = F.copy()
    if isinstance(value, float):  # a number in a numeric column keeps its dtype
        X[column] = X[column].astype(float)
        X.loc[row, column] = value
        return X
    values = X[column].to_numpy(dtype=object).copy()
    values[row] = value
    X[column] = values
    return X


NAMED = ("feature names", "features")
# (id, the odd table made of F, expectation, words, reference: "same" rows of F, or None)
PREDICT_TABLES = [
    ("same", lambda: F, OK, (), "same"),
    ("reordered", lambda: F[F.columns[::-1]], ERROR, ("order",), None),
    ("renamed", lambda: F.rename(columns={"a": "A"}), ERROR, ("'A'", "- A", "unseen"), None),
    ("extra-column", lambda: F.assign(z=1.0), ERROR, ("z",), None),
    ("missing-column", lambda: F.drop(columns="c"), ERROR, ("c", "missing"), None),
    ("numpy-object", lambda: F.to_numpy(dtype=object), OK, (), "same"),
    ("list-of-rows", lambda: F.to_numpy(dtype=object).tolist(), OK, (), "same"),
    ("polars", lambda: pl.from_pandas(F), OK, (), "same"),
    ("pyarrow", lambda: pa.Table.from_pandas(F, preserve_index=False), OK, (), "same"),
    (
        "pyarrow-chunked",
        lambda: pa.concat_tables(
            [pa.Table.from_pandas(F.iloc[:10], preserve_index=False)]
            + [pa.Table.from_pandas(F.iloc[10:], preserve_index=False)]
        ),
        OK,
        (),
        "same",
    ),
    ("reversed-index", lambda: F.set_axis(np.arange(N)[::-1]), OK, (), "same"),
    ("string-index", lambda: F.set_axis([f"r{i}" for i in range(N)]), OK, (), "same"),
    ("single-row", lambda: F.iloc[[3]], OK, (), slice(3, 4)),
    ("zero-rows", lambda: F.iloc[:0], EITHER, ("sample",), slice(0, 0)),
    ("unseen-category", lambda: _cell("b", "new"), OK, (), None),
    ("unseen-categorical-value", lambda: _col("e", pd.Categorical(["r"] * N)), OK, (), None),
    ("unused-category", lambda: _col("e", F["e"].where(F.index > 3, "unused")), OK, (), None),
    (
        "categories-reordered",
        lambda: _col("e", F["e"].cat.reorder_categories(["unused", "q", "p"])),
        OK,
        (),
        "same",
    ),
    ("b-as-category", lambda: _col("b", F["b"].astype("category")), OK, (), "same"),
    ("b-string-dtype", lambda: _col("b", F["b"].astype("string")), OK, (), "same"),
    ("b-pyarrow-string", lambda: _col("b", F["b"].astype("string[pyarrow]")), OK, (), "same"),
    ("b-ints", lambda: _col("b", np.arange(N)), OK, (), None),
    ("b-bytes", lambda: _cell("b", b"x"), OK, (), None),
    ("b-list-cell", lambda: _cell("b", [1, 2]), ERROR, ("'b'",), None),
    ("b-dict-cell", lambda: _cell("b", {"k": 1}), ERROR, ("'b'",), None),
    ("b-tuple-cell", lambda: _cell("b", ("x",)), ERROR, ("'b'",), None),
    ("b-missing-spellings", _mixed_missing, OK, (), "same"),
    ("b-all-missing", lambda: _col("b", _obj([None] * N)), OK, (), None),
    ("a-object", lambda: _col("a", F["a"].astype(object)), OK, (), "same"),
    ("a-float32", lambda: _col("a", F["a"].astype(np.float32)), OK, (), "same"),
    ("a-Float64-NA", lambda: _col("a", F["a"].astype("Float64")), OK, (), "same"),
    ("a-None", lambda: _col("a", _obj(None if v != v else v for v in F["a"])), OK, (), "same"),
    ("a-NaT", lambda: _col("a", _obj(pd.NaT if v != v else v for v in F["a"])), OK, (), "same"),
    ("a-Decimal", lambda: _col("a", _obj(Decimal(repr(v)) for v in F["a"])), OK, (), "same"),
    ("a-number-strings", lambda: _col("a", F["a"].map(repr)), EITHER, ("'a'",), "same"),
    ("a-word", lambda: _cell("a", "hello"), ERROR, ("'a'",), None),
    ("a-inf", lambda: _cell("a", np.inf), ERROR, ("infinity",), None),
    ("a-minus-inf", lambda: _cell("a", -np.inf), ERROR, ("infinity",), None),
    ("a-huge", lambda: _cell("a", 1e300), OK, (), None),
    ("a-all-nan", lambda: _col("a", np.nan), OK, (), None),
    ("a-bools", lambda: _col("a", F.index % 2 == 0), OK, (), None),
    ("a-datetime", lambda: _col("a", pd.date_range("2020", periods=N)), ERROR, ("'a'",), None),
    ("a-complex", lambda: _col("a", F["a"] + 1j), ERROR, ("'a'", "complex"), None),
    ("a-list-cell", lambda: _cell("a", [1.0]), ERROR, ("'a'",), None),
    ("c-float", lambda: _col("c", F["c"].astype(float)), OK, (), "same"),
    ("c-uint8", lambda: _col("c", F["c"].astype(np.uint8)), OK, (), "same"),
    ("c-Int64-NA", lambda: _col("c", F["c"].astype("Int64").where(F.index > 0)), OK, (), None),
    ("c-number-strings", lambda: _col("c", F["c"].astype(str)), EITHER, ("'c'",), "same"),
    ("d-strings", lambda: _col("d", F["d"].astype(str)), OK, (), None),
    ("d-ints", lambda: _col("d", F["d"].astype(int)), OK, (), None),
    ("d-boolean-NA", lambda: _col("d", F["d"].astype("boolean").where(F.index > 0)), OK, (), None),
    ("duplicated-columns", lambda: pd.concat([F, F[["a"]]], axis=1), ERROR, ("a",), None),
    (
        "duplicated-name-same-count",
        lambda: F.set_axis(["a", "b", "a", "d", "e"], axis=1),
        ERROR,
        ("c", "a"),
        None,
    ),
    ("integer-names", lambda: F.set_axis(range(5), axis=1), OK, (), "same"),
    ("mixed-names", lambda: F.set_axis(["a", 1, "c", "d", "e"], axis=1), ERROR, NAMED, None),
    ("empty-name", lambda: F.rename(columns={"a": ""}), ERROR, NAMED, None),
    (
        "multiindex-names",
        lambda: F.set_axis(pd.MultiIndex.from_tuples([(c, 0) for c in F.columns]), axis=1),
        EITHER,
        NAMED,
        "same",
    ),
    ("series", lambda: F["a"], ERROR, ("2d", "2-d"), None),
    ("1d-array", lambda: F["a"].to_numpy(), ERROR, ("2d",), None),
    ("3d-array", lambda: np.zeros((2, 5, 1)), ERROR, ("3d",), None),
    ("scalar", lambda: 5.0, ERROR, ("scalar",), None),
    ("none", lambda: None, ERROR, ("scalar", "none"), None),
    ("string", lambda: "abc", ERROR, ("scalar",), None),
    ("sparse", lambda: sp.csr_matrix(np.ones((3, 5))), ERROR, ("sparse",), None),
    ("dict-of-lists", lambda: F.to_dict("list"), ERROR, ("scalar", "dict"), None),
    ("list-of-dicts", lambda: F.to_dict("records"), ERROR, ("1d", "dict"), None),
    ("polars-lazy", lambda: pl.from_pandas(F).lazy(), EITHER, ("lazy",), "same"),
    ("strings-array", lambda: F.astype(str).to_numpy(), EITHER, ("'a'", "0"), None),
]
PREDICT_CASES = [
    case(f"tabular-predict-{kind}-{name}", kind, make, expect, words, ref)
    for name, make, expect, words, ref in PREDICT_TABLES
    for kind in ("clf", "reg", "enc")
]


@pytest.mark.parametrize("kind, make, expect, words, ref", PREDICT_CASES)
def test_tabular_predict(tabular, kind, make, expect, words, ref):
    models, outputs = tabular
    model, expected = models[kind], outputs[kind]

    def call():
        X = make()
        got = output(model, X)
        rows = None if ref is None else expected[slice(None) if ref == "same" else ref]
        agree(got, rows, n_rows=None if rows is None else rows.shape[0])

    handled(call, words, expect)
    agree(output(model, F), expected, what="the model's output on F after the call")


def _frame_of(**columns):
    n = len(next(iter(columns.values())))
    return pd.DataFrame(columns, index=range(n))


def _numbers(n=N):
    return np.random.RandomState(2).normal(size=n)


def _polars(**columns):
    return pl.DataFrame({"x": _numbers(), **columns})


def _arrow(**columns):
    return pa.table({"x": _numbers(), **columns})


_DATES = pd.date_range("2020-01-01", periods=N)
# (id, the training table, expectation, words, reference: "same" as the fit on F, or None)
FIT_TABLES = [
    ("pandas", lambda: F, OK, (), "same"),
    ("polars", lambda: pl.from_pandas(F), OK, (), "same"),
    ("pyarrow", lambda: pa.Table.from_pandas(F, preserve_index=False), OK, (), "same"),
    ("numpy-object", lambda: F.to_numpy(dtype=object), OK, (), None),
    ("list-of-rows", lambda: F.to_numpy(dtype=object).tolist(), OK, (), None),
    ("numpy-float", lambda: np.column_stack([_numbers(), _numbers() ** 2]), OK, (), None),
    ("numpy-strings", lambda: F.astype(str).to_numpy(), OK, (), None),
    ("numpy-bools", lambda: F[["d"]].to_numpy(), OK, (), None),
    ("numpy-all-None", lambda: np.full((N, 2), None, dtype=object), OK, (), None),
    ("numpy-datetime64", lambda: _DATES.to_numpy().reshape(-1, 1), ERROR, ("datetime",), None),
    ("numpy-complex", lambda: np.ones((N, 2)) + 1j, ERROR, ("complex",), None),
    ("numpy-structured", lambda: np.zeros(N, dtype=[("a", float)]), ERROR, ("1d",), None),
    ("empty-name", lambda: F.rename(columns={"a": ""}), OK, (), None),
    ("duplicated-names", lambda: F.set_axis(list("abcda"), axis=1), EITHER, ("'a'",), None),
    ("integer-names", lambda: F.set_axis(range(5), axis=1), OK, (), None),
    ("mixed-names", lambda: F.set_axis(["a", 1, "c", "d", "e"], axis=1), ERROR, NAMED, None),
    ("all-missing-number", lambda: _col("a", np.nan), OK, (), None),
    ("all-missing-object", lambda: _col("b", _obj([None] * N)), OK, (), None),
    (
        "all-missing-everywhere",
        lambda: _frame_of(a=[np.nan] * N, b=_obj([None] * N), e=pd.Categorical([None] * N)),
        OK,
        (),
        None,
    ),
    ("constant", lambda: _frame_of(a=[1.0] * N, b=["x"] * N, c=[3] * N), OK, (), None),
    ("single-row", lambda: F.iloc[:1], EITHER, ("class", "sample"), None),
    ("two-rows", lambda: F.iloc[:2], OK, (), None),
    ("single-column", lambda: F[["a"]], OK, (), None),
    ("single-categorical-column", lambda: F[["b"]], OK, (), None),
    ("zero-rows", lambda: F.iloc[:0], ERROR, ("0 sample",), None),
    ("zero-columns", lambda: F[[]], ERROR, ("0 feature",), None),
    ("inf", lambda: _cell("a", np.inf), ERROR, ("infinity",), None),
    ("minus-inf", lambda: _cell("a", -np.inf), ERROR, ("infinity",), None),
    ("huge", lambda: _cell("a", 1e300), OK, (), None),
    ("huge-both-signs", lambda: _col("a", np.where(F.index % 2, 1e308, -1e308)), OK, (), None),
    (
        "huge-standard",
        lambda: _col("a", np.where(F.index % 2, 1e308, -1e308)),
        EITHER,
        ("'a'",),
        {"numeric_scaling": "standard"},
    ),
    (
        "huge-robust",
        lambda: _col("a", np.where(F.index % 2, 1e308, -1e308)),
        EITHER,
        ("'a'",),
        {"numeric_scaling": "robust"},
    ),
    ("tiny", lambda: _col("a", _numbers() * 1e-300), OK, (), None),
    ("float16", lambda: _col("a", _numbers().astype(np.float16)), OK, (), None),
    ("uint64-huge", lambda: _col("c", np.arange(N, dtype=np.uint64) + 2**63), OK, (), None),
    ("number-strings", lambda: _col("a", _numbers().astype(str).astype(object)), OK, (), None),
    ("numbers-and-a-word", lambda: _cell("a", "oops"), OK, (), None),
    ("mixed-int-str", lambda: _col("b", _obj([1, "x"] * (N // 2))), OK, (), None),
    ("bytes", lambda: _col("b", _obj([b"x", b"y"] * (N // 2))), OK, (), None),
    ("bytes-and-str", lambda: _col("b", _obj([b"x", "x"] * (N // 2))), OK, (), None),
    (
        "missing-spellings",
        lambda: _col("b", _obj([None, np.nan, pd.NA, pd.NaT, "x", "y"] * (N // 6))),
        OK,
        (),
        None,
    ),
    ("Int64-NA", lambda: _col("c", F["c"].astype("Int64").where(F.index > 2)), OK, (), None),
    ("Float64-NA", lambda: _col("a", F["a"].astype("Float64")), OK, (), None),
    ("boolean-NA", lambda: _col("d", F["d"].astype("boolean").where(F.index > 2)), OK, (), None),
    ("string-NA", lambda: _col("b", F["b"].astype("string")), OK, (), None),
    ("string-pyarrow", lambda: _col("b", F["b"].astype("string[pyarrow]")), OK, (), None),
    ("category-all-NaN", lambda: _col("e", pd.Categorical([None] * N, ["p"])), OK, (), None),
    ("category-ints", lambda: _col("e", pd.Categorical(F["c"])), OK, (), None),
    ("category-mixed", lambda: _col("e", pd.Categorical(_obj([1, "x"] * (N // 2)))), OK, (), None),
    ("Decimal", lambda: _col("a", _obj(Decimal(i) for i in range(N))), OK, (), None),
    (
        "sparse-column",
        lambda: _col("a", pd.arrays.SparseArray(np.r_[1.0, np.zeros(N - 1)])),
        EITHER,
        ("'a'",),
        None,
    ),
    ("datetime", lambda: _col("t", _DATES), ERROR, ("'t'",), None),
    ("datetime-NaT", lambda: _col("t", _DATES.where(F.index > 2)), ERROR, ("'t'",), None),
    ("datetime-tz", lambda: _col("t", _DATES.tz_localize("UTC")), ERROR, ("'t'",), None),
    ("timedelta", lambda: _col("t", _DATES - _DATES[0]), ERROR, ("'t'",), None),
    ("period", lambda: _col("t", _DATES.to_period("D")), ERROR, ("'t'",), None),
    ("interval", lambda: _col("t", pd.interval_range(0, N)), ERROR, ("'t'",), None),
    ("complex", lambda: _col("t", _numbers() + 1j), ERROR, ("'t'",), None),
    ("lists", lambda: _col("t", _obj([[1], [2]] * (N // 2))), ERROR, ("'t'",), None),
    ("dicts", lambda: _col("t", _obj([{"k": 1}] * N)), ERROR, ("'t'",), None),
    ("tuples", lambda: _col("t", _obj([("x",), ("y",)] * (N // 2))), ERROR, ("'t'",), None),
    ("sets", lambda: _col("t", _obj([{1}] * N)), ERROR, ("'t'",), None),
    ("strings-as-numbers", lambda: F, ERROR, ("'b'",), "numeric"),
    ("polars-nulls", lambda: _polars(s=["u", None] * (N // 2)), OK, (), None),
    (
        "polars-categorical",
        lambda: _polars(s=pl.Series(["u", "v"] * (N // 2), dtype=pl.Categorical)),
        OK,
        (),
        None,
    ),
    (
        "polars-enum",
        lambda: _polars(s=pl.Series(["u"] * N, dtype=pl.Enum(["u", "v"]))),
        OK,
        (),
        None,
    ),
    (
        "polars-decimal",
        lambda: _polars(s=pl.Series([Decimal(1)] * N, dtype=pl.Decimal(5, 2))),
        OK,
        (),
        None,
    ),
    ("polars-datetime", lambda: _polars(s=_DATES.to_pydatetime()), ERROR, ("'s'",), None),
    (
        "polars-duration",
        lambda: _polars(s=pl.Series([1] * N, dtype=pl.Duration)),
        ERROR,
        ("'s'",),
        None,
    ),
    ("polars-list", lambda: _polars(s=[[1], [2]] * (N // 2)), ERROR, ("'s'",), None),
    ("polars-struct", lambda: _polars(s=[{"k": 1}] * N), ERROR, ("'s'",), None),
    ("polars-null-column", lambda: _polars(s=pl.Series([None] * N)), EITHER, ("'s'",), None),
    ("polars-lazy", lambda: pl.from_pandas(F).lazy(), EITHER, ("lazy",), None),
    ("arrow-nulls", lambda: _arrow(s=["u", None] * (N // 2)), OK, (), None),
    (
        "arrow-dictionary",
        lambda: _arrow(s=pa.array(["u", "v"] * (N // 2)).dictionary_encode()),
        OK,
        (),
        None,
    ),
    ("arrow-timestamp", lambda: _arrow(s=pa.array(_DATES.to_pydatetime())), ERROR, ("'s'",), None),
    ("arrow-list", lambda: _arrow(s=[[1], [2]] * (N // 2)), ERROR, ("'s'",), None),
    ("arrow-null-type", lambda: _arrow(s=pa.nulls(N)), EITHER, ("'s'",), None),
]
FIT_CASES = [
    case(f"tabular-fit-{kind}-{name}", kind, make, expect, words, ref)
    for name, make, expect, words, ref in FIT_TABLES
    for kind in ("clf", "enc") + (("reg",) if ref == "same" or name.startswith("huge") else ())
]


@pytest.mark.parametrize("kind, make, expect, words, ref", FIT_CASES)
def test_tabular_fit(tabular, kind, make, expect, words, ref):
    params = {"categorical_features": None} if ref == "numeric" else {}
    params = ref if isinstance(ref, dict) else params  # the plan's parameters of the case

    def call():
        X = make()
        model = fit_tabular(make_tabular(kind, **params), X)
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        if ref == "same":  # another kind of table, the same rows: the same model
            agree(output(model, F), tabular[1][kind], what="the predictions on F")
        else:
            agree(output(model, X), n_rows=n)

    handled(call, words, expect)


def _y(kind, n=N):
    return (Y_CLF if kind == "clf" else Y_REG)[:n]


# (id, y of F's rows, expectation, words) for the classifier and the regressor
TARGETS = [
    ("nan", lambda k: np.where(np.arange(N) == 0, np.nan, _y(k)), ERROR, ("nan", "y")),
    ("inf", lambda k: np.where(np.arange(N) == 0, np.inf, _y(k)), ERROR, ("inf", "y")),
    ("none-in-object", lambda k: _obj([None, *_y(k)[1:]]), ERROR, ("y", "none", "nan")),
    ("strings", lambda k: np.array(["a", "b"] * (N // 2)), EITHER, ("y", "string", "numeric")),
    ("bools", lambda k: np.arange(N) % 2 == 0, OK, ()),
    ("2d-one-column", lambda k: _y(k).reshape(-1, 1), OK, ()),
    ("2d-two-columns", lambda k: np.column_stack([_y(k), _y(k)]), EITHER, ("y", "multi")),
    ("3d", lambda k: np.zeros((N, 1, 1)), ERROR, ("y", "dim", "3")),
    ("too-short", lambda k: _y(k)[:-1], ERROR, ("inconsistent", "samples")),
    ("too-long", lambda k: np.r_[_y(k), _y(k)[:1]], ERROR, ("inconsistent", "samples")),
    ("scalar", lambda k: 1.0, ERROR, ("y", "scalar", "0d", "1d")),
    ("none", lambda k: None, ERROR, ("y",)),
    ("empty", lambda k: np.array([]), ERROR, ("inconsistent", "0 sample")),
    ("series-other-index", lambda k: pd.Series(_y(k), index=np.arange(N) + 100), OK, ()),
    ("data-frame", lambda k: pd.DataFrame({"t": _y(k)}), OK, ()),
    ("list", lambda k: list(_y(k)), OK, ()),
    ("one-class", lambda k: np.zeros(N), EITHER, ("class",)),
    ("complex", lambda k: _y(k) + 1j, ERROR, ("complex",)),
    ("pd-NA", lambda k: pd.array([pd.NA, *_y(k)[1:]], dtype="Float64"), ERROR, ("nan", "y")),
    ("huge", lambda k: _y(k) * 1e300, EITHER, ("y", "large")),
    ("class-weight-unknown-class", lambda k: _y(k), "class_weight", ("class_weight", "7")),
]
TARGET_CASES = [
    case(f"tabular-y-{kind}-{name}", kind, make, expect, words)
    for name, make, expect, words in TARGETS
    for kind in ("clf", "reg")
    if not (kind == "reg" and expect == "class_weight")
]


@pytest.mark.parametrize("kind, make, expect, words", TARGET_CASES)
def test_tabular_targets(kind, make, expect, words):
    params = {}
    if expect == "class_weight":  # a weight for a class y does not have
        params, expect = {"class_weight": {0: 1.0, 7: 2.0}}, EITHER

    def call():
        model = make_tabular(kind, **params).fit(F, make(kind))
        agree(output(model, F), n_rows=N)

    handled(call, words, expect)


WEIGHTS = [
    ("negative", lambda: -np.ones(N), ERROR, ("negative",)),
    ("one-negative", lambda: np.r_[-1.0, np.ones(N - 1)], ERROR, ("negative",)),
    ("nan", lambda: np.r_[np.nan, np.ones(N - 1)], ERROR, ("nan", "sample_weight")),
    ("inf", lambda: np.r_[np.inf, np.ones(N - 1)], ERROR, ("inf", "sample_weight")),
    ("zeros", lambda: np.zeros(N), ERROR, ("sample_weight", "zero", "positive")),
    ("one-positive", lambda: np.r_[1.0, np.zeros(N - 1)], EITHER, ("sample_weight", "class")),
    ("too-short", lambda: np.ones(N - 1), ERROR, ("sample_weight",)),
    ("2d", lambda: np.ones((N, 1)), ERROR, ("sample_weight", "1d")),
    ("scalar", lambda: 2.0, OK, ()),
    ("strings", lambda: np.array(["1"] * N), EITHER, ("sample_weight",)),
    ("words", lambda: np.array(["a"] * N), ERROR, ("sample_weight", "float")),
    ("list", lambda: [1.0] * N, OK, ()),
    ("series", lambda: pd.Series(np.ones(N), index=np.arange(N) + 5), OK, ()),
    ("huge", lambda: np.full(N, 1e300), EITHER, ("sample_weight",)),
    ("tiny", lambda: np.full(N, 1e-300), EITHER, ("sample_weight",)),
    ("ints", lambda: np.arange(N) % 3, EITHER, ("sample_weight", "class")),
    ("complex", lambda: np.ones(N) + 1j, ERROR, ("sample_weight", "complex")),
]
WEIGHT_CASES = [
    case(f"tabular-weight-{kind}-{name}", kind, make, expect, words)
    for name, make, expect, words in WEIGHTS
    for kind in ("clf", "reg", "enc")
]


@pytest.mark.parametrize("kind, make, expect, words", WEIGHT_CASES)
def test_tabular_sample_weight(kind, make, expect, words):
    def call():
        model = fit_tabular(make_tabular(kind), F, sample_weight=make())
        agree(output(model, F), n_rows=N)

    handled(call, words, expect)


#: every constructor parameter with a bad value (or an odd one that works)
BAD_VALUES = [-1, 0, np.nan, "bad", 10**9, 1.5, None]
PARAMETERS = [
    "numeric_scaling", "numeric_embedding", "n_bins", "d_embedding", "categorical_dims",
    "min_frequency", "hidden_layer_sizes", "activation", "dropout", "n_members", "solver",
    "alpha", "batch_size", "learning_rate", "learning_rate_init", "power_t", "max_iter",
    "shuffle", "random_state", "tol", "verbose", "warm_start", "momentum",
    "nesterovs_momentum", "early_stopping", "validation_fraction", "scoring", "beta_1",
    "beta_2", "epsilon", "weight_decay", "n_iter_no_change", "max_fun", "clip_norm",
    "device", "max_device_memory", "dtype", "callbacks", "class_weight", "loss",
    "label_smoothing",
]  # fmt: skip
#: values that would train for a very long time, as asked: not a defect
_SLOW = {("max_iter", 10**9), ("n_iter_no_change", 10**9), ("verbose", 10**9)}
PARAMETER_CASES = (
    [
        case(f"tabular-param-clf-{name}={value!r}", TabularClassifier, name, value)
        for name in PARAMETERS
        for value in BAD_VALUES
        if (name, value) not in _SLOW
    ]
    + [
        case(f"tabular-param-reg-{name}={value!r}", TabularRegressor, name, value)
        for name in ("loss", "standardize_target", "categorical_dims", "n_members")
        for value in BAD_VALUES
    ]
    + [
        case(f"tabular-param-enc-{name}={value!r}", TabularEncoder, name, value)
        for name in ("numeric_scaling", "n_bins", "min_frequency", "missing_indicators", "dtype")
        for value in BAD_VALUES
    ]
)


@pytest.mark.parametrize("cls, name, value", PARAMETER_CASES)
def test_tabular_parameters(cls, name, value):
    def call():
        if cls is TabularEncoder:
            model = TabularEncoder(n_bins=4, **{name: value}).fit(F)
        else:
            y = Y_CLF if cls is TabularClassifier else Y_REG
            model = cls(**{**SMALL, name: value}).fit(F, y)
        agree(output(model, F), n_rows=N)

    handled(call, (name, "1000000000") if value == 10**9 else (name,))


CATEGORICAL_FEATURES = [
    ("names", ["b", "e"], OK, ()),
    ("absent-name", ["zz"], ERROR, ("zz",)),
    ("one-name-as-str", "b", ERROR, ("categorical_features",)),
    ("indices", [1, 4], OK, ()),
    ("out-of-range", [7], ERROR, ("categorical_features", "7")),
    ("negative", [-1], ERROR, ("categorical_features", "-1")),
    ("zero-one-ints", [0, 1, 0, 1, 1], ERROR, ("mask", "dtype bool")),
    ("bool-mask", [False, True, False, True, True], OK, ()),
    ("bool-mask-short", [False, True], ERROR, ("categorical_features", "shape")),
    ("bool-mask-long", [True] * 7, ERROR, ("categorical_features", "shape")),
    ("empty-list", [], ERROR, ("'b'",)),
    ("none", None, ERROR, ("'b'",)),
    ("floats", [1.0, 4.0], ERROR, ("categorical_features",)),
    ("mixed", [1, "e"], ERROR, ("categorical_features",)),
    ("nested", [[1, 4]], ERROR, ("categorical_features",)),
    ("set", {1, 4}, ERROR, ("categorical_features",)),
    ("dict", {"b": True}, ERROR, ("categorical_features",)),
    ("duplicated", [1, 1, 4], OK, ()),
    ("numpy-names", np.array(["b", "e"]), OK, ()),
    ("pandas-index", pd.Index(["b", "e"]), OK, ()),
    ("numpy-int64", np.array([1, 4], dtype=np.int64), OK, ()),
    ("numeric-column-too", ["a", "b", "e"], OK, ()),
    ("bool-mask-numpy", np.array([0, 1, 0, 1, 1], bool), OK, ()),
    ("names-no-names", ["b"], ERROR, ("feature names", "names")),
    ("nan", [np.nan], ERROR, ("categorical_features",)),
    ("bad-string", "dtype", ERROR, ("categorical_features",)),
]
CATEGORICAL_CASES = [
    case(f"tabular-categorical-{kind}-{name}", kind, value, expect, words)
    for name, value, expect, words in CATEGORICAL_FEATURES
    for kind in ("clf", "enc")
]


@pytest.mark.parametrize("kind, value, expect, words", CATEGORICAL_CASES)
def test_tabular_categorical_features(kind, value, expect, words):
    X = F.to_numpy(dtype=object) if words == ("feature names", "names") else F

    def call():
        model = fit_tabular(make_tabular(kind, categorical_features=value), X)
        agree(output(model, X), n_rows=N)

    handled(call, words, expect)


VALIDATION = [
    ("same", lambda: dict(X_val=F, y_val=Y_CLF), OK, ()),
    (
        "other-columns",
        lambda: dict(X_val=F.rename(columns={"a": "A"}), y_val=Y_CLF),
        ERROR,
        ("'A'", "- A"),
    ),
    ("reordered", lambda: dict(X_val=F[F.columns[::-1]], y_val=Y_CLF), ERROR, ("order",)),
    ("fewer-columns", lambda: dict(X_val=F.drop(columns="c"), y_val=Y_CLF), ERROR, ("c",)),
    ("X_val-only", lambda: dict(X_val=F), ERROR, ("y_val",)),
    ("y_val-only", lambda: dict(y_val=Y_CLF), ERROR, ("X_val",)),
    ("short-y_val", lambda: dict(X_val=F, y_val=Y_CLF[:-1]), ERROR, ("inconsistent", "y_val")),
    ("unseen-category", lambda: dict(X_val=_cell("b", "new"), y_val=Y_CLF), OK, ()),
    ("unseen-class", lambda: dict(X_val=F, y_val=Y_CLF + 5), EITHER, ("y_val", "class", "label")),
    ("nan-y_val", lambda: dict(X_val=F, y_val=np.r_[np.nan, Y_CLF[1:]]), ERROR, ("y_val", "nan")),
    ("numpy-X_val", lambda: dict(X_val=F.to_numpy(dtype=object), y_val=Y_CLF), OK, ()),
    ("inf-X_val", lambda: dict(X_val=_cell("a", np.inf), y_val=Y_CLF), ERROR, ("infinity",)),
    ("empty-X_val", lambda: dict(X_val=F.iloc[:0], y_val=Y_CLF[:0]), ERROR, ("X_val", "sample")),
    (
        "weights-short",
        lambda: dict(X_val=F, y_val=Y_CLF, sample_weight_val=np.ones(3)),
        ERROR,
        ("sample_weight",),
    ),
    (
        "weights-negative",
        lambda: dict(X_val=F, y_val=Y_CLF, sample_weight_val=-np.ones(N)),
        ERROR,
        ("negative",),
    ),
    ("polars-X_val", lambda: dict(X_val=pl.from_pandas(F), y_val=Y_CLF), OK, ()),
    ("1d-X_val", lambda: dict(X_val=F["a"], y_val=Y_CLF), ERROR, ("2d", "x_val")),
    ("list-cell-X_val", lambda: dict(X_val=_cell("b", [1]), y_val=Y_CLF), ERROR, ("'b'",)),
]
VALIDATION_CASES = [
    case(f"tabular-validation-{kind}-{name}", kind, make, expect, words)
    for name, make, expect, words in VALIDATION
    for kind in ("clf", "reg")
]


@pytest.mark.parametrize("kind, make, expect, words", VALIDATION_CASES)
def test_tabular_validation_sets(kind, make, expect, words):
    def call():
        kwargs = make()
        if kind == "reg" and "y_val" in kwargs:
            kwargs["y_val"] = np.asarray(kwargs["y_val"], dtype=float) / 3
        model = make_tabular(kind, early_stopping=True).fit(F, _y(kind), **kwargs)
        agree(output(model, F), n_rows=N)

    handled(call, words, expect)


# A fitted model given a failing continuation keeps its predictions.
CONTINUATIONS = [
    ("warm-start-list-cell", "fit", lambda: _cell("b", [1]), ("'b'",)),
    ("warm-start-inf", "fit", lambda: _cell("a", np.inf), ("infinity",)),
    ("warm-start-renamed", "fit", lambda: F.rename(columns={"a": "A"}), ("'A'", "- A")),
    ("warm-start-one-column", "fit", lambda: F[["a"]], ("feature",)),
    ("partial-fit-word", "partial_fit", lambda: _cell("a", "word"), ("'a'",)),
    ("partial-fit-reordered", "partial_fit", lambda: F[F.columns[::-1]], ("order",)),
    ("partial-fit-list-cell", "partial_fit", lambda: _cell("b", {"k": 1}), ("'b'",)),
    ("partial-fit-new-class", "partial_fit", lambda: F, ("class",)),
]
CONTINUATION_CASES = [
    case(f"tabular-continue-{kind}-{name}", kind, how, make, words)
    for name, how, make, words in CONTINUATIONS
    for kind in ("clf", "reg")
    if not (kind == "reg" and name.endswith("new-class"))
]


@pytest.mark.parametrize("kind, how, make, words", CONTINUATION_CASES)
def test_tabular_failed_continuation_keeps_the_model(kind, how, make, words):
    model = make_tabular(kind, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(F, _y(kind))
    before = output(model, F)
    y = _y(kind) + (7 if how == "partial_fit" and make is CONTINUATIONS[-1][2] else 0)
    handled(lambda: getattr(model, how)(make(), y), words, ERROR)
    agree(output(model, F), before, what="the predictions after the failed call")


# ======================================================================================
# Sequences
# ======================================================================================
VOCAB, STEPS = 10, 6


def tokens(n=20, seed=0):
    """Token ids 1..9 padded with 0 at the end of some rows, and a label."""
    rng = np.random.RandomState(seed)
    X = rng.randint(1, VOCAB, (n, STEPS))
    for i, length in enumerate(rng.randint(2, STEPS + 1, n)):
        X[i, length:] = 0
    return X, np.arange(n) % 2


def steps(n=20, seed=0):
    """Float sequences (n, STEPS, 2) padded with 0.0 at the end of some rows."""
    X = np.random.RandomState(seed).normal(size=(n, STEPS, 2)) + 3.0
    X[::3, 4:] = 0.0
    return X, np.arange(n) % 2


SEQUENCE_MODELS = {
    "lstm": lambda: [Embedding(VOCAB, 4), LSTM(4)],
    "gru-bi": lambda: [Embedding(VOCAB, 4), GRU(3, bidirectional=True)],
    "conv1d": lambda: [Embedding(VOCAB, 4), Conv1D(4, 3, padding="same"), GlobalAvgPool1D()],
    "attention": lambda: [
        Embedding(VOCAB, 4),
        PositionEmbedding(),
        MultiHeadAttention(2),
        GlobalMaxPool1D(),
    ],
    "transformer": lambda: [
        Embedding(VOCAB, 4),
        SinusoidalPositionEmbedding(),
        TransformerEncoderBlock(2, 8, dropout=0.0),
        GlobalAvgPool1D(),
    ],
    "residual-causal": lambda: [
        Embedding(VOCAB, 4),
        Residual([MultiHeadAttention(2, causal=True)]),
        Sequential([LayerNorm(), LSTM(3, return_sequences=True)]),
        GlobalMaxPool1D(),
    ],
    "cross-attention": lambda: [
        Embedding(VOCAB, 4),
        TimeDistributed(Dense(4)),
        MultiHeadAttention(2, query_steps=2),
        Flatten(),
    ],
}
SEQ = dict(padding_value=0, max_iter=1, batch_size=8, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def sequence_models():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X, y = tokens()
        models = {
            name: NeuralNetClassifier(make(), **SEQ).fit(X, y)
            for name, make in SEQUENCE_MODELS.items()
        }
        Xf, yf = steps()
        models["float-lstm"] = NeuralNetClassifier([LSTM(3)], **SEQ).fit(Xf, yf)
        models["rnn-preset"] = RNNClassifier(cell="gru", units=(3,), **SEQ).fit(
            Xf.reshape(len(Xf), -1), yf
        )
    return models


def _ids(change):
    X = tokens()[0].copy()
    return change(X) if change(X) is not None else X


def _padded(X, steps=STEPS):
    """``X`` with padding (0) after its steps up to ``steps``."""
    return np.concatenate([X, np.zeros((len(X), steps - X.shape[1]), X.dtype)], axis=1)


def _set(X, index, value, dtype=None):
    X = X.astype(dtype or X.dtype)
    X[index] = value
    return X


# (id, odd token ids, expectation, words, reference: "same" rows of tokens(), or None)
TOKEN_INPUTS = [
    ("same", lambda: tokens()[0], OK, (), "same"),
    ("1d", lambda: tokens()[0][0], ERROR, ("2d", "1d"), None),
    ("3d", lambda: tokens()[0][:, :, None], ERROR, ("shape", "3d", "dimension"), None),
    ("nan", lambda: _set(tokens()[0], (0, 0), np.nan, float), ERROR, ("nan",), None),
    ("inf", lambda: _set(tokens()[0], (0, 0), np.inf, float), ERROR, ("inf",), None),
    ("integral-floats", lambda: tokens()[0].astype(float), OK, (), "same"),
    ("fractions", lambda: tokens()[0] + 0.5, ERROR, ("integer", "token", "id"), None),
    ("negative", lambda: _set(tokens()[0], (0, 0), -1), ERROR, ("-1", "token", "id"), None),
    ("too-large", lambda: _set(tokens()[0], (0, 0), VOCAB), ERROR, (str(VOCAB), "id"), None),
    ("huge", lambda: _set(tokens()[0], (0, 0), 2**62), ERROR, ("id", "range"), None),
    ("strings", lambda: tokens()[0].astype(str), EITHER, ("token", "string", "number"), "same"),
    ("words", lambda: np.full((2, STEPS), "w"), ERROR, ("token", "string", "number"), None),
    ("bools", lambda: tokens()[0] > 3, EITHER, ("token", "bool", "id"), None),
    (
        "zero-steps",
        lambda: np.zeros((3, 0), int),
        EITHER,
        ("step", "feature", "0"),
        lambda: np.zeros((3, STEPS), int),
    ),
    ("zero-rows", lambda: tokens()[0][:0], EITHER, ("sample",), slice(0, 0)),
    (
        "one-step",
        lambda: tokens()[0][:, :1],
        EITHER,
        ("1 feature", "step", "shape"),
        lambda: _padded(tokens()[0][:, :1]),
    ),
    (
        "more-steps",
        lambda: np.c_[tokens()[0], tokens()[0]],
        EITHER,
        ("12", "step", "shape"),
        lambda: _padded(np.c_[tokens()[0], tokens()[0]], 15),
    ),
    ("all-padding", lambda: np.zeros((3, STEPS), int), OK, (), None),
    ("padding-in-the-middle", lambda: _set(tokens()[0], (slice(None), 1), 0), OK, (), None),
    ("padding-first", lambda: _set(tokens()[0], (slice(None), 0), 0), OK, (), None),
    (
        "ragged-lists",
        lambda: [[1, 2, 3], [4, 5]],
        EITHER,
        ("ragged", "length", "shape"),
        lambda: _padded(np.array([[1, 2, 3], [4, 5, 0]])),
    ),
    ("equal-lists", lambda: tokens()[0].tolist(), OK, (), "same"),
    ("data-frame", lambda: pd.DataFrame(tokens()[0]), OK, (), "same"),
    ("int8", lambda: tokens()[0].astype(np.int8), OK, (), "same"),
    ("uint64", lambda: tokens()[0].astype(np.uint64), OK, (), "same"),
    ("object", lambda: tokens()[0].astype(object), OK, (), "same"),
    ("none-cell", lambda: _set(tokens()[0], (0, 0), None, object), ERROR, ("nan", "none"), None),
    ("polars", lambda: pl.DataFrame(tokens()[0]), OK, (), "same"),
    (
        "pyarrow",
        lambda: pa.table(pd.DataFrame(tokens()[0]).set_axis(list("abcdef"), axis=1)),
        OK,
        (),
        "same",
    ),
    ("sparse", lambda: sp.csr_matrix(tokens()[0]), EITHER, ("sparse",), "same"),
]
FLOAT_INPUTS = [
    ("same", lambda: steps()[0], OK, (), "same"),
    ("nan-real", lambda: _set(steps()[0], (0, 0, 0), np.nan), ERROR, ("nan",), None),
    ("nan-step", lambda: _set(steps()[0], (0, 5), np.nan), ERROR, ("nan",), None),
    ("inf", lambda: _set(steps()[0], (1, 0, 0), np.inf), ERROR, ("inf",), None),
    ("all-padding", lambda: np.zeros((3, STEPS, 2)), OK, (), None),
    ("half-padded-step", lambda: _set(steps()[0], (0, 0, 0), 0.0), OK, (), None),
    ("flat-rows", lambda: steps()[0].reshape(20, -1), OK, (), "same"),
    (
        "wrong-features",
        lambda: steps()[0][:, :, :1],
        EITHER,
        ("feature", "shape"),
        lambda: _padded(steps()[0][:, :, 0], 12),
    ),
    ("huge", lambda: steps()[0] * 1e30, EITHER, ("large", "float32"), None),
    ("4d", lambda: steps()[0][..., None], EITHER, ("shape", "feature"), None),
]
SEQUENCE_CASES = [
    case(f"sequence-predict-{model}-{name}", model, make, expect, words, ref)
    for model in SEQUENCE_MODELS
    for name, make, expect, words, ref in TOKEN_INPUTS
] + [
    case(f"sequence-predict-{model}-{name}", model, make, expect, words, ref)
    for model in ("float-lstm", "rnn-preset")
    for name, make, expect, words, ref in FLOAT_INPUTS
    if not (model == "float-lstm" and name == "flat-rows")
]


@pytest.mark.parametrize("model, make, expect, words, ref", SEQUENCE_CASES)
def test_sequence_predict(sequence_models, model, make, expect, words, ref):
    est = sequence_models[model]
    X0 = (tokens if model in SEQUENCE_MODELS else steps)()[0]
    if model == "rnn-preset":
        X0 = X0.reshape(len(X0), -1)
    expected = est.predict_proba(X0)

    def call():
        X = make()
        if model == "rnn-preset" and isinstance(X, np.ndarray) and X.ndim == 3:
            X = X.reshape(len(X), -1)
        got = est.predict_proba(X)
        if callable(ref):  # the same sequences padded explicitly: the same predictions
            rows = est.predict_proba(ref())
        else:
            rows = None if ref is None else expected[slice(None) if ref == "same" else ref]
        agree(got, rows, n_rows=None if rows is None else len(rows))

    handled(call, words, expect)
    agree(est.predict_proba(X0), expected, what="the predictions after the call")


def _fit_tokens(layers, X=None, **params):
    X = tokens()[0] if X is None else X
    return NeuralNetClassifier(layers, **{**SEQ, **params}).fit(X, np.arange(len(X)) % 2)


def _fit_steps(layers, **params):
    return NeuralNetClassifier(layers, **{**SEQ, **params}).fit(*steps())


# (id, a fit, expectation, words)
SEQUENCE_FITS = [
    ("padding-never-present", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value=-1), OK, ()),
    ("padding-a-fraction", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value=0.5), OK, ()),
    ("padding-a-string", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value="pad"), ERROR, ("padding_value",)),
    ("padding-nan", lambda: _fit_steps([LSTM(2)], padding_value=np.nan), EITHER, ("padding_value",)),
    ("padding-inf", lambda: _fit_steps([LSTM(2)], padding_value=np.inf), EITHER, ("padding_value",)),
    ("padding-list", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value=[0]), ERROR, ("padding_value",)),
    ("padding-bool", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value=True), EITHER, ("padding_value",)),
    ("padding-out-of-vocabulary", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], padding_value=VOCAB), EITHER, ("padding_value", "id")),
    ("ragged-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], X=[[1, 2, 3], [4, 5]] * 4), EITHER, ("ragged", "length", "shape")),
    ("negative-ids-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], X=-tokens()[0]), ERROR, ("id", "-")),
    ("fraction-ids-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], X=tokens()[0] + 0.5), ERROR, ("integer", "id")),
    ("nan-ids-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2)], X=_set(tokens()[0], (0, 0), np.nan, float)), ERROR, ("nan",)),
    ("all-padding-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), GlobalAvgPool1D()], X=np.zeros((8, STEPS), int)), EITHER, ("padding",)),
    ("one-step-fit", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, 4), GlobalAvgPool1D()], X=tokens()[0][:, :1] % 9 + 1), OK, ()),
    ("embedding-input_dim-0", lambda: _fit_tokens([Embedding(0, 4), LSTM(2)]), ERROR, ("input_dim",)),
    ("embedding-input_dim-negative", lambda: _fit_tokens([Embedding(-3, 4), LSTM(2)]), ERROR, ("input_dim",)),
    ("embedding-input_dim-float", lambda: _fit_tokens([Embedding(2.5, 4), LSTM(2)]), ERROR, ("input_dim",)),
    ("embedding-input_dim-string", lambda: _fit_tokens([Embedding("ten", 4), LSTM(2)]), ERROR, ("input_dim",)),
    ("embedding-output_dim-0", lambda: _fit_tokens([Embedding(VOCAB, 0), LSTM(2)]), ERROR, ("output_dim",)),
    ("embedding-output_dim-nan", lambda: _fit_tokens([Embedding(VOCAB, np.nan), LSTM(2)]), ERROR, ("output_dim",)),
    ("embedding-on-floats", lambda: _fit_steps([Embedding(VOCAB, 4), LSTM(2)]), ERROR, ("embedding",)),
    ("lstm-units-0", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(0)]), ERROR, ("units",)),
    ("lstm-units-negative", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(-1)]), ERROR, ("units",)),
    ("lstm-units-string", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM("4")]), ERROR, ("units",)),
    ("lstm-bidirectional-string", lambda: _fit_tokens([Embedding(VOCAB, 4), LSTM(2, bidirectional="yes")]), ERROR, ("bidirectional",)),
    ("lstm-on-rows", lambda: _fit_tokens([Dense(4), LSTM(2)], padding_value=None), ERROR, ("lstm",)),
    ("gru-units-float", lambda: _fit_tokens([Embedding(VOCAB, 4), GRU(2.5)]), ERROR, ("units",)),
    ("rnn-activation-bad", lambda: _fit_tokens([Embedding(VOCAB, 4), SimpleRNN(2, activation="bad")]), ERROR, ("activation",)),
    ("conv1d-filters-0", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(0), GlobalAvgPool1D()]), ERROR, ("filters",)),
    ("conv1d-kernel-0", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, 0), GlobalAvgPool1D()]), ERROR, ("kernel_size",)),
    ("conv1d-kernel-too-long", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, 9), GlobalAvgPool1D()], padding_value=None), ERROR, ("kernel_size", "steps")),
    ("conv1d-padding-bad", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, padding="full"), GlobalAvgPool1D()]), ERROR, ("padding",)),
    ("conv1d-stride-0", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, stride=0), GlobalAvgPool1D()]), ERROR, ("stride",)),
    ("conv1d-dilation-0", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, dilation=0), GlobalAvgPool1D()]), ERROR, ("dilation",)),
    ("conv1d-strided-masked", lambda: _fit_tokens([Embedding(VOCAB, 4), Conv1D(2, stride=2), GlobalAvgPool1D()]), ERROR, ("mask",)),
    ("attention-heads-0", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(0), GlobalAvgPool1D()]), ERROR, ("num_heads",)),
    ("attention-heads-not-dividing", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(3), GlobalAvgPool1D()]), EITHER, ("num_heads", "key_dim")),
    ("attention-key_dim-0", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(2, 0), GlobalAvgPool1D()]), ERROR, ("key_dim",)),
    ("attention-dropout-1.5", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(2, dropout=1.5), GlobalAvgPool1D()]), ERROR, ("dropout",)),
    ("attention-query_steps-0", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(2, query_steps=0), GlobalAvgPool1D()]), ERROR, ("query_steps",)),
    ("attention-query_steps-too-many", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(2, query_steps=99), GlobalAvgPool1D()]), ERROR, ("query_steps",)),
    ("attention-causal-string", lambda: _fit_tokens([Embedding(VOCAB, 4), MultiHeadAttention(2, causal="yes"), GlobalAvgPool1D()]), ERROR, ("causal",)),
    ("block-heads-0", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(0), GlobalAvgPool1D()]), ERROR, ("num_heads",)),
    ("block-ff_units-0", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, 0), GlobalAvgPool1D()]), ERROR, ("ff_units",)),
    ("block-dropout-negative", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, dropout=-1), GlobalAvgPool1D()]), ERROR, ("dropout",)),
    ("block-activation-bad", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, activation="bad"), GlobalAvgPool1D()]), ERROR, ("activation",)),
    ("block-epsilon-negative", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, epsilon=-1), GlobalAvgPool1D()]), ERROR, ("epsilon",)),
    ("block-norm_first-string", lambda: _fit_tokens([Embedding(VOCAB, 4), TransformerEncoderBlock(2, norm_first="yes"), GlobalAvgPool1D()]), ERROR, ("norm_first",)),
    ("layernorm-epsilon-nan", lambda: _fit_tokens([Embedding(VOCAB, 4), LayerNorm(epsilon=np.nan), GlobalAvgPool1D()]), ERROR, ("epsilon",)),
    ("sinusoid-wavelength-0", lambda: _fit_tokens([Embedding(VOCAB, 4), SinusoidalPositionEmbedding(0), GlobalAvgPool1D()]), ERROR, ("max_wavelength",)),
    ("sinusoid-odd-features", lambda: _fit_tokens([Embedding(VOCAB, 3), SinusoidalPositionEmbedding(), GlobalAvgPool1D()]), EITHER, ("feature", "even")),
    ("position-on-rows", lambda: _fit_tokens([Dense(4), PositionEmbedding()], padding_value=None), ERROR, ("positionembedding",)),
    ("pool-on-rows", lambda: _fit_tokens([Dense(4), GlobalAvgPool1D()], padding_value=None), ERROR, ("globalavgpool1d",)),
    ("rnn-cell-bad", lambda: RNNClassifier(cell="bad", **SEQ).fit(*steps()), ERROR, ("cell",)),
    ("rnn-units-0", lambda: RNNClassifier(units=(0,), **SEQ).fit(*steps()), ERROR, ("units",)),
    ("rnn-units-string", lambda: RNNClassifier(units="4", **SEQ).fit(*steps()), ERROR, ("units",)),
    ("rnn-dense_units-negative", lambda: RNNClassifier(dense_units=(-1,), **SEQ).fit(*steps()), ERROR, ("dense_units",)),
    ("rnn-dropout-2", lambda: RNNClassifier(dropout=2.0, **SEQ).fit(*steps()), ERROR, ("dropout",)),
    ("rnn-bidirectional-string", lambda: RNNClassifier(bidirectional="yes", **SEQ).fit(*steps()), ERROR, ("bidirectional",)),
    ("rnn-input_shape-wrong", lambda: RNNClassifier(input_shape=(5, 2), **SEQ).fit(*steps()), ERROR, ("input_shape",)),
    ("rnn-input_shape-negative", lambda: RNNClassifier(input_shape=(-6, 2), **SEQ).fit(*steps()), ERROR, ("input_shape",)),
    ("net-input_shape-string", lambda: _fit_steps([LSTM(2)], input_shape="6x2"), ERROR, ("input_shape",)),
    ("net-layers-not-layers", lambda: _fit_steps(["lstm"]), ERROR, ("layers", "layer")),
    ("net-layers-empty", lambda: _fit_steps([]), EITHER, ("layers",)),
]  # fmt: skip
SEQUENCE_FIT_CASES = [
    case(f"sequence-fit-{name}", make, expect, words)
    for name, make, expect, words in SEQUENCE_FITS
]


@pytest.mark.parametrize("make, expect, words", SEQUENCE_FIT_CASES)
def test_sequence_fit(make, expect, words):
    def call():
        est = make()
        X = steps()[0] if est.n_features_in_ == STEPS * 2 else tokens()[0]
        if getattr(est, "input_shape_", None) and len(est.input_shape_) == 1:
            X = tokens()[0][:, : est.input_shape_[0]]
        agree(est.predict_proba(X))

    handled(call, words, expect)


N_SEQ, T_SEQ, F_SEQ = 3, 5, 4
MASK_LAYERS = {
    "lstm": lambda: LSTM(3, return_sequences=True),
    "gru-bi": lambda: GRU(3, bidirectional=True),
    "rnn": lambda: SimpleRNN(3, return_sequences=True),
    "attention": lambda: MultiHeadAttention(2),
    "attention-causal": lambda: MultiHeadAttention(2, causal=True),
    "block": lambda: TransformerEncoderBlock(2, 8, dropout=0.0),
    "avg-pool": GlobalAvgPool1D,
    "max-pool": GlobalMaxPool1D,
    "residual": lambda: Residual([MultiHeadAttention(2)]),
    "sequential": lambda: Sequential(
        [TransformerEncoderBlock(2, 8, dropout=0.0), GlobalMaxPool1D()]
    ),
    "time-distributed": lambda: TimeDistributed(Dense(3)),
}


def _mask():
    mask = np.ones((N_SEQ, T_SEQ), bool)
    mask[1, 3:] = False
    mask[2, :2] = False
    return mask


MASKS = [
    ("bools", _mask, OK, ()),
    ("list", lambda: _mask().tolist(), OK, ()),
    ("3d", lambda: _mask()[:, :, None], OK, ()),
    ("none", lambda: None, OK, ()),
    ("all-false", lambda: np.zeros((N_SEQ, T_SEQ), bool), OK, ()),
    ("ints", lambda: _mask().astype(int), ERROR, ("mask",)),
    ("floats", lambda: _mask().astype(float), ERROR, ("mask",)),
    ("objects", lambda: _mask().astype(object), EITHER, ("mask",)),
    ("strings", lambda: "yes", ERROR, ("mask",)),
    ("wrong-steps", lambda: np.ones((N_SEQ, T_SEQ + 1), bool), ERROR, ("mask", "shape")),
    ("wrong-rows", lambda: np.ones((N_SEQ - 1, T_SEQ), bool), ERROR, ("mask", "shape")),
    ("transposed", lambda: _mask().T, ERROR, ("mask", "shape")),
    ("1d", lambda: np.ones(N_SEQ, bool), ERROR, ("mask", "shape")),
    ("scalar-true", lambda: np.True_, ERROR, ("mask", "shape")),
    ("ragged", lambda: [[True] * T_SEQ, [True]], ERROR, ("mask",)),
]
# A TimeDistributed of a layer that takes no mask uses none of a sequences' mask (each
# step reaches its layer as a row): a mask of another shape there changes nothing.
MASK_CASES = [
    case(
        f"sequence-mask-{layer}-{name}",
        layer,
        make,
        EITHER if layer == "time-distributed" and expect == ERROR and "shape" in words else expect,
        words,
    )
    for layer in MASK_LAYERS
    for name, make, expect, words in MASKS
]


@pytest.mark.parametrize("layer, make, expect, words", MASK_CASES)
def test_sequence_masks(layer, make, expect, words):
    built = MASK_LAYERS[layer]()
    built.build(
        (T_SEQ, F_SEQ), backend=get_backend("cpu"), dtype=np.float64, rng=np.random.RandomState(0)
    )
    X = np.random.RandomState(1).normal(size=(N_SEQ, T_SEQ, F_SEQ))

    def call():
        mask = make()
        got = built.forward_with_mask(X, training=False, mask=mask)
        agree(got, n_rows=N_SEQ)
        if mask is not None:  # padded steps enter as zeros: NaN there changes no real step
            real = np.asarray(mask, dtype=bool).reshape(N_SEQ, T_SEQ)[..., None]

            def at_real_steps(Y):
                return np.where(real, Y, 0.0) if Y.ndim == 3 and Y.shape[1] == T_SEQ else Y

            for fill in (0.0, np.nan):
                other = built.forward_with_mask(np.where(real, X, fill), training=False, mask=mask)
                what = f"the output with {fill} at the padded steps"
                agree(at_real_steps(other), at_real_steps(got), what=what)

    handled(call, words, expect)


# ======================================================================================
# ONNX
# ======================================================================================
rt = pytest.importorskip("onnxruntime")
from sknet.onnx import to_onnx  # noqa: E402  (the onnx extra, installed above)

X_MLP = np.random.RandomState(3).normal(size=(N, 3))


@pytest.fixture(scope="module")
def onnx_models(tabular, sequence_models):
    """Fitted models and their ONNX Runtime sessions, made once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X_num = np.where(np.arange(N * 3).reshape(N, 3) % 7 == 0, np.nan, X_MLP)
        models = {
            "tab-clf": tabular[0]["clf"],
            "tab-reg": tabular[0]["reg"],
            "tab-numpy": TabularClassifier(**SMALL).fit(X_num, Y_CLF),
            "tab-standard": TabularRegressor(
                **{**SMALL, "numeric_embedding": None, "n_members": 1},
                numeric_scaling="standard",
            ).fit(F, Y_REG),
            "tab-periodic": TabularClassifier(
                **{**SMALL, "numeric_embedding": "periodic"}, numeric_scaling="robust"
            ).fit(F, Y_CLF),
            "tab-int-categories": TabularClassifier(
                **SMALL, categorical_features=list("abcde")
            ).fit(_col("a", F["a"].round()), Y_CLF),
            "tab-polars": TabularClassifier(**SMALL).fit(pl.from_pandas(F), Y_CLF),
            "mlp-clf": MLPClassifier(
                hidden_layer_sizes=(4,), max_iter=2, random_state=0, device="cpu"
            ).fit(X_MLP, Y_CLF),
            "mlp-reg": MLPRegressor(
                hidden_layer_sizes=(4,), max_iter=2, random_state=0, device="cpu"
            ).fit(X_MLP, Y_REG),
            **{name: model for name, model in sequence_models.items() if name != "rnn-preset"},
        }
        sessions = {
            name: rt.InferenceSession(
                to_onnx(model).SerializeToString(), providers=["CPUExecutionProvider"]
            )
            for name, model in models.items()
        }
    return models, sessions


def table_feed(session, X):
    """The inputs of a tabular model's session for the frame (or float array) ``X``."""
    feed = {}
    for info in session.get_inputs():
        if info.name == "X" and not isinstance(X, pd.DataFrame):
            feed["X"] = np.asarray(X, dtype=np.float64)
            continue
        name = info.name.removeprefix("missingindicator_")
        column = X[name] if name in X.columns else X.iloc[:, int(name[1:])]
        values = column.to_numpy(dtype=object).reshape(-1, 1)
        missing = np.asarray(pd.isna(values), dtype=bool)
        if info.name.startswith("missingindicator_"):
            feed[info.name] = missing
        elif info.type == "tensor(string)":
            feed[info.name] = np.where(missing, "", values).astype(str)
        else:
            feed[info.name] = np.where(missing, np.nan, values).astype(np.float64)
    return feed


def _num(change):
    X = np.where(np.arange(N * 3).reshape(N, 3) % 7 == 0, np.nan, X_MLP)
    return change(X.copy())


TABLE_INPUTS = [
    ("same", lambda: F),
    ("all-nan-numbers", lambda: _col("a", np.nan)),
    ("nan-in-a-column-without", lambda: _col("c", F["c"].where(F.index > 3))),
    ("unseen-categories", lambda: _col("e", pd.Categorical(["r"] * N)).assign(b="new")),
    ("all-missing-strings", lambda: _col("b", _obj([None] * N))),
    ("empty-strings", lambda: _col("b", "")),
    ("huge", lambda: _col("a", np.where(F.index % 2, 1e30, -1e30))),
    ("beyond-float32", lambda: _col("a", np.where(F.index % 2, 1e300, -1e300))),
    ("tiny", lambda: _col("a", F["a"] * 1e-300)),
    ("single-row", lambda: F.iloc[[0]]),
    ("zero-rows", lambda: F.iloc[:0]),
    ("numbers-out-of-range", lambda: _col("c", F["c"] * 1000)),
    ("all-true", lambda: _col("d", True)),
    ("unused-category", lambda: _col("e", F["e"].where(F.index > 3, "unused"))),
]
ARRAY_INPUTS = [
    ("same", lambda: X_MLP),
    ("zeros", lambda: np.zeros((4, 3))),
    ("huge", lambda: np.full((4, 3), 1e30)),
    ("minus-huge", lambda: np.full((4, 3), -1e30)),
    ("tiny", lambda: np.full((4, 3), 1e-30)),
    ("single-row", lambda: X_MLP[:1]),
    ("zero-rows", lambda: X_MLP[:0]),
    ("large", lambda: X_MLP * 1e6),
]
SEQ_INPUTS = [
    ("same", lambda: tokens()[0]),
    ("all-padding", lambda: np.zeros((3, STEPS), int)),
    ("padding-in-the-middle", lambda: _set(tokens()[0], (slice(None), 1), 0)),
    ("padding-first", lambda: _set(tokens()[0], (slice(None), 0), 0)),
    ("one-real-step", lambda: np.c_[tokens()[0][:, :1], np.zeros((20, STEPS - 1), int)]),
    ("zero-rows", lambda: tokens()[0][:0]),
]
FLOAT_SEQ_INPUTS = [
    ("same", lambda: steps()[0]),
    ("all-padding", lambda: np.zeros((3, STEPS, 2))),
    ("half-padded-step", lambda: _set(steps()[0], (0, 0, 0), 0.0)),
    ("padding-first", lambda: _set(steps()[0], (slice(None), 0), 0.0)),
    ("huge", lambda: steps()[0] * 1e30),
]
ONNX_CASES = (
    [
        case(f"onnx-{model}-{name}", model, make)
        for model in ("tab-clf", "tab-reg", "tab-standard", "tab-periodic", "tab-polars")
        for name, make in TABLE_INPUTS
    ]
    + [
        case(f"onnx-tab-int-categories-{name}", "tab-int-categories", make)
        for name, make in [
            ("same", lambda: _col("a", F["a"].round())),
            ("unseen-numbers", lambda: _col("a", F["a"].round() + 0.5).assign(c=7)),
            ("nan-categories", lambda: _col("a", np.nan).assign(c=np.nan)),
            ("huge-categories", lambda: _col("a", 1e300).assign(c=-1e300)),
        ]
    ]
    + [
        case(f"onnx-tab-numpy-{name}", "tab-numpy", lambda change=change: _num(change))
        for name, change in [
            ("same", lambda X: X),
            ("all-nan", lambda X: np.full_like(X, np.nan)),
            ("huge", lambda X: X * 1e30),
            ("single-row", lambda X: X[:1]),
        ]
    ]
    + [
        case(f"onnx-{model}-{name}", model, make)
        for model in ("mlp-clf", "mlp-reg")
        for name, make in ARRAY_INPUTS
    ]
    + [
        case(f"onnx-{model}-{name}", model, make)
        for model in SEQUENCE_MODELS
        for name, make in SEQ_INPUTS
    ]
    + [case(f"onnx-float-lstm-{name}", "float-lstm", make) for name, make in FLOAT_SEQ_INPUTS]
)


@pytest.mark.parametrize("model, make", ONNX_CASES)
def test_onnx_agrees_with_predict(onnx_models, model, make):
    est, session = onnx_models[0][model], onnx_models[1][model]

    def call():
        X = make()
        try:
            expected = output(est, X) if hasattr(est, "predict_proba") else est.predict(X)
        except ALLOWED:  # predict refuses it (the message checked elsewhere): nothing to agree on
            return
        if model.startswith("tab"):
            feed = table_feed(session, X)
        else:
            feed = {"X": X if X.dtype.kind in "iu" else X.astype(np.float32)}
            feed["X"] = feed["X"].astype(np.int64) if X.dtype.kind in "iu" else feed["X"]
        got = session.run(None, feed)
        if hasattr(est, "predict_proba"):
            labels, proba = got
            agree(proba, expected, what="ONNX Runtime's probabilities")
            if not np.array_equal(labels, est.predict(X)):
                raise Wrong("ONNX Runtime's labels differ from predict's")
        else:
            agree(got[0].reshape(np.shape(expected)), expected, what="ONNX Runtime's predictions")

    handled(call, (), OK)


def _unfitted():
    return MLPClassifier()


def _lambda_model():
    est = NeuralNetClassifier([Dense(3), Lambda(lambda X: X * 2)], max_iter=1, device="cpu")
    return est.fit(X_MLP, Y_CLF)


TO_ONNX_ARGUMENTS = [
    ("opset-16", dict(target_opset=16), ERROR, ("target_opset",)),
    ("opset-0", dict(target_opset=0), ERROR, ("target_opset",)),
    ("opset-string", dict(target_opset="17"), ERROR, ("target_opset",)),
    ("opset-float", dict(target_opset=17.0), ERROR, ("target_opset",)),
    ("opset-bool", dict(target_opset=True), ERROR, ("target_opset",)),
    ("opset-huge", dict(target_opset=10**6), ERROR, ("target_opset",)),
    ("opset-numpy", dict(target_opset=np.int64(18)), OK, ()),
    ("opset-none", dict(target_opset=None), OK, ()),
    ("dtype-float16", dict(dtype="float16"), ERROR, ("dtype",)),
    ("dtype-int32", dict(dtype=np.int32), ERROR, ("dtype",)),
    ("dtype-bad", dict(dtype="bad"), ERROR, ("dtype",)),
    ("dtype-number", dict(dtype=1), ERROR, ("dtype",)),
    ("dtype-float64", dict(dtype="float64"), OK, ()),
    ("dtype-numpy-dtype", dict(dtype=np.dtype("float32")), OK, ()),
    ("flat_input-string", dict(flat_input="yes"), ERROR, ("flat_input",)),
    ("flat_input-int", dict(flat_input=1), ERROR, ("flat_input",)),
    ("flat_input-none", dict(flat_input=None), ERROR, ("flat_input",)),
    ("flat_input-numpy-bool", dict(flat_input=np.True_), OK, ()),
    ("unknown-keyword", dict(opset=17), ERROR, ("opset",)),
]
TO_ONNX_ESTIMATORS = [
    ("unfitted", _unfitted, ERROR, ("fitted",)),
    ("scikit-learn-estimator", lambda: __import__("sklearn.linear_model").linear_model.LogisticRegression().fit(X_MLP, Y_CLF), ERROR, ("logisticregression",)),
    ("none", lambda: None, ERROR, ("nonetype",)),
    ("a-string", lambda: "model", ERROR, ("str",)),
    ("an-encoder", lambda: TabularEncoder().fit(F), ERROR, ("tabularencoder",)),
    ("a-lambda-layer", _lambda_model, ERROR, ("lambda",)),
    ("a-class", lambda: MLPClassifier, ERROR, ("mlpclassifier", "type")),
]  # fmt: skip
TO_ONNX_CASES = [
    case(f"onnx-argument-{model}-{name}", model, kwargs, expect, words)
    for name, kwargs, expect, words in TO_ONNX_ARGUMENTS
    for model in ("mlp-clf", "tab-clf", "lstm")
] + [
    case(f"onnx-estimator-{name}", make, None, expect, words)
    for name, make, expect, words in TO_ONNX_ESTIMATORS
]


@pytest.mark.parametrize("model, kwargs, expect, words", TO_ONNX_CASES)
def test_to_onnx_arguments(onnx_models, model, kwargs, expect, words):
    def call():
        if kwargs is None:
            to_onnx(model())
            return
        est = onnx_models[0][model]
        onnx_model = to_onnx(est, **kwargs)
        session = rt.InferenceSession(
            onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        if model == "tab-clf":
            feed = table_feed(session, F)
            expected = est.predict_proba(F)
        else:
            X = tokens()[0] if model == "lstm" else X_MLP
            dtype = np.int64 if model == "lstm" else np.dtype(kwargs.get("dtype") or "float32")
            feed, expected = {"X": X.astype(dtype)}, est.predict_proba(X)
        agree(session.run(None, feed)[1], expected, what="ONNX Runtime's probabilities")

    handled(call, words, expect)


# ======================================================================================
# Loggers and callbacks
# ======================================================================================
X_LOG = np.random.RandomState(4).rand(60, 4)
Y_LOG = (X_LOG[:, 0] + X_LOG[:, 1] > 1).astype(int)


def mlp(callbacks, **params):
    defaults = dict(hidden_layer_sizes=(4,), max_iter=3, random_state=0, device="cpu")
    return MLPClassifier(callbacks=callbacks, **{**defaults, **params})


class Raise(Callback):
    """Raises ``error`` at the end of epoch ``at``."""

    def __init__(self, error, at=2):
        self.error = error
        self.at = at

    def on_epoch_end(self, state, epoch, logs):
        if epoch == self.at:
            raise self.error
        return False


class AddKey(Callback):
    """Adds ``key`` (with ``value``) to the history rows from epoch ``at`` on."""

    def __init__(self, key="extra", value=1.5, at=2):
        self.key = key
        self.value = value
        self.at = at

    def on_epoch_end(self, state, epoch, logs):
        if epoch >= self.at:
            logs[self.key] = self.value
        return False


def csv_matches(path, est, sep=","):
    """The CSV file parses with pandas and holds ``est.history_``, row for row."""
    try:
        table = pd.read_csv(path, sep=sep, engine="python")
    except Exception as exc:
        raise Wrong(f"pandas cannot read the CSV file: {type(exc).__name__}: {exc}") from None
    history = pd.DataFrame(est.history_)
    if len(table) != len(history):
        raise Wrong(f"the CSV file has {len(table)} rows, history_ {len(history)}")
    for key in history.columns:
        if key not in table.columns:
            raise Wrong(f"the CSV file lacks the key {key!r}")
        expected = pd.to_numeric(history[key], errors="coerce").to_numpy(dtype=float)
        got = pd.to_numeric(table[key], errors="coerce").to_numpy(dtype=float)
        if not np.allclose(got, expected, equal_nan=True, rtol=1e-6, atol=0):
            raise Wrong(f"the CSV column {key!r} differs from history_")


def _unwritable(tmp):
    return "/proc/sknet-sweep/h.csv"


def _file(tmp, text="not a directory"):
    path = tmp / "a-file"
    path.write_text(text)
    return path


def _csv_fit(tmp, path, sep=",", fits=lambda est: est.fit(X_LOG, Y_LOG), **logger):
    est = fits(mlp([CSVLogger(path, separator=sep, **logger)]))
    csv_matches(est.callbacks_[0].path_, est, sep)


def _partial_fits(est):
    for _ in range(3):
        est.partial_fit(X_LOG, Y_LOG, classes=[0, 1])
    return est


def _warm_fits(est):
    est.set_params(warm_start=True)
    return est.fit(X_LOG, Y_LOG).fit(X_LOG, Y_LOG)


def _interrupted(est):
    est.callbacks.append(Raise(KeyboardInterrupt()))
    return est.fit(X_LOG, Y_LOG)


def _failing(tmp):
    path = tmp / "failed.csv"
    est = mlp([Raise(ValueError("the callback failed at epoch 2")), CSVLogger(path)])
    with contextlib.suppress(ValueError):
        est.fit(X_LOG, Y_LOG)
    table = pd.read_csv(path)
    if len(table) != 1:
        raise Wrong(f"the CSV of a fit that failed at epoch 2 has {len(table)} rows, expected 1")


def _two_on_one_file(tmp):
    mlp([CSVLogger(tmp / "one.csv"), CSVLogger(tmp / "one.csv")]).fit(X_LOG, Y_LOG)


def _new_key(tmp, key="extra", value=1.5):
    est = mlp([AddKey(key, value), CSVLogger(tmp / "keys.csv")]).fit(X_LOG, Y_LOG)
    csv_matches(tmp / "keys.csv", est)


def _append_to(tmp, text):
    path = _file(tmp, text)
    est = mlp([CSVLogger(path, append=True)]).fit(X_LOG, Y_LOG)
    table = pd.read_csv(path)
    if len(table) < len(est.history_):
        raise Wrong("the appended CSV lacks the fit's rows")


def _tabular_fits(est_params, how):
    def fits(tmp):
        est = make_tabular("clf", callbacks=[CSVLogger(tmp / "tab.csv")], **est_params)
        if how == "partial":
            est.partial_fit(F, Y_CLF, classes=[0, 1]).partial_fit(F, Y_CLF)
        else:
            est.fit(F, Y_CLF)
        csv_matches(tmp / "tab.csv", est)

    return fits


# (id, the case run in a fresh tmp_path, expectation, words)
CSV_CASES = [
    ("a-directory", lambda t: _csv_fit(t, t), ERROR, ("path",)),
    ("under-a-file", lambda t: _csv_fit(t, _file(t) / "h.csv"), ERROR, ("path",)),
    ("unwritable", lambda t: _csv_fit(t, _unwritable(t)), ERROR, ("path",)),
    ("empty-path", lambda t: _csv_fit(t, ""), ERROR, ("path",)),
    ("int-path", lambda t: _csv_fit(t, 5), ERROR, ("path",)),
    ("none-path", lambda t: _csv_fit(t, None), ERROR, ("path",)),
    ("bytes-path", lambda t: _csv_fit(t, os.fsencode(t / "h.csv")), EITHER, ("path",)),
    ("run-in-path", lambda t: _csv_fit(t, t / "h-{run}.csv"), OK, ()),
    ("path-object", lambda t: _csv_fit(t, t / "sub" / "dir" / "h.csv"), OK, ()),
    ("unicode-path", lambda t: _csv_fit(t, t / "histoire-é.csv"), OK, ()),
    ("separator-empty", lambda t: _csv_fit(t, t / "h.csv", ""), ERROR, ("separator",)),
    ("separator-two", lambda t: _csv_fit(t, t / "h.csv", ",,"), ERROR, ("separator",)),
    ("separator-quote", lambda t: _csv_fit(t, t / "h.csv", '"'), ERROR, ("separator",)),
    ("separator-newline", lambda t: _csv_fit(t, t / "h.csv", "\n"), ERROR, ("separator",)),
    ("separator-return", lambda t: _csv_fit(t, t / "h.csv", "\r"), ERROR, ("separator",)),
    ("separator-int", lambda t: _csv_fit(t, t / "h.csv", 1), ERROR, ("separator",)),
    ("separator-none", lambda t: _csv_fit(t, t / "h.csv", None), ERROR, ("separator",)),
    ("separator-tab", lambda t: _csv_fit(t, t / "h.csv", "\t"), OK, ()),
    ("separator-semicolon", lambda t: _csv_fit(t, t / "h.csv", ";"), OK, ()),
    ("separator-space", lambda t: _csv_fit(t, t / "h.csv", " "), OK, ()),
    ("separator-e", lambda t: _csv_fit(t, t / "h.csv", "e"), EITHER, ("separator",)),
    ("separator-dot", lambda t: _csv_fit(t, t / "h.csv", "."), EITHER, ("separator",)),
    ("separator-digit", lambda t: _csv_fit(t, t / "h.csv", "0"), EITHER, ("separator",)),
    ("separator-minus", lambda t: _csv_fit(t, t / "h.csv", "-"), EITHER, ("separator",)),
    ("separator-accent", lambda t: _csv_fit(t, t / "h.csv", "é"), OK, ()),
    ("separator-nul", lambda t: _csv_fit(t, t / "h.csv", "\0"), EITHER, ("separator",)),
    ("append-string", lambda t: _csv_fit(t, t / "h.csv", append="yes"), ERROR, ("append",)),
    ("warm-start", lambda t: _csv_fit(t, t / "h.csv", fits=_warm_fits), OK, ()),
    ("warm-start-run", lambda t: _csv_fit(t, t / "h-{run}.csv", fits=_warm_fits), OK, ()),
    ("partial-fit", lambda t: _csv_fit(t, t / "h.csv", fits=_partial_fits), OK, ()),
    ("interrupted", lambda t: _csv_fit(t, t / "h.csv", fits=_interrupted), OK, ()),
    ("lbfgs", lambda t: _csv_fit(t, t / "h.csv", fits=lambda e: e.set_params(solver="lbfgs").fit(X_LOG, Y_LOG)), OK, ()),
    ("early-stopping", lambda t: _csv_fit(t, t / "h.csv", fits=lambda e: e.set_params(early_stopping=True).fit(X_LOG, Y_LOG)), OK, ()),
    ("failed-fit", _failing, OK, ()),
    ("two-on-one-file", _two_on_one_file, ERROR, ("path",)),
    ("new-key", _new_key, OK, ()),
    ("key-with-separator", lambda t: _new_key(t, "a,b"), OK, ()),
    ("value-with-newline", lambda t: _new_key(t, "note", "two\nlines"), OK, ()),
    ("value-none", lambda t: _new_key(t, "none", None), OK, ()),
    ("append-to-another-csv", lambda t: _append_to(t, "a,b\n1,2\n"), OK, ()),
    ("append-to-text", lambda t: _append_to(t, "not, a csv\n\n\"unclosed\n"), EITHER, ("path",)),
    ("append-to-binary", lambda t: _append_to(t, "\0\1\2"), EITHER, ("path",)),
    ("tabular-fit", _tabular_fits({}, "fit"), OK, ()),
    ("tabular-early-stopping", _tabular_fits({"early_stopping": True}, "fit"), OK, ()),
    ("tabular-partial-fit", _tabular_fits({}, "partial"), OK, ()),
    ("a-fifo", lambda t: (os.mkfifo(t / "fifo"), _csv_fit(t, t / "fifo")), ERROR, ("path",)),
    ("dev-full", lambda t: _csv_fit(t, "/dev/full"), ERROR, ("path",)),
    ("a-symlink-to-a-directory", lambda t: (os.symlink(t, t / "link"), _csv_fit(t, t / "link")), ERROR, ("path",)),
    ("a-dangling-symlink", lambda t: (os.symlink(t / "nowhere" / "h.csv", t / "link"), _csv_fit(t, t / "link")), EITHER, ("path",)),
]  # fmt: skip


def _board(tmp, path, fits=lambda est: est.fit(X_LOG, Y_LOG), **params):
    est = fits(mlp([TensorBoardLogger(path, **params)]))
    files = os.listdir(est.callbacks_[0].path_)
    if not any(name.startswith("events.out.tfevents") for name in files):
        raise Wrong(f"no event file in {est.callbacks_[0].path_}: {files}")


BOARD_CASES = [
    ("a-file", lambda t: _board(t, _file(t)), ERROR, ("path",)),
    ("under-a-file", lambda t: _board(t, _file(t) / "runs"), ERROR, ("path",)),
    ("unwritable", lambda t: _board(t, "/proc/sknet-sweep/runs"), ERROR, ("path",)),
    ("empty-path", lambda t: _board(t, ""), EITHER, ("path",)),
    ("int-path", lambda t: _board(t, 3), ERROR, ("path",)),
    ("histogram-negative", lambda t: _board(t, t, histogram_freq=-1), ERROR, ("histogram_freq",)),
    ("histogram-string", lambda t: _board(t, t, histogram_freq="1"), ERROR, ("histogram_freq",)),
    ("histogram-float", lambda t: _board(t, t, histogram_freq=1.5), ERROR, ("histogram_freq",)),
    ("histogram-none", lambda t: _board(t, t, histogram_freq=None), ERROR, ("histogram_freq",)),
    ("histogram-bool", lambda t: _board(t, t, histogram_freq=True), ERROR, ("histogram_freq",)),
    ("histogram-every-epoch", lambda t: _board(t, t, histogram_freq=1), OK, ()),
    ("run-in-path", lambda t: _board(t, t / "runs" / "{run}"), OK, ()),
    ("warm-start", lambda t: _board(t, t / "{run}", fits=_warm_fits), OK, ()),
    ("partial-fit", lambda t: _board(t, t / "{run}", fits=_partial_fits), OK, ()),
    ("interrupted", lambda t: _board(t, t, fits=_interrupted), OK, ()),
    ("lbfgs", lambda t: _board(t, t, fits=lambda e: e.set_params(solver="lbfgs").fit(X_LOG, Y_LOG)), OK, ()),
]  # fmt: skip


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    mlflow = pytest.importorskip("mlflow")
    tmp = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{tmp / 'm.db'}"
    client = mlflow.MlflowClient(uri)
    client.create_experiment("sweep", artifact_location=(tmp / "artifacts").as_uri())
    return uri, client


def _mlflow(store, fits=lambda est: est.fit(X_LOG, Y_LOG), **params):
    uri, client = store
    params = {"tracking_uri": uri, "experiment_name": "sweep", "log_model": False, **params}
    est = fits(mlp([MLflowLogger(**params)]))
    run = client.get_run(est.callbacks_[0].run_id_)
    logged = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train_loss")}
    rows = {row["epoch"]: row["train_loss"] for row in est.history_}
    if not logged or any(
        not np.isclose(value, rows.get(step, np.nan)) for step, value in logged.items()
    ):
        raise Wrong(f"the run's train_loss {logged} is not history_'s {rows}")
    if max(logged) != max(rows):  # each fit a run (partial_fit too): its last epoch logged
        raise Wrong(f"the run's last epoch is {max(logged)}, history_'s {max(rows)}")


MLFLOW_CASES = [
    ("plain", lambda s, t: _mlflow(s), OK, ()),
    ("with-model", lambda s, t: _mlflow(s, log_model=True), OK, ()),
    ("uri-scheme-unknown", lambda s, t: _mlflow(s, tracking_uri="nonsense://x"), ERROR, ("tracking_uri",)),
    ("uri-under-a-file", lambda s, t: _mlflow(s, tracking_uri=f"sqlite:///{_file(t)}/m.db"), ERROR, ("tracking_uri",)),
    ("uri-empty", lambda s, t: _mlflow(s, tracking_uri=""), ERROR, ("tracking_uri",)),
    ("uri-int", lambda s, t: _mlflow(s, tracking_uri=5), ERROR, ("tracking_uri",)),
    ("uri-closed-port", lambda s, t: _mlflow(s, tracking_uri="http://127.0.0.1:9", timeout=2), ERROR, ("tracking_uri", "127.0.0.1")),
    ("experiment-int", lambda s, t: _mlflow(s, experiment_name=5), ERROR, ("experiment_name",)),
    ("experiment-empty", lambda s, t: _mlflow(s, experiment_name=""), EITHER, ("experiment_name",)),
    ("experiment-new", lambda s, t: _mlflow(s, experiment_name="sweep-new"), OK, ()),
    ("run-name-int", lambda s, t: _mlflow(s, run_name=5), ERROR, ("run_name",)),
    ("run-name-long", lambda s, t: _mlflow(s, run_name="r" * 1000), EITHER, ("run_name",)),
    ("parent-unknown", lambda s, t: _mlflow(s, parent_run_id="nope"), ERROR, ("parent_run_id",)),
    ("parent-int", lambda s, t: _mlflow(s, parent_run_id=3), ERROR, ("parent_run_id",)),
    ("log-model-string", lambda s, t: _mlflow(s, log_model="yes"), ERROR, ("log_model",)),
    ("timeout-negative", lambda s, t: _mlflow(s, timeout=-1), ERROR, ("timeout",)),
    ("timeout-zero", lambda s, t: _mlflow(s, timeout=0), ERROR, ("timeout",)),
    ("timeout-string", lambda s, t: _mlflow(s, timeout="10"), ERROR, ("timeout",)),
    ("timeout-nan", lambda s, t: _mlflow(s, timeout=np.nan), ERROR, ("timeout",)),
    ("timeout-none", lambda s, t: _mlflow(s, timeout=None), OK, ()),
    ("warm-start", lambda s, t: _mlflow(s, fits=_warm_fits), OK, ()),
    ("partial-fit", lambda s, t: _mlflow(s, fits=_partial_fits), OK, ()),
    ("interrupted", lambda s, t: _mlflow(s, fits=_interrupted), OK, ()),
]  # fmt: skip


def _fit_with(callback, fits=None, **params):
    est = mlp([callback], **params)
    (fits or (lambda e: e.fit(X_LOG, Y_LOG)))(est)
    agree(est.predict_proba(X_LOG))


CALLBACK_CASES = [
    ("progress-plain", lambda: _fit_with(ProgressBar()), OK, ()),
    ("progress-lbfgs", lambda: _fit_with(ProgressBar(), solver="lbfgs"), OK, ()),
    ("progress-partial-fit", lambda: _fit_with(ProgressBar(), _partial_fits), OK, ()),
    ("progress-interrupted", lambda: _fit_with(ProgressBar(), _interrupted), OK, ()),
    ("progress-tabular", lambda: make_tabular("clf", callbacks=[ProgressBar()]).fit(F, Y_CLF), OK, ()),
    ("stop-monitor-unknown", lambda: _fit_with(EarlyStopping("nope")), ERROR, ("nope",)),
    ("stop-monitor-without-validation", lambda: _fit_with(EarlyStopping("valid_loss")), ERROR, ("valid_loss",)),
    ("stop-monitor-int", lambda: _fit_with(EarlyStopping(1)), ERROR, ("monitor",)),
    ("stop-patience-negative", lambda: _fit_with(EarlyStopping("train_loss", patience=-1)), ERROR, ("patience",)),
    ("stop-patience-string", lambda: _fit_with(EarlyStopping("train_loss", patience="3")), ERROR, ("patience",)),
    ("stop-patience-float", lambda: _fit_with(EarlyStopping("train_loss", patience=1.5)), ERROR, ("patience",)),
    ("stop-patience-nan", lambda: _fit_with(EarlyStopping("train_loss", patience=np.nan)), ERROR, ("patience",)),
    ("stop-min_delta-negative", lambda: _fit_with(EarlyStopping("train_loss", min_delta=-1)), ERROR, ("min_delta",)),
    ("stop-min_delta-nan", lambda: _fit_with(EarlyStopping("train_loss", min_delta=np.nan)), ERROR, ("min_delta",)),
    ("stop-min_delta-inf", lambda: _fit_with(EarlyStopping("train_loss", min_delta=np.inf)), EITHER, ("min_delta",)),
    ("stop-mode-bad", lambda: _fit_with(EarlyStopping("train_loss", mode="bad")), ERROR, ("mode",)),
    ("stop-restore-string", lambda: _fit_with(EarlyStopping("train_loss", restore_best_weights="yes")), ERROR, ("restore_best_weights",)),
    ("stop-patience-zero", lambda: _fit_with(EarlyStopping("train_loss", patience=0)), OK, ()),
    ("stop-on-validation", lambda: _fit_with(EarlyStopping(), early_stopping=True), OK, ()),
    ("stop-warm-start", lambda: _fit_with(EarlyStopping("train_loss"), _warm_fits), OK, ()),
    ("stop-partial-fit", lambda: _fit_with(EarlyStopping("train_loss"), _partial_fits), OK, ()),
    ("stop-lbfgs", lambda: _fit_with(EarlyStopping("train_loss"), solver="lbfgs"), OK, ()),
    ("schedule-policy-bad", lambda: _fit_with(LRScheduler("bad")), ERROR, ("policy",)),
    ("schedule-policy-none", lambda: _fit_with(LRScheduler(None)), ERROR, ("policy",)),
    ("schedule-step_size-0", lambda: _fit_with(LRScheduler(step_size=0)), ERROR, ("step_size",)),
    ("schedule-step_size-string", lambda: _fit_with(LRScheduler(step_size="2")), ERROR, ("step_size",)),
    ("schedule-gamma-negative", lambda: _fit_with(LRScheduler(gamma=-1)), ERROR, ("gamma",)),
    ("schedule-gamma-nan", lambda: _fit_with(LRScheduler(gamma=np.nan)), ERROR, ("gamma",)),
    ("schedule-gamma-huge", lambda: _fit_with(LRScheduler(step_size=1, gamma=1e300)), EITHER, ("gamma", "learning")),
    ("schedule-T_max-0", lambda: _fit_with(LRScheduler("cosine", T_max=0)), ERROR, ("T_max",)),
    ("schedule-T_max-float", lambda: _fit_with(LRScheduler("cosine", T_max=2.5)), ERROR, ("T_max",)),
    ("schedule-T_max-none", lambda: _fit_with(LRScheduler("cosine")), OK, ()),
    ("schedule-monitor-unknown", lambda: _fit_with(LRScheduler("plateau", monitor="nope")), ERROR, ("nope",)),
    ("schedule-monitor-without-validation", lambda: _fit_with(LRScheduler("plateau")), ERROR, ("valid_loss",)),
    ("schedule-patience-negative", lambda: _fit_with(LRScheduler("plateau", monitor="train_loss", patience=-1)), ERROR, ("patience",)),
    ("schedule-min_lr-negative", lambda: _fit_with(LRScheduler(min_lr=-1)), ERROR, ("min_lr",)),
    ("schedule-min_lr-nan", lambda: _fit_with(LRScheduler(min_lr=np.nan)), ERROR, ("min_lr",)),
    ("schedule-warmup-negative", lambda: _fit_with(LRScheduler(warmup=-1)), ERROR, ("warmup",)),
    ("schedule-warmup-float", lambda: _fit_with(LRScheduler(warmup=1.5)), ERROR, ("warmup",)),
    ("schedule-warmup-huge", lambda: _fit_with(LRScheduler(warmup=10**9)), OK, ()),
    ("schedule-lbfgs", lambda: _fit_with(LRScheduler(), solver="lbfgs"), ERROR, ("lrscheduler",)),
    ("schedule-partial-fit", lambda: _fit_with(LRScheduler(step_size=1), _partial_fits), OK, ()),
    ("schedule-warm-start", lambda: _fit_with(LRScheduler(step_size=1), _warm_fits), OK, ()),
    ("schedule-plateau-train", lambda: _fit_with(LRScheduler("plateau", monitor="train_loss", patience=0)), OK, ()),
    ("not-a-callback", lambda: _fit_with("ProgressBar"), ERROR, ("callback",)),
    ("a-class", lambda: _fit_with(ProgressBar), ERROR, ("callback", "progressbar")),
]  # fmt: skip
LOGGER_CASES = (
    [case(f"logger-csv-{name}", "tmp", make, expect, words) for name, make, expect, words in CSV_CASES]
    + [case(f"logger-tensorboard-{name}", "tmp", make, expect, words) for name, make, expect, words in BOARD_CASES]
    + [case(f"logger-mlflow-{name}", "mlflow", make, expect, words) for name, make, expect, words in MLFLOW_CASES]
    + [case(f"callback-{name}", None, make, expect, words) for name, make, expect, words in CALLBACK_CASES]
)  # fmt: skip


@pytest.mark.parametrize("needs, make, expect, words", LOGGER_CASES)
def test_loggers_and_callbacks(request, monkeypatch, tmp_path, needs, make, expect, words):
    monkeypatch.chdir(tmp_path)  # what a logger writes by default lands here
    if needs == "tmp":
        handled(lambda: make(tmp_path), words, expect)
    elif needs == "mlflow":
        store = request.getfixturevalue("mlflow_store")
        handled(lambda: make(store, tmp_path), words, expect)
    else:
        handled(make, words, expect)


# Odd column plans exported: the graph takes the table and agrees with predict, or
# to_onnx refuses the plan naming the column.
ODD_PLANS = [
    ("rare-categories", lambda: F, dict(min_frequency=1000), EITHER, ("min_frequency",)),
    ("all-nan-column", lambda: _col("a", np.nan), {}, OK, ()),
    ("constant-column", lambda: _col("a", 1.0), {}, OK, ()),
    ("unscaled", lambda: F, dict(numeric_scaling=None), OK, ()),
    ("all-missing-strings", lambda: _col("b", _obj([None] * N)), {}, EITHER, ("'b'",)),
    ("unicode-categories", lambda: _col("b", _obj(["é", "😀", "", "a b"] * (N // 4))), {}, OK, ()),
    ("bytes-categories", lambda: _col("b", _obj([b"x", b"y"] * (N // 2))), {}, EITHER, ("'b'",)),
    ("decimal-categories", lambda: _col("b", _obj([Decimal(1), Decimal(2)] * (N // 2))), {}, EITHER, ("'b'",)),
    ("mixed-categories", lambda: _col("b", _obj([1, "x"] * (N // 2))), {}, EITHER, ("'b'",)),
    ("bool-and-int-categories", lambda: F, dict(categorical_features=["b", "c", "d", "e"]), OK, ()),
    ("float-categories", lambda: _col("c", F["c"] + 0.5), dict(categorical_features=["b", "c", "e"]), OK, ()),
    ("indicator-name-taken", lambda: F.assign(missingindicator_b=1.0), {}, EITHER, ("missingindicator_b",)),
    ("x-name-taken", lambda: F.rename(columns={"a": "", "b": "x0"}), {}, EITHER, ("x0",)),
    ("X-name", lambda: F.rename(columns={"a": "X"}), {}, OK, ()),
    ("duplicated-names", lambda: F.set_axis(list("abcda"), axis=1), {}, EITHER, ("'a'", "duplicate")),
    ("integer-names", lambda: F.set_axis(range(5), axis=1), {}, EITHER, ("name",)),
    ("spaces-and-symbols", lambda: F.set_axis(["a b", "b/c", "c:d", "d.e", "e-f"], axis=1), {}, OK, ()),
    ("long-name", lambda: F.rename(columns={"a": "a" * 300}), {}, OK, ()),
    ("numpy-object", lambda: F.to_numpy(dtype=object), {}, OK, ()),
    ("one-categorical-column", lambda: F[["b"]], {}, OK, ()),
    ("one-numeric-column", lambda: F[["a"]], {}, OK, ()),
]  # fmt: skip
ODD_PLAN_CASES = [
    case(f"onnx-plan-{kind}-{name}", kind, make, params, expect, words)
    for name, make, params, expect, words in ODD_PLANS
    for kind in ("clf", "reg")
]


def _array_feed(session, X):
    """The inputs of a table without names: 'X' (numbers) or 'x<j>' per column."""
    if [i.name for i in session.get_inputs()] == ["X"]:
        return {"X": np.asarray(X, dtype=np.float64)}
    return table_feed(session, pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]))


@pytest.mark.parametrize("kind, make, params, expect, words", ODD_PLAN_CASES)
def test_onnx_odd_column_plans(kind, make, params, expect, words):
    def call():
        X = make()
        est = make_tabular(kind, **params)
        est.fit(X, _y(kind))
        session = rt.InferenceSession(
            to_onnx(est).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        frame = X if isinstance(X, pd.DataFrame) else None
        feed = table_feed(session, frame) if frame is not None else _array_feed(session, X)
        got = session.run(None, feed)
        expected = output(est, X) if kind == "clf" else est.predict(X)
        agree(got[-1].reshape(np.shape(expected)), expected, what="ONNX Runtime's output")

    handled(call, words, expect)

"""A table on the cluster: DataParallel on a Dask DataFrame whose partitions stay on the workers.

The plan learned from merged per-partition summaries equals the one-process
plan on a table that fits (the categories exactly, the quantiles exactly
while kept exact, within the stated rank error when sketched); with
``sync_every=1`` the model is the one-process fit to 1e-10 in float64; each
shard is encoded once, on its worker; prediction on a Dask frame stays on
the workers; every bad input is refused, naming its partition or column,
before training starts. Small frames (thousands of rows, a few partitions)
on a cluster of two worker processes and on an in-process one.
"""

import importlib.util
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

pytest.importorskip("dask", reason="needs dask (the distributed extra)")
distributed = pytest.importorskip("distributed", reason="needs dask.distributed")
pd = pytest.importorskip("pandas")

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from sklearn.base import clone  # noqa: E402

from sknet import MLPRegressor, TabularClassifier, TabularRegressor  # noqa: E402
from sknet.distributed import DataParallel, _data_parallel, _tables  # noqa: E402
from sknet.distributed._tables import chunk_rows, validation_positions  # noqa: E402
from sknet.tabular import TabularEncoder  # noqa: E402
from tests.conftest import local_dask_client  # noqa: E402
from tests.distributed.helpers import assert_same_model, cluster_client  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def processes():
    """Two worker processes, one thread each, on loopback."""
    with local_dask_client() as client:
        yield client


@pytest.fixture(scope="module")
def threads():
    """Two in-process workers: what a test patches in sknet reaches them too."""
    with cluster_client(processes=False) as client:
        yield client


def table(n=1200, seed=0):
    """Numbers with missing values, a category of 30 levels, strings with missing, booleans."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "size": rng.lognormal(size=n).round(2),
            "age": rng.normal(40, 12, n).round(0),
            "city": pd.Categorical(rng.choice([f"city{i:02d}" for i in range(30)], n)),
            "kind": rng.choice(["flat", "house", None, "boat"], n, p=[0.5, 0.3, 0.15, 0.05]),
            "garden": rng.rand(n) > 0.6,
        }
    ).astype({"kind": object})
    frame.loc[rng.rand(n) < 0.1, "size"] = np.nan
    frame.loc[rng.rand(n) < 0.05, "age"] = np.nan
    signal = (
        np.log(frame["size"].fillna(1.0))
        + 0.03 * (frame["age"].fillna(40) - 40)
        + (frame["city"].cat.codes.to_numpy() % 3 == 0)
        + frame["garden"]
    )
    return frame, signal.to_numpy() + 0.3 * rng.normal(size=n)


def labels(signal):
    return pd.Series(np.where(signal > np.median(signal), "yes", "no"), name="target")


def small(estimator_class, **params):
    defaults = dict(
        hidden_layer_sizes=(16,),
        n_members=2,
        d_embedding=4,
        n_bins=8,
        max_iter=3,
        batch_size=128,
        random_state=0,
        device="cpu",
        dtype="float64",
        early_stopping=False,
    )
    return estimator_class(**{**defaults, **params})


def on_dask(frame, target, npartitions=4):
    """The frame with its target as one Dask frame, and X, y taken from it."""
    whole = dd.from_pandas(frame.assign(target=target), npartitions=npartitions)
    return whole.drop(columns="target"), whole["target"]


def assert_same_plan(a, b):
    for name in ("is_categorical_", "indicator_features_", "cardinalities_", "medians_"):
        assert_array_equal(getattr(a, name), getattr(b, name))
    assert [c.tolist() for c in a.categories_] == [c.tolist() for c in b.categories_]
    for x, y in zip(a.quantiles_, b.quantiles_):
        assert_array_equal(x, y)
    for x, y in zip(a.bins_, b.bins_):
        assert_array_equal(x, y)
    assert a.feature_names_in_.tolist() == b.feature_names_in_.tolist()


def training_not_started(monkeypatch):
    """Make any start of training (the driver of the epochs) a test failure."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(_data_parallel, "_Driver", refuse)


# -- 1. fit from a Dask DataFrame and Series: the one-process fit ----------------------------
def test_a_tabular_classifier_on_a_dask_frame_is_the_one_process_fit(processes):
    frame, signal = table()
    y = labels(signal)
    est = small(TabularClassifier)
    local = clone(est).fit(frame, y)
    X, dy = on_dask(frame, y)
    parallel = DataParallel(est, client=processes, sync_every=1).fit(X, dy)
    fitted = parallel.estimator_
    assert_same_plan(fitted.encoder_, local.encoder_)  # merged on the workers, exact
    assert parallel.plan_rank_error_.tolist() == [0.0, 0.0]
    assert_same_model(local, fitted, rtol=1e-10)
    assert parallel.shard_rows_ == [600, 600] and sorted(parallel.workers_) == sorted(
        processes.nthreads()
    )
    assert parallel.feature_names_in_.tolist() == list(frame.columns)
    assert parallel.classes_.tolist() == ["no", "yes"]
    assert_allclose(parallel.predict_proba(frame), local.predict_proba(frame), rtol=1e-10)


def test_a_weighted_regressor_with_rare_levels_is_the_one_process_fit(threads):
    frame, signal = table(n=900, seed=1)
    weights = np.random.RandomState(2).randint(0, 4, len(frame)).astype(float)
    est = small(TabularRegressor, min_frequency=35, numeric_embedding="periodic")
    local = clone(est).fit(frame, signal, sample_weight=weights)
    whole = dd.from_pandas(frame.assign(target=signal, weight=weights), npartitions=3)
    X = whole.drop(columns=["target", "weight"])
    parallel = DataParallel(est, client=threads, sync_every=1)
    parallel.fit(X, whole["target"], sample_weight=whole["weight"])
    fitted = parallel.estimator_
    plan = fitted.encoder_
    assert len(plan.categories_[0]) < 30  # the rare cities are unknown, as in one process
    assert [c.tolist() for c in plan.categories_] == [
        c.tolist() for c in local.encoder_.categories_
    ]
    for a, b in zip(plan.quantiles_, local.encoder_.quantiles_):
        assert_array_equal(a, b)  # the weights counted as the loss counts them
    assert_allclose(fitted.target_mean_, local.target_mean_, rtol=1e-12)
    assert_same_model(local, fitted, rtol=1e-10)


def test_early_stopping_rows_are_drawn_per_partition_from_random_state(threads):
    frame, signal = table(n=800, seed=3)
    y = labels(signal)
    est = small(TabularClassifier, early_stopping=True, validation_fraction=0.2)
    X, dy = on_dask(frame, y, npartitions=4)
    first = DataParallel(est, client=threads, sync_every=1).fit(X, dy)
    one_worker = DataParallel(est, client=threads, sync_every=1, n_workers=1).fit(X, dy)
    assert_same_model(first.estimator_, one_worker.estimator_, rtol=1e-10)
    # the same rows, drawn partition by partition: the one-process fit given them
    bounds = np.linspace(0, 800, 5).astype(int)
    val = np.concatenate(
        [
            a + validation_positions(b - a, 0.2, 0, i, y.to_numpy()[a:b])
            for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
        ]
    )
    train = np.setdiff1d(np.arange(800), val)
    assert sum(first.shard_rows_) == train.size and 0.1 * 800 < val.size < 0.3 * 800
    local = clone(est).fit(
        frame.iloc[train], y.iloc[train], X_val=frame.iloc[val], y_val=y.iloc[val]
    )
    assert_same_plan(first.estimator_.encoder_, local.encoder_)  # the training rows' only
    assert_same_model(local, first.estimator_, rtol=1e-10)
    assert_allclose(first.estimator_.validation_scores_, local.validation_scores_, rtol=1e-10)
    # each partition's draw: its own, from the seed and its number, stratified
    classes = np.repeat(["a", "b"], [150, 50])
    drawn = validation_positions(200, 0.2, 7, 3, classes)
    assert_array_equal(drawn, validation_positions(200, 0.2, 7, 3, classes))
    assert not np.array_equal(drawn, validation_positions(200, 0.2, 8, 3, classes))
    assert not np.array_equal(drawn, validation_positions(200, 0.2, 7, 4, classes))
    assert np.isin((drawn < 150).sum(), (30, 31)) and np.isin((drawn >= 150).sum(), (10, 11))


def test_the_table_stays_on_the_workers(processes, monkeypatch):
    frame, signal = table()
    y = labels(signal)
    X, dy = on_dask(frame, y)

    def refuse(*args, **kwargs):
        raise AssertionError("the table came to the driver")

    for cls in (dd.DataFrame, dd.Series):
        monkeypatch.setattr(cls, "compute", refuse)
        monkeypatch.setattr(cls, "__array__", refuse, raising=False)
    came_back = []
    gather = distributed.Client.gather

    def watched(self, futures, *args, **kwargs):
        result = gather(self, futures, *args, **kwargs)
        came_back.append(result)
        return result

    monkeypatch.setattr(distributed.Client, "gather", watched)
    est = small(TabularClassifier, early_stopping=True, max_iter=2)
    parallel = DataParallel(est, client=processes, sync_every=1).fit(X, dy)
    monkeypatch.undo()
    frames, matrices = [], []

    def walk(obj):
        if isinstance(obj, pd.DataFrame):
            frames.append(obj)
        elif isinstance(obj, np.ndarray) and obj.ndim == 2:
            matrices.append(obj)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                walk(item)

    walk(came_back)
    n_val = len(frame) - sum(parallel.shard_rows_)
    assert sum(len(f) for f in frames) == n_val  # of X's rows, only the validation rows came
    assert not matrices  # and no shard: the encoded rows stayed on the workers


def test_a_network_estimator_trains_on_a_dask_frame_of_numbers(threads):
    frame, signal = table(n=600, seed=4)
    numbers = frame[["size", "age"]].fillna(0.0)
    est = MLPRegressor(
        hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu", dtype="float64"
    )
    local = clone(est).fit(numbers, signal)
    X, dy = on_dask(numbers, signal, npartitions=3)
    parallel = DataParallel(est, client=threads, sync_every=1).fit(X, dy)
    assert_same_model(local, parallel.estimator_, rtol=1e-10)
    assert parallel.feature_names_in_.tolist() == ["size", "age"]
    assert_allclose(parallel.predict(numbers), local.predict(numbers), rtol=1e-10)
    X, dy = on_dask(frame, signal, npartitions=3)
    with pytest.raises(ValueError, match="Column 'city' of X has dtype category"):
        DataParallel(est, client=threads).fit(X, dy)
    X, dy = on_dask(frame[["size", "age"]], signal, npartitions=3)  # NaN: refused by partition
    with pytest.raises(ValueError, match=r"partition \d \(of 3\) of X: Input X contains NaN"):
        DataParallel(est, client=threads).fit(X, dy)


def test_a_persisted_frame_trains_where_its_partitions_are(processes):
    frame, signal = table(n=800, seed=5)
    y = labels(signal)
    whole = processes.persist(dd.from_pandas(frame.assign(target=y), npartitions=4))
    futures = distributed.futures_of(whole)
    processes.gather(futures)
    who_has = processes.who_has(futures)
    holders = {f.key[1]: who_has[f.key][0] for f in futures}
    est = small(TabularClassifier, max_iter=1)
    parallel = DataParallel(est, client=processes).fit(
        whole.drop(columns="target"), whole["target"]
    )
    for shard, worker in enumerate(parallel.workers_):  # two partitions a shard
        assert worker in (holders[2 * shard], holders[2 * shard + 1])
    # a shard goes to the worker that holds the most of its rows
    holders = ["w1", "w2", "w1", "w1"]
    rows = _tables.FrameRows(
        [None] * 4, ["a"], [100, 300, 200, 200], [None] * 4, holders, None, None
    )
    groups = _tables.frame_shards(rows, ["w1", "w2"], 2)
    assert [(parts, worker) for parts, _, _, worker in groups] == [([0, 1], "w2"), ([2, 3], "w1")]
    assert [(start, stop) for _, start, stop, _ in groups] == [(0, 400), (400, 800)]


# -- 2. the plan on the cluster: exact, or within the stated rank error ----------------------
def test_a_sketched_plan_stays_within_its_stated_rank_error(threads, monkeypatch):
    monkeypatch.setattr(_tables, "RESOLUTION", 16)  # a tiny sketch: compressed on 6 partitions
    rng = np.random.RandomState(6)
    n = 6000
    frame = pd.DataFrame({"x": rng.standard_t(4, size=n), "c": rng.choice(list("abcd"), n)})
    y = labels(frame["x"].to_numpy() + (frame["c"] == "a"))
    est = small(TabularClassifier, max_iter=1)
    X, dy = on_dask(frame, y, npartitions=6)
    parallel = DataParallel(est, client=threads).fit(X, dy)
    epsilon = parallel.plan_rank_error_[0]
    assert 0 < epsilon <= (1 + 1) / 16  # one compression a level: partitions, one merge
    plan, local = parallel.estimator_.encoder_, clone(est).fit(frame, y).encoder_
    assert [c.tolist() for c in plan.categories_] == [c.tolist() for c in local.categories_]
    x = np.sort(frame["x"].to_numpy())
    levels = np.linspace(0, 1, plan.quantiles_[0].size)
    below = np.searchsorted(x, plan.quantiles_[0], side="left") / n
    at_or_below = np.searchsorted(x, plan.quantiles_[0], side="right") / n
    assert np.all(below <= levels + epsilon + 1e-12)
    assert np.all(at_or_below >= levels - epsilon - 1e-12)
    assert plan.quantiles_[0][0] == x[0] and plan.quantiles_[0][-1] == x[-1]


# -- 3. encoded on the workers, once, in the fit's dtype, in chunks --------------------------
def test_each_row_is_encoded_once_on_its_worker_in_the_fits_dtype(threads, monkeypatch):
    frame, signal = table(n=1000, seed=7)
    y = labels(signal)
    X, dy = on_dask(frame, y)
    encoded = []
    encode = TabularEncoder._encode_table  # every encoding: transform's and the estimator's

    def counted(self, table):
        out = encode(self, table)
        encoded.append((out.shape[0], out.dtype))
        return out

    monkeypatch.setattr(TabularEncoder, "_encode_table", counted)
    est = small(TabularClassifier, dtype="float32", early_stopping=True, max_iter=3)
    parallel = DataParallel(est, client=threads, sync_every=2).fit(X, dy)
    assert len(parallel.estimator_.history_) == 3
    n_train = sum(parallel.shard_rows_)
    assert sum(rows for rows, _ in encoded) == n_train + (1000 - n_train)  # once each row
    assert {dtype for _, dtype in encoded} == {np.dtype(np.float32)}


def test_a_partition_larger_than_the_worker_allows_is_encoded_in_chunks(threads, monkeypatch):
    frame, signal = table(n=700, seed=8)
    y = labels(signal)
    X, dy = on_dask(frame, y, npartitions=2)
    est = small(TabularClassifier, max_iter=2)
    whole = DataParallel(est, client=threads, sync_every=1).fit(X, dy)
    calls = []
    transform = TabularEncoder.transform

    def counted(self, table):
        calls.append(len(table))
        return transform(self, table)

    monkeypatch.setattr(TabularEncoder, "transform", counted)
    monkeypatch.setattr(_tables, "chunk_rows", lambda *args: 50)
    chunked = DataParallel(est, client=threads, sync_every=1).fit(X, dy)
    assert max(calls) == 50 and len(calls) == 14  # 350 rows a partition, 50 at a time
    assert_same_model(whole.estimator_, chunked.estimator_)  # the same matrix, bit for bit
    # what a worker allows: 1/16 of its memory limit a chunk, within [1024, 131072] rows
    assert chunk_rows(10, 20, 4, None) == 131072
    assert chunk_rows(10, 20, 4, 2**28) == 2**28 // 16 // (32 * 10 + 2 * 4 * 20)
    assert chunk_rows(10, 20, 4, 2**20) == 1024


# -- 4. prediction on the workers; a model that pickles without the cluster ------------------
def test_predict_on_a_dask_frame_is_a_dask_collection_computed_on_the_workers(processes):
    frame, signal = table(n=900, seed=9)
    y = labels(signal)
    X, dy = on_dask(frame, y, npartitions=3)
    parallel = DataParallel(small(TabularClassifier, max_iter=2), client=processes).fit(X, dy)
    local = parallel.estimator_
    predicted = parallel.predict(X)
    assert isinstance(predicted, dd.Series) and predicted.npartitions == 3
    assert predicted.divisions == X.divisions
    computed = processes.compute(predicted).result()
    assert_array_equal(computed.index, frame.index)
    assert_array_equal(computed.to_numpy(), local.predict(frame))
    proba = processes.compute(parallel.predict_proba(X)).result()
    assert proba.columns.tolist() == ["no", "yes"]
    assert_allclose(proba.to_numpy(), local.predict_proba(frame), rtol=1e-12)
    filtered = X[X["garden"]]  # some partitions may hold no row: empty outputs there
    kept = processes.compute(parallel.predict(filtered)).result()
    assert_array_equal(kept.to_numpy(), local.predict(frame[frame["garden"]]))
    assert parallel.score(X, dy) == pytest.approx(local.score(frame, y))
    assert_array_equal(parallel.predict(frame), local.predict(frame))  # pandas: as before


def test_predict_on_a_dask_array_is_a_dask_array(threads):
    frame, signal = table(n=400, seed=10)
    numbers = frame[["size", "age"]].fillna(0.0).to_numpy()
    est = MLPRegressor(hidden_layer_sizes=(8,), max_iter=2, random_state=0, device="cpu")
    parallel = DataParallel(est, client=threads).fit(numbers, signal)
    blocks = da.from_array(numbers, chunks=(150, 1))
    predicted = parallel.predict(blocks)
    assert isinstance(predicted, da.Array) and predicted.chunks == ((150, 150, 100),)
    # float32: a block's products may round differently from the whole array's
    assert_allclose(threads.compute(predicted).result(), parallel.predict(numbers), rtol=1e-6)


def test_a_fitted_model_pickles_without_any_reference_to_the_cluster(threads, tmp_path):
    frame, signal = table(n=400, seed=11)
    y = labels(signal)
    X, dy = on_dask(frame, y, npartitions=2)
    parallel = DataParallel(small(TabularClassifier, max_iter=1), client=threads).fit(X, dy)
    data = pickle.dumps(parallel)
    found = []

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            found.append(module)
            return super().find_class(module, name)

    Recording(io.BytesIO(data)).load()
    assert found and not [m for m in found if m.split(".")[0] in ("dask", "distributed")]
    path = tmp_path / "model.pkl"
    path.write_bytes(data)
    frame.to_pickle(tmp_path / "frame.pkl")
    script = (
        "import sys, pickle, numpy as np, pandas as pd\n"
        "sys.modules['dask'] = sys.modules['distributed'] = None  # no Dask at all\n"
        f"model = pickle.loads(open({str(path)!r}, 'rb').read())\n"
        f"frame = pd.read_pickle({str(tmp_path / 'frame.pkl')!r})\n"
        "print(','.join(model.predict(frame)[:20]))\n"
    )
    env = {**os.environ, "SKNET_DEVICE": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ",".join(parallel.predict(frame)[:20])


# -- 5. bad input: a clear error naming the partition or column, before training --------------
def write_files(directory, pieces):
    directory.mkdir()
    for i, piece in enumerate(pieces):
        piece.to_parquet(directory / f"part.{i}.parquet")
    whole = dd.read_parquet(str(directory))
    return whole.drop(columns="target"), whole["target"]


def test_partitions_whose_dtypes_disagree_are_refused(threads, tmp_path, monkeypatch):
    frame, signal = table(n=300, seed=12)
    pieces = [frame.iloc[:150].assign(target=labels(signal)[:150].to_numpy())]
    pieces.append(frame.iloc[150:].assign(target=labels(signal)[150:].to_numpy()))
    pieces[0]["rooms"] = np.arange(150)  # int64 in the first file ...
    pieces[1]["rooms"] = np.where(np.arange(150) % 7, np.arange(150), np.nan)  # float64 here
    X, dy = write_files(tmp_path / "table", pieces)
    training_not_started(monkeypatch)
    message = r"Column 'rooms' has dtype float64 in partition 1 \(of 2\) of X, but X.dtypes"
    with pytest.raises(ValueError, match=message):
        DataParallel(small(TabularClassifier), client=threads).fit(X, dy)


def test_partitions_whose_categories_disagree_are_refused(threads, tmp_path, monkeypatch):
    frame, signal = table(n=300, seed=13)
    y = labels(signal).to_numpy()
    pieces = []
    for i, rows in enumerate((slice(0, 150), slice(150, 300))):
        piece = frame.iloc[rows].assign(target=y[rows])
        piece["city"] = pd.Categorical(piece["city"].astype(str)).add_categories([f"only{i}"])
        pieces.append(piece)
    X, dy = write_files(tmp_path / "table", pieces)
    training_not_started(monkeypatch)
    with pytest.raises(ValueError, match="Column 'city' is categorical with other categories"):
        DataParallel(small(TabularClassifier), client=threads).fit(X, dy)
    model = DataParallel(small(TabularClassifier, max_iter=1), client=threads)
    monkeypatch.undo()
    model.fit(X.astype({"city": str}), dy)  # what the message says to do: it trains


def test_an_empty_partition_is_refused_by_number(threads, monkeypatch):
    frame, signal = table(n=400, seed=14)
    y = labels(signal)
    whole = dd.from_pandas(frame.assign(target=y), npartitions=4)
    whole = whole.map_partitions(
        lambda part: part.iloc[:0] if len(part) and part.index[0] == 200 else part,
        meta=whole._meta,
    )
    training_not_started(monkeypatch)
    with pytest.raises(ValueError, match=r"partition 2 \(of 4\) of X has no rows"):
        DataParallel(small(TabularClassifier), client=threads).fit(
            whole.drop(columns="target"), whole["target"]
        )


def test_unknown_divisions_that_cannot_align_the_rows_are_refused(threads, monkeypatch):
    frame, signal = table(n=400, seed=15)
    y = labels(signal)
    X = dd.from_pandas(frame, npartitions=4).clear_divisions()
    training_not_started(monkeypatch)
    for parts in (4, 3):
        dy = dd.from_pandas(y, npartitions=parts).clear_divisions()
        with pytest.raises(ValueError, match="divisions of X are unknown"):
            DataParallel(small(TabularClassifier), client=threads).fit(X, dy)


def test_a_y_whose_partitions_do_not_hold_xs_rows_is_refused(threads, monkeypatch):
    frame, signal = table(n=400, seed=16)
    y = labels(signal)
    X = dd.from_pandas(frame, npartitions=4)
    model = DataParallel(small(TabularClassifier), client=threads)
    training_not_started(monkeypatch)
    with pytest.raises(ValueError, match="y has 3 partition.* and X 4"):
        model.fit(X, dd.from_pandas(y, npartitions=3))
    with pytest.raises(ValueError, match="y's divisions differ from X's"):
        model.fit(
            X, dd.from_pandas(y, npartitions=4).repartition(divisions=[0, 50, 250, 300, 399])
        )
    index = np.arange(400, dtype=float)
    index[50] = 50.5  # the same divisions, one other row
    shifted = dd.from_pandas(y.set_axis(index), npartitions=4).repartition(divisions=X.divisions)
    with pytest.raises(ValueError, match=r"partition 0 \(of 4\) of y holds other rows than X's"):
        model.fit(X, shifted)
    with pytest.raises(TypeError, match="y must be a Dask Series, DataFrame or array"):
        model.fit(X, y.to_numpy())
    with pytest.raises(TypeError, match="sample_weight must be a Dask Series"):
        model.fit(X, dd.from_pandas(y, npartitions=4), sample_weight=np.ones(400))


def test_a_column_missing_from_some_files_is_refused_by_name(threads, tmp_path, monkeypatch):
    frame, signal = table(n=300, seed=17)
    y = labels(signal).to_numpy()
    pieces = [frame.iloc[:100].assign(target=y[:100])]
    pieces.append(frame.iloc[100:200].drop(columns="kind").assign(target=y[100:200]))
    pieces.append(frame.iloc[200:].assign(target=y[200:]))
    X, dy = write_files(tmp_path / "table", pieces)
    training_not_started(monkeypatch)
    with pytest.raises(ValueError, match=r"Column\(s\) \['kind'\] of X are missing from partit"):
        DataParallel(small(TabularClassifier), client=threads).fit(X, dy)


# -- 6. the benchmark, at a small size --------------------------------------------------------
def test_the_benchmark_runs_at_a_small_size(tmp_path):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_dask_tables.py"
    spec = importlib.util.spec_from_file_location("bench_dask_tables", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    options = ["--rows", "6000", "--files", "3", "--test-rows", "1000", "--epochs", "1"]
    options += ["--local-seeds", "0", "--memory-limit", "2GiB", "--dir", str(tmp_path / "t")]
    results = bench.main([*options, "--json", str(tmp_path / "r.json")])
    (run,) = results["cluster"]
    assert run["train_rows"] + run["validation_rows"] == 6000
    assert run["rows_per_s_epochs"] > 0 and run["driver_peak_bytes"] > 0
    assert len(run["worker_peak_bytes"]) == 2 and 0 <= run["accuracy"] <= 1
    (local,) = results["one_process"]
    assert local["rows"] == 3000 and local["peak_bytes"] > 0
    assert (tmp_path / "r.json").exists()

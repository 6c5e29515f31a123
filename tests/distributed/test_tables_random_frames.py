"""A table on the cluster, on seeded random frames of every dtype, cut into partitions of
every shape (sknet/distributed/_tables.py, _frame_checks.py, sknet/tabular/_summaries.py).

The docs (docs/user_guide/dask.md, *A table on the cluster*) promise that the plan a
Dask DataFrame fit learns on the workers is the one-process plan of the same rows
(exact while a column's values are few: the categories, medians, quantiles and bins;
``numeric_scaling='standard'`` up to float rounding), that with ``sync_every=1`` the
model is the one-process fit to 1e-10 in float64, that prediction on a Dask frame is
the pandas prediction, and that bad input is refused, by partition or column, before
training starts. Each is checked here on ``random_frame`` (nullable Int64, Float64 and
boolean, strings, ``pd.NA``/``None``/``NaN`` among objects, categories) against the
rows the workers see (``X.compute()``: dask may turn object columns into strings),
with one partition, tiny ones of 1 to 3 rows, partitions where a column is missing
throughout or lacks a category, categories in another order, unknown divisions, and
weights and labels as Dask collections.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

dask = pytest.importorskip("dask", reason="needs dask (the distributed extra)")
pytest.importorskip("distributed", reason="needs dask.distributed")
pd = pytest.importorskip("pandas")

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from dask.dataframe.utils import clear_known_categories  # noqa: E402
from sklearn.base import clone  # noqa: E402

from sknet import TabularClassifier, TabularRegressor  # noqa: E402
from sknet.distributed import DataParallel, _data_parallel, _tables  # noqa: E402
from tests.distributed.helpers import assert_same_model, cluster_client, within  # noqa: E402
from tests.tabular.test_small_predict_paths import CATEGORICAL, TINY, random_frame  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: Seconds a refusal may take before it counts as a hang (a bound, not a speed test).
REFUSED_WITHIN = 120
#: The column plans tried on the random frames (the estimator's plan parameters).
PLANS = [
    {},
    dict(categorical_features=CATEGORICAL, numeric_codes=True),
    dict(categorical_features=CATEGORICAL, numeric_scaling="robust", min_frequency=5),
    dict(numeric_scaling="standard"),
    dict(numeric_scaling=None, numeric_codes=True, min_frequency=3),
]


@pytest.fixture(scope="module")
def threads():
    """Two in-process workers, one thread each."""
    with cluster_client(processes=False) as client:
        yield client


def tiny(estimator_class=TabularClassifier, **params):
    defaults = dict(TINY, dtype="float64", early_stopping=False, batch_size=32)
    return estimator_class(**{**defaults, **params})


def labels(rng, n):
    return pd.Series(np.where(rng.rand(n) > 0.5, "yes", "no"), name="target")


def random_sizes(rng, n, largest):
    """Partition sizes of ``n`` rows: each from 1 to ``largest`` rows, the last the rest."""
    sizes = rng.randint(1, largest + 1, size=n)
    sizes = sizes[np.cumsum(sizes) < n]
    return np.append(sizes, n - sizes.sum())


def cut(frame, sizes, strings=True, **columns):
    """``frame`` with ``columns`` as one Dask frame of partitions of ``sizes`` rows
    (known divisions), and X taken from it; ``strings``: dask's conversion of object
    columns to strings (its default) or not."""
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    with dask.config.set({"dataframe.convert-string": strings}):
        whole = dd.from_pandas(frame.assign(**columns), npartitions=1)
        whole = whole.repartition(divisions=[*edges[:-1].tolist(), int(edges[-1]) - 1])
    assert whole.npartitions == len(sizes)
    return whole.drop(columns=list(columns)), whole


def from_pieces(pieces, meta=None):
    """One Dask partition a pandas frame, as files whose dtypes disagree read: X's dtypes
    are ``meta``'s (the first piece's), each partition's its own."""
    meta = pieces[0].iloc[:0] if meta is None else meta
    return dd.from_delayed([dask.delayed(p) for p in pieces], meta=meta, verify_meta=False)


def plan_on_the_workers(estimator, X, y, client, sample_weight=None):
    """The plan a DataParallel fit of ``estimator`` learns from Dask ``X`` (the pass over
    its partitions, merged summaries; no training)."""
    stand_in = _tables.frame_inputs(estimator, X, y, sample_weight, {}, client, "fit")[0]
    return stand_in.plan


def encoded_on_the_workers(plan, X, client):
    """``plan.transform`` of each partition of Dask ``X``, on the workers, in order."""
    parts = client.compute([dask.delayed(plan.transform)(p) for p in X.to_delayed()])
    return np.concatenate(client.gather(parts))


def assert_same_plan(a, b, exact=True):
    """The same plan: exactly, or (``numeric_scaling='standard'``) to float rounding."""
    for name in (
        "is_categorical_", "numeric_features_", "categorical_features_",
        "indicator_features_", "code_features_", "cardinalities_",
    ):  # fmt: skip
        assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    names = [getattr(e, "feature_names_in_", np.array([])).tolist() for e in (a, b)]
    assert names[0] == names[1]
    assert a.n_features_in_ == b.n_features_in_ and a.output_groups_ == b.output_groups_
    assert [c.tolist() for c in a.categories_] == [c.tolist() for c in b.categories_]
    assert [c.dtype for c in a.categories_] == [c.dtype for c in b.categories_]

    def same(x, y, what):
        if exact:
            assert_array_equal(x, y, err_msg=what, strict=True)
        else:
            assert_allclose(x, y, rtol=1e-10, atol=1e-12, err_msg=what)

    same(a.medians_, b.medians_, "medians_")
    for name in ("quantiles_", "bins_", "offsets_", "scales_"):
        first, second = getattr(a, name), getattr(b, name)
        assert (first is None) == (second is None), name
        for x, y in zip([] if first is None else first, [] if second is None else second):
            same(x, y, name)


def training_not_started(monkeypatch):
    """Make any start of training (the driver of the epochs) a test failure."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(_data_parallel, "_Driver", refuse)


def refused(error, match, fit, *args, **kwargs):
    """``fit(*args, **kwargs)`` raises ``error`` matching ``match``, in bounded time."""
    with pytest.raises(error, match=match):
        within(REFUSED_WITHIN, fit, *args, **kwargs)


# -- 1. the plan and the encoding on the workers: the one-process plan, on random frames ----
@pytest.mark.parametrize("seed", range(10))
def test_the_plan_of_random_partitions_is_the_one_process_plan(threads, seed):
    rng = np.random.RandomState(seed)
    largest = [3, None, 12, 40, 1][seed % 5]  # tiny partitions, one, a few, single rows
    n = rng.randint(10, 40) if largest in (1, 3) else rng.randint(20, 160)
    frame = random_frame(rng, n)
    params = PLANS[seed % len(PLANS)]
    sizes = [n] if largest is None else random_sizes(rng, n, largest)
    strings = seed % 2 == 0  # dask's conversion of object columns to strings, or not
    X, whole = cut(frame, sizes, strings, target=labels(rng, n))
    if not strings:
        assert str(X.dtypes["mixed"]) == "object"  # ints, text, None, pd.NA as they are
    rows = X.compute()  # the rows the workers read
    estimator = tiny(**params)
    plan = plan_on_the_workers(estimator, X, whole["target"], threads)
    local = estimator._make_encoder().fit(rows)
    exact = params.get("numeric_scaling") != "standard"
    assert_same_plan(plan, local, exact=exact)
    encoded, expected = encoded_on_the_workers(plan, X, threads), local.transform(rows)
    if exact:
        assert_array_equal(encoded, expected, strict=True)
    else:
        assert_allclose(encoded, expected, rtol=1e-10, atol=1e-12)
    assert plan.transform(rows).tolist() == encoded.tolist()  # the whole frame: the same rows


@pytest.mark.parametrize("seed", range(3))
def test_weights_count_on_the_workers_as_in_one_process(threads, seed):
    rng = np.random.RandomState(100 + seed)
    n = 120
    frame = random_frame(rng, n)
    weights = rng.randint(0, 4, n).astype(float)
    weights[30:60] = 0.0  # the second partition weighs nothing
    X, whole = cut(frame, [30, 30, 25, 35], target=labels(rng, n), w=weights)
    estimator = tiny(**{**PLANS[seed], "min_frequency": 4})
    plan = plan_on_the_workers(estimator, X, whole["target"], threads, whole["w"])
    rows = X.compute()
    local = estimator._make_encoder().fit(rows, sample_weight=weights)
    assert_same_plan(plan, local)
    assert_array_equal(encoded_on_the_workers(plan, X, threads), local.transform(rows))


# -- 2. partition edge cases: the one-process model, predicted on the workers ----------------
def missing_in_a_partition(rng, n):
    """A categorical and a numeric column missing throughout the second partition, a
    category absent from the third."""
    frame = random_frame(rng, n)
    frame.loc[30:59, ["category", "string", "float", "Int64"]] = None
    third = frame.loc[60:89, "object"]
    frame.loc[60:89, "object"] = third.where(third != "a", "b")
    return frame, [30, 30, 30, n - 90]


EDGE_CASES = {
    "one partition": lambda rng: (random_frame(rng, 90), [90]),
    "tiny partitions": lambda rng: (random_frame(rng, 40), random_sizes(rng, 40, 3)),
    "missing in a partition": lambda rng: missing_in_a_partition(rng, 110),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_partition_edge_cases_train_the_one_process_model(threads, case):
    rng = np.random.RandomState(len(case))
    frame, sizes = EDGE_CASES[case](rng)
    y = labels(rng, len(frame))
    X, whole = cut(frame, sizes, target=y)
    rows = X.compute()
    estimator = tiny()
    local = clone(estimator).fit(rows, y)
    model = DataParallel(estimator, client=threads, sync_every=1).fit(X, whole["target"])
    assert_same_plan(model.estimator_.encoder_, local.encoder_)
    assert_same_model(local, model.estimator_, rtol=1e-10)
    assert sum(model.shard_rows_) == len(frame)
    assert model.plan_rank_error_.tolist() == [0.0] * len(local.encoder_.numeric_features_)
    predicted = threads.compute(model.predict(X)).result()
    assert_array_equal(predicted.index, rows.index)
    assert_array_equal(predicted.to_numpy(), local.predict(rows))
    proba = threads.compute(model.predict_proba(X)).result()
    assert proba.columns.tolist() == ["no", "yes"]
    assert_allclose(proba.to_numpy(), local.predict_proba(rows), rtol=1e-10)


def test_categories_in_another_order_and_unknown_divisions_give_the_one_process_model(threads):
    rng = np.random.RandomState(7)
    n = 90
    frame = random_frame(rng, n).drop(columns="mixed").assign(target=labels(rng, n))
    pieces = [frame.iloc[a : a + 30].copy() for a in range(0, n, 30)]
    for piece, order in zip(pieces, (["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"])):
        piece["category"] = piece["category"].cat.reorder_categories(order)  # one set
    whole = from_pieces(pieces, meta=clear_known_categories(pieces[0].iloc[:0]))
    assert not whole.known_divisions
    X, y = whole.drop(columns="target"), whole["target"]  # one frame's: aligned all the same
    rows = X.compute()
    estimator = tiny()
    local = clone(estimator).fit(rows, frame["target"])
    model = DataParallel(estimator, client=threads, sync_every=1).fit(X, y)
    assert_same_plan(model.estimator_.encoder_, local.encoder_)
    plan = model.estimator_.encoder_
    categorical = [X.columns[j] for j in plan.categorical_features_]
    assert plan.categories_[categorical.index("category")].tolist() == ["a", "b", "c"]
    assert_same_model(local, model.estimator_, rtol=1e-10)
    proba = threads.compute(model.predict_proba(X)).result()
    assert_allclose(proba.to_numpy(), local.predict_proba(rows), rtol=1e-10)


def test_weights_and_labels_as_dask_collections_give_the_one_process_model(threads):
    rng = np.random.RandomState(8)
    n = 96
    frame = random_frame(rng, n)
    y = labels(rng, n)
    weights = rng.randint(0, 4, n).astype(float)
    weights[24:48] = 0.0  # a whole partition of weight zero
    whole = dd.from_pandas(frame.assign(target=y, w=weights, cat=pd.Categorical(y)), npartitions=4)
    X = whole.drop(columns=["target", "w", "cat"])
    assert whole.divisions == (0, 24, 48, 72, 95)
    rows = X.compute()
    estimator = tiny()
    local = clone(estimator).fit(rows, y, sample_weight=weights)
    by_column = DataParallel(estimator, client=threads, sync_every=1)
    by_column.fit(X, whole["target"], sample_weight=whole["w"])
    assert_same_plan(by_column.estimator_.encoder_, local.encoder_)
    assert_same_model(local, by_column.estimator_, rtol=1e-10)
    # an array of X's blocks: the weights, and string labels
    as_arrays = DataParallel(estimator, client=threads, sync_every=1).fit(
        X,
        da.from_array(y.to_numpy().astype(str), chunks=24),
        sample_weight=da.from_array(weights, chunks=24),
    )
    assert as_arrays.classes_.tolist() == ["no", "yes"]
    assert_same_model(local, as_arrays.estimator_, rtol=1e-10)
    # the labels as a categorical Dask series
    categorical = DataParallel(estimator, client=threads, sync_every=1)
    categorical.fit(X, whole["cat"], sample_weight=whole["w"])
    assert categorical.classes_.tolist() == ["no", "yes"]
    assert_same_model(local, categorical.estimator_, rtol=1e-10)


def test_a_regressor_on_random_partitions_is_the_one_process_fit(threads):
    rng = np.random.RandomState(9)
    n = 100
    frame = random_frame(rng, n)
    signal = rng.normal(size=n)
    X, whole = cut(frame, random_sizes(rng, n, 17), target=signal)
    rows = X.compute()
    estimator = tiny(TabularRegressor, numeric_scaling="robust")
    local = clone(estimator).fit(rows, signal)
    model = DataParallel(estimator, client=threads, sync_every=1).fit(X, whole["target"])
    assert_same_plan(model.estimator_.encoder_, local.encoder_)
    assert_allclose(model.estimator_.target_mean_, local.target_mean_, rtol=1e-12)
    assert_same_model(local, model.estimator_, rtol=1e-10)
    predicted = threads.compute(model.predict(X)).result()
    assert_allclose(predicted.to_numpy(), local.predict(rows), rtol=1e-10)


# -- 3. bad input: a clear error naming what is wrong, before training, never a hang ---------
@pytest.fixture(scope="module")
def fitted(threads):
    """A model fitted on a Dask frame, the frame, and its labels."""
    rng = np.random.RandomState(10)
    n = 90
    frame = random_frame(rng, n)
    X, whole = cut(frame, [30, 30, 30], target=labels(rng, n))
    estimator = tiny(warm_start=True)
    return DataParallel(estimator, client=threads).fit(X, whole["target"]), X, whole


def test_a_frame_whose_columns_differ_from_the_fitted_ones_is_refused(fitted):
    model, X, whole = fitted
    other = {
        "missing": X.drop(columns=["float"]),
        "renamed": X.rename(columns={"float": "floats"}),
        "reordered": X[list(X.columns[::-1])],
    }
    messages = {
        "missing": "seen at fit time, yet now missing:\n- float",
        "renamed": "unseen at fit time:\n- floats",
        "reordered": "must be in the same order",
    }
    for name, frame in other.items():
        for method in ("predict", "predict_proba"):
            refused(ValueError, messages[name], getattr(model, method), frame)
        refused(ValueError, messages[name], model.score, frame, whole["target"])
        # warm_start=True: the fitted plan kept, the columns checked (before any epoch)
        refused(ValueError, messages[name], model.fit, frame, whole["target"])
    assert len(model.estimator_.loss_curve_) == TINY["max_iter"]  # not trained further


def test_targets_and_frames_that_do_not_align_are_refused(threads, monkeypatch):
    rng = np.random.RandomState(11)
    n = 90
    frame = random_frame(rng, n).assign(target=labels(rng, n))
    ddf = dd.from_pandas(frame, npartitions=3)
    model = DataParallel(tiny(), client=threads)
    training_not_started(monkeypatch)
    X = ddf.drop(columns="target")
    refused(
        ValueError,
        r"partition \d \(of 3\) of y holds other rows than X's",
        model.fit,
        ddf[ddf["float"].isna()].drop(columns="target"),  # fewer rows of X than of y
        ddf["target"],
    )
    short = dd.from_pandas(frame["target"].iloc[:-7], npartitions=3)
    refused(ValueError, "y's divisions differ from X's", model.fit, X, short)
    refused(ValueError, "the divisions of y are unknown", model.fit, X, short.clear_divisions())
    unknown = ddf.clear_divisions()
    refused(
        ValueError,
        "the divisions of X are unknown",
        model.fit,
        unknown.drop(columns="target"),
        dd.from_pandas(frame["target"], npartitions=3).clear_divisions(),
    )
    blocks = da.from_array(frame["target"].to_numpy().astype(str), chunks=45)
    refused(ValueError, "Dask array of 2 row block", model.fit, X, blocks)
    refused(TypeError, "y must be a Dask Series", model.fit, X, frame["target"])
    refused(
        TypeError,
        "X must be a Dask DataFrame here, got a Series",
        model.fit,
        X["float"],
        ddf["target"],
    )


def test_partitions_that_disagree_are_refused_by_column_and_partition(threads, monkeypatch):
    rng = np.random.RandomState(12)
    n = 90
    frame = random_frame(rng, n).drop(columns="mixed").assign(target=labels(rng, n))
    model = DataParallel(tiny(), client=threads)
    training_not_started(monkeypatch)

    def pieces(**changes):
        out = [frame.iloc[a : a + 30].copy() for a in range(0, n, 30)]
        for column, change in changes.items():
            out[1][column] = change(out[1][column])
        return out

    def fit(parts, meta=None):
        whole = from_pieces(parts, meta)
        return model.fit(whole.drop(columns="target"), whole["target"])

    # object where X.dtypes says category, and the other way round
    message = r"Column 'category' has dtype object in partition 1 \(of 3\) of X, but X.dtypes"
    refused(ValueError, message, fit, pieces(category=lambda c: c.astype(object)))
    parts = pieces(category=lambda c: c.astype(object))
    message = r"Column 'category' has dtype category in partition [02] \(of 3\) of X"
    refused(ValueError, message, fit, parts, parts[1].iloc[:0])
    # int64 in the first file, float64 after a NaN in the second
    parts = pieces(int=lambda c: c.where(c > 0))
    message = (
        r"Column 'int' has dtype float64 in partition 1 \(of 3\) of X, but X.dtypes says int64"
    )
    refused(ValueError, message, fit, parts)
    # categories of other sets, read as files are (X.dtypes: categories unknown)
    parts = pieces(category=lambda c: c.cat.add_categories(["zz"]))
    message = r"Column 'category' is categorical with other categories in partition 1 \(4 cat"
    refused(ValueError, message, fit, parts, clear_known_categories(parts[0].iloc[:0]))
    # an empty partition
    parts = [frame.iloc[:40], frame.iloc[40:40], frame.iloc[40:]]
    refused(ValueError, r"partition 1 \(of 3\) of X has no rows", fit, parts)


# -- 4. what is not yet as documented ---------------------------------------------------------
def test_integer_ids_beyond_floats_in_a_column_with_missing_values_keep_their_categories(
    threads,
):
    big = 2**53
    ids = pd.array([big, big + 1, 5, None, 7, big + 3], dtype="Int64")
    frame = pd.DataFrame({"id": ids, "x": np.arange(6.0)})
    y = pd.Series(list("ababab"), name="target")
    X, whole = cut(frame, [2, 2, 2], target=y)  # int64, float64 (a missing ID), int64
    estimator = tiny(categorical_features=["id"], numeric_codes=False)
    plan = plan_on_the_workers(estimator, X, whole["target"], threads)
    local = estimator._make_encoder().fit(frame)
    assert local.categories_[0].tolist() == [5, 7, big, big + 1, big + 3]  # exact
    assert plan.categories_[0].tolist() == local.categories_[0].tolist()
    assert_array_equal(encoded_on_the_workers(plan, X, threads), local.transform(frame))


def test_a_dask_array_for_a_tabular_estimator_is_refused(threads):
    # its blocks would train unencoded, on a plan learned from zeros
    rng = np.random.RandomState(13)
    blocks = da.from_array(rng.normal(50, 20, size=(60, 3)), chunks=(20, 3))
    y = da.from_array(np.array(["no", "yes"] * 30), chunks=20)
    with pytest.raises(TypeError, match="learns its column plan from a Dask DataFrame"):
        DataParallel(tiny(), client=threads, sync_every=1).fit(blocks, y)


def test_predict_on_a_dask_frame_with_an_object_column_is_the_pandas_predict(threads):
    rng = np.random.RandomState(14)
    n = 60
    frame = random_frame(rng, n)
    y = labels(rng, n)
    X, whole = cut(frame, [20, 20, 20], strings=False, target=y)
    assert str(X.dtypes["mixed"]) == "object"
    model = DataParallel(tiny(), client=threads, sync_every=1).fit(X, whole["target"])
    rows = X.compute()
    predicted = threads.compute(model.predict(X)).result()
    assert_array_equal(predicted.to_numpy(), model.estimator_.predict(rows))


def test_a_target_whose_dtype_differs_between_partitions_is_kept(threads):
    rng = np.random.RandomState(15)
    n = 90
    frame = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(["a", "b"], n)})
    target = rng.randint(-3, 4, n).astype(float)
    target[30:] += 0.5
    pieces = [frame.iloc[a : a + 30].assign(target=target[a : a + 30]) for a in (0, 30, 60)]
    pieces[0]["target"] = pieces[0]["target"].astype("int64")  # whole numbers, as int64
    whole = from_pieces(pieces)
    estimator = tiny(TabularRegressor)
    model = DataParallel(estimator, client=threads, sync_every=1).fit(
        whole.drop(columns="target"), whole["target"]
    )  # the partitions' targets in their common dtype
    local = clone(estimator).fit(frame, target)
    assert_allclose(model.estimator_.target_mean_, local.target_mean_, rtol=1e-12)
    assert_same_model(local, model.estimator_, rtol=1e-10)


def test_known_categories_that_differ_are_refused_as_other_categories(threads, monkeypatch):
    rng = np.random.RandomState(16)
    n = 60
    frame = pd.DataFrame({"x": rng.normal(size=n), "category": pd.Categorical(["a", "b"] * 30)})
    pieces = [frame.iloc[:30].assign(target=labels(rng, 30).to_numpy())]
    pieces.append(frame.iloc[30:].assign(target=labels(rng, 30).to_numpy()))
    pieces[1]["category"] = pieces[1]["category"].cat.add_categories(["zz"])
    whole = from_pieces(pieces)  # X.dtypes: the first file's categories, known
    training_not_started(monkeypatch)
    refused(
        ValueError,
        "categorical with other categories in partition 1",
        DataParallel(tiny(), client=threads).fit,
        whole.drop(columns="target"),
        whole["target"],
    )


def test_categories_that_differ_only_by_type_are_refused(threads, monkeypatch):
    rng = np.random.RandomState(17)
    n = 60
    codes = rng.randint(1, 4, n)
    pieces = []
    for a, as_text in ((0, False), (30, True)):
        values = codes[a : a + 30].astype(str) if as_text else codes[a : a + 30]
        piece = pd.DataFrame({"x": rng.normal(size=30), "level": pd.Categorical(values)})
        pieces.append(piece.assign(target=labels(rng, 30).to_numpy()))
    assert pieces[0]["level"].cat.categories.tolist() == [1, 2, 3]
    assert pieces[1]["level"].cat.categories.tolist() == ["1", "2", "3"]
    whole = from_pieces(pieces, meta=clear_known_categories(pieces[0].iloc[:0]))
    training_not_started(monkeypatch)
    refused(
        ValueError,
        "categorical with other categories in partition 1",
        DataParallel(tiny(), client=threads).fit,
        whole.drop(columns="target"),
        whole["target"],
    )


def test_a_dask_array_of_other_blocks_is_refused_by_name(threads, monkeypatch):
    rng = np.random.RandomState(18)
    n = 120
    frame = random_frame(rng, n)
    y = labels(rng, n)
    whole = dd.from_pandas(frame.assign(target=y), npartitions=4)
    X = whole.drop(columns="target")
    assert whole.divisions == (0, 30, 60, 90, 119)
    other_blocks = ((40, 20, 30, 30),)
    model = DataParallel(tiny(), client=threads)
    training_not_started(monkeypatch)
    weights = da.from_array(np.ones(n), chunks=other_blocks)
    refused(ValueError, "sample_weight", model.fit, X, whole["target"], sample_weight=weights)
    labels_ = da.from_array(y.to_numpy().astype(str), chunks=other_blocks)
    refused(ValueError, r"of y\b|y is a Dask array", model.fit, X, labels_)

"""A Dask DataFrame where its partitions live: the plan learned there, the rows encoded there.

``DataParallel(est).fit(X, y)`` with a Dask DataFrame ``X`` (and ``y`` a Dask
Series, DataFrame or array partitioned like it) never brings the table to
the driver. Before training, one task a partition (:func:`_partition_pass`),
on the workers, checks the partition (its columns and dtypes, its rows, that
``y`` and the weights hold the same rows), draws its early-stopping rows
(:func:`validation_positions`: deterministic from ``random_state`` and the
partition's number) and, for a tabular estimator, summarizes its training
rows (:class:`~sknet.tabular._summaries.TableSummary`). The summaries merge
on the workers, in a tree of fan-in :data:`_FAN_IN`, in partition order;
the driver receives the merged one and makes the column plan of it
(:func:`~sknet.tabular._summaries.encoder_from_summary`), with the targets,
the weights and the validation rows. The estimator's own fit then runs on
the driver on a :class:`~sknet.tabular._table.RemoteTable` (the table's
names and dtypes, its number of rows, the plan; no values), and each shard
of the epochs is encoded once, on its worker, from its partitions
(:func:`encode_shard`, in chunks the worker's memory allows).

:func:`predict_collection` is prediction on the workers: a Dask collection
in, a Dask collection out.

Dask is imported where a fit or a prediction runs.
"""

import secrets
import threading
import warnings

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import check_array

from sknet.distributed._frame_checks import (
    check_partition,
    frame_error,
    is_dask_collection,
    is_dask_frame,
    read_error,
    same_categories,
    shown_categories,
    with_targets,
)
from sknet.estimators._tabular import TabularMixin
from sknet.tabular._columns import categorical_mask
from sknet.tabular._encoder import why_numeric
from sknet.tabular._summaries import RESOLUTION, TableSummary, encoder_from_summary
from sknet.tabular._table import RemoteTable, as_table

#: Summaries merged at once, in the tree on the workers.
_FAN_IN = 8
#: The most rows encoded at once on a worker, and the fewest.
_MAX_CHUNK_ROWS, _MIN_CHUNK_ROWS = 1 << 17, 1 << 10
#: The part of a worker's memory limit one chunk's temporaries may take.
_CHUNK_SHARE = 16
#: Seconds between two looks at the pass's futures (their callbacks wake it sooner).
_POLL_SECONDS = 0.5


class _PassSpec:
    """What every partition's task is told: the frame's columns, the plan's kinds, the split."""

    def __init__(self, X, n_partitions, tabular, is_categorical, why, dtype, split):
        self.columns = list(X.columns)
        self.dtypes = list(X._meta.dtypes)
        self.n_partitions = n_partitions
        self.y_columns = self.w_column = None  # the columns with_targets adds
        self.tabular = tabular
        self.is_categorical = is_categorical  # None: no plan to learn
        self.why = why
        self.dtype = np.dtype(dtype)
        self.split = split  # None, or (fraction, seed, stratify)
        self.resolution = RESOLUTION  # the numeric summaries' (see sknet.tabular._summaries)


class FrameRows:
    """What the driver keeps of a Dask DataFrame fit: where the rows are, none of them.

    ``parts`` are X's partitions (Dask delayed objects, with the targets'
    columns: :func:`~sknet.distributed._frame_checks.with_targets`), of which
    ``columns`` are X's; ``n_rows`` and ``validation`` (each partition's
    early-stopping rows, positions in it) say which rows each trains on, in
    partition order; ``holders`` the worker holding each partition (a
    persisted frame) or None; ``plan`` is set by the driver (the estimator's
    fitted ``encoder_``, or None for a network estimator that takes the
    numbers as they are).
    """

    def __init__(self, parts, columns, n_rows, validation, holders, names, rank_errors):
        self.parts, self.columns = parts, columns
        self.n_rows, self.validation = n_rows, validation
        self.holders, self.names, self.rank_errors = holders, names, rank_errors
        self.train_rows = np.array(
            [n - (0 if v is None else len(v)) for n, v in zip(n_rows, validation)], np.int64
        )
        self.plan = None


# -- before training: the pass over the partitions ------------------------------------
def frame_inputs(estimator, X, y, sample_weight, fit_params, client, method):
    """The driver's inputs for a fit on Dask DataFrame ``X``: ``(X, y, sample_weight,
    fit_params, FrameRows)``, ``X`` a stand-in of no memory (a RemoteTable for a tabular
    estimator, with the plan learned on the workers when the fit learns one)."""
    import dask

    estimator._validate_params()
    tabular = isinstance(estimator, TabularMixin)
    frame, y_columns, w_column = with_targets(X, y, sample_weight)
    parts = frame.to_delayed()  # the partitions dask reads, once for every pass of the fit
    meta = as_table(X._meta)
    fitted = estimator.__sklearn_is_fitted__()
    learns_plan = tabular and (not fitted or (method == "fit" and not estimator.warm_start))
    if tabular:
        is_categorical = categorical_mask(meta, estimator.categorical_features)
        why = why_numeric(estimator._make_encoder())
    else:
        _check_numeric(X)
        is_categorical, why = None, ""
    split = None
    if method == "fit" and estimator.early_stopping and fit_params.get("X_val") is None:
        stratify = is_classifier(estimator)
        split = (estimator.validation_fraction, _seed(estimator.random_state), stratify)
    learned = is_categorical if learns_plan else None
    spec = _PassSpec(X, len(parts), tabular, learned, why, estimator.dtype, split)
    spec.y_columns, spec.w_column = y_columns, w_column
    passes = [
        dask.delayed(_partition_pass, pure=False, nout=2)(spec, i, part)
        for i, part in enumerate(parts)
    ]
    summaries = [summary for summary, _ in passes]
    while learns_plan and len(summaries) > 1:
        summaries = [
            dask.delayed(_merge, pure=False)(*summaries[i : i + _FAN_IN])
            for i in range(0, len(summaries), _FAN_IN)
        ]
    kept = client.compute([r for _, r in passes])
    merged = client.compute(summaries[0]) if learns_plan else None
    _wait_for_pass(client, kept, merged, spec)
    results = client.gather(kept)
    summary = client.gather(merged) if learns_plan else None
    same_categories(results)
    inputs = _driver_inputs(estimator, X, meta, results, summary, fit_params, split)
    n_rows, validation, names, rank_errors = inputs.pop()
    rows = FrameRows(
        parts, spec.columns, n_rows, validation, _holders(client, frame), names, rank_errors
    )
    return (*inputs, rows)


def _wait_for_pass(client, kept, merged, spec):
    """Wait for the pass over the partitions; at the first failure, stop it and raise the
    error, naming its partition."""
    everything = kept + ([] if merged is None else [merged])
    done = threading.Event()
    for future in everything:  # the futures' own callbacks wake this thread: no polling
        future.add_done_callback(lambda _future: done.set())
    while True:
        failed = [future for future in everything if future.status in ("error", "cancelled")]
        if failed:
            erred = [i for i, one in enumerate(kept) if one.status == "error"]
            if erred:
                one = kept[erred[0]]
                error = read_error(one.exception(), erred[0], spec.columns, spec.n_partitions)
            elif failed[0].status == "error":
                error = failed[0].exception()
            else:
                error = RuntimeError("The pass over X's partitions was cancelled")
            client.cancel(everything)  # the other partitions' tasks: no need to finish them
            raise error
        if all(future.status == "finished" for future in everything):
            return
        done.wait(_POLL_SECONDS)
        done.clear()


def _driver_inputs(estimator, X, meta, results, summary, fit_params, split):
    n_rows = [r["n_rows"] for r in results]
    validation = [r["validation"] for r in results]
    y_train, y_val = _take_rows(results, "y")
    w_train, w_val = _take_rows(results, "w")
    fit_params = dict(fit_params)
    if split is not None:
        n_val = sum(len(v) for v in validation)
        if n_val < 2:
            raise ValueError(
                f"The validation set is too small: validation_fraction="
                f"{estimator.validation_fraction} of X's {sum(n_rows)} rows drew {n_val} row(s) "
                "(each partition draws its own). Increase 'validation_fraction' or the size "
                "of your dataset."
            )
        fit_params["X_val"], fit_params["y_val"] = _validation_rows(results), y_val
        if w_train is not None:
            fit_params["sample_weight_val"] = w_val
    n_train = sum(n - (0 if v is None else len(v)) for n, v in zip(n_rows, validation))
    if n_train < 1:
        raise ValueError(
            "No rows are left to train on after the early-stopping split; give more rows, "
            "or set early_stopping=False."
        )
    names = [str(c) for c in X.columns] if all(isinstance(c, str) for c in X.columns) else None
    rank_errors = None
    if isinstance(estimator, TabularMixin):
        plan = None
        if summary is not None:
            plan = encoder_from_summary(
                estimator._make_encoder(), RemoteTable(meta.native, 0), summary
            )
            rank_errors = summary.rank_errors()
        stand_in = RemoteTable(meta.native, n_train, plan)
    else:
        dtype = np.dtype(estimator.dtype)
        stand_in = RemoteTable(meta.native, n_train).stand_in(len(X.columns), dtype)
    return [stand_in, y_train, w_train, fit_params, (n_rows, validation, names, rank_errors)]


def _partition_pass(spec, index, part):
    """On a worker: partition ``index`` checked, its validation rows drawn, its training
    rows summarized. Returns ``(summary or None, what the driver keeps of it)``."""
    try:
        part, y, w = check_partition(spec, index, part)
        labels = None
        if spec.split is not None and spec.split[2] and np.ndim(y) == 1:
            labels = np.asarray(y)
        validation = None
        if spec.split is not None:
            validation = validation_positions(
                len(part), spec.split[0], spec.split[1], index, labels
            )
        train = _train_positions(len(part), validation)
        if not spec.tabular:  # numbers as they are: checked finite here, before training
            _numbers(part, spec.dtype)
        summary = None
        if spec.is_categorical is not None:
            rows = part if train is None else part.iloc[train]
            summary = TableSummary.of(
                rows,
                spec.is_categorical,
                None if w is None else (w if train is None else w[train]),
                why=spec.why,
                resolution=spec.resolution,
            )
    except Exception as exc:
        named = frame_error(exc, index, spec.n_partitions)
        if named is exc:
            raise
        raise named from exc
    kept = {
        "n_rows": len(part),
        "validation": validation,
        "y": y,
        "w": w,
        "categories": _category_tokens(part),
        "X_val": None,
    }
    if validation is not None and len(validation):
        rows = part.iloc[validation]
        kept["X_val"] = rows if spec.tabular else _numbers(rows, spec.dtype)
    return summary, kept


def _merge(*summaries):
    return TableSummary.merge_all(summaries)


def validation_positions(n_rows, fraction, seed, index, labels=None):
    """The early-stopping rows of partition ``index``: sorted positions in it.

    Drawn from ``seed`` (the estimator's ``random_state``) and the
    partition's number alone, so the same whatever worker runs it. Each
    class of ``labels`` (or all the rows, without labels) gives
    ``floor(fraction * n + u)`` of its ``n`` rows, ``u`` uniform in [0, 1):
    ``fraction`` of the rows in expectation, stratified, every partition
    drawing its own.
    """
    rng = np.random.default_rng([seed, index])
    if labels is None:
        groups = [np.arange(n_rows)]
    else:
        _, inverse = np.unique(labels, return_inverse=True)
        inverse = inverse.ravel()
        groups = [np.flatnonzero(inverse == c) for c in range(inverse.max() + 1)]
    chosen = [
        rng.choice(rows, int(np.floor(fraction * rows.size + rng.random())), replace=False)
        for rows in groups
    ]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def _train_positions(n_rows, validation):
    if validation is None or len(validation) == 0:
        return None
    keep = np.ones(n_rows, dtype=bool)
    keep[validation] = False
    return np.flatnonzero(keep)


def _seed(random_state):
    """One integer seed for the partitions' draws, from the estimator's random_state."""
    if random_state is None:
        return secrets.randbits(63)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    return int(random_state)


def _check_numeric(X):
    """A network estimator's frame: every column numbers (or booleans)."""
    refused = [(c, d) for c, d in X.dtypes.items() if getattr(d, "kind", "O") not in "biuf"]
    if refused:
        column, dtype = refused[0]
        raise ValueError(
            f"Column {column!r} of X has dtype {dtype}: this estimator takes numbers. A "
            "table with categories (or strings) is TabularClassifier's or "
            "TabularRegressor's, which learn a plan for them on the cluster."
        )


def _numbers(frame, dtype):
    return check_array(
        frame.to_numpy(), dtype=[dtype.type, np.float64, np.float32], input_name="X"
    )


def _category_tokens(part):
    """Each categorical column's categories, as a short token (compared across partitions)."""
    import pandas as pd

    tokens = {}
    for column, dtype in part.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            categories = dtype.categories
            # (hash_array hashes a number by its text: the kind tells 1 from '1')
            hashed = pd.util.hash_array(np.asarray(categories, dtype=object)).sum()
            kind = categories.dtype.kind
            shown = shown_categories(categories)
            tokens[column] = (len(categories), bool(dtype.ordered), (hashed, kind), shown)
    return tokens


def _take_rows(results, key):
    """A per-partition array's training rows and validation rows, all partitions in order.

    Each partition's array is let go once copied: the driver holds one copy of the rows.
    """
    if results[0][key] is None:
        return None, None
    first = np.asarray(results[0][key])
    n_val = sum(0 if r["validation"] is None else len(r["validation"]) for r in results)
    shape = first.shape[1:]
    try:  # the partitions' common dtype (integers in one, floats in another: floats)
        dtype = np.result_type(*(np.asarray(r[key]).dtype for r in results))
    except TypeError:  # (numbers in one, text in another: as objects, judged by the fit)
        dtype = np.dtype(object)
    train = np.empty((sum(r["n_rows"] for r in results) - n_val, *shape), dtype)
    val = np.empty((n_val, *shape), dtype)
    a = b = 0
    for r in results:
        values, validation = np.asarray(r.pop(key)), r["validation"]
        keep = _train_positions(r["n_rows"], validation)
        m = values.shape[0] if keep is None else keep.size
        train[a : a + m] = values if keep is None else values[keep]
        if validation is not None and len(validation):
            val[b : b + len(validation)] = values[validation]
            b += len(validation)
        a += m
    return train, val


def _validation_rows(results):
    frames = [r["X_val"] for r in results if r["X_val"] is not None]
    if isinstance(frames[0], np.ndarray):
        return np.concatenate(frames)
    import pandas as pd

    return pd.concat(frames)


def _holders(client, frame):
    """The worker holding each partition of a persisted frame (its graph's futures), or None."""
    import distributed

    futures = [f for f in distributed.futures_of(frame) if isinstance(f.key, tuple)]
    names = {f.key[0] for f in futures}
    if len(names) != 1 or len(futures) != frame.npartitions:
        return [None] * frame.npartitions
    who_has = client.who_has(futures)
    by_index = {f.key[1]: (who_has.get(f.key) or (None,))[0] for f in futures}
    return [by_index.get(i) for i in range(frame.npartitions)]


# -- the shards: groups of partitions, encoded where they are ---------------------------
def frame_shards(frame, workers, k):
    """``(partitions, start, stop, worker)`` of each shard: contiguous groups of the
    partitions with training rows, cut where the rows are closest to even, each on the
    worker holding most of its rows (in order, for a frame not persisted)."""
    counts = frame.train_rows
    edges = np.concatenate([[0], np.cumsum(counts)])
    n = int(edges[-1])
    with_rows = np.flatnonzero(counts > 0)
    k = max(1, min(k, with_rows.size))
    cuts = sorted({int(np.argmin(np.abs(edges - i * n / k))) for i in range(k + 1)})
    free, groups = list(workers), []
    for a, b in zip(cuts, cuts[1:]):
        parts = [i for i in range(a, b) if counts[i] > 0]
        if not parts:
            continue
        held = {}
        for i in parts:
            if frame.holders[i] is not None:
                held[frame.holders[i]] = held.get(frame.holders[i], 0) + int(counts[i])
        worker = max(free, key=lambda w: (held.get(w, 0), -free.index(w)))
        free.remove(worker)
        groups.append((parts, int(edges[a]), int(edges[b]), worker))
    return groups


def submit_shard(client, frame, parts, Y, w, dtype, worker):
    """The future of a shard's ``(X, Y, w)``, encoded on ``worker`` from its partitions."""
    import dask

    held = client.scatter(
        [Y, w, [frame.validation[i] for i in parts]], workers=[worker], hash=False
    )
    rows = [frame.n_rows[i] for i in parts]
    graph = dask.delayed(encode_shard, pure=False)(
        frame.plan, dtype, frame.columns, rows, parts, *held, *[frame.parts[i] for i in parts]
    )
    return client.compute(graph, workers=[worker], allow_other_workers=False)


def encode_shard(plan, dtype, columns, n_rows, indices, Y, w, validation, *parts):
    """On a worker: a shard's training rows encoded by ``plan`` into one matrix, once.

    Each partition's training rows are encoded in chunks of at most
    :func:`chunk_rows` rows (what the worker's memory limit allows), in the
    fit's dtype, straight into the shard's matrix. ``plan`` None: a network
    estimator's numbers, checked as it checks them.
    """
    import distributed

    parts = [part[columns] for part in parts]  # without the targets' columns
    width = plan.output_groups_["categorical"].stop if plan is not None else len(columns)
    worker = distributed.get_worker()
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    chunk = chunk_rows(len(columns), width, np.dtype(dtype).itemsize, limit)
    n = sum(r - (0 if v is None else len(v)) for r, v in zip(n_rows, validation))
    X = np.empty((n, width), dtype=dtype)
    offset = 0
    for index, part, rows, val in zip(indices, parts, n_rows, validation):
        if len(part) != rows:
            raise ValueError(
                f"Partition {index} of X has {len(part)} rows now, {rows} when its plan was "
                "learned: the files changed during the fit"
            )
        keep = _train_positions(rows, val)
        m = rows if keep is None else keep.size
        encode_rows(plan, part, keep, X[offset : offset + m], chunk)
        offset += m
    return X, Y, w


def chunk_rows(n_columns, width, itemsize, memory_limit):
    """Rows encoded at once: a chunk's temporaries within a share of the worker's memory.

    A row read takes about 32 bytes a column (float64 numbers, objects for
    categories, their codes) and the encoded row twice its ``width`` items;
    one chunk may take ``1 / 16`` of ``memory_limit`` (None or 0: no limit),
    within ``[1024, 131072]`` rows.
    """
    if not memory_limit:
        return _MAX_CHUNK_ROWS
    per_row = 32 * max(n_columns, 1) + 2 * itemsize * max(width, 1)
    rows = int(memory_limit) // _CHUNK_SHARE // per_row
    return int(min(max(rows, _MIN_CHUNK_ROWS), _MAX_CHUNK_ROWS))


def encode_rows(plan, part, positions, out, chunk):
    """Rows ``positions`` of ``part`` (all with None) encoded into ``out``, ``chunk`` at a time."""
    n = out.shape[0]
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        rows = part.iloc[a:b] if positions is None else part.iloc[positions[a:b]]
        if plan is None:
            out[a:b] = _numbers(rows, out.dtype)
        else:
            out[a:b] = plan.transform(rows)


# -- prediction on the workers ---------------------------------------------------------
def predict_collection(estimator, method, X):
    """``estimator.<method>`` of a Dask DataFrame or array, computed on the workers.

    A frame gives a Dask Series (one output) or DataFrame (one column a class
    or output) with X's index and divisions; an array a Dask array of X's
    row chunks. The model travels once per task graph (a delayed object).
    """
    import dask

    model = dask.delayed(estimator, pure=True)
    if is_dask_frame(X):
        meta = _output_meta(estimator, method, X)
        return X.map_partitions(_predict_partition, model, method, meta, meta=meta)
    if X.ndim != 2:
        raise ValueError(f"A Dask array X must be 2-D, got {X.ndim} dimension(s)")
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    with warnings.catch_warnings():  # one made-up row, for the outputs' shape and dtype
        warnings.simplefilter("ignore")
        sample = getattr(estimator, method)(np.zeros((1, X.shape[1]), dtype=X.dtype))
    if sample.ndim == 1:
        return X.map_blocks(
            _predict_block, model, method, drop_axis=1, dtype=sample.dtype, meta=sample[:0]
        )
    return X.map_blocks(
        _predict_block,
        model,
        method,
        chunks=(X.chunks[0], (sample.shape[1],)),
        dtype=sample.dtype,
        meta=sample[:0],
    )


def score_collection(estimator, X, y, sample_weight, client):
    """``estimator.score`` of Dask ``X``: predicted on the workers, scored here (one value
    a row of the predictions and of ``y`` come to this process)."""
    from sklearn.metrics import accuracy_score, r2_score

    predicted = predict_collection(estimator, "predict", X)
    pieces = [a for a in (predicted, y, sample_weight) if is_dask_collection(a)]
    computed = iter(client.gather(client.compute(pieces)))
    y_pred, y, sample_weight = (
        next(computed) if is_dask_collection(a) else a for a in (predicted, y, sample_weight)
    )
    score = accuracy_score if is_classifier(estimator) else r2_score
    return float(score(np.asarray(y), np.asarray(y_pred), sample_weight=sample_weight))


def _predict_block(block, estimator, method):
    return getattr(estimator, method)(block)


def _output_meta(estimator, method, X):
    """The empty pandas object a partition's outputs are (from dask's made-up rows)."""
    import pandas as pd

    rows = X._meta_nonempty.copy()
    for j in np.flatnonzero(np.asarray([getattr(d, "kind", "") == "O" for d in rows.dtypes])):
        # dask makes up a bare object() there, which a plan refuses as a category: missing
        rows.isetitem(int(j), pd.Series([None] * len(rows), index=rows.index, dtype=object))
    with warnings.catch_warnings():  # made-up values: what they give does not matter
        warnings.simplefilter("ignore")
        outputs = _outputs(estimator, method, rows)
    return outputs.iloc[:0]


def _outputs(estimator, method, part):
    import pandas as pd

    values = getattr(estimator, method)(part)
    if values.ndim == 1:
        return pd.Series(values, index=part.index, name=method)
    classes = getattr(estimator, "classes_", None)
    columns = range(values.shape[1])
    if method != "predict" and classes is not None and np.ndim(classes) == 1:
        if len(classes) == values.shape[1]:
            columns = list(classes)
    return pd.DataFrame(values, index=part.index, columns=columns)


def _predict_partition(part, estimator, method, meta):
    if len(part) == 0:  # an empty partition (a filter's): empty outputs, as dask expects
        return meta.set_axis(part.index) if hasattr(meta, "set_axis") else meta
    return _outputs(estimator, method, part)

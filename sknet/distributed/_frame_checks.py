"""What a Dask DataFrame fit refuses, before training starts, by partition and column.

On the driver, from the frames' metadata alone (:func:`with_targets`):
``y`` and the sample weights must be Dask collections that hold X's rows
partition by partition: columns of X's own frame, or frames with the same
known divisions (with unknown divisions nothing says which row of one is
which of the other's, short of a shuffle of the whole table). Then ``y`` and
the weights travel as columns of X's partitions, each row's with it. On the
workers, each partition (:func:`check_partition`): the columns X's dtypes
name, in order, none missing (a file without one); the dtypes X's metadata
says (a file whose column is another type); some rows; ``y`` and the
weights with X's rows (the same index). Across the partitions, on the
driver (:func:`same_categories`): a categorical column has the same
categories in every partition. Every error names the partition (its number,
of the partitions dask reads) or the column, and says what to do.
"""

import re

import numpy as np

#: dask's name for the categories of a categorical column it has not read yet
_UNKNOWN = "__UNKNOWN_CATEGORIES__"
#: The columns a fit adds to X's partitions: the targets, their rows, the weights, theirs.
Y_COLUMN, ROWS_COLUMN, W_COLUMN, W_ROWS_COLUMN = (
    "__sknet_y",
    "__sknet_rows_y",
    "__sknet_w",
    "__sknet_rows_w",
)
_PREFIX = "__sknet_"


def is_dask_frame(X):
    """Whether ``X`` is a Dask DataFrame or Series (without importing dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "divisions")


def is_dask_collection(X):
    """Whether ``X`` is a Dask DataFrame, Series or array."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "__dask_graph__")


def _partitions_hint(X, a, name):
    if X.known_divisions and a.known_divisions:
        return f"align it: {name} = {name}.repartition(divisions=X.divisions)"
    return (
        f"the divisions of {'X' if not X.known_divisions else name} are unknown "
        "(known_divisions is False), so nothing says which rows of one are which of the "
        f"other's, short of a shuffle of the whole table: take X and {name} from one frame "
        "(y = ddf['target'], X = ddf.drop(columns='target')), or give both known divisions "
        "(ddf.set_index(column, sorted=True), or dd.read_parquet(..., "
        "calculate_divisions=True))"
    )


def _co_aligned(X, a):
    """Whether dask computes ``a``'s partitions from X's own parents (one frame's columns)."""
    try:
        from dask.dataframe.dask_expr._expr import are_co_aligned
    except ImportError:  # pragma: no cover - another dask: only known divisions align
        return False
    return bool(are_co_aligned(X.expr, a.expr))


def _check_aligned(X, a, name):
    """Refuse, from the metadata, a ``y`` or weights not partitioned as ``X`` is."""
    if is_dask_frame(a):
        if _co_aligned(X, a):
            return
        if a.npartitions != X.npartitions:
            raise ValueError(
                f"{name} has {a.npartitions} partition(s) and X {X.npartitions}: each "
                f"partition of {name} must hold the rows of X's; " + _partitions_hint(X, a, name)
            )
        if not (X.known_divisions and a.known_divisions):
            raise ValueError(
                f"{name} is not a column of X's frame, and " + _partitions_hint(X, a, name)
            )
        if a.divisions != X.divisions:
            raise ValueError(
                f"{name}'s divisions differ from X's ({a.divisions[:3]}... and "
                f"{X.divisions[:3]}...): each partition of {name} must hold the rows of "
                f"X's; align it: {name} = {name}.repartition(divisions=X.divisions)"
            )
    elif is_dask_collection(a) and hasattr(a, "numblocks"):  # a Dask array
        if a.numblocks[0] != X.npartitions or (a.ndim == 2 and a.numblocks[1] != 1):
            raise ValueError(
                f"{name} is a Dask array of {a.numblocks[0]} row block(s) and X has "
                f"{X.npartitions} partition(s): one block a partition is needed "
                f"({name} = ddf['target'] keeps them, or {name}.rechunk)"
            )
    else:
        raise TypeError(
            f"With a Dask DataFrame X, {name} must be a Dask Series, DataFrame or array "
            f"partitioned like X, got a {type(a).__name__}: e.g. y = ddf['target'] and "
            "X = ddf.drop(columns='target'), which keep each row's target with it"
        )


def _columns_of(a, prefix):
    """``a``'s columns, each a 1-D Dask collection, named ``prefix`` (and a number)."""
    if a.ndim == 1:
        return {prefix: a}
    if is_dask_frame(a):
        return {f"{prefix}{i}": a[c] for i, c in enumerate(a.columns)}
    return {f"{prefix}{i}": a[:, i] for i in range(a.shape[1])}


def with_targets(X, y, sample_weight):
    """X's partitions with ``y`` and the weights as columns of theirs, each row's with it.

    Checks first (:func:`_check_aligned`) that dask need not move a row to put
    them there. Returns ``(frame, y's columns, the weights' column or None)``;
    each of ``y`` and the weights (a Dask frame) also brings a column of its
    partition's number of rows, missing where X has a row it has not (see
    :func:`check_partition`).
    """
    if not is_dask_frame(X) or X.ndim != 2:
        raise TypeError(f"X must be a Dask DataFrame here, got a {type(X).__name__}")
    if len(X.columns) == 0:
        raise ValueError("X has no columns: a table needs at least one")
    if y is None:
        raise ValueError("DataParallel.fit requires y, a Dask Series partitioned like X")
    taken = [c for c in X.columns if str(c).startswith(_PREFIX)]
    if taken:
        raise ValueError(f"X has columns named {taken}: names starting {_PREFIX} are sknet's")
    extra = {}
    for name, a, prefix, rows in (
        ("y", y, Y_COLUMN, ROWS_COLUMN),
        ("sample_weight", sample_weight, W_COLUMN, W_ROWS_COLUMN),
    ):
        if a is None:
            continue
        _check_aligned(X, a, name)
        columns = _columns_of(a, prefix)
        extra.update(columns)
        if is_dask_frame(a):
            first = next(iter(columns.values()))
            extra[rows] = first.map_partitions(_rows_marker, meta=(rows, "i8"))
    y_columns = [c for c in extra if c.startswith(Y_COLUMN)]
    return X.assign(**extra), y_columns, (W_COLUMN if sample_weight is not None else None)


def _rows_marker(series):
    import pandas as pd

    return pd.Series(len(series), index=series.index, dtype="int64")


def check_partition(spec, index, part):
    """On a worker: partition ``index`` as X's metadata says, ``y`` and the weights its rows.

    ``part`` is X's partition with the columns :func:`with_targets` added.
    Returns X's columns of it, ``y`` (a NumPy array) and the weights
    (float64, or None).
    """
    where = f"partition {index} (of {spec.n_partitions})"
    columns = [c for c in part.columns if not str(c).startswith(_PREFIX)]
    if columns != spec.columns:
        missing = [c for c in spec.columns if c not in columns]
        if missing:
            raise missing_columns(missing, where)
        raise ValueError(
            f"{where} of X has the columns {columns}, not X's {spec.columns} in this order"
        )
    if len(part) == 0:
        raise ValueError(
            f"{where} of X has no rows: every partition must hold some. Leave the empty "
            "ones out of the frame before taking X and y from it (ddf = ddf.partitions[[i "
            f"for i in range(ddf.npartitions) if i != {index}]]), or repartition it."
        )
    for column, expected, dtype in zip(columns, spec.dtypes, part.dtypes):
        if not _same_dtype(expected, dtype):
            if all(getattr(d, "name", None) == "category" for d in (expected, dtype)):
                raise other_categories(
                    column,
                    where,
                    len(dtype.categories),
                    shown_categories(dtype.categories),
                    "X.dtypes",
                    len(expected.categories),
                    shown_categories(expected.categories),
                )
            raise ValueError(
                f"Column {column!r} has dtype {dtype} in {where} of X, but X.dtypes says "
                f"{expected}: the partitions (files) disagree. Cast it to one dtype for all, "
                f"e.g. X = X.astype({{{column!r}: {str(dtype)!r}}})."
            )
    for name, rows in (("y", ROWS_COLUMN), ("sample_weight", W_ROWS_COLUMN)):
        if rows in part.columns:
            counts = part[rows].to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isnan(counts).any() or (counts != len(part)).any():
                raise ValueError(
                    f"{where} of {name} holds other rows than X's (their index or their "
                    f"number differs): {name}'s partitions do not hold X's rows. Take both "
                    "from one frame (y = ddf['target'], X = ddf.drop(columns='target'))."
                )
    y = part[spec.y_columns[0]] if spec.y_columns == [Y_COLUMN] else part[spec.y_columns]
    w = None
    if spec.w_column is not None:
        w = part[spec.w_column].to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError(
                f"sample_weight has a value that is negative, NaN or infinite in {where}"
            )
    return part[spec.columns], y.to_numpy(), w


def _same_dtype(expected, dtype):
    categorical = [getattr(d, "name", None) == "category" for d in (expected, dtype)]
    if all(categorical):
        # categories compared with the other partitions' (same_categories) when dask has
        # not read them; with X's own when it has
        return list(expected.categories) == [_UNKNOWN] or expected == dtype
    return expected == dtype


def same_categories(results):
    """Refuse a categorical column whose categories differ between partitions."""
    first = results[0]["categories"]
    for index, result in enumerate(results[1:], start=1):
        for column, token in result["categories"].items():
            if first.get(column, token)[:3] != token[:3]:  # count, order, hash of the set
                count, _, _, shown = first[column]
                raise other_categories(
                    column, f"partition {index}", token[0], token[3], "partition 0", count, shown
                )


def shown_categories(categories):
    """A column's categories as an error shows them: the first four."""
    categories = list(categories)
    return ", ".join(map(repr, categories[:4])) + (", ..." if len(categories) > 4 else "")


def other_categories(column, where, count, shown, reference, reference_count, reference_shown):
    """The error of a categorical column whose categories differ between partitions."""
    return ValueError(
        f"Column {column!r} is categorical with other categories in {where} ({count} "
        f"categories: {shown}) than in {reference} ({reference_count}: {reference_shown}): "
        "the partitions (files) disagree on its categories. Give it one set "
        f"(X = X.categorize(columns=[{column!r}])) or make it strings "
        f"(X[{column!r}] = X[{column!r}].astype(str))."
    )


def missing_columns(names, where):
    return ValueError(
        f"Column(s) {names} of X are missing from {where}: the files disagree on their "
        "columns (X.columns are those of the first). Write the missing columns into every "
        "file, or read only the ones every file has (dd.read_parquet(path, columns=[...]))."
    )


def frame_error(exc, index, n_partitions):
    """``exc``, saying which partition it came from (unless it says so already)."""
    where = f"partition {index} (of {n_partitions})"
    if where in str(exc):
        return exc
    message = f"In {where} of X: {exc}"
    try:
        return type(exc)(message)
    except Exception:  # noqa: BLE001 (an exception type with another signature)
        return ValueError(message)


#: pandas' error putting an array of another length in a frame (a Dask array's block in X)
_LENGTHS = r"Length of values \((\d+)\) does not match length of index \((\d+)\)"


def read_error(exc, index, columns, n_partitions):
    """The error of partition ``index``'s task: named, and a missing column said so."""
    if isinstance(exc, KeyError):
        names = [c for c in columns if re.search(rf"['\"]{re.escape(str(c))}['\"]", str(exc))]
        if names:
            return missing_columns(names, f"partition {index} (of {n_partitions})")
    lengths = re.search(_LENGTHS, str(exc))
    if isinstance(exc, ValueError) and lengths:  # pandas', putting an array's block in X
        return ValueError(
            f"In partition {index} (of {n_partitions}): a block of y or of sample_weight (a "
            f"Dask array) holds {lengths[1]} rows where X's partition holds {lengths[2]}: "
            "each block must hold its partition's rows. Take them from X's frame (y = "
            "ddf['target']), or rechunk the array to X's partition lengths "
            "(y.rechunk((tuple(X.map_partitions(len).compute()),)))."
        )
    return frame_error(exc, index, n_partitions)

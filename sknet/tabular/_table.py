"""The one adapter of tables: any dataframe or array, read as NumPy columns.

:func:`as_table` turns what a user passes as a table into a :class:`Table`:
a pandas, polars or pyarrow table (any dataframe `narwhals
<https://narwhals-dev.github.io/narwhals/>`_ knows, as scikit-learn 1.9
takes them) keeps its column names and dtypes; a NumPy array, or a list of
rows, becomes a 2-D array (a list mixing numbers and strings becomes an
array of objects, so that a column of numbers stays numbers). Everything
that reads a table's columns (the column kinds, the plan, the encoding, the
checks of the column names at predict) goes through it. pandas is read by
pandas itself (faster for a row or two); the other kinds through narwhals.
"""

import warnings

import numpy as np
import scipy.sparse as sp

#: A table of at most this many rows (a predict of a row or a few) is read and coded
#: value by value: a pandas frame converted whole to read its columns, its category
#: codes looked up a value at a time (:func:`~sknet.tabular._categorical.encode_few_categories`).
FEW_ROWS = 64
#: narwhals dtypes (by class name) read as categorical columns under 'from_dtype'
_CATEGORICAL_DTYPES = ("Categorical", "Enum", "String", "Object", "Boolean")


def _narwhals():
    import narwhals.stable.v2 as nw  # scikit-learn 1.9 needs it too; imported when a table comes

    return nw


def is_pandas(X):
    """Whether ``X`` is a pandas DataFrame (without importing pandas)."""
    return type(X).__module__.startswith("pandas") and hasattr(X, "iloc")


def _is_dataframe(X):
    if is_pandas(X):
        return True
    if isinstance(X, (np.ndarray, list, tuple)) or sp.issparse(X):
        return False
    try:
        return _narwhals().dependencies.is_into_dataframe(X)
    except ImportError:  # pragma: no cover - narwhals is a dependency
        return False


def _is_lazy_frame(X):
    """Whether ``X`` is a lazy frame narwhals knows (polars' LazyFrame, Dask's DataFrame)."""
    if is_pandas(X) or isinstance(X, (np.ndarray, list, tuple)) or sp.issparse(X):
        return False
    try:
        return _narwhals().dependencies.is_into_lazyframe(X)
    except ImportError:  # pragma: no cover - narwhals is a dependency
        return False


class Table:
    """A table's columns as NumPy arrays, whatever holds them.

    Made by :func:`as_table`. ``names`` are the column names when every
    column has a string name (as scikit-learn records ``feature_names_in_``),
    else ``None``.
    """

    def __init__(self, native, *, frame=None, array=None):
        self.native = native
        self._frame = frame  # a narwhals DataFrame (not pandas)
        self._array = array
        if is_pandas(native):
            labels = native.columns.tolist()
        elif frame is not None:
            labels = list(frame.columns)
        else:
            labels = None
        self._labels = labels
        self._dtypes = self._whole = None  # a pandas frame's, read once when needed
        self.shape = native.shape if array is None else array.shape
        if labels and all(type(c) is str for c in labels):
            self.names = list(labels)
        elif labels and all(isinstance(c, str) for c in labels):  # str subclasses: np.str_
            self.names = [str(c) for c in labels]
        else:
            self.names = None

    @property
    def is_frame(self):
        """Whether the table came as a dataframe (its columns have dtypes of their own)."""
        return self._array is None

    def label(self, j):
        """How error messages name column ``j``: its name, or its index."""
        if self._labels is not None:
            return repr(self._labels[j]) if isinstance(self._labels[j], str) else str(j)
        return str(j)

    def take(self, rows):
        """The table of rows ``rows`` (a slice or integer indices), of the same kind."""
        if isinstance(rows, slice) and rows == slice(None):
            return self
        if self._array is not None:
            return Table(self._array[rows], array=self._array[rows])
        if is_pandas(self.native):
            return Table(self.native.iloc[rows])
        index = np.arange(self.shape[0])[rows]
        return _from_frame(self._frame[index])

    # -- dtypes ---------------------------------------------------------------------
    def dtype_kinds(self):
        """``'categorical'``, ``'numeric'`` or the refused dtype, for each column of a frame."""
        if is_pandas(self.native):
            return _pandas_kinds(self.native)
        kinds = []
        for dtype in self._frame.schema.values():
            if type(dtype).__name__ in _CATEGORICAL_DTYPES:
                kinds.append("categorical")
            elif dtype.is_numeric():
                kinds.append("numeric")
            else:
                kinds.append(str(dtype))
        return kinds

    # -- values -----------------------------------------------------------------------
    def values(self, j):
        """Column ``j`` as a 1-D array: numbers as they are, anything else as objects.

        A dataframe's missing values (``None``, ``NaN``, ``NA``, null) are found
        by :func:`missing_mask`; a null of polars or
        pyarrow comes as ``None``.
        """
        if self._array is not None:
            return self._array[:, j]
        if is_pandas(self.native):
            column = self.native.iloc[:, j]
            nullable_ints = column.dtype.kind in "iu" and not isinstance(column.dtype, np.dtype)
            if nullable_ints and column.hasnans and _beyond_floats(column):
                return column.to_numpy(dtype=object)  # (not as floats: IDs stay distinct)
            if column.dtype.kind in "biuf":
                return column.to_numpy()
            return column.to_numpy(dtype=object)
        series = self._frame.get_column(self._labels[j])
        if series.dtype.is_numeric() and not series.null_count():
            return series.to_numpy()
        if series.dtype.is_integer() and _beyond_floats(series):
            values = np.empty(len(series), dtype=object)
            values[:] = series.to_list()  # exact integers, None for null
            return values
        values = np.asarray(series.to_numpy(), dtype=object)
        values[np.asarray(series.is_null().to_numpy(), dtype=bool)] = None  # pyarrow reads
        return values  # a null category as another category

    def values_of(self, columns):
        """:meth:`values` of each of ``columns`` (a list of 1-D arrays).

        A pandas frame's columns of objects, strings and categories are read in
        one conversion (a row or two of a wide frame is read in microseconds,
        not a column at a time).
        """
        block = self._pandas_block(columns, "Oc")
        if block is None:
            return [self.values(j) for j in columns]
        return [block[:, i] for i in range(len(columns))]

    def block_of(self, columns):
        """Columns ``columns`` as one 2-D array of objects, where the table reads them in
        one conversion (a few rows of a pandas frame, two columns or more); else None."""
        if self.shape[0] > FEW_ROWS:
            return None
        return self._pandas_block(columns, "Oc")

    def _pandas_block(self, columns, kinds):
        """Columns ``columns`` of a pandas frame in one array: ``kinds`` ``'iuf'``, numbers
        as float64; ``'Oc'``, objects (strings and categories). None where they are
        read one by one: a larger frame's columns of other dtypes (nullable and extension
        ones, numbers among the objects), a few rows' that are not all numbers.

        A frame of a few rows is converted whole to objects, once (a few
        microseconds, where pandas takes tens to select columns and as many to
        list its dtypes), and its dtypes are not read: those objects are the
        values one column's conversion gives, and where they are not all
        numbers (``NA``, ``None``, text) the numbers are read one by one, as
        any column of another dtype is. A larger frame is read by its selected
        columns.
        """
        if not is_pandas(self.native) or len(columns) < 2:
            return None
        if self.shape[0] <= FEW_ROWS:
            if self._whole is None:
                self._whole = self.native.to_numpy(dtype=object)
            block = self._whole[:, list(columns)]
            if kinds != "iuf":
                return block
            try:
                return block.astype(np.float64)
            except (TypeError, ValueError, OverflowError):  # one by one: the same values,
                return None  # or the error naming the column
        if self._dtypes is None:
            self._dtypes = list(self.native.dtypes)
        dtypes = [self._dtypes[j] for j in columns]
        if kinds == "iuf":
            if not all(isinstance(d, np.dtype) and d.kind in "iuf" for d in dtypes):
                return None  # (nullable and extension dtypes: one by one)
        elif any(getattr(d, "kind", "O") in "biufmM" for d in dtypes):
            return None
        selected = self.native.iloc[:, list(columns)]
        return selected.to_numpy(dtype=np.float64 if kinds == "iuf" else object)

    def numbers(self, columns, dtype=np.float64, why=""):
        """Columns ``columns`` as one float array, missing values as NaN.

        A column that holds anything but numbers (a string, say) is a
        ValueError naming it, saying ``why`` it is numeric and how to make it
        categorical; infinity a ValueError naming its column.
        """
        out = np.empty((self.shape[0], len(columns)), dtype=dtype)
        block = self._pandas_block(columns, "iuf")
        if block is not None:
            out[...] = block
        else:
            for i, j in enumerate(columns):
                out[:, i] = self._numbers(j, why)
        infinite = np.isinf(out).any(axis=0)
        if infinite.any():
            j = columns[int(np.flatnonzero(infinite)[0])]
            raise ValueError(
                f"Input X contains infinity in column {self.label(j)}: a numeric column "
                "may hold missing values (NaN), not infinite ones."
            )
        return out

    def _numbers(self, j, why):
        if is_pandas(self.native):
            column = self.native.iloc[:, j]
            if column.dtype.kind in "iuf":
                return column.to_numpy(dtype=np.float64)
            values = column.to_numpy(dtype=object)
        else:
            values = self.values(j)
            if values.dtype.kind in "biuf":
                return values
        if values.dtype.kind == "O":
            missing = missing_mask(values)
            if missing.any():
                values = values.copy()
                values[missing] = np.nan
        try:
            return values.astype(np.float64)
        except OverflowError:  # an integer beyond the floats: refused as infinity is
            raise ValueError(
                f"Input X contains a number too large for a float in column "
                f"{self.label(j)}: a numeric column may hold missing values (NaN), not "
                "infinite ones."
            ) from None
        except (TypeError, ValueError) as exc:  # a string (a date, a list) among the numbers
            value = _first_text(values)
            message = (
                f"Column {self.label(j)} is planned as numeric{why} but holds a value that "
                f"is not a number: {value!r}. "
                + (
                    "Make it categorical: list it in categorical_features (by name, by "
                    "index, or in a boolean mask of dtype bool), or pass "
                    "categorical_features='from_dtype', which takes the columns of strings."
                    if isinstance(value, (str, bytes))
                    else "Convert it to numbers (a date to days, say)."
                )
            )
            if isinstance(exc, TypeError):  # NumPy's words kept: scikit-learn's checks read them
                raise TypeError(f"{message} ({exc})") from exc
            raise ValueError(message) from exc


class RemoteTable(Table):
    """A table whose rows live elsewhere: the partitions of a Dask DataFrame, on its workers.

    It has what the driver of a cluster fit knows of the table: the columns'
    names and dtypes (from ``meta``, an empty pandas frame of them), its
    number of rows, and the column plan learned where the rows are
    (``plan``: a fitted :class:`~sknet.tabular.TabularEncoder` made from the
    partitions' merged summaries, :mod:`sknet.tabular._summaries`; None when
    an already fitted plan is applied). It holds no values: each worker
    encodes its own rows, and :meth:`stand_in` is what the encoded table
    looks like on the driver, a matrix that takes no memory.
    """

    def __init__(self, meta, n_rows, plan=None):
        super().__init__(meta)
        self.shape = (int(n_rows), meta.shape[1])
        self.plan = plan

    def take(self, rows):
        if isinstance(rows, slice) and rows == slice(None):
            return self
        raise TypeError("A RemoteTable's rows are on the cluster: they cannot be taken here")

    def values(self, j):
        raise TypeError(
            f"Column {self.label(j)} of a RemoteTable is on the cluster: its values are read "
            "there, partition by partition"
        )

    def numbers(self, columns, dtype=np.float64, why=""):
        return self.values(columns[0] if len(columns) else 0)

    def stand_in(self, width, dtype):
        """The table encoded into ``width`` columns of ``dtype``, as the driver sees it.

        Every row is the same zero row and the matrix takes no memory (a read-only
        view of zero strides): the rows are encoded on the workers.
        """
        dtype = np.dtype(dtype)
        zeros = np.zeros(width, dtype)
        stand_in = np.lib.stride_tricks.as_strided(
            zeros, (self.shape[0], width), (0, dtype.itemsize)
        )
        stand_in.flags.writeable = False
        return stand_in


#: Integers of larger magnitude lose digits as float64 (two IDs would read as one).
EXACT_IN_FLOATS = 2**53


def _beyond_floats(column):
    """Whether an integer column (pandas or narwhals) holds a value float64 would round:
    read through floats (as a column with a missing value is), two would read as one."""
    try:
        return bool(column.abs().max() > EXACT_IN_FLOATS)
    except TypeError:  # no value but missing ones: the maximum is NA (or None)
        return False


def missing_mask(values):
    """Where a 1-D array of any dtype holds a missing value (None, NaN, NA, NaT)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "biuUS":
        return np.zeros(values.shape, dtype=bool)
    try:
        import pandas as pd
    except ImportError:  # plain arrays: None and float NaN
        return np.fromiter(
            (v is None or (isinstance(v, float) and v != v) for v in values),
            dtype=bool,
            count=len(values),
        )
    return np.asarray(pd.isna(values), dtype=bool)


def _first_text(values):
    for value in values:
        if isinstance(value, (str, bytes)):
            return value
        try:
            float(value)
        except (TypeError, ValueError):
            return value
    return None


def _pandas_kinds(X):
    import pandas as pd  # a DataFrame came, so pandas is there

    types = pd.api.types
    kinds = []
    for dtype in X.dtypes:
        if (
            isinstance(dtype, pd.CategoricalDtype)
            or types.is_bool_dtype(dtype)
            or types.is_object_dtype(dtype)
            or types.is_string_dtype(dtype)
        ):
            kinds.append("categorical")
        elif types.is_numeric_dtype(dtype) and not types.is_complex_dtype(dtype):
            kinds.append("numeric")
        else:
            kinds.append(str(dtype))
    return kinds


def _from_frame(frame):
    return Table(frame.to_native(), frame=frame)


def as_table(X, name="X"):
    """``X`` as a :class:`Table`: a dataframe with its names, else a 2-D array.

    Sparse matrices are refused (a TypeError saying what takes them), as
    are arrays that are not 2-D or hold complex numbers.
    """
    if isinstance(X, Table):
        return X
    if _is_lazy_frame(X):
        raise TypeError(
            f"{name} is a lazy frame ({type(X).__module__}.{type(X).__name__}): a table "
            "here holds its rows; collect them first (polars: X.collect(), Dask: X.compute())"
        )
    if _is_dataframe(X):
        if is_pandas(X):
            if X.ndim != 2:
                raise ValueError(f"{name} must be 2-D, got {X.ndim} dimension(s)")
            return Table(X)
        return _from_frame(_narwhals().from_native(X, eager_only=True))
    if sp.issparse(X):
        raise TypeError(
            f"{name} is a sparse matrix; a table takes dense data (a DataFrame or an "
            "array). Densify it with X.toarray(), or use MLPClassifier/MLPRegressor, "
            "which take sparse input."
        )
    array = np.asarray(X)
    if array.dtype.kind in "US" and not isinstance(X, np.ndarray):
        # NumPy makes a list mixing numbers and strings all strings: objects keep them.
        array = np.asarray(X, dtype=object)
    if array.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {'scalar' if array.ndim == 0 else f'{array.ndim}D'} "
            f"array instead: {name} must be a table of shape (n_samples, n_features). "
            "Reshape your data either using array.reshape(-1, 1) if your data has a "
            "single feature or array.reshape(1, -1) if it contains a single sample."
        )
    if array.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {array.dtype}")
    if array.dtype.kind not in "biufOUSb":
        raise TypeError(f"{name} must hold numbers, strings or booleans, got dtype {array.dtype}")
    return Table(array, array=array)


def check_columns(estimator, table, reset):
    """Record (``reset``) or check the table's number of columns and their names.

    scikit-learn's rules and messages (``validate_data``'s checks of
    ``n_features_in_`` and ``feature_names_in_``), for every kind of table
    whichever scikit-learn is installed: names are recorded when every column
    has a string name, and a table with other names, or the same ones in
    another order, is refused at predict.
    """
    n_features, name = table.shape[1], type(estimator).__name__
    labels = table._labels or []
    types = [] if table.names is not None else sorted({type(c).__qualname__ for c in labels})
    if len(types) > 1 and "str" in types:
        raise TypeError(
            "Feature names are only supported if all input features have string names, "
            f"but your input has {types} as feature name / column name types. If you "
            "want feature names to be stored and validated, you must convert them all to "
            "strings, by using X.columns = X.columns.astype(str) for example. Otherwise "
            "you can remove feature / column names from your input data, or convert them "
            "all to a non-string data type."
        )
    names = table.names
    if reset:
        estimator.n_features_in_ = n_features
        if names is not None:
            estimator.feature_names_in_ = np.asarray(names, dtype=object)
        else:
            estimator.__dict__.pop("feature_names_in_", None)
        return
    fitted = getattr(estimator, "feature_names_in_", None)
    if names is not None and fitted is None:
        warnings.warn(f"X has feature names, but {name} was fitted without feature names")
    elif names is None and fitted is not None:
        warnings.warn(
            f"X does not have valid feature names, but {name} was fitted with feature names"
        )
    elif names is not None and names != list(fitted):
        raise ValueError(_names_message(fitted, names))
    if n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {name} is expecting "
            f"{estimator.n_features_in_} features as input."
        )


def _names_message(fitted, names):
    unseen, missing = sorted(set(names) - set(fitted)), sorted(set(fitted) - set(names))

    def listed(values):
        shown = [f"- {v}\n" for v in values[:5]]
        return "".join(shown) + ("- ...\n" if len(values) > 5 else "")

    message = "The feature names should match those that were passed during fit.\n"
    if unseen:
        message += "Feature names unseen at fit time:\n" + listed(unseen)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + listed(missing)
    if not unseen and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    return message

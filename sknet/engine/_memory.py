"""What a fit needs in device memory, by part.

:func:`estimate_memory` (public as :func:`sknet.utils.estimate_memory`) adds
up the bytes of a fit by part: the data, the parameters, their gradients,
the optimizer's state, the activations of the largest batch (with their
gradients and the layers' reused buffers) and the workspace (temporaries of
a batch, or of a validation chunk). Parameters, gradients and optimizer
state are counted on the built objects; activations and workspace are
measured: a copy of the network runs forward and backward on two small
batches on the host under :mod:`tracemalloc`, and the growth per row is
carried to the batch size. That holds for any layer, a user's too.

One computation serves both: :func:`fit_sizes` turns a fit's network,
optimizer and data into :class:`FitSizes`, and :meth:`FitSizes.estimate`
into a :class:`MemoryEstimate`. :func:`estimate_memory` calls it on the
estimator's clone and a description of the data;
:mod:`~sknet.engine._placement` calls it on the fit's own network and data
when it decides where ``fit`` and ``partial_fit`` keep their data, so a
``max_device_memory`` of at least the estimate's ``total`` keeps the data on
the device.
"""

import copy
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples, check_consistent_length

from sknet.backend import get_backend
from sknet.engine._bytes import format_bytes
from sknet.engine._optimizers import make_optimizer
from sknet.engine._probe import PROBE_ROWS, activation_profile, at_rows, largest_true, probe_rows
from sknet.engine._trainer import Trainer, resolve_batch_size

#: The parts of an estimate, in the order they are shown.
PARTS = ("data", "parameters", "gradients", "optimizer_state", "activations", "workspace")

#: Share of the measured parts (activations and workspace) that a fit keeps
#: free beyond an estimate's total in the memory a GPU reports free
#: (:attr:`MemoryEstimate.margin`): what the measurement on the host cannot
#: see (the allocator's rounding, the libraries' workspaces).
MARGIN = 0.25
#: How much the measured parts vary from one measurement to the next (the
#: kernels' caches, SciPy's sparse products): a share of activations and
#: workspace, and bytes (:attr:`MemoryEstimate.tolerance`). A fit's own
#: estimate may exceed ``max_device_memory`` by this much and keep the data on
#: the device, so that a limit of what :func:`estimate_memory` said does.
TOLERANCE = (0.01, 4096)


# -- the result ------------------------------------------------------------------------
class MemoryEstimate(Mapping):
    """Bytes a fit needs on its device, by part: a read-only mapping.

    Keys are ``'data'``, ``'parameters'``, ``'gradients'``,
    ``'optimizer_state'``, ``'activations'`` and ``'workspace'``; ``total`` is
    their sum. ``device`` and ``batch_size`` say what was estimated;
    ``placement`` is ``'device'`` (the data moved there once) or
    ``'streamed'`` (a fit's plan with the data streamed from host memory).

    ``fit`` makes the same estimate on its own network and data, and keeps
    the data on the device when its ``total`` is at most
    ``max_device_memory`` (give or take :attr:`tolerance`, the repeatability
    of the measurement) and, on a GPU, ``total + margin`` is at most the
    memory free there: :attr:`margin` is a quarter of the activations and
    workspace, for what the measurement on the host cannot see; it is not
    counted against ``max_device_memory``. So ``max_device_memory=total``
    keeps the data on the device. :meth:`batch_size_that_fits` turns a
    memory size into a batch size.
    """

    def __init__(self, parts, *, device, batch_size, placement="device", sizes=None):
        self._parts = {name: int(parts[name]) for name in PARTS}
        self.device = device
        self.batch_size = int(batch_size)
        self.placement = placement
        self._sizes = sizes  # FitSizes: the same estimate at other batch sizes

    def __getitem__(self, key):
        return self._parts[key]

    def __iter__(self):
        return iter(self._parts)

    def __len__(self):
        return len(self._parts)

    @property
    def total(self):
        """The sum of the parts, in bytes."""
        return sum(self._parts.values())

    @property
    def margin(self):
        """Bytes kept free beyond ``total`` on a GPU: a quarter of activations + workspace."""
        return int(MARGIN * (self["activations"] + self["workspace"]))

    @property
    def tolerance(self):
        """Bytes the measurement varies by: 1% of activations + workspace, and 4 KiB."""
        share, fixed = TOLERANCE
        return int(share * (self["activations"] + self["workspace"])) + fixed

    def at_batch_size(self, batch_size, *, last=None):
        """The same estimate for another ``batch_size`` (the data placed the same way).

        ``last``: rows of the epoch's last batch (default: what is left of
        the training rows by full batches).
        """
        if self._sizes is None:
            raise ValueError("This MemoryEstimate was not made by estimate_memory")
        if not isinstance(batch_size, Integral) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        streamed = self["data"] if self.placement == "streamed" else None
        return self._sizes.estimate(batch_size, streamed_data=streamed, last=last)

    def batch_size_that_fits(self, available):
        """The largest batch size whose fit needs at most ``available`` bytes (0: none).

        At most the number of training rows, the largest batch a fit takes.
        """
        if self._sizes is None:  # nothing to recompute with
            return self.batch_size if self.total <= available else 0

        def fits(batch_size, last=None):
            return self.at_batch_size(batch_size, last=last).total <= available

        # Without the last batch's buffers (a smaller batch may allocate its own)
        # the total grows with the batch size, and with a last batch of
        # batch_size - 1 rows too: the answer lies between the two.
        high = largest_true(lambda b: fits(b, last=0), self._sizes.n_train)
        low = largest_true(lambda b: fits(b, last=b - 1), high)
        return next((b for b in range(high, low, -1) if fits(b)), low)

    def __repr__(self):
        lines = [f"MemoryEstimate({self.device}, batch_size={self.batch_size}):"]
        for name, value in self._parts.items():
            lines.append(f"  {name:<16} {format_bytes(value):>11}")
        lines.append(f"  {'total':<16} {format_bytes(self.total):>11}")
        return "\n".join(lines)


# -- the parts ---------------------------------------------------------------------------
def model_bytes(trainer, optimizer, *, keeps_best, lbfgs=False):
    """Bytes of parameters, gradients and optimizer state, counted on the built objects."""
    leaves = [layer for _, layer in trainer.network.leaves()]
    weights = sum(
        int(a.nbytes) for layer in leaves for a in (*layer.params.values(), *layer.state.values())
    )
    grads = sum(int(g.nbytes) for layer in leaves for g in layer.grads.values())
    state = 0
    if optimizer is not None:
        for name in optimizer.state_names:
            state += sum(int(a.nbytes) for a in getattr(optimizer, name))
        state += int(optimizer._tmp.nbytes)
    elif lbfgs and not trainer.backend.separate_memory:
        # SciPy's L-BFGS on the host: 10 pairs of float64 vectors and a few more.
        state = 25 * int(trainer.parameters.flat_params.size) * 8
    return {
        "parameters": weights * (2 if keeps_best else 1),  # early stopping keeps a copy
        "gradients": grads,
        "optimizer_state": state,
    }


def array_bytes(a, dtype, rows=None):
    """Bytes of ``a`` (its first ``rows`` rows) as a backend array of ``dtype``."""
    if a is None:
        return 0
    n = a.shape[0] if rows is None else rows
    itemsize = np.dtype(dtype).itemsize
    if hasattr(a, "nnz"):  # sparse: values, column indices, row pointers
        nnz = a.nnz if rows is None else int(a.nnz * n / max(a.shape[0], 1))
        return nnz * (itemsize + a.indices.itemsize) + (n + 1) * a.indptr.itemsize
    return n * int(np.prod(a.shape[1:], dtype=np.int64)) * itemsize


def _copied(a, dtype, backend):
    """Whether moving ``a`` to ``backend`` in ``dtype`` makes a copy."""
    if a is None:
        return False
    return backend.separate_memory or a.dtype != np.dtype(dtype)


def order_bytes(backend, n_train):
    """Bytes of the epoch's row order (and, on the host, its shuffled copy)."""
    return n_train * 8 * (1 if backend.separate_memory else 2)


def validation_bytes(backend, dtype, validation, split):
    """Bytes the validation set adds: ``(host copies of a split, copies on the device)``."""
    if validation is None:
        return 0, 0
    host = 0 if backend.separate_memory or not split else 1  # X[val_rows] on the host
    arrays = [a for a in validation if a is not None]
    return (
        host * sum(array_bytes(a, dtype) for a in arrays),
        sum(array_bytes(a, dtype) for a in arrays if _copied(a, dtype, backend)),
    )


def data_bytes(backend, dtype, X, Y, w, n_train, validation=None, split=False):
    """Bytes of the training (and validation) data a fit puts on the device."""
    total = sum(array_bytes(a, dtype) for a in (X, Y, w) if _copied(a, dtype, backend))
    total += order_bytes(backend, n_train)
    return total + sum(validation_bytes(backend, dtype, validation, split))


def row_bytes(dtype, X, Y, w):
    """Bytes of one row of ``X``, ``Y`` and ``w`` on the device."""
    n = max(X.shape[0], 1)
    return sum(array_bytes(a, dtype) for a in (X, Y, w) if a is not None) / n


# -- one computation for the estimate and the planner ------------------------------------
class FitSizes:
    """The numbers of a fit's memory, for any batch size (no arrays kept).

    Made by :func:`fit_sizes`. ``model``: the bytes of parameters,
    gradients and optimizer state; ``data``: of the data moved to the
    device once; ``order``: of the epoch's row order; ``profile``: the
    measured lines of :func:`activation_profile`; ``row``: bytes of one
    training row (``X``, ``Y``, ``w``) on the device; ``n_train``; and of
    the validation set (None without one): ``val_host`` (host copies of a
    split), ``val_device`` (its copies on the device), ``val_row`` (bytes of
    one of its rows on the device) and ``eval_chunk`` (rows per evaluation
    chunk).
    """

    def __init__(self, *, device, separate_memory, model, data, order, profile, row, n_train):
        self.device, self.separate_memory = device, separate_memory
        self.model, self.data, self.order = model, data, order
        self.profile, self.row, self.n_train = profile, row, n_train
        self.val_host = self.val_device = self.val_row = 0
        self.eval_chunk = None

    def estimate(self, batch_size, *, streamed_data=None, last=None):
        """The :class:`MemoryEstimate` of a fit with batches of ``batch_size`` rows.

        With ``streamed_data`` (bytes of the chunk buffers and the validation
        set), the data are streamed: no gathered batch among the activations.
        ``last``: rows of the epoch's last, smaller batch (default: the rest
        of the training rows).
        """
        batch, profile = int(batch_size), self.profile
        last = self.n_train % batch if last is None else last
        parts = dict(self.model)
        parts["data"] = self.data if streamed_data is None else streamed_data
        parts["activations"] = at_rows(profile["activations"], batch)
        parts["activations"] += at_rows(profile["resize"], last)  # the last batch's buffers
        if streamed_data is None:
            parts["activations"] += self.row * batch  # the batch gathered from the data
        parts["workspace"] = at_rows(profile["workspace"], batch)
        if self.eval_chunk is not None:
            evaluation = at_rows(profile["evaluation"], self.eval_chunk)
            parts["workspace"] = max(parts["workspace"], evaluation)
        return MemoryEstimate(
            parts,
            device=self.device,
            batch_size=batch,
            placement="device" if streamed_data is None else "streamed",
            sizes=self,
        )


def fit_sizes(backend, trainer, optimizer, data, validation, *, n_train, keeps_best, split, probe):
    """The :class:`FitSizes` of a fit: shared by :func:`estimate_memory` and the planner.

    ``data`` is ``(X, Y, w)`` as the fit holds them (or :class:`DataShape`
    stand-ins), ``validation`` likewise or None, ``split`` whether the
    validation set is a split of ``X`` (early stopping: then its rows are
    counted in proportion to ``X``'s, as :func:`estimate_memory` counts
    them), ``probe`` the rows ``(X, Y)`` to measure on (the first
    :func:`probe_rows` of the data).
    """
    X, Y, w = data
    dtype = trainer.network.dtype
    if split:  # which rows were drawn does not count (sparse rows differ in size)
        n_val = validation[0].shape[0]
        validation = tuple(None if a is None else _described(a).rows(n_val) for a in data)
    sizes = FitSizes(
        device=backend.name,
        separate_memory=backend.separate_memory,
        model=model_bytes(trainer, optimizer, keeps_best=keeps_best, lbfgs=optimizer is None),
        data=data_bytes(backend, dtype, X, Y, w, n_train, validation, split),
        order=order_bytes(backend, n_train),
        profile=activation_profile(trainer.network, trainer.loss, *probe, backend),
        row=row_bytes(dtype, X, Y, w),
        n_train=n_train,
    )
    if validation is not None:
        sizes.val_host, sizes.val_device = validation_bytes(backend, dtype, validation, split)
        sizes.val_row = row_bytes(dtype, *validation)
        sizes.eval_chunk = min(trainer.network.predict_chunk_rows(), validation[0].shape[0])
    return sizes


# -- estimate_memory ------------------------------------------------------------------
#: What estimate_memory calls on an estimator: sknet's estimators have them all.
_ESTIMATOR_METHODS = (
    "get_params",
    "_validate_params",
    "_check_params",
    "_validate_input",
    "_initialize",
)


def _check_estimator(estimator):
    """A TypeError unless ``estimator`` is an sknet estimator (an instance)."""
    if isinstance(estimator, type):
        got = f"the class {estimator.__module__}.{estimator.__qualname__}, not an instance"
    elif not all(callable(getattr(estimator, name, None)) for name in _ESTIMATOR_METHODS):
        got = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    else:
        return
    raise TypeError(
        "estimate_memory takes an sknet estimator such as sknet.MLPClassifier, "
        f"sknet.ConvNetRegressor or sknet.NeuralNetClassifier, got {got}"
    )


def _probe_sample(X, y, n_rows, classifier):
    """Rows of ``X``/``y`` to validate: the first ones and, for a classifier, one per class.

    The classes come from all of ``y``, so that the output layer has its width
    however the rows are sorted.
    """
    take = np.arange(min(n_rows, PROBE_ROWS[1]))
    if classifier:
        labels = np.asarray(y)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim == 1:
            _, first = np.unique(labels, return_index=True)
            take = np.concatenate([take, np.setdiff1d(first, take)])
    if sp.issparse(X) and X.format not in ("csr", "csc"):
        X = X.tocsr()  # as validation converts it
    return _rows(X, take), _rows(y, take)


def _rows(a, take):
    if hasattr(a, "iloc"):
        return a.iloc[take]
    if isinstance(a, (list, tuple)):
        return [a[i] for i in take]
    return a[take]


def _default_targets(estimator, n):
    """Targets standing in for ``y``: the fitted outputs, else one output (two classes)."""
    n_outputs = getattr(estimator, "n_outputs_", None)
    if n_outputs is not None and "network_" in estimator.__dict__:
        codes = np.arange(n) % max(n_outputs, 2)
        Y = (codes[:, None] == np.arange(n_outputs)).astype(np.float64)
        if n_outputs == 1:
            Y[:, 0] = codes % 2
        return estimator._decode_targets(Y)
    return np.arange(n) % 2 if is_classifier(estimator) else np.zeros(n)


def _check_lengths(X, y, sample_weight, X_val, y_val):
    """scikit-learn's errors for rows that do not match, before any work."""
    check_consistent_length(X, y)
    if sample_weight is not None and not isinstance(sample_weight, Real):
        if np.ndim(sample_weight) != 1:
            raise ValueError(
                "sample_weight must be a 1D array or a scalar, got an array of shape "
                f"{np.shape(sample_weight)}"
            )
        check_consistent_length(X, sample_weight)
    if (X_val is None) != (y_val is None):
        raise ValueError(
            "X_val and y_val must be given together, got only "
            + ("y_val" if X_val is None else "X_val")
        )
    if X_val is not None:
        check_consistent_length(X_val, y_val)


def _weights(estimator, sample_weight, n_rows, X_dtype):
    """A stand-in for the fit's sample weights (None when it has none)."""
    class_weight = getattr(estimator, "class_weight", None)
    if sample_weight is None and class_weight is None:
        return None
    dtype = object  # made by the fit (class weights, a conversion): a copy
    if class_weight is None and isinstance(sample_weight, Real):
        dtype = X_dtype  # np.full(n_samples, sample_weight, X.dtype)
    elif class_weight is None and isinstance(sample_weight, np.ndarray):
        if sample_weight.dtype in (np.float32, np.float64):
            dtype = sample_weight.dtype  # used as it is
    return DataShape((n_rows,), dtype)


def estimate_memory(estimator, X, y=None, *, sample_weight=None, X_val=None, y_val=None):
    """Bytes a fit of ``estimator`` on ``X`` would need on its device, by part.

    Parameters
    ----------
    estimator : sknet estimator
        Fitted or not; it is not modified (a clone is built on the host).
        Another library's estimator is a TypeError.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The training data.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
        The targets: they decide the width of the output layer (the number of
        classes, found in all of ``y``). Without them, a fitted estimator's
        outputs are assumed, else one output (two classes).
    sample_weight : array-like of shape (n_samples,) or float, default=None
        Sample weights, if the fit will get them.
    X_val, y_val : array-like, default=None
        A validation set, if the fit will get one.

    Returns
    -------
    estimate : MemoryEstimate
        A mapping of bytes by part (``'data'``, ``'parameters'``,
        ``'gradients'``, ``'optimizer_state'``, ``'activations'`` of the largest
        batch, ``'workspace'``) with their ``total`` and the ``margin`` a fit
        keeps free beyond it on a GPU.

    Raises
    ------
    TypeError
        If ``estimator`` is not an sknet estimator.
    ValueError
        If ``X``, ``y``, ``sample_weight`` (or ``X_val`` and ``y_val``) have
        different numbers of rows, or the data are not valid for the
        estimator (scikit-learn's messages).

    Notes
    -----
    Parameters, gradients and optimizer state are counted on a network built
    on the host; activations and workspace are measured there, on two small
    batches, and carried to the batch size (for a GPU fit, on the NumPy copy
    of the code CuPy runs). On the CPU, data the fit uses in place (arrays
    already of its dtype) count nothing; data that validation converts
    (lists, data frames, integers) count as the copy it makes.

    ``fit`` and ``partial_fit`` make the same computation to decide whether
    the data stay on the device or stream: with ``max_device_memory`` at least
    ``total`` they stay (within ``estimate.tolerance``: 1% of activations and
    workspace, and 4 KiB). On a GPU, the free memory must also hold ``total +
    margin`` (``margin``: a quarter of activations and workspace, what the
    measurement on the host cannot see).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.utils import estimate_memory
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(hidden_layer_sizes=(64,), device="cpu")
    >>> estimate = estimate_memory(clf, X, y)
    >>> list(estimate)
    ['data', 'parameters', 'gradients', 'optimizer_state', 'activations', 'workspace']
    >>> estimate["gradients"] == (64 * 64 + 64 + 64 * 10 + 10) * 4  # float32
    True
    >>> estimate.total == sum(estimate.values())
    True
    >>> clf.set_params(max_device_memory=estimate.total).fit(X, y).data_placement_
    'device'
    """
    _check_estimator(estimator)
    n_rows = _num_samples(X)
    if y is None:
        y = _default_targets(estimator, n_rows)
    _check_lengths(X, y, sample_weight, X_val, y_val)
    probe, X_rows, Y_rows = _built_probe(estimator, X, y, n_rows)
    backend = get_backend(probe.device)
    trainer = Trainer(probe.network_, probe._loss, alpha=probe.alpha)
    lbfgs = probe.solver == "lbfgs"
    optimizer = None if lbfgs else make_optimizer(probe, trainer)
    keeps_best = probe.early_stopping and not lbfgs  # L-BFGS has no early stopping
    data = (
        DataShape.of(X, n_rows, X_rows),
        DataShape.of(y, n_rows, Y_rows),
        _weights(probe, sample_weight, n_rows, X_rows.dtype),
    )
    validation, split, n_train = _validation_of(probe, data, X_val, y_val, keeps_best)
    batch_size = n_train if lbfgs else resolve_batch_size(probe.batch_size, n_train)
    sizes = fit_sizes(
        backend,
        trainer,
        optimizer,
        data,
        validation,
        n_train=n_train,
        keeps_best=keeps_best,
        split=split,
        probe=(X_rows[: probe_rows(n_train)], Y_rows[: probe_rows(n_train)]),
    )
    return sizes.estimate(batch_size)


def _validation_of(probe, data, X_val, y_val, keeps_best):
    """The fit's validation set (given, or split off), whether it is split, the training rows."""
    n_rows = data[0].shape[0]
    if X_val is not None:
        validation = probe._validate_input(X_val, y_val, incremental=True, reset=False)
        return validation + (None,), False, n_rows
    if not keeps_best:
        return None, False, n_rows
    n_val = int(np.ceil(probe.validation_fraction * n_rows))
    return tuple(None if a is None else a.rows(n_val) for a in data), True, n_rows - n_val


def _built_probe(estimator, X, y, n_rows):
    """A clone of ``estimator`` built on the host from rows that show every class."""
    probe = clone(estimator)
    probe._validate_params()
    probe._check_params()
    X_rows, y_rows = _probe_sample(X, y, n_rows, is_classifier(probe))
    X_rows, Y_rows = probe._validate_input(X_rows, y_rows, incremental=False, reset=True)
    probe._initialize(X_rows.shape[1], Y_rows.shape[1], get_backend("cpu"), check_random_state(0))
    return probe, X_rows, Y_rows


def _described(a):
    return a if isinstance(a, DataShape) else DataShape.of_array(a)


class DataShape:
    """What the parts need of a data array without reading it all: shape, dtype, nnz."""

    def __init__(self, shape, dtype, sparse=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        if sparse is not None:  # nnz, and index arrays of the right itemsizes
            self.nnz, self.indices, self.indptr = sparse

    @classmethod
    def of_array(cls, a):
        """The shape, dtype (and nnz) of an array the fit holds."""
        sparse = (a.nnz, a.indices, a.indptr) if sp.issparse(a) else None
        return cls(a.shape, a.dtype, sparse)

    @classmethod
    def of(cls, source, n_rows, validated):
        """``source`` (the user's array) as ``validated`` shows some of its rows.

        The dtype is the validated one when validation uses ``source`` as it
        is, else ``object``: validation made a copy, which counts.
        """
        if sp.issparse(source):
            as_is = source.format == validated.format and source.dtype == validated.dtype
        else:
            as_is = isinstance(source, np.ndarray) and source.dtype == validated.dtype
        sparse = None
        if sp.issparse(validated):
            nnz = int(getattr(source, "nnz", validated.nnz * n_rows / validated.shape[0]))
            sparse = nnz, validated.indices, validated.indptr
        dtype = validated.dtype if as_is else object
        return cls((n_rows,) + validated.shape[1:], dtype, sparse)

    def rows(self, n):
        """The same for the first ``n`` rows."""
        other = copy.copy(self)
        other.shape = (n,) + self.shape[1:]
        if hasattr(self, "nnz"):
            other.nnz = int(self.nnz * n / max(self.shape[0], 1))
        return other

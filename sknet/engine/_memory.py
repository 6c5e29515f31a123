"""What a fit needs in device memory, and where its training data go.

:func:`estimate_memory` (public as :func:`sknet.utils.estimate_memory`) adds
up the bytes of a fit by part: the data, the parameters, their gradients,
the optimizer's state, the activations of the largest batch (with their
gradients and the layers' reused buffers) and the workspace (temporaries of
a batch, or of a validation chunk). Parameters, gradients and optimizer
state are counted on the built objects; activations and workspace are
measured: a copy of the network runs forward and backward on two small
batches on the host under :mod:`tracemalloc`, and the growth per row is
carried to the batch size. That holds for any layer, a user's too.

:func:`plan_placement` makes the decision ``fit`` and ``partial_fit`` act
on: the data stay on the device when everything fits in the memory that is
free there (or in ``max_device_memory``), else they stay on the host and are
streamed in chunks of many batches (:class:`~sknet.backend._base.RowStream`).
"""

import contextlib
import copy
import re
import tracemalloc
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples

from sknet.backend import Backend, get_backend

#: The parts of an estimate, in the order they are shown.
PARTS = ("data", "parameters", "gradients", "optimizer_state", "activations", "workspace")

# Rows of the two probe batches (fewer when the data have fewer rows).
_PROBE_ROWS = (16, 48)
# One chunk buffer holds at most this many bytes: the first chunk of an epoch is
# copied before any computation can hide it, so chunks stay moderate.
_MAX_CHUNK_BYTES = 256 << 20
# Share of the measured activations and workspace kept free beyond the estimate.
_MARGIN = 0.25
_UNITS = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


# -- bytes as people write them ------------------------------------------------------
def parse_bytes(value, name="max_device_memory"):
    """Bytes from an int or a string such as ``'8GB'``, ``'512 MiB'`` or ``'1.5e9'``."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        number = int(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kmgtKMGT]?)(i?)[bB]?\s*", value)
        try:
            unit, binary = match.group(2).lower(), match.group(3)
            factor = 1024 ** "_kmgt".index(unit) if binary and unit else _UNITS[unit]
            number = int(float(match.group(1)) * factor)
        except (AttributeError, ValueError):
            raise ValueError(
                f"{name} must be a number of bytes or a string such as '8GB' or "
                f"'512MiB', got {value!r}"
            ) from None
    else:
        raise ValueError(f"{name} must be an int or a string such as '8GB', got {value!r}")
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


def format_bytes(n):
    """``1536`` -> ``'1.5 KiB'``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# -- the result ------------------------------------------------------------------------
class MemoryEstimate(Mapping):
    """Bytes a fit needs on its device, by part: a read-only mapping.

    Keys are ``'data'``, ``'parameters'``, ``'gradients'``,
    ``'optimizer_state'``, ``'activations'`` and ``'workspace'``; ``total`` is
    their sum. ``device`` and ``batch_size`` say what was estimated;
    :meth:`batch_size_that_fits` turns a memory size into a batch size.
    """

    def __init__(self, parts, *, device, batch_size, per_row, placement="device"):
        self._parts = {name: int(parts[name]) for name in PARTS}
        self.device = device
        self.batch_size = int(batch_size)
        self.placement = placement
        self._per_row = float(per_row)  # activations + workspace per batch row

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

    def batch_size_that_fits(self, available):
        """The largest batch size whose fit needs at most ``available`` bytes (0: none)."""
        if self._per_row <= 0:
            return self.batch_size if self.total <= available else 0
        fixed = self.total - self._per_row * self.batch_size
        return max(int((available - fixed) // self._per_row), 0)

    def __repr__(self):
        lines = [f"MemoryEstimate({self.device}, batch_size={self.batch_size}):"]
        for name, value in self._parts.items():
            lines.append(f"  {name:<16} {format_bytes(value):>11}")
        lines.append(f"  {'total':<16} {format_bytes(self.total):>11}")
        return "\n".join(lines)


# -- measuring a network ---------------------------------------------------------------
@contextlib.contextmanager
def _traced():
    """Bytes allocated in the block: ``'retained'`` at its end and the ``'peak'``."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = {}
    try:
        yield result
    finally:
        current, peak = tracemalloc.get_traced_memory()
        result.update(retained=max(current - base, 0), peak=max(peak - base, 0))
        if started:
            tracemalloc.stop()


def _probe_backend(backend):
    """Where to measure: the host; the xp-generic code when the fit runs on a GPU."""
    return backend if not backend.separate_memory else Backend("cpu", np)


def _run_probe(network, loss, X, Y, sizes, probe, training):
    """Retained and peak bytes of forward (and backward) passes over ``sizes`` rows.

    The passes run one after the other on one fresh copy of the network, as
    consecutive batches do.
    """
    net = copy.deepcopy(network).to_backend(probe)  # fresh: no buffers yet
    net_loss = copy.deepcopy(loss)
    measured = []
    for n in sizes:
        Xn, Yn = probe.asarray(X[:n], net.dtype), probe.asarray(Y[:n], net.dtype)
        with _traced() as used:
            Z = net.forward(Xn, training=training)
            if training:
                _, dZ = net_loss(Z, Yn, None, n)
                net.backward(dZ)
                del dZ
            del Z
        measured.append((used["retained"], used["peak"]))
    return measured


def _line(sizes, values):
    """``(fixed, per_row)`` of a straight line through two measurements."""
    (n1, n2), (m1, m2) = sizes, values
    per_row = max((m2 - m1) / (n2 - n1), 0.0) if n2 > n1 else m2 / max(n2, 1)
    return max(m1 - per_row * n1, 0.0), per_row


def activation_profile(network, loss, X, Y, backend):
    """How activations and workspace grow with the batch, measured on the host.

    Returns a dict of ``(fixed, per_row)`` lines: ``'activations'`` (what a
    training pass keeps: layer caches and buffers), ``'workspace'`` (its
    temporaries beyond that), ``'resize'`` (buffers a smaller batch allocates
    anew while the larger ones still exist: the time-major buffers of
    recurrent layers) and ``'evaluation'`` (the peak of an inference pass, for
    validation chunks).
    """
    probe = _probe_backend(backend)
    n_rows = X.shape[0]
    small, large = min(_PROBE_ROWS[0], max(n_rows // 2, 1)), min(_PROBE_ROWS[1], n_rows)
    sizes = (small, large)
    _run_probe(network, loss, X, Y, [small], probe, True)  # compiles, fills caches
    (kept1, peak1), *_ = _run_probe(network, loss, X, Y, [small], probe, True)
    (kept2, peak2), (_, peak3) = _run_probe(network, loss, X, Y, [large, small], probe, True)
    infer = [_run_probe(network, loss, X, Y, [n], probe, False)[0] for n in sizes]
    resized = max(peak3 - (peak1 - kept1), 0) if large > small else 0
    return {
        "activations": _line(sizes, [kept1, kept2]),
        "workspace": _line(sizes, [peak1 - kept1, peak2 - kept2]),
        "resize": (0.0, resized / small),
        "evaluation": _line(sizes, [peak for _, peak in infer]),
    }


def _at(line, rows):
    fixed, per_row = line
    return fixed + per_row * rows


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
        state = 25 * int(trainer.flat_params.size) * 8
    return {
        "parameters": weights * (2 if keeps_best else 1),  # early stopping keeps a copy
        "gradients": grads,
        "optimizer_state": state,
    }


def _array_bytes(a, dtype, rows=None):
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


def data_bytes(backend, dtype, X, Y, w, n_train, validation=None, split=False):
    """Bytes of the training (and validation) data a fit puts on the device."""
    total = sum(_array_bytes(a, dtype) for a in (X, Y, w) if _copied(a, dtype, backend))
    total += n_train * 8 * (1 if backend.separate_memory else 2)  # the epoch's row order
    if validation is not None:
        X_val, Y_val, w_val = validation
        host_copies = 0 if backend.separate_memory or not split else 1  # X[val_rows]
        total += sum(
            _array_bytes(a, dtype) * (host_copies + _copied(a, dtype, backend))
            for a in (X_val, Y_val, w_val)
        )
    return total


def row_bytes(dtype, X, Y, w):
    """Bytes of one row of ``X``, ``Y`` and ``w`` on the device."""
    n = max(X.shape[0], 1)
    return sum(_array_bytes(a, dtype) for a in (X, Y, w) if a is not None) / n


# -- estimate_memory ------------------------------------------------------------------
def _probe_rows(X, y, n_rows):
    """Rows of ``X``/``y`` for the probe; every class of a 1-D ``y`` among them."""
    take = np.arange(min(n_rows, _PROBE_ROWS[1]))
    if y is not None:
        y_arr = np.asarray(y)
        if y_arr.ndim == 1 and y_arr.dtype.kind not in "fc":
            _, first = np.unique(y_arr, return_index=True)
            take = np.union1d(take, first)
    rows = X[take] if hasattr(X, "shape") and not hasattr(X, "iloc") else _rows(X, take)
    return rows, None if y is None else _rows(y, take)


def _rows(a, take):
    if hasattr(a, "iloc"):
        return a.iloc[take]
    if isinstance(a, (list, tuple)):
        return [a[i] for i in take]
    return a[take]


def _default_targets(estimator, n):
    """Targets standing in for ``y``: the fitted outputs, else one output (two classes)."""
    from sklearn.base import is_classifier

    n_outputs = getattr(estimator, "n_outputs_", None)
    if n_outputs is not None and "network_" in estimator.__dict__:
        codes = np.arange(n) % max(n_outputs, 2)
        Y = (codes[:, None] == np.arange(n_outputs)).astype(np.float64)
        if n_outputs == 1:
            Y[:, 0] = codes % 2
        return estimator._decode_targets(Y)
    return np.arange(n) % 2 if is_classifier(estimator) else np.zeros(n)


def estimate_memory(estimator, X, y=None, *, sample_weight=None, X_val=None, y_val=None):
    """Bytes a fit of ``estimator`` on ``X`` would need on its device, by part.

    Parameters
    ----------
    estimator : sknet estimator
        Fitted or not; it is not modified (a clone is built on the host).
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The training data.
    y : array-like, default=None
        The targets: they decide the width of the output layer (the number of
        classes). Without them, a fitted estimator's outputs are assumed, else
        one output (two classes).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, if the fit will get them.
    X_val, y_val : array-like, default=None
        A validation set, if the fit will get one.

    Returns
    -------
    estimate : MemoryEstimate
        A mapping of bytes by part (``'data'``, ``'parameters'``,
        ``'gradients'``, ``'optimizer_state'``, ``'activations'`` of the largest
        batch, ``'workspace'``) with their ``total``.

    Notes
    -----
    Parameters, gradients and optimizer state are counted on a network built
    on the host; activations and workspace are measured there, on two small
    batches, and carried to the batch size (for a GPU fit, on the NumPy copy
    of the code CuPy runs). On the CPU, data the fit uses in place (already of
    its dtype) count nothing. ``fit`` plans with the same numbers when it
    decides whether the data stream from host memory (``max_device_memory``).

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
    """
    from sknet.engine._optimizers import make_optimizer
    from sknet.engine._trainer import Trainer, resolve_batch_size

    n_rows = _num_samples(X)
    if y is None:
        y = _default_targets(estimator, n_rows)
    probe = clone(estimator)
    probe._validate_params()
    probe._check_params()
    backend = get_backend(probe.device)
    X_rows, y_rows = _probe_rows(X, y, n_rows)
    X_rows, Y_rows = probe._validate_input(X_rows, y_rows, incremental=False, reset=True)
    probe._initialize(X_rows.shape[1], Y_rows.shape[1], get_backend("cpu"), check_random_state(0))
    trainer = Trainer(probe.network_, probe._loss, alpha=probe.alpha)
    lbfgs = probe.solver == "lbfgs"
    optimizer = None if lbfgs else make_optimizer(probe, trainer)
    validation = None
    if X_val is not None:
        validation = probe._validate_input(X_val, y_val, incremental=True, reset=False) + (None,)
    split = probe.early_stopping and validation is None
    n_train = n_rows - (int(np.ceil(probe.validation_fraction * n_rows)) if split else 0)
    batch_size = n_train if lbfgs else resolve_batch_size(probe.batch_size, n_train)
    X_all = _Shape(X, n_rows, X_rows)
    Y_all = _Shape(None, n_rows, Y_rows)
    w_all = None if sample_weight is None else np.broadcast_to(np.float64(0), (n_rows,))
    if split:
        validation = tuple(None if a is None else a.rows(n_rows - n_train) for a in (X_all, Y_all))
        validation += (None,)
    return _estimate(
        backend,
        trainer,
        optimizer,
        (X_all, Y_all, w_all),
        validation,
        batch_size=batch_size,
        n_train=n_train,
        keeps_best=probe.early_stopping,
        split=split,
        profile=activation_profile(trainer.network, probe._loss, X_rows, Y_rows, backend),
    )


class _Shape:
    """What the parts need of a data array without reading it all: shape, dtype, nnz.

    ``source`` is the user's array (None for encoded targets); ``validated``
    some of its rows as the estimator validated them.
    """

    def __init__(self, source, n_rows, validated):
        self.shape = (n_rows,) + validated.shape[1:]
        given = isinstance(source, np.ndarray) or sp.issparse(source)
        # Arrays validation converts (lists, frames, targets) count as copies.
        self.dtype = np.dtype(source.dtype) if given else np.dtype(object)
        if sp.issparse(validated):
            self.nnz = int(getattr(source, "nnz", validated.nnz * n_rows / validated.shape[0]))
            self.indices, self.indptr = validated.indices, validated.indptr

    def rows(self, n):
        """The same for the first ``n`` rows."""
        other = copy.copy(self)
        other.shape = (n,) + self.shape[1:]
        if hasattr(self, "nnz"):
            other.nnz = int(self.nnz * n / max(self.shape[0], 1))
        return other


def _estimate(backend, trainer, optimizer, data, validation, **kw):
    """Assemble a :class:`MemoryEstimate` (shared by estimate_memory and the planner)."""
    X, Y, w = data
    dtype = trainer.network.dtype
    batch = kw["batch_size"]
    parts = model_bytes(trainer, optimizer, keeps_best=kw["keeps_best"], lbfgs=optimizer is None)
    parts["data"] = data_bytes(backend, dtype, X, Y, w, kw["n_train"], validation, kw["split"])
    profile = kw["profile"]
    input_batch = row_bytes(dtype, X, Y, w) * batch  # the gathered batch
    last = kw["n_train"] % batch  # a smaller last batch may reallocate buffers
    parts["activations"] = _at(profile["activations"], batch) + input_batch
    parts["activations"] += _at(profile["resize"], last)
    parts["workspace"] = _at(profile["workspace"], batch)
    if validation is not None:
        chunk = min(trainer.network.predict_chunk_rows(), validation[0].shape[0])
        parts["workspace"] = max(parts["workspace"], _at(profile["evaluation"], chunk))
    per_row = profile["activations"][1] + profile["workspace"][1] + input_batch / batch
    estimate = MemoryEstimate(parts, device=backend.name, batch_size=batch, per_row=per_row)
    estimate._profile = profile
    return estimate


# -- where the data go ------------------------------------------------------------------
class NoRoomForBatch(MemoryError):
    """The planned device memory cannot hold the model and one batch (raised up front)."""


@dataclass
class Placement:
    """Where a fit keeps its data: ``kind`` is ``'device'`` or ``'streamed'``.

    Streamed data come in chunks of ``chunk_rows`` rows (a multiple of the
    batch size); ``validation_on_device`` says whether the validation set
    was moved there once (else it is moved chunk by chunk at every epoch),
    evaluated in chunks of ``validation_chunk_rows``. ``estimate`` (None when
    nothing was measured), ``capacity`` and ``needed`` are the numbers the
    decision was made on.
    """

    kind: str
    chunk_rows: int | None = None
    validation_on_device: bool = True
    validation_chunk_rows: int | None = None
    estimate: MemoryEstimate | None = None
    capacity: int | None = None
    needed: int | None = None  # bytes with all the data on the device

    def training_data(self, est, backend, X, Y, w):
        """The data as the trainer takes them: on the backend, or streamed from the host."""
        from sknet.engine._trainer import StreamedData

        if self.kind == "device":
            return backend_data(est, backend, X, Y, w)
        stream = backend.row_stream((X, Y, w), est._np_dtype, self.chunk_rows)
        return StreamedData(X, Y, w, self.chunk_rows, stream)

    def describe(self, n_rows):
        """The line ``verbose`` prints about a streamed fit."""
        return (
            f"Data: streamed from host memory in chunks of {self.chunk_rows} rows (with "
            f"all {n_rows} rows on the device the fit would need about "
            f"{format_bytes(self.needed)}; {format_bytes(self.capacity)} is available)"
        )


def device_capacity(est, backend, allocated=0):
    """Bytes the fit may use on the device: ``max_device_memory``, and what is free there.

    ``allocated`` bytes (the model, already on the device) count as usable.
    None: no limit (the CPU without ``max_device_memory``).
    """
    limit = None if est.max_device_memory is None else parse_bytes(est.max_device_memory)
    if backend.separate_memory:
        available = backend.available_memory()
        if available is not None:
            available += allocated
            limit = available if limit is None else min(limit, available)
    return limit


def backend_data(est, backend, X, Y, w):
    """The data moved to the backend once, in the estimator's dtype; batches are gathered there."""
    from sknet.engine._trainer import BackendData

    dtype = est._np_dtype
    return BackendData(
        backend.asarray(X, dtype),
        backend.asarray(Y, dtype),
        None if w is None else backend.asarray(w, dtype),
    )


def place_training_data(est, trainer, optimizer, data, validation, *, train_rows, batch_size):
    """Decide where a stochastic fit keeps its data and bring them there.

    Records ``est.data_placement_``, prints the plan of a streamed fit under
    ``verbose``, and returns ``(placement, data as the trainer takes them)``.
    """
    placement = plan_placement(
        est, trainer, optimizer, data, validation, train_rows=train_rows, batch_size=batch_size
    )
    est.data_placement_ = placement.kind
    if est.verbose and placement.kind == "streamed":
        print(placement.describe(data[0].shape[0] if train_rows is None else len(train_rows)))
    return placement, placement.training_data(est, trainer.backend, *data)


def plan_placement(est, trainer, optimizer, data, validation, *, train_rows, batch_size):
    """Decide where a stochastic fit keeps its data (see :class:`Placement`).

    The data stay on the device when the whole fit fits in
    :func:`device_capacity`; else they are streamed from the host in chunks
    as large as the memory left after the model, the activations and the
    workspace (with a margin) allows, at most ``_MAX_CHUNK_BYTES`` each.
    """
    backend, dtype = trainer.backend, trainer.network.dtype
    X, Y, w = data
    n_train = X.shape[0] if train_rows is None else train_rows.shape[0]
    model = sum(model_bytes(trainer, optimizer, keeps_best=est.early_stopping).values())
    capacity = device_capacity(est, backend, allocated=model)
    if capacity is None:
        return Placement("device")
    device = _AsDevice(backend)  # data count in full, as copies on the device
    data_total = data_bytes(device, dtype, X, Y, w, n_train, validation)
    if est.max_device_memory is None and model + data_total <= capacity / 2:
        return Placement("device", capacity=capacity)  # plenty of room: nothing to measure
    rows = train_rows[: _PROBE_ROWS[1]] if train_rows is not None else slice(_PROBE_ROWS[1])
    profile = activation_profile(trainer.network, trainer.loss, X[rows], Y[rows], backend)
    estimate = _estimate(
        device,
        trainer,
        optimizer,
        data,
        validation,
        batch_size=batch_size,
        n_train=n_train,
        keeps_best=est.early_stopping,
        split=False,
        profile=profile,
    )
    margin = _MARGIN * (estimate["activations"] + estimate["workspace"])
    if estimate.total + margin <= capacity:  # the margin streaming keeps, too
        return Placement("device", estimate=estimate, capacity=capacity)
    return _streamed(est, backend, estimate, capacity, data, validation, batch_size, n_train)


class _AsDevice:
    """A backend as :func:`data_bytes` sees it when every array is copied to it."""

    separate_memory = True

    def __init__(self, backend):
        self.name = backend.name


def _streamed(est, backend, estimate, capacity, data, validation, batch_size, n_train):
    """The streamed :class:`Placement`, or a MemoryError when not even a batch fits."""
    dtype, profile = est._np_dtype, estimate._profile
    row = row_bytes(dtype, *data)
    kept = estimate["activations"] - row * batch_size  # no gathered batch when streaming
    workspace, val_chunk = _at(profile["workspace"], batch_size), None
    if validation is not None:  # chunks whose inference costs what a batch costs
        fixed, per_row = profile["evaluation"]
        val_chunk = est.network_.predict_chunk_rows()
        if per_row > 0:
            val_chunk = min(val_chunk, int((max(kept, workspace) - fixed) // per_row))
        val_chunk = max(min(val_chunk, validation[0].shape[0]), 1)
        workspace = max(workspace, _at(profile["evaluation"], val_chunk))
    model = estimate["parameters"] + estimate["gradients"] + estimate["optimizer_state"]
    budget = capacity - model - (1 + _MARGIN) * (kept + workspace)
    buffers, val_bytes = backend.stream_buffers, 0
    if validation is not None:
        val_bytes = sum(_array_bytes(a, dtype) for a in validation if a is not None)
        if val_bytes <= budget / 2:
            budget -= val_bytes
        else:  # streamed too, chunk by chunk
            budget, val_bytes = budget - row * val_chunk, 0
    chunk_rows = int(max(budget, 0) // (buffers * row))
    chunk_rows = min(chunk_rows, int(_MAX_CHUNK_BYTES // row), n_train)
    if chunk_rows < n_train:
        chunk_rows -= chunk_rows % batch_size
    if chunk_rows < min(batch_size, n_train):
        fits = estimate.batch_size_that_fits(capacity - estimate["data"])
        raise NoRoomForBatch(
            f"Not even one batch fits on {backend.name}: the model and a batch of "
            f"{batch_size} rows need about {format_bytes(capacity - budget + row * batch_size)}, "
            f"and {format_bytes(capacity)} is available"
            + (f"; batch_size={fits} would fit." if fits else "; raise max_device_memory.")
        )
    on_device = validation is None or val_bytes > 0
    parts = dict(estimate)
    parts["data"] = buffers * chunk_rows * row + val_bytes
    parts["activations"], parts["workspace"] = kept, workspace
    streamed = MemoryEstimate(
        parts, device=backend.name, batch_size=batch_size, per_row=estimate._per_row
    )
    streamed.placement = "streamed"
    return Placement(
        "streamed",
        chunk_rows=chunk_rows,
        validation_on_device=on_device,
        estimate=streamed,
        capacity=capacity,
        needed=estimate.total,
        validation_chunk_rows=val_chunk,
    )


def out_of_memory_message(est, backend, exc, used, X, y, sample_weight):
    """The MemoryError message of a fit that ran out of device memory."""
    batch_size = used["batch_size"]
    message = (
        f"{backend.name} ran out of memory while training with batch_size={batch_size}: {exc}."
    )
    placement = used.get("placement")
    try:
        estimate = placement.estimate if placement is not None else None
        if estimate is None:
            estimate = estimate_memory(est, X, y, sample_weight=sample_weight)
        capacity = device_capacity(est, backend, allocated=0)
    except Exception:  # the message must not fail: say what is known
        return message + " Use a smaller batch_size, or device='cpu'."
    parts = ", ".join(f"{name} {format_bytes(value)}" for name, value in estimate.items())
    message += f" The fit needs about {format_bytes(estimate.total)} ({parts})"
    if capacity is not None:
        message += f", and {format_bytes(capacity)} was free"
    fits = None if capacity is None else estimate.batch_size_that_fits(capacity)
    advice = f" batch_size={fits} would fit." if fits else " Use a smaller batch_size."
    if placement is not None and placement.kind == "streamed":
        return message + ". The data are streamed from host memory already;" + advice
    return (
        message
        + "."
        + advice
        + " Data too large for the device are streamed from host memory when they do "
        "not fit: max_device_memory= sets the limit sknet plans with; device='cpu' "
        "trains on the host."
    )


def check_full_batch_fits(est, trainer, data, validation):
    """A MemoryError up front when an L-BFGS fit exceeds ``max_device_memory``.

    L-BFGS takes every row in one batch, so its data cannot stream.
    """
    if est.max_device_memory is None:
        return
    backend, (X, Y, _) = trainer.backend, data
    capacity = device_capacity(est, backend)
    rows = slice(_PROBE_ROWS[1])
    estimate = _estimate(
        _AsDevice(backend),
        trainer,
        None,
        data,
        validation,
        batch_size=X.shape[0],
        n_train=X.shape[0],
        keeps_best=False,
        split=False,
        profile=activation_profile(trainer.network, trainer.loss, X[rows], Y[rows], backend),
    )
    if estimate.total > capacity:
        raise NoRoomForBatch(
            f"solver='lbfgs' trains on all {X.shape[0]} rows at once and needs about "
            f"{format_bytes(estimate.total)} on {backend.name}, more than the "
            f"{format_bytes(capacity)} available (max_device_memory="
            f"{est.max_device_memory!r}). Use solver='adam' or 'sgd': their data "
            "stream from host memory when they do not fit."
        )

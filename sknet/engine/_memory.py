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

:mod:`~sknet.engine._placement` plans with the same numbers where ``fit``
and ``partial_fit`` keep their data.
"""

import contextlib
import copy
import re
import tracemalloc
from collections.abc import Mapping
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples

from sknet.backend import Backend, get_backend
from sknet.engine._optimizers import make_optimizer
from sknet.engine._trainer import Trainer, resolve_batch_size

#: The parts of an estimate, in the order they are shown.
PARTS = ("data", "parameters", "gradients", "optimizer_state", "activations", "workspace")

# Rows of the two probe batches (fewer when the data have fewer rows).
PROBE_ROWS = (16, 48)
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
    small, large = min(PROBE_ROWS[0], max(n_rows // 2, 1)), min(PROBE_ROWS[1], n_rows)
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


def at_rows(line, rows):
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


def data_bytes(backend, dtype, X, Y, w, n_train, validation=None, split=False):
    """Bytes of the training (and validation) data a fit puts on the device."""
    total = sum(array_bytes(a, dtype) for a in (X, Y, w) if _copied(a, dtype, backend))
    total += n_train * 8 * (1 if backend.separate_memory else 2)  # the epoch's row order
    if validation is not None:
        X_val, Y_val, w_val = validation
        host_copies = 0 if backend.separate_memory or not split else 1  # X[val_rows]
        total += sum(
            array_bytes(a, dtype) * (host_copies + _copied(a, dtype, backend))
            for a in (X_val, Y_val, w_val)
        )
    return total


def row_bytes(dtype, X, Y, w):
    """Bytes of one row of ``X``, ``Y`` and ``w`` on the device."""
    n = max(X.shape[0], 1)
    return sum(array_bytes(a, dtype) for a in (X, Y, w) if a is not None) / n


# -- estimate_memory ------------------------------------------------------------------
def _probe_rows(X, y, n_rows):
    """Rows of ``X``/``y`` for the probe; every class of a 1-D ``y`` among them."""
    take = np.arange(min(n_rows, PROBE_ROWS[1]))
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
    return assemble_estimate(
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


def assemble_estimate(backend, trainer, optimizer, data, validation, **kw):
    """Assemble a :class:`MemoryEstimate` (shared by estimate_memory and the planner)."""
    X, Y, w = data
    dtype = trainer.network.dtype
    batch = kw["batch_size"]
    parts = model_bytes(trainer, optimizer, keeps_best=kw["keeps_best"], lbfgs=optimizer is None)
    parts["data"] = data_bytes(backend, dtype, X, Y, w, kw["n_train"], validation, kw["split"])
    profile = kw["profile"]
    input_batch = row_bytes(dtype, X, Y, w) * batch  # the gathered batch
    last = kw["n_train"] % batch  # a smaller last batch may reallocate buffers
    parts["activations"] = at_rows(profile["activations"], batch) + input_batch
    parts["activations"] += at_rows(profile["resize"], last)
    parts["workspace"] = at_rows(profile["workspace"], batch)
    if validation is not None:
        chunk = min(trainer.network.predict_chunk_rows(), validation[0].shape[0])
        parts["workspace"] = max(parts["workspace"], at_rows(profile["evaluation"], chunk))
    per_row = profile["activations"][1] + profile["workspace"][1] + input_batch / batch
    estimate = MemoryEstimate(parts, device=backend.name, batch_size=batch, per_row=per_row)
    estimate._profile = profile
    return estimate

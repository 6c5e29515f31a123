"""What a fit needs in device memory, by part.

:func:`~sknet.engine._estimate.estimate_memory` (public as
:func:`sknet.utils.estimate_memory`) adds up the bytes of a fit by part: the
data, the parameters, their gradients, the optimizer's state, the
activations of the largest batch (with their gradients and the layers'
reused buffers) and the workspace (temporaries of a batch, or of a
validation chunk). Parameters, gradients and optimizer state are counted on
the objects a fit builds (for the estimate, built dry: they take no memory);
activations and workspace are measured: a copy of the network runs forward
and backward on two small batches on the host under :mod:`tracemalloc`, and
the growth per row is carried to the batch size
(:func:`~sknet.engine._probe.activation_profile`). That holds for any
layer, a user's too.

On a GPU every array the fit holds there takes whole blocks of the allocator
(:class:`~sknet.backend.MemoryRules`: CuPy's pool rounds to 512 bytes), and
the data are always copied there; on the CPU data already in the fit's dtype
are used in place and count nothing. The rules come from the device string,
so a GPU is sized without CuPy (:func:`~sknet.backend.memory_rules`).

What else a fit holds is counted too, so that the total bounds what the fit
allocates: the copies of the network that the batches split over threads
run (a gradient array and the fixed part of the activations and workspace
each), SciPy's L-BFGS state (measured), the previous model that a refit
keeps until it completes (:mod:`~sknet.engine._transaction`), and, where the
device is the host, the fit's own objects (:data:`HOST_OVERHEAD`).

One computation serves both: :func:`fit_sizes` turns a fit's network,
optimizer and data into :class:`FitSizes`, and :meth:`FitSizes.estimate`
into a :class:`MemoryEstimate`. ``estimate_memory`` calls it on the
estimator's dry clone and a description of the data;
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

from sknet.backend import memory_rules
from sknet.engine import _sharding
from sknet.engine._bytes import format_bytes, parse_bytes
from sknet.engine._probe import activation_profile, at_rows, largest_true, lbfgs_bytes
from sknet.engine._transaction import optimizer_nbytes

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
#: Bytes of a fit's own objects where the device is the host: ``(fixed, per
#: epoch)``, the trainer, callbacks and validation objects, and a row of
#: ``history_`` (and ``loss_curve_``) per epoch (at most ``max_iter``).
HOST_OVERHEAD = (128 << 10, 1 << 10)


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
    memory size into a batch size. ``measured`` is False for a network too
    large to run on the host: its activations and workspace are then
    bounded from the layers' shapes instead of measured.
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
    def measured(self):
        """Whether activations and workspace were measured (else bounded from shapes)."""
        return self._sizes is None or self._sizes.profile.get("measured", True)

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

        Parameters
        ----------
        available : int, float or str
            Bytes: a number, or a string as ``max_device_memory`` takes them
            (``'2MB'``, ``'512 MiB'``; see :func:`~sknet.engine._bytes.parse_bytes`).

        Raises
        ------
        TypeError
            If ``available`` is neither a number nor a string.
        ValueError
            If it is negative or NaN, or a string that is no number of bytes.
        """
        available = _available_bytes(available)
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


def _available_bytes(value):
    """``available`` of :meth:`MemoryEstimate.batch_size_that_fits` as a number of bytes."""
    if isinstance(value, str):
        return parse_bytes(value, "available")
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(
            "available must be a number of bytes or a string such as '8GB' or '512MiB', "
            f"got {value!r}"
        )
    if not value >= 0:  # NaN too
        raise ValueError(f"available must be a non-negative number of bytes, got {value!r}")
    return value


# -- the parts ---------------------------------------------------------------------------
def model_bytes(trainer, optimizer, *, keeps_best, lbfgs=False, backend=None):
    """Bytes of parameters, gradients and optimizer state, counted on the built objects.

    ``backend``: the device they are counted for (default: the trainer's; a
    dry network's is given, or its :class:`~sknet.backend.MemoryRules`).
    """
    rules = memory_rules(trainer.backend if backend is None else backend)
    leaves = [layer for _, layer in trainer.network.leaves()]
    weights = held_bytes(
        (a for layer in leaves for a in (*layer.params.values(), *layer.state.values())),
        rules,
    )
    grads = held_bytes((g for layer in leaves for g in layer.grads.values()), rules)
    state = optimizer_nbytes(optimizer)
    if rules.unit > 1 and optimizer is not None:
        state = held_bytes(_optimizer_arrays(optimizer), rules)
    if optimizer is None and lbfgs and not rules.separate_memory:
        state = lbfgs_bytes(trainer.parameters.flat_params)  # SciPy's, on the host
    return {
        "parameters": weights * (2 if keeps_best else 1),  # early stopping keeps a copy
        "gradients": grads,
        "optimizer_state": state,
    }


def held_bytes(arrays, rules=None):
    """Bytes of ``arrays``; with the :class:`~sknet.backend.MemoryRules` of a device
    whose allocator rounds, the blocks of the allocations they are views of (each once).
    """
    if rules is None or rules.unit == 1:
        return sum(int(a.nbytes) for a in arrays)
    owners = {}
    for a in arrays:
        while hasattr(a.base, "nbytes") and hasattr(a.base, "shape"):
            a = a.base  # a view of a flat array: the allocation is the flat array
        owners[id(a)] = a
    return sum(rules.allocated(a.nbytes) for a in owners.values())


def _optimizer_arrays(optimizer):
    """The arrays of a stochastic optimizer's state and its work array (what
    :func:`~sknet.engine._transaction.optimizer_nbytes` counts)."""
    arrays = [a for name in optimizer.state_names for a in getattr(optimizer, name)]
    tmp = vars(optimizer).get("_tmp")
    return arrays if tmp is None else [*arrays, tmp]


def backend_dtype(a, dtype):
    """The dtype ``a`` takes on the backend: its own for integers (token ids), else ``dtype``.

    Validated data hold integers only where the network takes token ids,
    which stay integers there (:attr:`Network.input_dtype
    <sknet.engine._network.Network.input_dtype>`).
    """
    own = getattr(a, "dtype", None)
    return own if own is not None and own.kind in "iu" else np.dtype(dtype)


def array_bytes(a, dtype, rows=None, rules=None):
    """Bytes of ``a`` (its first ``rows`` rows) as a backend array of ``dtype``; with
    a device's :class:`~sknet.backend.MemoryRules`, in its allocator's blocks."""
    if a is None:
        return 0
    allocated = (lambda n: n) if rules is None else rules.allocated
    n = a.shape[0] if rows is None else rows
    itemsize = backend_dtype(a, dtype).itemsize
    if hasattr(a, "nnz"):  # sparse: values, column indices, row pointers
        nnz = a.nnz if rows is None else int(a.nnz * n / max(a.shape[0], 1))
        return (
            allocated(nnz * itemsize)
            + allocated(nnz * a.indices.itemsize)
            + allocated((n + 1) * a.indptr.itemsize)
        )
    return allocated(n * int(np.prod(a.shape[1:], dtype=np.int64)) * itemsize)


def _copied(a, dtype, backend):
    """Whether moving ``a`` to ``backend`` in ``dtype`` makes a copy."""
    if a is None:
        return False
    return backend.separate_memory or a.dtype != backend_dtype(a, dtype)


def order_bytes(backend, n_train):
    """Bytes of the epoch's row order (and, on the host, its shuffled copy)."""
    if backend.separate_memory:
        return memory_rules(backend).allocated(n_train * 8)
    return n_train * 8 * 2


def validation_bytes(backend, dtype, validation, split):
    """Bytes the validation set adds: ``(host copies of a split, copies on the device)``."""
    if validation is None:
        return 0, 0
    host = 0 if backend.separate_memory or not split else 1  # X[val_rows] on the host
    arrays = [a for a in validation if a is not None]
    rules = memory_rules(backend)
    return (
        host * sum(array_bytes(a, dtype) for a in arrays),
        sum(array_bytes(a, dtype, rules=rules) for a in arrays if _copied(a, dtype, backend)),
    )


def data_bytes(backend, dtype, X, Y, w, n_train, validation=None, split=False):
    """Bytes of the training (and validation) data a fit puts on the device.

    On the CPU, arrays already in the fit's dtype are used in place (nothing);
    a device with memory of its own gets a copy of each, in its allocator's blocks.
    """
    rules = memory_rules(backend)
    total = sum(
        array_bytes(a, dtype, rules=rules) for a in (X, Y, w) if _copied(a, dtype, backend)
    )
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
    chunk). ``shards``: ``(threads, work per sample)`` when batches may split
    over threads (:mod:`~sknet.engine._sharding`), else None; ``previous``:
    ``(weights, optimizer state)`` bytes the fit keeps of a previous model;
    ``overhead``: bytes of the fit's own objects on the host (0 on a GPU).
    """

    def __init__(self, *, device, separate_memory, model, data, order, profile, row, n_train):
        self.device, self.separate_memory = device, separate_memory
        self.model, self.data, self.order = model, data, order
        self.profile, self.row, self.n_train = profile, row, n_train
        self.val_host = self.val_device = self.val_row = 0
        self.eval_chunk = self.shards = None
        self.previous, self.overhead = (0, 0), 0

    def n_shards(self, batch_size):
        """How many copies of the network run a batch of ``batch_size`` rows (1: none)."""
        if self.shards is None:
            return 1
        return _sharding.shard_count(batch_size, *self.shards)

    def batch_workspace(self, batch_size):
        """The temporaries of a training batch of ``batch_size`` rows (on its copies)."""
        batch = int(batch_size)
        return _copies_at(self.profile["workspace"], batch, self.n_shards(batch))

    def estimate(self, batch_size, *, streamed_data=None, last=None):
        """The :class:`MemoryEstimate` of a fit with batches of ``batch_size`` rows.

        With ``streamed_data`` (bytes of the chunk buffers and the validation
        set), the data are streamed: no gathered batch among the activations.
        ``last``: rows of the epoch's last, smaller batch (default: the rest
        of the training rows). Split over ``n`` threads, a batch runs on ``n``
        copies of the network: ``n - 1`` more gradient arrays, and the fixed
        parts of the activations and workspace ``n`` times.
        """
        batch, profile = int(batch_size), self.profile
        last = self.n_train % batch if last is None else last
        copies = self.n_shards(batch)
        parts = dict(self.model)
        parts["parameters"] += self.previous[0]
        parts["optimizer_state"] += self.previous[1]
        parts["gradients"] += (copies - 1) * self.model["gradients"]
        parts["data"] = self.data if streamed_data is None else streamed_data
        parts["activations"] = _copies_at(profile["activations"], batch, copies)
        parts["activations"] += at_rows(profile["resize"], last)  # the last batch's buffers
        if streamed_data is None:
            parts["activations"] += self.row * batch  # the batch gathered from the data
        parts["workspace"] = self.batch_workspace(batch)
        if self.eval_chunk is not None:
            evaluation = at_rows(profile["evaluation"], self.eval_chunk)
            parts["workspace"] = max(parts["workspace"], evaluation)
        parts["workspace"] += self.overhead
        return MemoryEstimate(
            parts,
            device=self.device,
            batch_size=batch,
            placement="device" if streamed_data is None else "streamed",
            sizes=self,
        )


def _copies_at(line, rows, copies):
    """A measured line at ``rows`` rows shared out among ``copies`` copies of the network."""
    fixed, per_row = line
    return copies * fixed + per_row * rows


def fit_sizes(
    backend,
    trainer,
    optimizer,
    data,
    validation,
    *,
    n_train,
    keeps_best,
    split,
    probe,
    epochs=1,
    previous=(0, 0),
):
    """The :class:`FitSizes` of a fit: shared by ``estimate_memory`` and the planner.

    ``backend`` is the fit's :class:`~sknet.backend.Backend`, or a CUDA device's
    :class:`~sknet.backend.MemoryRules` standing in for it (no CuPy needed: the
    measurement runs on the host either way). ``data`` is ``(X, Y, w)`` as the
    fit holds them (or :class:`DataShape` stand-ins), ``validation`` likewise
    or None, ``split`` whether the validation set is a split of ``X`` (early
    stopping: then its rows are counted in proportion to ``X``'s, as
    ``estimate_memory`` counts them), ``probe`` the rows ``(X, Y)`` to measure on (the first
    :func:`~sknet.engine._probe.probe_rows` of the data), ``epochs`` the
    most the fit runs, ``previous`` the bytes it keeps of a previous model.
    """
    X, Y, w = data
    dtype = trainer.network.dtype
    if split:  # which rows were drawn does not count (sparse rows differ in size)
        n_val = validation[0].shape[0]
        validation = tuple(None if a is None else _described(a).rows(n_val) for a in data)
    sizes = FitSizes(
        device=backend.name,
        separate_memory=backend.separate_memory,
        model=model_bytes(
            trainer, optimizer, keeps_best=keeps_best, lbfgs=optimizer is None, backend=backend
        ),
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
    if not backend.separate_memory:  # the host: threads, and the fit's own objects
        threads = _sharding.cpu_threads() if trainer.plan.shardable else 1
        if threads > 1:
            sizes.shards = (threads, _sharding.work_per_sample(trainer.network))
        fixed, per_epoch = HOST_OVERHEAD
        sizes.overhead = fixed + per_epoch * max(int(epochs), 1)
    sizes.previous = tuple(previous)
    return sizes


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

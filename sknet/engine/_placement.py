"""Where a fit's training data go: on the device once, or streamed from the host.

:func:`plan_placement` makes the decision ``fit`` and ``partial_fit`` act on,
with the numbers of :mod:`~sknet.engine._memory`: the data stay on the device
when everything fits in the memory that is free there (or in
``max_device_memory``), else they stay on the host and are streamed in chunks
of many batches (:class:`~sknet.backend.RowStream`). The error messages of a
fit that does not fit are written here too.
"""

from dataclasses import dataclass

from sknet.engine._memory import (
    PROBE_ROWS,
    MemoryEstimate,
    activation_profile,
    array_bytes,
    assemble_estimate,
    at_rows,
    data_bytes,
    estimate_memory,
    format_bytes,
    model_bytes,
    parse_bytes,
    row_bytes,
)
from sknet.engine._types import BackendData, NoRoomForBatch, StreamedData

# One chunk buffer holds at most this many bytes: the first chunk of an epoch is
# copied before any computation can hide it, so chunks stay moderate.
_MAX_CHUNK_BYTES = 256 << 20
# Share of the measured activations and workspace kept free beyond the estimate.
_MARGIN = 0.25


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
    rows = train_rows[: PROBE_ROWS[1]] if train_rows is not None else slice(PROBE_ROWS[1])
    profile = activation_profile(trainer.network, trainer.loss, X[rows], Y[rows], backend)
    estimate = assemble_estimate(
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
    workspace, val_chunk = at_rows(profile["workspace"], batch_size), None
    if validation is not None:  # chunks whose inference costs what a batch costs
        fixed, per_row = profile["evaluation"]
        val_chunk = est.network_.predict_chunk_rows()
        if per_row > 0:
            val_chunk = min(val_chunk, int((max(kept, workspace) - fixed) // per_row))
        val_chunk = max(min(val_chunk, validation[0].shape[0]), 1)
        workspace = max(workspace, at_rows(profile["evaluation"], val_chunk))
    model = estimate["parameters"] + estimate["gradients"] + estimate["optimizer_state"]
    budget = capacity - model - (1 + _MARGIN) * (kept + workspace)
    buffers, val_bytes = backend.stream_buffers, 0
    if validation is not None:
        val_bytes = sum(array_bytes(a, dtype) for a in validation if a is not None)
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
    rows = slice(PROBE_ROWS[1])
    estimate = assemble_estimate(
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

"""Where a fit's training data go: on the device once, or streamed from the host.

:func:`plan_placement` makes the decision ``fit`` and ``partial_fit`` act on,
with the computation of :func:`~sknet.engine._estimate.estimate_memory`
(:func:`~sknet.engine._memory.fit_sizes` on the fit's own network and data):
the data stay on the device when the estimate's ``total`` fits in
``max_device_memory`` (give or take its ``tolerance``) and, on a GPU,
``total`` plus its ``margin`` fits in the memory free there
(:class:`DeviceRoom`); else they
stay on the host and are streamed in chunks of many batches
(:class:`~sknet.backend.RowStream`). The error messages of a fit that does
not fit are written here too: they say what would (a batch size,
``max_device_memory``, ``device='cpu'``).
"""

from dataclasses import dataclass

from sknet.engine._bytes import format_bytes, limit_string, parse_bytes
from sknet.engine._estimate import estimate_memory
from sknet.engine._memory import MARGIN, MemoryEstimate, data_bytes, fit_sizes, model_bytes
from sknet.engine._probe import at_rows, largest_true, probe_rows
from sknet.engine._transaction import held_by_transaction
from sknet.engine._types import BackendData, NoRoomForBatch, StreamedData

# One chunk buffer holds at most this many bytes: the first chunk of an epoch is
# copied before any computation can hide it, so chunks stay moderate.
_MAX_CHUNK_BYTES = 256 << 20


@dataclass
class Placement:
    """Where a fit keeps its data: ``kind`` is ``'device'`` or ``'streamed'``.

    Streamed data come in chunks of ``chunk_rows`` rows (a multiple of the
    batch size); ``validation_on_device`` says whether the validation set
    was moved there once (else it is moved chunk by chunk at every epoch),
    evaluated in chunks of ``validation_chunk_rows``. ``estimate`` (None when
    nothing was measured; for streamed data, the plan's own parts),
    ``capacity`` (the bytes the plan may use) and ``needed`` (the total with
    all the data on the device) are the numbers the decision was made on.
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
        dtype = est._np_dtype
        dtypes = (est.network_.input_dtype, dtype, dtype)  # token ids stay integers
        stream = backend.row_stream((X, Y, w), dtypes, self.chunk_rows)
        return StreamedData(X, Y, w, self.chunk_rows, stream)

    def describe(self, n_rows):
        """The line ``verbose`` prints about a streamed fit."""
        return (
            f"Data: streamed from host memory in chunks of {self.chunk_rows} rows (with "
            f"all {n_rows} rows on the device the fit would need about "
            f"{format_bytes(self.needed)}; {format_bytes(self.capacity)} is available)"
        )


@dataclass(frozen=True)
class DeviceRoom:
    """The device memory a fit may use: ``limit`` (``max_device_memory``) and ``free``.

    ``free`` is what a GPU has free (with what the fit already holds there),
    None on the CPU; both None: no bound. The data fit on the device when
    the estimate's ``total <= limit + tolerance`` and ``total + margin <=
    free``: the margin (:attr:`MemoryEstimate.margin`) is kept free on a GPU,
    never counted against ``max_device_memory``; the tolerance
    (:attr:`MemoryEstimate.tolerance`) is what the measurement varies by, so
    that a limit of what :func:`~sknet.engine._estimate.estimate_memory` said
    keeps the data there. A streamed plan keeps within ``limit`` itself.
    """

    limit: int | None
    free: int | None
    given: object = None  # max_device_memory as the user wrote it

    @property
    def bounded(self):
        return self.limit is not None or self.free is not None

    def room(self, margin):
        """Bytes a plan with this margin may use (None: no bound)."""
        rooms = [self.limit, None if self.free is None else self.free - margin]
        rooms = [r for r in rooms if r is not None]
        return min(rooms) if rooms else None

    def fits(self, estimate):
        """Whether the data of ``estimate`` (on the device) fit."""
        if self.limit is not None and estimate.total > self.limit + estimate.tolerance:
            return False
        return self.free is None or estimate.total + estimate.margin <= self.free

    def describe(self, backend_name):
        """``"max_device_memory='2MiB' allows 2.0 MiB"``, and what is free on a GPU."""
        said = []
        if self.limit is not None:
            said.append(f"max_device_memory={self.given!r} allows {format_bytes(self.limit)}")
        if self.free is not None:
            said.append(
                f"{format_bytes(self.free)} is free on {backend_name} (less a margin of "
                f"{MARGIN:.0%} of the activations and workspace)"
            )
        return " and ".join(said)


def device_room(est, backend, allocated=0):
    """The :class:`DeviceRoom` of a fit of ``est`` on ``backend``.

    ``allocated`` bytes (the model, already on the device) count as free.
    """
    limit = None if est.max_device_memory is None else parse_bytes(est.max_device_memory)
    free = None
    if backend.separate_memory:
        free = backend.available_memory()
        if free is not None:
            free += allocated
    return DeviceRoom(limit, free, est.max_device_memory)


def device_capacity(est, backend, allocated=0):
    """Bytes the fit may use on the device, margin aside (None: no bound)."""
    return device_room(est, backend, allocated).room(0)


def backend_data(est, backend, X, Y, w):
    """The data moved to the backend once, in the estimator's dtype; batches are gathered there."""
    dtype = est._np_dtype
    return BackendData(
        backend.asarray(X, est.network_.input_dtype),  # token ids stay integers
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


def _sizes_of_fit(est, trainer, optimizer, data, validation, train_rows, *, lbfgs=False):
    """:func:`~sknet.engine._memory.fit_sizes` of this fit, as estimate_memory computes them."""
    X, Y, _ = data
    n_train = X.shape[0] if train_rows is None else train_rows.shape[0]
    rows = slice(probe_rows(n_train))  # the rows estimate_memory measures on too
    return fit_sizes(
        trainer.backend,
        trainer,
        optimizer,
        data,
        validation,
        n_train=n_train,
        keeps_best=est.early_stopping and not lbfgs,
        split=train_rows is not None,
        probe=(X[rows], Y[rows]),
        epochs=est.max_iter,  # partial_fit runs one: a bound
        previous=held_by_transaction(est),
    )


def plan_placement(est, trainer, optimizer, data, validation, *, train_rows, batch_size):
    """Decide where a stochastic fit keeps its data (see :class:`Placement`).

    The data stay on the device when the fit's estimate fits in
    :func:`device_room`; else they are streamed from the host in chunks as
    large as the memory left after the model, the activations and the
    workspace allows, at most ``_MAX_CHUNK_BYTES`` each. When not even one
    batch fits, a :class:`~sknet.exceptions.DeviceMemoryError` says what
    would.
    """
    backend, dtype = trainer.backend, trainer.network.dtype
    X, Y, w = data
    n_train = X.shape[0] if train_rows is None else train_rows.shape[0]
    model = sum(model_bytes(trainer, optimizer, keeps_best=est.early_stopping).values())
    room = device_room(est, backend, allocated=model)
    if not room.bounded:
        return Placement("device")
    if room.limit is None:
        data_total = data_bytes(backend, dtype, X, Y, w, n_train, validation)
        if model + data_total <= room.free / 2:  # plenty of room: nothing to measure
            return Placement("device", capacity=room.free)
    sizes = _sizes_of_fit(est, trainer, optimizer, data, validation, train_rows)
    placement = _plan(sizes, batch_size, room, backend.stream_buffers)
    if placement is None:
        raise NoRoomForBatch(_no_room_message(sizes, batch_size, room, backend))
    return placement


def _plan(sizes, batch_size, room, buffers):
    """The :class:`Placement` of a fit with these sizes in this room, or None."""
    estimate = sizes.estimate(batch_size)
    if room.fits(estimate):
        return Placement(
            "device",
            estimate=estimate,
            capacity=room.room(estimate.margin),
            needed=estimate.total,
        )
    return _streamed(sizes, estimate, room, buffers)


def _streamed(sizes, estimate, room, buffers):
    """The streamed :class:`Placement`, or None when not even a batch fits.

    What the plan holds on the device: the model, the activations (no
    gathered batch: batches are slices of a chunk) and workspace of a batch,
    ``buffers`` chunk buffers and the validation set (whole, when it takes
    at most half of what is left and leaves room for a batch's chunk; else
    one evaluation chunk at a time).
    """
    batch, n_train, profile = estimate.batch_size, sizes.n_train, sizes.profile
    streamed = sizes.estimate(batch, streamed_data=0)
    kept, workspace = streamed["activations"], sizes.batch_workspace(batch)
    val_chunk = None
    if sizes.eval_chunk is not None:  # chunks whose inference costs what a batch costs
        fixed, per_row = profile["evaluation"]
        val_chunk = sizes.eval_chunk
        if per_row > 0:
            val_chunk = min(val_chunk, int((max(kept, workspace) - fixed) // per_row))
        val_chunk = max(val_chunk, 1)
        workspace = max(workspace, at_rows(profile["evaluation"], val_chunk))
    space = room.room(int(MARGIN * (kept + workspace)))
    fixed_data = sizes.val_host + (0 if sizes.separate_memory else sizes.order)
    model = streamed["parameters"] + streamed["gradients"] + streamed["optimizer_state"]
    workspace += sizes.overhead  # the fit's own objects (on the host), beyond the margin
    budget = space - model - kept - workspace - fixed_data
    smallest_chunk = buffers * sizes.row * min(batch, n_train)
    on_device, val_bytes = True, 0
    if sizes.eval_chunk is not None:
        on_device = sizes.val_device <= budget / 2 and budget - sizes.val_device >= smallest_chunk
        val_bytes = sizes.val_device if on_device else sizes.val_row * val_chunk
    chunk_rows = int(max(budget - val_bytes, 0) // (buffers * sizes.row))
    chunk_rows = min(chunk_rows, int(_MAX_CHUNK_BYTES // sizes.row), n_train)
    if chunk_rows < n_train:
        chunk_rows -= chunk_rows % batch
    if chunk_rows < min(batch, n_train):
        return None
    parts = dict(streamed)
    parts["data"] = buffers * chunk_rows * sizes.row + val_bytes + fixed_data
    parts["workspace"] = workspace
    plan = MemoryEstimate(
        parts, device=sizes.device, batch_size=batch, placement="streamed", sizes=sizes
    )
    return Placement(
        "streamed",
        chunk_rows=chunk_rows,
        validation_on_device=on_device,
        estimate=plan,
        capacity=space,
        needed=estimate.total,
        validation_chunk_rows=val_chunk,
    )


def _smallest_limit(sizes, batch_size, buffers):
    """The smallest ``max_device_memory`` that takes this batch size with the data streamed.

    None when no limit does (a row larger than a chunk may be).
    """
    high = sizes.estimate(batch_size).total + buffers * sizes.row * sizes.n_train
    high += sizes.val_device + sizes.val_row * (sizes.eval_chunk or 0)

    def streams(limit):
        estimate = sizes.estimate(batch_size)
        return _streamed(sizes, estimate, DeviceRoom(limit, None), buffers) is not None

    if not streams(high):
        return None
    return high - largest_true(lambda cut: streams(high - cut), high - 1)


def _no_room_message(sizes, batch_size, room, backend):
    """What a fit whose batch does not fit needs, and what would fit."""
    buffers = backend.stream_buffers
    on_device = sizes.estimate(batch_size).total
    streamed = _smallest_limit(sizes, batch_size, buffers)
    needed = on_device if streamed is None else min(streamed, on_device)
    message = (
        f"Not even one batch fits on {backend.name}: with batch_size={batch_size} the "
        f"fit needs about {format_bytes(on_device)} with the data on the device"
        + ("" if streamed is None else f", {format_bytes(streamed)} with them streamed")
        + f", and {room.describe(backend.name)}."
    )
    advice = []
    fits = largest_true(lambda b: _plan(sizes, b, room, buffers) is not None, batch_size - 1)
    if fits:
        advice.append(f"batch_size={fits}")
    unlimited = DeviceRoom(None, room.free)
    if room.limit is not None and _plan(sizes, batch_size, unlimited, buffers) is not None:
        advice.append(f"max_device_memory={limit_string(needed)!r} or more")
    if backend.separate_memory:
        advice.append("device='cpu' (host memory)")
    elif room.limit is not None:
        advice.append("max_device_memory=None (no limit on the CPU)")
    return message + " Use " + ", or ".join(advice) + "."


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
        capacity = device_capacity(est, backend)
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

    L-BFGS takes every row in one batch, so its data cannot stream. The
    estimate is :func:`~sknet.engine._estimate.estimate_memory`'s, and the rule
    the stochastic solvers' (:class:`DeviceRoom`).
    """
    if est.max_device_memory is None:
        return
    backend, (X, _, _) = trainer.backend, data
    sizes = _sizes_of_fit(est, trainer, None, data, validation, None, lbfgs=True)
    estimate = sizes.estimate(X.shape[0])
    room = device_room(est, backend, allocated=sum(sizes.model.values()))
    if room.fits(estimate):
        return
    advice = "Use solver='adam' or 'sgd': their data stream from host memory when they do not fit"
    if room.free is None or estimate.total + estimate.margin <= room.free:
        advice += f", or max_device_memory={limit_string(estimate.total)!r} or more"
    if backend.separate_memory:
        advice += ", or device='cpu'"
    raise NoRoomForBatch(
        f"solver='lbfgs' trains on all {X.shape[0]} rows at once and needs about "
        f"{format_bytes(estimate.total)} on {backend.name}, more than the "
        f"{format_bytes(room.room(estimate.margin))} available (max_device_memory="
        f"{est.max_device_memory!r}). {advice}."
    )

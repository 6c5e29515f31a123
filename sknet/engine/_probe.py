"""Measuring what a network allocates per row: two small batches under tracemalloc.

:func:`activation_profile` runs a copy of the network forward and backward on
two small batches on the host and fits a line (fixed bytes, bytes per row) to
the peaks of the activations, the workspace, a resized last batch and an
evaluation chunk: how :mod:`~sknet.engine._memory` carries them to any batch
size, for any layer, a user's too. The copy (:func:`probe_network`) shares
the network's host parameters or stands for them with shared zero buffers:
measuring copies no model. A network whose arrays would take more than
:data:`MEASURE_LIMIT` bytes even so is not run: its profile is bounded from
the layers' shapes (:func:`shape_profile`). :func:`lbfgs_bytes` is what
SciPy's L-BFGS-B holds, measured once.
"""

import contextlib
import copy
import functools
import gc
import math
import tracemalloc
import warnings

import numpy as np

from sknet.backend import Backend
from sknet.engine._lbfgs import minimize_lbfgs
from sknet.layers._tree import walk

#: Rows of the two probe batches (fewer when the fit has fewer training rows).
PROBE_ROWS = (16, 48)
#: The most bytes of zero buffers :func:`probe_network` may allocate to stand for
#: a network's arrays; beyond, the network is not run (:func:`shape_profile`).
MEASURE_LIMIT = 256 << 20


@contextlib.contextmanager
def _young_garbage_only():
    """Let the garbage collector see only the objects made in the block.

    The objects that exist already are frozen (:func:`gc.freeze`, cheap), so
    that the collections of :func:`_traced` cost what the measurement makes,
    not what the process holds. Where the process froze objects of its own,
    nothing is frozen (unfreezing would release them too).
    """
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()


@contextlib.contextmanager
def _traced():
    """Bytes allocated in the block: ``'retained'`` at its end and the ``'peak'``.

    The garbage collector runs before the block and is held off in it, so
    that what it frees of others' garbage does not vary the numbers; what the
    block leaves unreachable is collected before ``'retained'`` is read.
    """
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = {}
    try:
        yield result
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        gc.collect()  # what the block left unreachable is not retained
        current = tracemalloc.get_traced_memory()[0]
        result.update(retained=max(current - base, 0), peak=max(peak - base, 0))
        if started:
            tracemalloc.stop()
        if collecting:
            gc.enable()


def _probe_backend(backend):
    """Where to measure: the host; the xp-generic code when the fit runs on a GPU."""
    return backend if not backend.separate_memory else Backend("cpu", np)


#: The arrays of a layer that :func:`probe_network` gives views of zero buffers
#: (``state`` always: a training forward writes running statistics).
_HELD = ("params", "grads", "state")


def _shared(kind, a):
    """Whether the probe's copy uses ``a`` itself: a real host array it only reads."""
    return kind != "state" and type(a) is np.ndarray


def _pool_key(kind, position, a):
    """Which zero buffer stands for ``a``: a parameter and its gradient share one (the
    values do not matter, only what the passes allocate), state has its own."""
    return ("state" if kind == "state" else "params", position, np.dtype(a.dtype))


def _pool_sizes(network):
    """``{buffer key: elements}`` of the zero buffers :func:`probe_network` makes."""
    sizes = {}
    for _, layer in walk(network.layers):
        for kind in _HELD:
            for j, a in enumerate(vars(layer).get(kind, {}).values()):
                if not _shared(kind, a):
                    key = _pool_key(kind, j, a)
                    sizes[key] = max(sizes.get(key, 0), int(a.size))
    return sizes


def probe_bytes(network):
    """Bytes of the zero buffers :func:`probe_network` allocates for ``network``."""
    return sum(n * key[2].itemsize for key, n in _pool_sizes(network).items())


def probe_network(network, backend):
    """A copy of ``network`` on ``backend`` (the host) to measure on, costing little.

    Parameters and gradients that are host arrays are shared (the copy reads
    the parameters and overwrites the gradients, which every batch
    overwrites anyway); the others (those of a dry network, or on a GPU) are
    views of zero buffers shared by all layers, one per position in the
    ``params`` dict and dtype (a gradient shares its parameter's: the values
    do not matter, only what the passes allocate), each as large as the
    largest such array, and so is every ``state`` array (running statistics,
    which a training forward writes), in buffers of its own. Other arrays of
    the layers are shared; training buffers and caches start empty. So
    neither the fit's model nor a dry network is copied: what it costs is
    the largest layer's arrays at most, and the measurement sees the arrays
    the passes allocate.
    """
    pools = {key: np.zeros(n, key[2]) for key, n in _pool_sizes(network).items()}
    memo = {id(network.backend): backend}
    for _, layer in walk(network.layers):
        held = vars(layer)
        if "backend_" in held:
            memo[id(held["backend_"])] = backend
        for kind in _HELD:
            for j, a in enumerate(held.get(kind, {}).values()):
                shared = _shared(kind, a)
                memo[id(a)] = (
                    a if shared else pools[_pool_key(kind, j, a)][: a.size].reshape(a.shape)
                )
        for name, value in held.items():
            if name in ("_buffers", "_cache"):
                memo[id(value)] = {}  # this layer's own, empty
            elif name not in _HELD:
                for a in _arrays_in(value):  # shared; a device array's stand-in on the host
                    on_device = hasattr(a, "__cuda_array_interface__")
                    memo.setdefault(id(a), np.zeros(a.shape, a.dtype) if on_device else a)
    return copy.deepcopy(network, memo).to_backend(backend)


def _arrays_in(value):
    """The arrays an attribute holds: itself, or the values of a dict or a list."""
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, (dict, list, tuple)):
        return [a for a in items if hasattr(a, "shape") and hasattr(a, "dtype")]
    return [value] if hasattr(value, "shape") and hasattr(value, "dtype") else []


def _run_probe(network, loss, X, Y, sizes, probe, training):
    """Retained and peak bytes of forward (and backward) passes over ``sizes`` rows.

    The passes run one after the other on one fresh copy of the network
    (:func:`probe_network`), as consecutive batches do.
    """
    net = probe_network(network, probe)  # fresh: no buffers yet
    net_loss = copy.deepcopy(loss)
    measured = []
    for n in sizes:
        Xn, Yn = probe.asarray(X[:n], net.input_dtype), probe.asarray(Y[:n], net.dtype)
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


def probe_rows(n_train):
    """How many rows of the training data the measurement takes (:func:`activation_profile`)."""
    return max(min(PROBE_ROWS[1], n_train), 1)


def shape_profile(network):
    """An upper bound of :func:`activation_profile` from the layers' shapes alone.

    For a network too large to run on the host: per row, each leaf layer
    keeps four arrays of the size of its input and of its largest
    intermediate (``values_per_sample``), and the largest layer makes as many
    temporaries. ``'measured'`` is False.
    """
    itemsize = np.dtype(network.dtype).itemsize
    sizes = [
        (math.prod(layer.input_shape_) + int(layer.values_per_sample())) * itemsize
        for _, layer in network.leaves()
    ]
    kept, temporary = 4.0 * sum(sizes), 4.0 * max(sizes)
    return {
        "activations": (0.0, kept),
        "workspace": (0.0, temporary),
        "resize": (0.0, 0.0),
        "evaluation": (0.0, temporary),
        "measured": False,
    }


@functools.cache
def _lbfgs_bytes_per_parameter():
    """Bytes per parameter that L-BFGS-B holds as :func:`~sknet.engine._lbfgs.run_lbfgs`
    runs it: SciPy's state (its history of corrections) and the float64 vectors
    the iterations pass (the start, the gradient, the last iterate kept), with
    the cast of each iterate to the network's dtype. Measured once, on 2**15
    parameters."""
    n = 1 << 15
    curvature = np.linspace(1.0, 3.0, n)
    kept = {}

    def loss_and_grad(x):
        x.astype(np.float32)  # the cast into the flat parameters
        grad = curvature * x
        return float(0.5 * grad @ x), grad

    def end_iteration(iteration, x, loss):
        kept["x"] = x.copy()

    with warnings.catch_warnings(), _traced() as used:
        warnings.simplefilter("ignore")  # stopping after a few iterations is the point
        x0 = np.ones(n)
        minimize_lbfgs(loss_and_grad, x0, max_iter=15, max_fun=50, tol=0.0, callback=end_iteration)
        del x0
    return used["peak"] / n


def lbfgs_bytes(flat_params):
    """Bytes L-BFGS (SciPy's, on the host) holds to train ``flat_params``."""
    return int(math.ceil(_lbfgs_bytes_per_parameter() * int(flat_params.size)))


def activation_profile(network, loss, X, Y, backend):
    """How activations and workspace grow with the batch, measured on the host.

    ``X`` and ``Y`` are the rows to measure on (:func:`probe_rows` of them).
    Returns a dict of ``(fixed, per_row)`` lines: ``'activations'`` (what a
    training pass keeps: layer caches and buffers), ``'workspace'`` (its
    temporaries beyond that), ``'resize'`` (buffers a smaller batch allocates
    anew while the larger ones still exist: the time-major buffers of
    recurrent layers) and ``'evaluation'`` (the peak of an inference pass, for
    validation chunks).
    """
    if probe_bytes(network) > MEASURE_LIMIT:
        return shape_profile(network)
    probe = _probe_backend(backend)
    n_rows = X.shape[0]
    small, large = min(PROBE_ROWS[0], max(n_rows // 2, 1)), min(PROBE_ROWS[1], n_rows)
    sizes = (small, large)
    with _young_garbage_only():
        _run_probe(network, loss, X, Y, [large, small], probe, True)  # compiles, fills caches
        # Each size twice: the second pass, its buffers there already, shows the
        # temporaries an early layer makes before the later ones allocate theirs.
        (kept1, peak1), (_, again1) = _run_probe(network, loss, X, Y, [small] * 2, probe, True)
        (kept2, peak2), (_, again2), (_, peak3) = _run_probe(
            network, loss, X, Y, [large, large, small], probe, True
        )
        infer = [_run_probe(network, loss, X, Y, [n], probe, False)[0] for n in sizes]
    work1, work2 = max(peak1 - kept1, again1), max(peak2 - kept2, again2)
    resized = max(peak3 - work1, 0) if large > small else 0
    return {
        "activations": _line(sizes, [kept1, kept2]),
        "workspace": _line(sizes, [work1, work2]),
        "resize": (0.0, resized / small),
        "evaluation": _line(sizes, [peak for _, peak in infer]),
    }


def largest_true(predicate, high):
    """The largest ``n`` in ``1..high`` with ``predicate(n)`` (0: none), for a
    predicate that holds up to some ``n`` and not beyond."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if predicate(middle):
            low = middle
        else:
            high = middle - 1
    return low


def at_rows(line, rows):
    fixed, per_row = line
    return fixed + per_row * rows

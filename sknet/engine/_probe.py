"""Measuring what a network allocates per row: two small batches under tracemalloc.

:func:`activation_profile` runs a copy of the network forward and backward on
two small batches on the host and fits a line (fixed bytes, bytes per row) to
the peaks of the activations, the workspace, a resized last batch and an
evaluation chunk: how :mod:`~sknet.engine._memory` carries them to any batch
size, for any layer, a user's too.
"""

import contextlib
import copy
import gc
import tracemalloc

import numpy as np

from sknet.backend import Backend

#: Rows of the two probe batches (fewer when the fit has fewer training rows).
PROBE_ROWS = (16, 48)


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


def _run_probe(network, loss, X, Y, sizes, probe, training):
    """Retained and peak bytes of forward (and backward) passes over ``sizes`` rows.

    The passes run one after the other on one fresh copy of the network, as
    consecutive batches do.
    """
    net = copy.deepcopy(network).to_backend(probe)  # fresh: no buffers yet
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
    probe = _probe_backend(backend)
    n_rows = X.shape[0]
    small, large = min(PROBE_ROWS[0], max(n_rows // 2, 1)), min(PROBE_ROWS[1], n_rows)
    sizes = (small, large)
    with _young_garbage_only():
        _run_probe(network, loss, X, Y, [large, small], probe, True)  # compiles, fills caches
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

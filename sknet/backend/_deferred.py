"""A helper thread for the backward pass's weight gradients, so that a fit uses a second core.

A tabular network's batch is a chain of small matrix products with Python
between them: OpenBLAS's own threads gain little on them and collapse when
another process holds a core, and split products give other bits. But half of
the backward pass's products, each layer's weight gradient, are needed by no
later step of that pass, only by the optimizer. While :func:`helper_thread` is
active, a layer hands such a product to :meth:`Backend.defer
<sknet.backend.Backend.defer>`, which queues it for one helper thread, and
carries on with its input's gradient; :meth:`Backend.finish_deferred
<sknet.backend.Backend.finish_deferred>`, called by the network at the end of
its backward pass, waits for the queue. Every product still runs whole on a
single-threaded BLAS, on one thread or the other, so a fit gives the same bits
with or without the helper.

The helper blocks on its queue when idle (no spinning: under load it costs the
busy cores nothing). The active helper is a :class:`contextvars.ContextVar`:
each thread sees its own, so fits run in several threads (row shards, a
threaded search) each defer to their own helper or run their work at once.
"""

import contextlib
import contextvars
import queue
import threading

_ACTIVE = contextvars.ContextVar("sknet_helper_thread", default=None)


class HelperThread:
    """One daemon thread running queued calls in order; :meth:`wait` joins the queue."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self._done = threading.Semaphore(0)
        self._pending = 0
        self._error = None
        self._thread = threading.Thread(target=self._loop, name="sknet-helper", daemon=True)
        self._thread.start()

    def _loop(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            except BaseException as error:  # noqa: BLE001 - raised again by wait()
                if self._error is None:
                    self._error = error
            finally:
                self._done.release()

    def submit(self, fn, args):
        """Queue ``fn(*args)``."""
        self._pending += 1
        self._jobs.put((fn, args))

    def wait(self):
        """Return when every queued call has run; the first error of one is raised here."""
        while self._pending:
            self._done.acquire()
            self._pending -= 1
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self):
        """Run what is queued, then end the thread."""
        self._jobs.put(None)
        self._thread.join()


@contextlib.contextmanager
def helper_thread(enabled=True):
    """Within the block, :func:`defer` queues its calls for a helper thread.

    ``enabled=False``, or a helper already active in this thread, changes
    nothing. The helper's queue is waited for, and the thread ended, on the way out.
    """
    if not enabled or _ACTIVE.get() is not None:
        yield
        return
    helper = HelperThread()
    token = _ACTIVE.set(helper)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        try:
            helper.wait()
        finally:
            helper.close()


def defer(fn, *args):
    """``fn(*args)`` on the active helper thread, or now where there is none."""
    helper = _ACTIVE.get()
    if helper is None:
        fn(*args)
    else:
        helper.submit(fn, args)


def finish_deferred():
    """Wait for the calls :func:`defer` queued in this thread (none: return at once)."""
    helper = _ACTIVE.get()
    if helper is not None:
        helper.wait()


class DeferredWork:
    """:meth:`defer` and :meth:`finish_deferred`, a mixin of Backend."""

    def defer(self, fn, *args, overlap=True):
        """``fn(*args)`` now, or on the fit's helper thread while one runs (the CPU only).

        For a backward pass's work that only the optimizer reads, a weight's
        gradient: its inputs must stay unchanged until :meth:`finish_deferred`,
        which the network calls at the end of its backward pass.
        ``overlap=False`` runs it now: a layer that computes no input gradient
        (the bottom of the chain) has nothing to run beside it, and handing a
        call to the helper and waiting for it costs tens of microseconds.
        """
        if overlap:
            defer(fn, *args)
        else:
            fn(*args)

    def finish_deferred(self):
        """Return once every call :meth:`defer` queued in this thread has run."""
        finish_deferred()

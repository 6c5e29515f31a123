"""The trainer: epochs (or a given number of batches) over data on a backend.

A :class:`Trainer` trains a :class:`~sknet.engine._network.Network` with a loss:
it lays all parameters and gradients out in two flat arrays
(:mod:`~sknet.engine._layout`), runs batches of
forward, loss, backward, L2 penalty, gradient clipping and optimizer step
without reading anything back, and reads the loss once per epoch. The same
object serves ``fit`` (``run_epochs``, or :func:`~sknet.engine._lbfgs.run_lbfgs`),
``partial_fit`` (one epoch) and a worker of another process (``run_batches``:
N batches, no callbacks).

What happens between epochs (recording ``history``, stopping, printing) is
done by callbacks on the public hook interface of
:class:`sknet.callbacks.Callback`, built-in ones first, the user's after;
they receive a :class:`~sknet.engine._callbacks.TrainingState`, never the
trainer's locals.
"""

import contextlib
import contextvars
import time
import warnings

import numpy as np

from sknet.engine._averaging import averages_in
from sknet.engine._batches import BatchRows
from sknet.engine._callbacks import TrainingHooks, call_hook, overrides
from sknet.engine._layout import ParameterLayout
from sknet.engine._lengths import NetworksByWidth, cut_steps
from sknet.engine._network import checked_output
from sknet.engine._sharding import RowShards, plan_shards, single_threaded_fit
from sknet.engine._types import BackendData, Diverged, StopTraining, StreamedData

#: ``(estimator, runner)`` while :func:`batches_run_by` is active, else None
_EPOCH_RUNNER = contextvars.ContextVar("sknet_epoch_runner", default=None)


@contextlib.contextmanager
def batches_run_by(estimator, runner):
    """Within the block, ``estimator``'s epochs run their batches through ``runner``.

    Everything else of a fit (validation, initialization, the shuffling,
    callbacks, history, stopping) stays in this process; only the batches of
    each epoch go to ``runner(trainer, data, optimizer, *, batch_size, rows, w,
    sw_sums, on_batch)``, which trains ``trainer.network`` and ``optimizer`` in
    place on the rows ``rows`` (host indices into ``data``, in order; ``w``
    the host sample weights or None) and returns the sum over rows of the
    batch losses. :mod:`sknet.distributed` runs them
    on Dask workers this way.
    """
    token = _EPOCH_RUNNER.set((estimator, runner))
    try:
        yield
    finally:
        _EPOCH_RUNNER.reset(token)


def _epoch_runner(estimator):
    active = _EPOCH_RUNNER.get()
    return active[1] if active is not None and active[0] is estimator else None


class Trainer:
    """Mini-batch and L-BFGS training of a network with a loss.

    Parameters
    ----------
    network : Network
    loss : Loss
    alpha : float, default=0.0
        L2 penalty on the layers' ``regularized`` parameters, divided by the
        (weighted) batch size as scikit-learn does.
    clip_norm : float or None, default=None
        Rescale each batch's whole gradient to at most this L2 norm.
    callbacks : list of Callback, default=()
        Called with a :class:`~sknet.engine._callbacks.TrainingState` by
        :meth:`run_epochs` and :func:`~sknet.engine._lbfgs.run_lbfgs`.
    single_threaded : bool, default=False
        One BLAS thread, and a helper thread for the weight gradients
        (:func:`~sknet.engine._sharding.single_threaded_fit`): OpenBLAS's threads
        collapse on small products when another process keeps a core busy.
    lengths : ndarray of int or None, default=None
        Each data row's number of steps: batches grouped by length, each cut
        to its longest sequence (:mod:`~sknet.engine._lengths`).
    """

    def __init__(
        self,
        network,
        loss,
        *,
        alpha=0.0,
        clip_norm=None,
        callbacks=(),
        single_threaded=False,
        lengths=None,
    ):
        self.network = network
        self.loss = loss
        self.alpha = alpha
        self.clip_norm = clip_norm
        self.callbacks = list(callbacks)
        self.single_threaded = single_threaded
        self.lengths = lengths
        self.state = None
        self._rows = BatchRows(self.network.backend)
        self._shards = None  # RowShards, made on the first batch split over threads
        self._active_shards = None  # the same, while split batches run
        self._lay_out_parameters()

    @property
    def backend(self):
        return self.network.backend

    def _lay_out_parameters(self):
        """Lay the trainable parameters out flat (:class:`ParameterLayout`)."""
        self.plan = self.network.prepare_training()
        self.parameters = ParameterLayout(self.network, self.plan)
        # Copies of the network follow the new layout: made again for the next
        # split batches (whole batches until then, if this happens mid-epoch).
        self._shards = self._active_shards = None
        self._widths = None if self.lengths is None else NetworksByWidth(self.network)

    # -- one batch ----------------------------------------------------------
    @contextlib.contextmanager
    def split_batches(self, batch_rows):
        """Within the block, batches of about ``batch_rows`` rows may run split over threads.

        See :mod:`sknet.engine._sharding`: on the CPU, with BLAS threads to spare
        and row-independent layers, each batch's rows are shared out among
        copies of the network, one per thread, while the BLAS runs
        single-threaded; otherwise the block changes nothing. A
        ``single_threaded`` trainer runs whole batches on a single-threaded BLAS.
        """
        n_shards = 1 if self.single_threaded else plan_shards(self.network, self.plan, batch_rows)
        if n_shards < 2:
            with single_threaded_fit(self.backend, self.single_threaded):
                yield
            return
        if self._shards is None or self._shards.n_shards != n_shards:
            self._shards = RowShards(self, n_shards)
        with self._shards.threads():
            self._active_shards = self._shards
            try:
                yield
            finally:
                self._active_shards = None

    def loss_and_gradients(self, X, Y, sample_weight, sw_sum, network=None):
        """Forward, loss, backward and L2 for one batch; the loss stays on the device.

        ``network``: a copy of the network for fewer steps (its batches run whole)."""
        shards = self._active_shards
        if network is None and shards is not None and shards.usable(X.shape[0]):
            loss = shards.loss_and_gradients(X, Y, sample_weight, sw_sum)
        else:
            network = self.network if network is None else network
            Z = network.forward(X, training=True)
            loss, dZ = self.loss(Z, Y, sample_weight, sw_sum)
            network.backward(dZ)
        if self.alpha > 0:
            loss = self.parameters.add_penalty(loss, self.alpha, sw_sum)
        return loss

    def run_batches(
        self,
        data,
        optimizer,
        *,
        batch_size,
        order=None,
        sw_sums=None,
        on_batch=None,
        n_batches=None,
        total=None,
        steps=None,
    ):
        """Train on consecutive batches of the rows in ``order`` (all rows if None).

        Parameters
        ----------
        data : BackendData
        optimizer : StochasticOptimizer
            Over :attr:`param_segments` (one array per ``lr_scale``).
        batch_size : int
        order : backend array of int, default=None
            Row indices to visit, in order; ``None`` visits rows as stored.
        sw_sums : sequence of float, default=None
            Each batch's sum of sample weights (host numbers, no sync); a
            batch whose weights sum to 0 is skipped.
        on_batch : callable, default=None
            ``on_batch(index, size)`` after each update.
        n_batches : int, default=None
            Stop after this many batches.
        total : 0-d backend array, default=None
            A running sum to add the losses to (zero if None).
        steps : list of int, default=None
            The steps each batch runs at (grouped by length; None: all).

        Returns
        -------
        total : 0-d backend array
            The sum over rows of the (penalized) batch losses, not read back.
        """
        with self.split_batches(batch_size):
            return self._run_batches(
                data, optimizer, batch_size, order, sw_sums, on_batch, n_batches, total, steps
            )

    def _run_batches(
        self, data, optimizer, batch_size, order, sw_sums, on_batch, n_batches, total, steps
    ):
        xp = self.backend.xp
        n = data.X.shape[0] if order is None else order.shape[0]
        total = xp.zeros((), dtype=np.float64) if total is None else total
        parameters = self.parameters
        grads = parameters.grad_segments
        for i, start in enumerate(range(0, n, batch_size)):
            if n_batches is not None and i >= n_batches:
                break
            stop = min(start + batch_size, n)
            if sw_sums is not None and sw_sums[i] == 0:
                continue  # nothing to learn from a batch of zero weight
            cut = None if steps is None or steps[i] == self._widths.steps else steps[i]
            X = data.X if cut is None else cut_steps(data.X, cut, self._widths.per_step)
            X, Y, w = self._rows.take(data, X, order, start, stop)
            sw_sum = (stop - start) if sw_sums is None else float(sw_sums[i])
            network = None if cut is None else self._widths.at(cut)
            loss = self.loss_and_gradients(X, Y, w, sw_sum, network)
            if i == 0:
                parameters.check_grad_views()
            if self.clip_norm is not None:
                self.backend.clip_by_norm(parameters.flat_grads, self.clip_norm)
            optimizer.step(grads)
            total = total + loss * (stop - start)
            if on_batch is not None:
                on_batch(i, stop - start)
        parameters.check_grad_views()
        return total

    def run_streamed(self, data, optimizer, rows, *, batch_size, sw_sums=None, on_batch=None):
        """Train on batches of host rows ``rows`` of ``data`` (:data:`StreamedData`).

        The rows come to the backend in chunks of ``data.chunk_rows`` (a
        multiple of ``batch_size``), gathered in ``rows``' order, and each chunk
        runs as :meth:`run_batches` over its rows as stored: the same batches,
        in the same order, as with the data on the backend.
        """
        step, total = data.chunk_rows, None
        row_chunks = (rows[start : start + step] for start in range(0, rows.shape[0], step))
        for k, chunk in enumerate(data.stream.chunks(row_chunks)):
            first = k * step // batch_size  # the epoch's index of the chunk's first batch
            total = self.run_batches(
                BackendData(*chunk),
                optimizer,
                batch_size=batch_size,
                sw_sums=None if sw_sums is None else sw_sums[first:],
                on_batch=None if on_batch is None else _shifted(on_batch, first),
                total=total,
            )
        return total

    # -- epochs ---------------------------------------------------------------
    def relayout(self, optimizer):
        """Lay the parameters out again after ``trainable``/``lr_scale`` changed."""
        self._lay_out_parameters()
        optimizer.follow(self.parameters)

    def start(self, state):
        """Give ``state`` to the callbacks' hooks for the training to come."""
        self.state = state
        state.trainer = self
        state.extra_keys = tuple(
            key for callback in self.callbacks for key in getattr(callback, "provides", ())
        )

    def begin_training(self, state):
        """Start ``state`` and call the callbacks' ``on_train_begin``: a :class:`TrainingHooks`.

        Call its ``end()`` in a ``finally``: every callback that began gets
        its ``on_train_end``, however training ends.
        """
        self.start(state)
        return TrainingHooks(self.callbacks, state).begin()

    def notify(self, hook, *args):
        """Call ``hook`` on every callback in order; True if any asked to stop."""
        stop = False
        for callback in self.callbacks:
            stop = call_hook(callback, hook, self.state, *args) or stop
        return stop

    def run_epochs(
        self,
        data,
        optimizer,
        state,
        *,
        batch_size,
        max_epochs,
        rng,
        shuffle=True,
        train_rows=None,
        sample_weight=None,
        evaluate=None,
    ):
        """Run up to ``max_epochs`` epochs, with callbacks; Ctrl-C ends them cleanly.

        ``train_rows`` (host indices) restricts training to part of ``data``
        (the rest being the early-stopping split); ``sample_weight`` is the
        host copy of the weights (for per-batch sums without a sync).
        ``evaluate()`` returns the epoch's ``(valid_loss, valid_score)``.
        """
        n_train = data.X.shape[0] if train_rows is None else train_rows.shape[0]
        sample_idx = np.arange(n_train)
        batch_hooks = [cb for cb in self.callbacks if overrides(cb, "on_batch_end")]
        runner = _epoch_runner(state.estimator)  # None: the batches run here

        def on_batch(i, size):
            for callback in batch_hooks:
                callback.on_batch_end(state, i, size)

        hooks = self.begin_training(state)
        try:
            for i in range(max_epochs):
                state.epoch = len(state.history) + 1
                self.notify("on_epoch_begin", state.epoch)
                started = time.perf_counter()
                if shuffle:  # the same draws as scikit-learn's MLP
                    perm = np.arange(n_train)
                    rng.shuffle(perm)
                    sample_idx = sample_idx[perm]
                rows = sample_idx if train_rows is None else train_rows[sample_idx]
                rows = rows[: state.epoch_rows]  # all, or the first (a callback's choice)
                ordered = shuffle or train_rows is not None or rows.shape[0] < n_train
                steps = None
                if self.lengths is not None and runner is None:  # grouped by length
                    rows, steps = self._widths.epoch(rows, self.lengths, batch_size, rng, shuffle)
                    ordered = True
                weighed = sample_weight is not None and runner is None
                sw_sums = _batch_sums(sample_weight[rows], batch_size) if weighed else None
                batches = dict(
                    batch_size=batch_size,
                    sw_sums=sw_sums,
                    on_batch=on_batch if batch_hooks else None,
                )
                if runner is not None:  # elsewhere (sknet.distributed)
                    total = runner(self, data, optimizer, rows=rows, w=sample_weight, **batches)
                elif isinstance(data, StreamedData):  # at the fitted width
                    total = self.run_streamed(data, optimizer, rows, **batches)
                else:
                    order = self.backend.asarray(rows) if ordered else None
                    total = self.run_batches(data, optimizer, order=order, steps=steps, **batches)
                loss = float(total) / rows.shape[0]  # the epoch's one read-back
                if self.end_epoch(state.epoch, loss, evaluate, started, i == max_epochs - 1):
                    break
        except KeyboardInterrupt:
            warnings.warn("Training interrupted by user.")
        except StopTraining:
            pass  # the epoch runner keeps the reason
        finally:
            hooks.end()

    def end_epoch(self, epoch, loss, evaluate, started, last=False):
        """Check the loss, record the history row, call on_epoch_end; True stops."""
        if not np.isfinite(loss):
            if self.notify("on_nan", epoch):
                return True
            raise Diverged(f"The loss became {loss} at epoch {epoch}.")
        optimizer = self.state.optimizer
        with averages_in(optimizer, self.network, keep=last) as kept:  # validated, seen
            valid_loss, valid_score = (None, None) if evaluate is None else evaluate()
            logs = {
                "epoch": epoch,
                "train_loss": loss,
                "valid_loss": valid_loss,
                "valid_score": valid_score,
                "learning_rate": None if optimizer is None else optimizer.base_learning_rate,
                "duration": time.perf_counter() - started,
            }
            self.state.history.append(logs)
            return kept(self.notify("on_epoch_end", epoch, logs))


def loss_and_outputs(trainer, X, Y, w, chunk_rows=None):
    """``trainer``'s validation loss on ``X``, ``Y`` (without the L2 term) and its outputs
    ``P`` on the host, by chunks of rows."""
    total, chunks = 0.0, []
    chunk = chunk_rows or trainer.network.predict_chunk_rows()
    weight_sum = X.shape[0] if w is None else float(w.sum())
    backend, dtype = trainer.backend, trainer.network.dtype
    for i in range(0, X.shape[0], chunk):
        part = slice(i, i + chunk)  # host data (streamed validation) moves by chunks
        Xb = backend.asarray(X[part], trainer.network.input_dtype)  # token ids: integers
        Z = trainer.network.forward(Xb, training=False)
        wb = None if w is None else backend.asarray(w[part], dtype)
        loss, _ = trainer.loss(Z, backend.asarray(Y[part], dtype), wb)
        total = total + loss * (Z.shape[0] if wb is None else wb.sum())
        chunks.append(trainer.backend.to_numpy(checked_output(trainer.loss.output, Z)))
    return float(total) / weight_sum, np.concatenate(chunks)


def resolve_batch_size(batch_size, n_train, auto=None):
    """scikit-learn's rule: ``'auto'`` is ``min(200, n)`` (or ``auto(n)``); larger sizes
    are clipped."""
    if batch_size == "auto":
        return min(200 if auto is None else int(auto(n_train)), n_train)
    if batch_size > n_train:
        warnings.warn(
            "Got `batch_size` less than 1 or larger than sample size. It is going to be clipped"
        )
    return int(np.clip(batch_size, 1, n_train))


def _batch_sums(w, batch_size):
    """Each batch's sum of the weights ``w`` of its rows, in order (host numbers)."""
    return np.add.reduceat(w, np.arange(0, w.shape[0], batch_size))


def _shifted(on_batch, offset):
    """``on_batch`` with batch indices counted from ``offset``."""
    return lambda i, size: on_batch(offset + i, size)

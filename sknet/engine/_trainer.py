"""The trainer: epochs (or a given number of batches) over data on a backend.

A :class:`Trainer` trains a :class:`~sknet.engine._network.Network` with a loss:
it lays all parameters and gradients out in two flat arrays, runs batches of
forward, loss, backward, L2 penalty, gradient clipping and optimizer step
without reading anything back, and reads the loss once per epoch. The same
object serves ``fit`` (``run_epochs``, ``run_lbfgs``), ``partial_fit`` (one
epoch) and a worker of another process (``run_batches``: N batches, no
callbacks).

What happens between epochs (recording ``history``, stopping, printing) is
done by callbacks on the public hook interface of
:class:`sknet.callbacks.Callback`, built-in ones first, the user's after;
they receive a :class:`TrainingState`, never the trainer's locals.
"""

import contextlib
import contextvars
import copy
import time
import warnings
from collections import namedtuple

import numpy as np

from sknet.engine._sharding import RowShards, plan_shards

#: Training data already on the backend: X, 2-D float targets Y, weights w or None.
BackendData = namedtuple("BackendData", "X Y w")
#: Training data kept on the host (X, Y, w) and brought to the backend by ``stream``
#: (a :class:`~sknet.backend._base.RowStream`) in chunks of ``chunk_rows`` rows.
StreamedData = namedtuple("StreamedData", "X Y w chunk_rows stream")


class Diverged(Exception):
    """Training produced a non-finite loss or weights (the estimator says what to do)."""


class StopTraining(Exception):  # noqa: N818 (a signal, like StopIteration)
    """Raised by an epoch runner to end training now, keeping the model as it is.

    The epoch in progress is not recorded; callbacks get ``on_train_end`` and
    the fit completes. The runner keeps its own record of why.
    """


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


class TrainingState:
    """What callbacks see of a running fit.

    Every hook gets this object as its first argument. Attributes it does not
    have are looked up on the estimator, so ``state.classes_`` or
    ``state.predict(X)`` work as they would on the estimator.

    Attributes
    ----------
    estimator : estimator
        The estimator being fitted.
    network : Network
        The network being trained (its layers are ``estimator.layers_``).
    optimizer : StochasticOptimizer or None
        The optimizer (``None`` with ``solver='lbfgs'``).
    epoch : int or None
        The current epoch, numbered from 1 across warm starts.
    n_train_rows : int
        Rows per epoch.
    batch_size : int
        Rows per batch (all rows with lbfgs).
    history : list of dict
        ``estimator.history_``: one row per epoch.
    has_validation : bool
        Whether a validation set is scored (``valid_loss``/``valid_score``).

    Examples
    --------
    A callback reading the state after every epoch:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import Callback
    >>> class ShowState(Callback):
    ...     def on_epoch_end(self, state, epoch, logs):
    ...         print(f"epoch {state.epoch}: {state.n_train_rows} rows in batches of "
    ...               f"{state.batch_size}, {len(state.classes_)} classes")
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), batch_size=50, tol=1.0,
    ...                     n_iter_no_change=1, random_state=0, device="cpu",
    ...                     callbacks=[ShowState()]).fit(X[:200] / 16, y[:200])
    epoch 1: 200 rows in batches of 50, 10 classes
    epoch 2: 200 rows in batches of 50, 10 classes
    epoch 3: 200 rows in batches of 50, 10 classes
    """

    #: history keys every fit produces; validation keys need a validation set
    TRAIN_KEYS = ("epoch", "train_loss", "learning_rate", "duration")
    VALID_KEYS = ("valid_loss", "valid_score")

    def __init__(
        self, estimator, network, optimizer, *, n_train_rows, batch_size, history, has_validation
    ):
        self.estimator = estimator
        self.network = network
        self.optimizer = optimizer
        self.epoch = None
        self.n_train_rows = n_train_rows
        self.batch_size = batch_size
        self.history = history
        self.has_validation = has_validation
        self.extra_keys = ()

    def __getattr__(self, name):
        # Only called for names this object lacks: the estimator's attributes.
        if name.startswith("__") or "estimator" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["estimator"], name)

    @property
    def learning_rate(self):
        """The base learning rate (SGD's rate, Adam's step size)."""
        return self.require_optimizer("learning_rate").base_learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        self.require_optimizer("learning_rate").base_learning_rate = value

    def require_optimizer(self, who):
        """The optimizer; a ValueError naming ``who`` with ``solver='lbfgs'``."""
        if self.optimizer is None:
            raise ValueError(
                f"{who} needs solver='sgd' or 'adam'; this "
                f"{type(self.estimator).__name__} has solver='lbfgs'"
            )
        return self.optimizer

    def check_monitor(self, monitor, who):
        """Raise a ValueError before training if ``monitor`` will have no value."""
        keys = self.TRAIN_KEYS + self.VALID_KEYS + tuple(self.extra_keys)
        if monitor not in keys:
            raise ValueError(
                f"{who}: monitor={monitor!r} is not in the history; choose one of {sorted(keys)}"
            )
        if monitor in self.VALID_KEYS and not self.has_validation:
            raise ValueError(
                f"{who}: monitor={monitor!r} needs a validation set: pass X_val and "
                "y_val to fit, or set early_stopping=True"
            )
        if monitor == "learning_rate":
            self.require_optimizer(f"{who} with monitor='learning_rate'")

    def weights(self):
        """The model's arrays (parameters and running statistics), live."""
        return self.network.weights()

    def update_trainable(self):
        """Apply changes of the layers' ``trainable``/``lr_scale`` made during training.

        Lays the parameters out again and moves the optimizer's state along
        (a newly trained parameter starts from zero state); call it from
        ``on_epoch_begin`` after changing the built layers (``state.network.layers``).
        """
        self.require_optimizer("Changing trainable layers during fit")
        self.__dict__["trainer"].relayout(self.optimizer)


class BestWeights:
    """A copy of the weights of one epoch, kept to be put back later.

    The one save/restore helper of early stopping (built-in and callback) and
    :class:`~sknet.callbacks.TerminateOnNaN`. Restores happen in ``on_train_end``
    (or ``on_nan``) in callback order: built-in callbacks first, the user's
    after, so what a user callback restores is what the model keeps.
    """

    def __init__(self):
        self.epoch = None
        self._arrays = None

    def save(self, network, epoch):
        """Copy the network's weights (into the same buffers after the first save)."""
        if self._arrays is None:
            self._arrays = network.save_weights()
        else:
            for saved, weight in zip(self._arrays, network.weights()):
                saved[...] = weight
        self.epoch = epoch

    def restore(self, network):
        """Put the saved weights back; False if nothing was saved."""
        if self._arrays is None:
            return False
        network.load_weights(self._arrays)
        return True

    def clear(self):
        self._arrays, self.epoch = None, None


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
        Called with a :class:`TrainingState` by :meth:`run_epochs` and
        :meth:`run_lbfgs`.
    """

    def __init__(self, network, loss, *, alpha=0.0, clip_norm=None, callbacks=()):
        self.network = network
        self.loss = loss
        self.alpha = alpha
        self.clip_norm = clip_norm
        self.callbacks = list(callbacks)
        self.state = None
        self._x_buffer = None
        self._shards = None  # RowShards, made on the first batch split over threads
        self._active_shards = None  # the same, while split batches run
        self._lay_out_parameters()

    @property
    def backend(self):
        return self.network.backend

    def _lay_out_parameters(self):
        """Put the trainable parameters and their gradients in two flat arrays.

        Layers keep their ``params``/``grads`` dicts, whose entries become
        views of the flat arrays; the optimizer then updates every parameter
        with a few whole-array operations (one fused kernel on a GPU) per step.
        Parameters are grouped in one segment per ``lr_scale`` (usually one),
        regularized ones first in each, so the L2 term is one slice a segment.
        Frozen layers stay out: no gradient, no optimizer state, no penalty.
        """
        xp, dtype = self.backend.xp, self.network.dtype
        groups = {}
        for i, layer in self.network.leaves():
            layer.grads.clear()  # in place: TimeDistributed shares it with its layer
            if not layer.trainable:
                for key, param in layer.params.items():
                    if param.base is not None:  # detach from an earlier fit's flat array
                        layer.params[key] = param = param.copy()
                    layer.grads[key] = xp.zeros_like(param)  # scratch for custom layers
                continue
            for key in layer.params:
                groups.setdefault(float(layer.lr_scale), []).append((i, layer, key))
        total = sum(
            int(layer.params[key].size) for entries in groups.values() for _, layer, key in entries
        )
        self.flat_params = xp.empty(total, dtype=dtype)
        self.flat_grads = xp.zeros(total, dtype=dtype)
        # Copies of the network follow the new layout: made again for the next
        # split batches (whole batches until then, if this happens mid-epoch).
        self._shards = self._active_shards = None
        self.param_segments, self.grad_segments, self.lr_scales = [], [], []
        self.layout, self.regularized_ranges, self._grad_views = [], [], []
        offset = 0
        for scale, entries in groups.items():
            entries.sort(key=lambda entry: entry[2] not in entry[1].regularized)
            start = regularized_stop = offset
            segment = []
            for i, layer, key in entries:
                param = layer.params[key]
                stop = offset + int(param.size)
                self.flat_params[offset:stop] = param.reshape(-1)
                layer.params[key] = self.flat_params[offset:stop].reshape(param.shape)
                layer.grads[key] = self.flat_grads[offset:stop].reshape(param.shape)
                self._grad_views.append((layer, key, layer.grads[key]))
                if key in layer.regularized:
                    regularized_stop = stop
                segment.append((i, key, int(param.size)))
                offset = stop
            self.param_segments.append(self.flat_params[start:offset])
            self.grad_segments.append(self.flat_grads[start:offset])
            self.lr_scales.append(scale)
            self.layout.append(tuple(segment))
            if regularized_stop > start:
                self.regularized_ranges.append((start, regularized_stop))
        self.network.prepare_training()

    def _check_grad_views(self):
        """Fail clearly if a (custom) layer replaced a gradient array."""
        for layer, key, view in self._grad_views:
            if layer.grads[key] is not view:
                raise TypeError(
                    f"{type(layer).__name__}.backward replaced grads[{key!r}] with a "
                    "new array; write gradients in place instead, e.g. "
                    f"self.grads[{key!r}][...] = value"
                )

    # -- one batch ----------------------------------------------------------
    @contextlib.contextmanager
    def split_batches(self, batch_rows):
        """Within the block, batches of about ``batch_rows`` rows may run split over threads.

        See :mod:`sknet.engine._sharding`: on the CPU, with BLAS threads to spare
        and row-independent layers, each batch's rows are shared out among
        copies of the network, one per thread, while the BLAS runs
        single-threaded; otherwise the block changes nothing.
        """
        n_shards = plan_shards(self.network, batch_rows)
        if n_shards < 2:
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

    def loss_and_gradients(self, X, Y, sample_weight, sw_sum):
        """Forward, loss, backward and L2 for one batch; the loss stays on the device."""
        shards = self._active_shards
        if shards is not None and shards.usable(X.shape[0]):
            loss = shards.loss_and_gradients(X, Y, sample_weight, sw_sum)
        else:
            Z = self.network.forward(X, training=True)
            loss, dZ = self.loss(Z, Y, sample_weight, sw_sum)
            self.network.backward(dZ)
        if self.alpha > 0:
            for start, stop in self.regularized_ranges:
                W, gW = self.flat_params[start:stop], self.flat_grads[start:stop]
                self.backend.add_scaled(gW, W, self.alpha / sw_sum)
                loss = loss + (0.5 * self.alpha / sw_sum) * self.backend.xp.vdot(W, W)
        return loss

    def _batch(self, data, order, start, stop):
        if order is None:
            w = None if data.w is None else data.w[start:stop]
            return data.X[start:stop], data.Y[start:stop], w
        backend, xp, idx = self.backend, self.backend.xp, order[start:stop]
        X = backend.take_rows(data.X, idx, out=self._rows_buffer(data.X, stop - start))
        w = None if data.w is None else xp.take(data.w, idx)
        return X, xp.take(data.Y, idx, axis=0), w

    def _rows_buffer(self, X, n_rows):
        if self.backend.is_sparse(X):
            return None
        buf = self._x_buffer
        if buf is None or buf.shape[0] < n_rows or buf.shape[1:] != X.shape[1:]:
            buf = self._x_buffer = self.backend.xp.empty((n_rows,) + X.shape[1:], X.dtype)
        return buf[:n_rows]

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

        Returns
        -------
        total : 0-d backend array
            The sum over rows of the (penalized) batch losses, not read back.
        """
        with self.split_batches(batch_size):
            return self._run_batches(
                data, optimizer, batch_size, order, sw_sums, on_batch, n_batches, total
            )

    def _run_batches(
        self, data, optimizer, batch_size, order, sw_sums, on_batch, n_batches, total
    ):
        xp = self.backend.xp
        n = data.X.shape[0] if order is None else order.shape[0]
        total = xp.zeros((), dtype=np.float64) if total is None else total
        grads = self.grad_segments
        for i, start in enumerate(range(0, n, batch_size)):
            if n_batches is not None and i >= n_batches:
                break
            stop = min(start + batch_size, n)
            if sw_sums is not None and sw_sums[i] == 0:
                continue  # nothing to learn from a batch of zero weight
            X, Y, w = self._batch(data, order, start, stop)
            sw_sum = (stop - start) if sw_sums is None else float(sw_sums[i])
            loss = self.loss_and_gradients(X, Y, w, sw_sum)
            if i == 0:
                self._check_grad_views()
            if self.clip_norm is not None:
                self.backend.clip_by_norm(self.flat_grads, self.clip_norm)
            optimizer.step(grads)
            total = total + loss * (stop - start)
            if on_batch is not None:
                on_batch(i, stop - start)
        self._check_grad_views()
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
        optimizer.rebind(self.param_segments, self.backend, layout=self.layout)
        optimizer.lr_scales = self.lr_scales

    def _start(self, state):
        self.state = state
        state.trainer = self
        state.extra_keys = tuple(
            key for callback in self.callbacks for key in getattr(callback, "provides", ())
        )

    def notify(self, hook, *args):
        """Call ``hook`` on every callback in order; True if any asked to stop."""
        stop = False
        for callback in self.callbacks:
            stop = bool(getattr(callback, hook)(self.state, *args)) or stop
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
        self._start(state)
        n_train = data.X.shape[0] if train_rows is None else train_rows.shape[0]
        sample_idx = np.arange(n_train)
        starts = np.arange(0, n_train, batch_size)
        batch_hooks = [cb for cb in self.callbacks if _overrides(cb, "on_batch_end")]
        runner = _epoch_runner(state.estimator)  # None: the batches run here

        def on_batch(i, size):
            for callback in batch_hooks:
                callback.on_batch_end(state, i, size)

        self.notify("on_train_begin")
        try:
            for _ in range(max_epochs):
                state.epoch = len(state.history) + 1
                self.notify("on_epoch_begin", state.epoch)
                started = time.perf_counter()
                if shuffle:  # the same draws as scikit-learn's MLP
                    perm = np.arange(n_train)
                    rng.shuffle(perm)
                    sample_idx = sample_idx[perm]
                rows = sample_idx if train_rows is None else train_rows[sample_idx]
                ordered = shuffle or train_rows is not None
                sw_sums = None
                if sample_weight is not None and runner is None:
                    sw_sums = np.add.reduceat(sample_weight[rows], starts)
                batches = dict(
                    batch_size=batch_size,
                    sw_sums=sw_sums,
                    on_batch=on_batch if batch_hooks else None,
                )
                if runner is not None:  # elsewhere (sknet.distributed)
                    total = runner(self, data, optimizer, rows=rows, w=sample_weight, **batches)
                elif isinstance(data, StreamedData):
                    total = self.run_streamed(data, optimizer, rows, **batches)
                else:
                    order = self.backend.asarray(rows) if ordered else None
                    total = self.run_batches(data, optimizer, order=order, **batches)
                loss = float(total) / n_train  # the epoch's one read-back
                if self.end_epoch(state.epoch, loss, evaluate, started):
                    break
        except KeyboardInterrupt:
            warnings.warn("Training interrupted by user.")
        except StopTraining:
            pass  # the epoch runner keeps the reason
        finally:
            self.notify("on_train_end")

    def end_epoch(self, epoch, loss, evaluate, started):
        """Check the loss, record the history row, call on_epoch_end; True stops."""
        if not np.isfinite(loss):
            if self.notify("on_nan", epoch):
                return True
            raise Diverged(f"The loss became {loss} at epoch {epoch}.")
        valid_loss, valid_score = (None, None) if evaluate is None else evaluate()
        optimizer = self.state.optimizer
        logs = {
            "epoch": epoch,
            "train_loss": loss,
            "valid_loss": valid_loss,
            "valid_score": valid_score,
            "learning_rate": None if optimizer is None else optimizer.base_learning_rate,
            "duration": time.perf_counter() - started,
        }
        self.state.history.append(logs)
        return self.notify("on_epoch_end", epoch, logs)

    def evaluate(self, X, Y, w, chunk_rows=None):
        """Validation loss (without the L2 term) and outputs ``P`` on the host."""
        total, chunks = 0.0, []
        chunk = chunk_rows or self.network.predict_chunk_rows()
        weight_sum = X.shape[0] if w is None else float(w.sum())
        backend, dtype = self.backend, self.network.dtype
        for i in range(0, X.shape[0], chunk):
            part = slice(i, i + chunk)  # host data (streamed validation) moves by chunks
            Z = self.network.forward(backend.asarray(X[part], dtype), training=False)
            wb = None if w is None else backend.asarray(w[part], dtype)
            loss, _ = self.loss(Z, backend.asarray(Y[part], dtype), wb)
            total = total + loss * (Z.shape[0] if wb is None else wb.sum())
            chunks.append(self.backend.to_numpy(self.loss.output(Z)))
        return float(total) / weight_sum, np.concatenate(chunks)

    # -- L-BFGS -------------------------------------------------------------
    def run_lbfgs(self, data, state, *, max_iter, max_fun, tol, evaluate=None):
        """Full-batch L-BFGS (SciPy); returns ``(loss, n_iter)``.

        Each iteration is an epoch for the callbacks. Ctrl-C keeps the last
        completed iteration (the initial weights if none completed).
        """
        from sknet.engine._optimizers import minimize_lbfgs

        self._start(state)
        backend, dtype = self.backend, self.network.dtype
        sw_sum = data.X.shape[0] if data.w is None else float(data.w.sum())
        flat_params, flat_grads = self.flat_params, self.flat_grads

        def unpack(x):
            flat_params[...] = backend.asarray(x, dtype)

        def loss_and_grad(x):
            unpack(x)
            loss = self.loss_and_gradients(data.X, data.Y, data.w, sw_sum)
            return float(loss), backend.to_numpy(flat_grads).astype(np.float64)

        x0 = backend.to_numpy(flat_params).astype(np.float64)
        last = {"x": x0, "loss": None, "n_iter": 0, "started": time.perf_counter()}

        def end_iteration(iteration, x, loss):
            unpack(x)
            last.update(x=x.copy(), loss=loss, n_iter=iteration)
            state.epoch = len(state.history) + 1
            stop = self.end_epoch(state.epoch, loss, evaluate, last["started"])
            last["started"] = time.perf_counter()
            return stop

        self.notify("on_train_begin")
        try:
            with self.split_batches(data.X.shape[0]):
                x, loss, n_iter = minimize_lbfgs(
                    loss_and_grad,
                    x0,
                    max_iter=max_iter,
                    max_fun=max_fun,
                    tol=tol,
                    callback=end_iteration,
                )
            unpack(x)
        except KeyboardInterrupt:
            warnings.warn("Training interrupted by user.")
            x, n_iter = last["x"], last["n_iter"]
            loss = last["loss"] if last["loss"] is not None else loss_and_grad(x)[0]
            unpack(x)
        finally:
            self.notify("on_train_end")
        return loss, n_iter


def resolve_batch_size(batch_size, n_train):
    """scikit-learn's rule: ``'auto'`` is ``min(200, n)``; larger sizes are clipped."""
    if batch_size == "auto":
        return min(200, n_train)
    if batch_size > n_train:
        warnings.warn(
            "Got `batch_size` less than 1 or larger than sample size. It is going to be clipped"
        )
    return int(np.clip(batch_size, 1, n_train))


def copy_callbacks(callbacks):
    """Working copies of ``callbacks``: the objects a user passes are never modified."""
    from sknet.callbacks import Callback

    callbacks = [] if callbacks is None else list(callbacks)
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise TypeError(
                "callbacks must be sknet.callbacks.Callback objects, got "
                f"{type(callback).__name__}"
            )
    return [copy.deepcopy(callback) for callback in callbacks]


def _shifted(on_batch, offset):
    """``on_batch`` with batch indices counted from ``offset``."""
    return lambda i, size: on_batch(offset + i, size)


def _overrides(callback, hook):
    from sknet.callbacks import Callback

    return getattr(type(callback), hook) is not getattr(Callback, hook)

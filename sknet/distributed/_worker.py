"""What runs on a Dask worker: a replica of the model, training on its shard.

Each worker keeps one :class:`_Replica` per shard of a running fit (network,
trainer, optimizer and its rows on the worker's device), for the whole fit.
:func:`_run_epoch` runs one epoch of the driver's global batches on it: the
replica's part of each batch, and the synchronizations with the other
replicas, worker to worker (:mod:`~sknet.distributed._exchange`). Two ways:

- ``'gradients'`` (``sync_every=1``): after each batch the replicas add up
  their gradients (each divided by the whole batch's weight sum, so that the
  sum is the batch's gradient), and each applies the same step: the model
  ``est.fit`` trains on the same batches. Dropout draws the whole batch's
  masks on every replica, each taking its rows' (:meth:`_Replica._draw`).
- ``'average'`` (``sync_every > 1`` or ``'epoch'``): each replica takes its
  own step on its part of each batch (the mean over its rows; the L2 term as
  in the whole batch), and every ``sync_every`` batches the replicas replace
  their parameters, running statistics and optimizer moments by their
  average, weighted by the sample weight each learned from since the last
  one. Every replica steps at every batch, so the optimizer's scalars (Adam's
  step count) stay the same everywhere, and an epoch makes as many steps as
  one process's. Adam's averaged second moment is corrected for the extra
  noise of the replicas' smaller batches
  (:meth:`_Replica._correct_second_moment`); SGD's update is linear in the
  gradient and needs nothing. (The driver runs the model's first epoch as
  ``'gradients'`` whatever ``sync_every``: a warm-up.)

The state's format (:func:`replica_state`) is shared with the driver, which
imports it from here.
"""

import collections
import contextlib
import copy
import time
import types

import numpy as np
from sklearn.utils import check_array

from sknet.backend import get_backend
from sknet.distributed._exchange import HostExchange, _distributed
from sknet.distributed._nccl import collective
from sknet.distributed._state import state_of
from sknet.engine._optimizers import make_optimizer
from sknet.engine._trainer import Trainer
from sknet.engine._types import BackendData

#: One shard's part of an epoch, from the driver. ``order``: the shard's rows
#: (local indices) in the epoch's order; per global batch of the epoch,
#: ``counts`` (this shard's rows), ``sizes`` (all rows), ``sums`` (the batch's
#: weight sum, what one process divides by) and ``local_sums`` (this shard's
#: part of it); ``positions``: each row's place in its batch (``'gradients'``
#: with several shards, else None); ``sync_every``: batches between two
#: synchronizations (None: once, at the end); ``mode``: see the module.
#: What a replica trains in one epoch; ``rates`` (None: the optimizer's own) the
#: learning rate of each batch, where a callback schedules it batch by batch.
EpochPlan = collections.namedtuple(
    "EpochPlan",
    "order counts sizes sums local_sums positions sync_every mode rates",
    defaults=(None,),
)

#: Columns of the per-synchronization records a replica returns.
RECORD_FIELDS = ("batches", "rows", "compute", "arrive", "done", "bytes")

#: What a replica's epoch runs in: the fit, the driver's counts of runs and of failed
#: runs (``link``), this replica's rank, every rank's worker and channel address.
RunInfo = collections.namedtuple("RunInfo", "fit_id run link rank peers addresses")


def layer_states(network):
    """The network's non-trained arrays (running statistics), live."""
    return network.weights()[len(network.params()) :]


def changing_states(network):
    """The running statistics that training changes: not those of frozen layers.

    A frozen layer's statistics are the same on every replica and must stay
    bit for bit what they are: averaging them would round them.
    """
    frozen = {
        id(a)
        for _, leaf in network.leaves()
        if not getattr(leaf, "trainable", True)
        for a in getattr(leaf, "state", {}).values()
    }
    return [a for a in layer_states(network) if id(a) not in frozen]


def training_flags(network):
    return [
        (getattr(layer, "trainable", True), getattr(layer, "lr_scale", 1.0))
        for _, layer in network.leaves()
    ]


def replica_state(trainer, optimizer):
    """A trainer's parameters, running statistics, optimizer state and flags, as NumPy arrays.

    What the driver pushes to the replicas when its model changed between
    epochs, and what it reads back from one replica after each epoch.
    """
    backend = trainer.backend
    arrays, scalars = optimizer.snapshot()
    return {  # copies: no live views
        "params": np.array(backend.to_numpy(trainer.parameters.flat_params)),
        "layer_states": [np.array(backend.to_numpy(s)) for s in layer_states(trainer.network)],
        "optimizer": (
            {name: [backend.to_numpy(a) for a in values] for name, values in arrays.items()},
            scalars,
        ),
        "flags": training_flags(trainer.network),
    }


class _Replica:
    """One shard's network, trainer and optimizer, on a worker's device."""

    def __init__(self, shard, template, index, n_shards):
        backend = get_backend(template.device)
        self.backend = backend
        with backend.device_context():
            # copies: a threaded (in-process) worker gets the driver's own objects
            network = copy.deepcopy(template.network).to_backend(backend).astype(template.dtype)
            t0 = template.samples_seen
            if n_shards > 1 and template.mode == "average":
                network.reseed(t0 * n_shards + index)  # one dropout stream a replica
            # The L2 term and the clipping are applied by the epoch loop, after the sum.
            self.trainer = Trainer(network, copy.deepcopy(template.loss))
            self.optimizer = make_optimizer(types.SimpleNamespace(**template.hyper), self.trainer)
            X, Y, w = shard
            dtype = template.dtype
            self.data = BackendData(
                backend.asarray(X, network.input_dtype),  # token ids stay integers
                backend.asarray(Y, dtype),
                None if w is None else backend.asarray(w, dtype),
            )
        self.alpha, self.clip_norm = template.alpha, template.clip_norm
        self._leaves = [leaf for _, leaf in network.leaves()]
        self._rows_per_sample = None  # of each layer that draws (TimeDistributed's: steps)
        self._x_buffer = self._ones = None
        self._gradient_sum = None  # Adam with local steps: the period's sum of gradients

    # -- state ------------------------------------------------------------------------
    def load(self, state):
        trainer, backend = self.trainer, self.backend
        network = trainer.network
        if training_flags(network) != state["flags"]:  # changed by a callback (Unfreeze)
            for (_, layer), (trainable, lr_scale) in zip(network.leaves(), state["flags"]):
                layer.trainable, layer.lr_scale = trainable, lr_scale
            trainer.relayout(self.optimizer)
        trainer.parameters.flat_params[...] = backend.asarray(state["params"])
        for target, value in zip(layer_states(network), state["layer_states"]):
            target[...] = backend.asarray(value)
        self.optimizer.restore(state["optimizer"])

    def dump(self):
        state = replica_state(self.trainer, self.optimizer)
        del state["flags"]
        return state

    def synced_arrays(self):
        """Everything the replicas average (live): parameters, running statistics, moments."""
        optimizer = self.optimizer
        moments = [a for name in optimizer.state_names for a in getattr(optimizer, name)]
        network = self.trainer.network
        return [self.trainer.parameters.flat_params, *changing_states(network), *moments]

    # -- one epoch ----------------------------------------------------------------------
    def run_epoch(self, plan, exchange):
        """Train on this shard's part of the epoch's batches, synchronizing with the others.

        Returns this replica's part of the epoch's loss sum and one record a
        synchronization (:data:`RECORD_FIELDS`).
        """
        trainer, backend = self.trainer, self.backend
        xp = backend.xp
        gradients = plan.mode == "gradients" and exchange.size > 1
        ends = np.cumsum(plan.counts)
        starts = ends - plan.counts
        order = backend.asarray(plan.order)
        positions = None if plan.positions is None else backend.asarray(plan.positions)
        n_batches = len(plan.counts)
        every = plan.sync_every or n_batches
        total = xp.zeros((), dtype=np.float64)
        records, period = [], _Period()
        self._gradient_sum = None
        if not gradients and exchange.size > 1 and "vs" in self.optimizer.state_names:
            self._gradient_sum = xp.zeros_like(trainer.parameters.flat_grads)
        largest = int(plan.counts.max()) if n_batches else 1
        rows_split = contextlib.nullcontext() if gradients else trainer.split_batches(largest)
        with rows_split:
            for b in range(n_batches):
                a, z = int(starts[b]), int(ends[b])
                exchange.check()  # stopped by the driver (a lost peer): do not train on
                if plan.rates is not None:  # as the driver's schedule sets it before batch b
                    self.optimizer.base_learning_rate = float(plan.rates[b])
                if plan.sums[b] != 0:  # a batch of zero weight is skipped, as by one process
                    batch = (order, positions, a, z, float(plan.sums[b]))
                    if gradients:
                        loss = self._gradient_step(batch, int(plan.sizes[b]), exchange, b, period)
                        if exchange.rank == 0:  # every replica has the batch's loss: one counts it
                            total = total + loss * int(plan.sizes[b])
                    else:
                        loss = self._local_step(batch, float(plan.local_sums[b]), period)
                        total = total + loss * (z - a)
                    period.add(z - a, float(plan.local_sums[b]), float(plan.sums[b]))
                    if gradients:  # a synchronization a batch
                        records.append(period.record(exchange))
                        period.reset()
                if (b + 1) % every == 0 or b == n_batches - 1:
                    if not gradients and exchange.size > 1 and period.weight_total > 0:
                        self._average(exchange, ("average", b), period)
                        records.append(period.record(exchange))
                    elif gradients and b == n_batches - 1 and changing_states(trainer.network):
                        self._average_layer_states(exchange, plan)
                    period.reset()
        trainer.parameters.check_grad_views()
        return float(total), np.array(records, dtype=np.float64).reshape(-1, len(RECORD_FIELDS))

    def _batch(self, order, a, z):
        backend, xp, data = self.backend, self.backend.xp, self.data
        idx = order[a:z]
        out = None
        if not backend.is_sparse(data.X):
            buf = self._x_buffer
            if buf is None or buf.shape[0] < z - a:
                buf = self._x_buffer = xp.empty((z - a,) + data.X.shape[1:], data.X.dtype)
            out = buf[: z - a]
        X = backend.take_rows(data.X, idx, out=out)
        w = None if data.w is None else xp.take(data.w, idx)
        return X, xp.take(data.Y, idx, axis=0), w

    def _finish_step(self, loss, sw_sum):
        """The L2 term (once, as in the whole batch), clipping, and the optimizer's step."""
        parameters = self.trainer.parameters
        if self.alpha > 0:
            loss = parameters.add_penalty(loss, self.alpha, sw_sum)
        if self.clip_norm is not None:
            self.backend.clip_by_norm(parameters.flat_grads, self.clip_norm)
        if self._gradient_sum is not None:
            self._gradient_sum += parameters.flat_grads
        self.optimizer.step(parameters.grad_segments)
        return loss

    def _local_step(self, batch, local_sum, period):
        """One step on this replica's rows of a batch: their mean, the batch's L2 term."""
        order, _, a, z, sw_sum = batch
        period.start_compute()
        if z > a and local_sum != 0:
            X, Y, w = self._batch(order, a, z)
            loss = self.trainer.loss_and_gradients(X, Y, w, local_sum)
            self.trainer.parameters.check_grad_views()
        else:  # none of the batch's rows here: the replica follows its momentum
            self.trainer.parameters.flat_grads[...] = 0
            loss = 0.0
        loss = self._finish_step(loss, sw_sum)
        period.end_compute()
        return loss

    def _gradient_step(self, batch, n_rows, exchange, step, period):
        """This replica's part of a batch's gradient, summed over the replicas; one step."""
        order, positions, a, z, sw_sum = batch
        trainer, backend = self.trainer, self.backend
        flat = trainer.parameters.flat_grads
        period.start_compute()
        drawn = self._draw(n_rows)
        if z > a:
            X, Y, w = self._batch(order, a, z)
            if w is None:  # each row weighs 1 over the whole batch's rows
                w = self._ones_like(z - a)
            self._take_draws(drawn, positions[a:z])  # its rows of the whole batch's draws
            loss = trainer.loss_and_gradients(X, Y, w, sw_sum)
            trainer.parameters.check_grad_views()
        else:
            flat[...] = 0
            loss = 0.0
        size = flat.shape[0]
        buffer = exchange.buffer(size + 1, flat.dtype)  # the gradient, and the loss last
        exchange.put(buffer, 0, flat)
        exchange.put(buffer, size, loss)
        period.end_compute()
        exchange.allreduce(("gradients", step), buffer)
        period.end_sync()
        flat[...] = backend.asarray(exchange.get(buffer, 0, size))
        return self._finish_step(exchange.get(buffer, size, 1)[0], sw_sum)

    def _draw(self, n_rows):
        """The random numbers each layer draws for a whole batch of ``n_rows`` rows.

        :meth:`~sknet.layers.Layer.split_draws` hands a copy of a layer the
        draws of its rows as attributes whose first axis is the rows; here
        one stand-in copy takes the whole batch's, and the replica's layer
        gets its rows' (:meth:`_take_draws`). A layer that sees several rows
        a sample (inside ``TimeDistributed``: one a step, sample after sample)
        draws for all of them. Every replica draws every batch, so their
        streams stay the one of ``est.fit``.
        """
        per_sample = self._rows_per_sample
        if per_sample is None:
            per_sample = self._rows_per_sample = self._count_rows_per_sample()
        drawn = []
        for leaf in self._leaves:
            copy_of_leaf = types.SimpleNamespace()
            factor = per_sample.get(id(leaf), 1)
            leaf.split_draws([copy_of_leaf], [0, n_rows * factor])
            if vars(copy_of_leaf):
                drawn.append((leaf, factor, vars(copy_of_leaf)))
        return drawn

    @staticmethod
    def _take_draws(drawn, rows):
        """Give each drawing layer its rows' draws (``rows``: the replica's, in the batch)."""
        for leaf, factor, arrays in drawn:
            for name, values in arrays.items():
                if factor != 1:  # (samples x steps, ...) -> the replica's samples' steps
                    values = values.reshape((-1, factor) + values.shape[1:])[rows]
                    values = values.reshape((-1,) + values.shape[2:])
                else:
                    values = values[rows]
                setattr(leaf, name, values)

    def _count_rows_per_sample(self):
        """How many rows each layer that draws sees for one sample (once, at inference)."""
        drawing = [leaf for leaf in self._leaves if _draws_random_numbers(leaf)]
        if not drawing:
            return {}
        seen = {}
        for leaf in drawing:

            def record(X, *, training, _leaf=leaf, _forward=leaf.forward):
                seen[id(_leaf)] = int(X.shape[0])
                return _forward(X, training=training)

            leaf.forward = record
        try:
            one = self.backend.take_rows(self.data.X, self.backend.xp.arange(1))
            self.trainer.network.forward(one, training=False)
        finally:
            for leaf in drawing:
                leaf.__dict__.pop("forward", None)
        return seen

    def _ones_like(self, n_rows):
        xp = self.backend.xp
        if self._ones is None or self._ones.shape[0] < n_rows:
            self._ones = xp.ones(n_rows, dtype=self.trainer.parameters.flat_grads.dtype)
        return self._ones[:n_rows]

    def _average(self, exchange, step, period):
        """Replace the synced arrays by their average over the replicas, weighted.

        With Adam, the averaged second moment is then corrected to the one the
        whole batches would have given (:meth:`_correct_second_moment`).
        """
        coefficient = period.weight / period.weight_total
        arrays = self.synced_arrays()
        sums = self._gradient_sum
        if sums is not None:
            squares = sums * sums
            arrays += [sums, squares]
        self._combine(exchange, step, arrays, coefficient)
        if sums is not None:
            self._correct_second_moment(sums, squares, exchange.size)
            sums[...] = 0
        period.end_sync()

    def _correct_second_moment(self, mean, mean_of_squares, n_replicas):
        """Take the noise of the replicas' smaller batches out of Adam's second moment.

        A replica's gradient on its part of a batch is the batch's gradient
        plus more noise: its square overestimates the square of the whole
        batch's gradient by the spread of the parts (for K equal parts,
        ``(1 - 1/K)`` times a part's noise variance), so the averaged second
        moment would shrink Adam's steps by up to ``sqrt(K)``. Over a period,
        the weighted variance across replicas of their gradient sums,
        ``mean(S_k^2) - mean(S_k)^2``, estimates that excess summed over the
        period's steps without bias (the batches' common gradient cancels);
        it enters the second moment with the weight ``1 - beta_2`` each step's
        square had, and the result is kept at least ``1/K`` of the average
        (the noise-only case). The large-batch/small-batch identity of
        McCandlish et al. (2018), "An empirical model of large-batch
        training", per coordinate.
        """
        optimizer, xp = self.optimizer, self.backend.xp
        excess = mean_of_squares
        excess -= mean * mean
        offset = 0
        for v in optimizer.vs:
            size = v.size
            floor = v / n_replicas
            v -= (1 - optimizer.beta_2) * excess[offset : offset + size].reshape(v.shape)
            xp.maximum(v, floor, out=v)
            offset += size

    def _average_layer_states(self, exchange, plan):
        total = float(np.sum(plan.sums))
        coefficient = float(np.sum(plan.local_sums)) / total if total else 1 / exchange.size
        self._combine(exchange, ("states",), changing_states(self.trainer.network), coefficient)

    def _combine(self, exchange, step, arrays, coefficient):
        """Replace ``arrays`` by the sum over the replicas of ``coefficient`` times theirs."""
        backend = self.backend
        buffer = exchange.buffer(sum(int(a.size) for a in arrays), arrays[0].dtype)
        offset = 0
        for array in arrays:
            exchange.put(buffer, offset, array, coefficient)
            offset += array.size
        exchange.allreduce(step, buffer)
        offset = 0
        for array in arrays:
            array[...] = backend.asarray(exchange.get(buffer, offset, array.size)).reshape(
                array.shape
            )
            offset += array.size


def _draws_random_numbers(layer):
    """Whether ``layer``'s class overrides :meth:`~sknet.layers.Layer.split_draws`."""
    owners = [cls for cls in type(layer).__mro__ if "split_draws" in vars(cls)]
    return len(owners) > 1 and owners[0] is not owners[-1]


class _Period:
    """What a replica learned from since the last synchronization, and how long it took."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.batches = self.rows = 0
        self.weight = self.weight_total = 0.0
        self.compute = 0.0
        self._started = self.arrive = self.done = None

    def add(self, rows, weight, weight_total):
        self.batches += 1
        self.rows += rows
        self.weight += weight
        self.weight_total += weight_total

    def start_compute(self):
        self._started = time.perf_counter()

    def end_compute(self):
        self.compute += time.perf_counter() - self._started
        self.arrive = time.time()

    def end_sync(self):
        self.done = time.time()

    def record(self, exchange):
        """The period's row of :data:`RECORD_FIELDS` (the bytes this replica sent for it)."""
        row = (self.batches, self.rows, self.compute, self.arrive, self.done, exchange.bytes_sent)
        exchange.bytes_sent = 0
        return row


def _run_epoch(shard, template, info, plan, state, scalars, want_state):
    """On a worker: one epoch of this shard's replica, in step with the other replicas.

    ``info`` is the run's :data:`RunInfo`. ``state`` (the driver's model,
    when it changed or the replica is new) or ``scalars`` (the optimizer's
    learning rate and counters) come first. Returns this replica's part of the
    loss, its records, and with ``want_state`` the synchronized state.
    """
    distributed = _distributed()
    worker = distributed.get_worker()
    task = worker.get_current_task()
    fit = state_of(worker, info.fit_id)
    distributed.secede()  # waits for its peers: out of the pool, so two shards may share a worker

    def still_wanted():
        task_state = worker.state.tasks.get(task)
        return task_state is not None and task_state.state in ("executing", "long-running")

    with fit.lock:
        replica = fit.replicas.get(info.rank)
    if replica is None:
        replica = _Replica(shard, template, info.rank, len(info.peers))
        with fit.lock:
            fit.replicas[info.rank] = replica
    host = HostExchange(
        fit,
        info.run,
        info.rank,
        info.peers,
        info.addresses,
        replica.backend,
        worker,
        still_wanted,
        info.link,
    )
    with replica.backend.device_context(), contextlib.closing(host):
        exchange = collective(host, replica.backend, fit.communicators)  # NCCL between GPUs
        if state is not None:
            replica.load(state)
        else:
            replica.optimizer.restore(({}, scalars))
        started = time.perf_counter()
        loss, records = replica.run_epoch(plan, exchange)
        result = {
            "loss": loss,
            "records": records,
            "seconds": time.perf_counter() - started,
            "device": replica.backend.name,
            "transport": exchange.kind,
        }
        if want_state:
            result["state"] = replica.dump()
    return result


def _dask_shard(keep, Y, w, dtype, *blocks):
    """On a worker: a shard from its Dask blocks, checked as the estimator checks X."""
    X = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    X = check_array(X[keep], dtype=[dtype.type, np.float64, np.float32], input_name="X")
    return X, Y, w

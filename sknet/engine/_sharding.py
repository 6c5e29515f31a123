"""Batches split into row shards that copies of the network run in parallel threads.

On the CPU, sknet's own kernels (im2col, pooling, the fused epilogues, the
recurrent cells) run on the calling thread, and OpenBLAS spreads one matrix
product over its threads with a poor speed-up on the small products of a
batch. Splitting the batch instead gives every thread whole forward and
backward passes: thread ``k`` runs a copy of the network, which shares the
parameters and has its own gradients and work buffers, on rows
``bounds[k]:bounds[k + 1]``; the gradients are then summed into the trainer's.
Each thread calls a single-threaded BLAS, so the threads in use are the same
number as before.

How many shards: the number of threads the user's BLAS may use (what
``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` or ``threadpoolctl`` set, at most
the CPUs this process may run on), as long as every shard keeps
:data:`MIN_SHARD_ROWS` rows and :data:`MIN_SHARD_WORK` multiply-adds and
every layer is ``shardable`` (its rows are independent: not
:class:`~sknet.layers.BatchNorm`, not a user's layer unless it says so).
Small networks (an MLP of a few hundred units) keep whole batches: there the
threads' hand-offs cost more than OpenBLAS's own threading loses. The BLAS
thread count is limited to one only while the batches run, and restored after.

A split batch trains the same model as a whole one up to float rounding: the
loss is a sum over rows, dropout masks are drawn for the whole batch, and the
L2 term is added once.
"""

import contextlib
import copy
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sknet.backend._deferred import helper_thread
from sknet.layers._base import Layer
from sknet.layers._tree import walk

#: The fewest rows a shard gets: fewer would spend more on Python than on arithmetic.
MIN_SHARD_ROWS = 16
#: The least work a shard gets, in multiply-adds of the forward pass (about
#: 0.4 ms of one core's matrix products). Measured on 2 cores: the default
#: ConvNet (135 M per 32-row shard) and an LSTM(128) over 28 steps (140 M per
#: 64-row shard) gain from splitting; a 784-256-128 MLP (15 M per 64 rows) loses.
MIN_SHARD_WORK = 50e6

_CONTROLLER = None
# The BLAS limit is process-wide: fits running in several threads share one
# limit, set by the first to enter and lifted by the last to leave.
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_LIMIT = None


def _threadpool_controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


@contextlib.contextmanager
def single_threaded_blas():
    """Within the block the BLAS runs on one thread; the user's setting comes back after.

    Reference-counted across threads: two fits split over threads at once
    leave the process's BLAS as the user set it, whichever ends first.
    """
    global _BLAS_USERS, _BLAS_LIMIT
    with _BLAS_LOCK:
        if _BLAS_USERS == 0:
            _BLAS_LIMIT = _threadpool_controller().limit(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0:
                _BLAS_LIMIT.restore_original_limits()
                _BLAS_LIMIT = None


@contextlib.contextmanager
def single_threaded_fit(backend, enabled=True):
    """Within the block the BLAS runs on one thread, and the backward pass's weight
    gradients on a helper thread where the user's thread budget has room for two
    (:mod:`sknet.backend._deferred`; the CPU only). The same bits either way.
    ``enabled=False`` changes nothing.

    For the whole fit, validation included: OpenBLAS's threads, woken by a
    multi-threaded product, spin for a while after it on the core the helper needs.
    """
    if not enabled:
        yield
        return
    helper = backend.xp is np and cpu_threads() >= 2  # the budget, before it is limited
    with helper_thread(helper), single_threaded_blas():
        yield


def cpu_threads():
    """Threads the user lets the BLAS use, at most the CPUs this process may use."""
    blas = _threadpool_controller().select(user_api="blas").lib_controllers
    threads = max((lib.num_threads for lib in blas), default=1)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(threads, cpus))


def plan_shards(network, plan, batch_rows):
    """How many row shards a batch of ``batch_rows`` rows of ``network`` gets (1: none).

    ``plan`` (the fit's :class:`~sknet.engine._plan.TrainingPlan`) says
    whether every layer may split.
    """
    if network.backend.xp is not np or not plan.shardable:
        return 1
    return shard_count(batch_rows, cpu_threads(), work_per_sample(network))


def shard_count(n_rows, threads, work):
    """Shards for ``n_rows`` rows of ``work`` multiply-adds each on ``threads`` threads."""
    n = min(threads, n_rows // MIN_SHARD_ROWS, int(n_rows * work // max(MIN_SHARD_WORK, 1)))
    return max(n, 1)


def work_per_sample(network):
    """Multiply-adds of one sample's forward pass, roughly: each layer's parameters
    times the positions they are applied at (pixels, steps; one for a row)."""
    return sum(_work(layer, 1) for layer in network.layers)


def _work(layer, repeats):
    """Multiply-adds of ``layer`` on one sample, applied ``repeats`` times (time steps)."""
    shape = layer.input_shape_
    inner = layer.sublayers()
    if inner:  # a wrapper applied per step runs its layer once per extra leading axis
        steps = [
            int(np.prod(shape[: len(shape) - len(block.input_shape_)] or (1,))) for block in inner
        ]
        return sum(_work(block, repeats * n) for block, n in zip(inner, steps))
    channels = shape[0] if len(shape) == 3 else shape[-1] if shape else 1
    positions = int(np.prod(shape)) // max(int(channels), 1)
    return repeats * positions * sum(int(p.size) for p in layer.params.values())


def shard_bounds(n_rows, n_shards):
    """Row offsets ``[0, ..., n_rows]`` of ``n_shards`` shards as equal as can be."""
    return [n_rows * k // n_shards for k in range(n_shards + 1)]


class RowShards:
    """Copies of a trainer's network and loss that train on row shards of its batches.

    Copy 0 is the trainer's own network. The others share its parameters
    (and running state) and write their gradients to flat arrays laid out like
    ``trainer.parameters.flat_grads``, which :meth:`loss_and_gradients` adds to it.

    Parameters
    ----------
    trainer : Trainer
        Its parameters are already laid out (``flat_params``/``flat_grads``).
    n_shards : int
        Number of copies (threads), at least 2.
    """

    def __init__(self, trainer, n_shards):
        self.trainer = trainer
        self.n_shards = n_shards
        self.work = work_per_sample(trainer.network)
        self.networks = [trainer.network]
        self.losses = [trainer.loss]
        self.flat_grads = [trainer.parameters.flat_grads]
        for _ in range(n_shards - 1):
            network, flat_grads = _network_copy(trainer)
            loss = copy.copy(trainer.loss)
            loss.__dict__.pop("_grad", None)  # the stock losses' work buffer
            self.networks.append(network)
            self.losses.append(loss)
            self.flat_grads.append(flat_grads)
        # Layers that draw random numbers draw a whole batch's on copy 0.
        leaves = [[leaf for _, leaf in network.leaves()] for network in self.networks]
        self._random = [
            column
            for column in zip(*leaves)
            if type(column[0]).split_draws is not Layer.split_draws
        ]
        self._pool = None

    @contextlib.contextmanager
    def threads(self):
        """Within the block, the worker threads exist and the BLAS runs single-threaded."""
        with (
            single_threaded_blas(),
            ThreadPoolExecutor(self.n_shards - 1, thread_name_prefix="sknet-shard") as pool,
        ):
            self._pool = pool
            try:
                yield self
            finally:
                self._pool = None

    def usable(self, n_rows):
        """Whether a batch of ``n_rows`` rows gets split (a short last batch may not)."""
        return shard_count(n_rows, self.n_shards, self.work) >= 2

    def loss_and_gradients(self, X, Y, sample_weight, sw_sum):
        """The batch's loss (without the L2 term); its gradient in the trainer's ``flat_grads``."""
        n = X.shape[0]
        n_shards = shard_count(n, self.n_shards, self.work)
        bounds = shard_bounds(n, n_shards)
        for column in self._random:
            column[0].split_draws(column[:n_shards], bounds)
        shards = [
            (
                k,
                X[a:b],
                Y[a:b],
                None if sample_weight is None else sample_weight[a:b],
                (b - a) / n,
                sw_sum,
            )
            for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))
        ]
        futures = [self._pool.submit(self._run, *shard) for shard in shards[1:]]
        loss = self._run(*shards[0])
        for future in futures:  # every thread ends before any error propagates
            future.exception()
        for future in futures:
            loss = loss + future.result()
        main = self.flat_grads[0]
        for grads in self.flat_grads[1:n_shards]:
            main += grads
        return loss

    def _run(self, k, X, Y, w, share, sw_sum):
        """Forward, loss and backward of copy ``k`` on its shard; returns its part of the loss."""
        network, loss_function = self.networks[k], self.losses[k]
        Z = network.forward(X, training=True)
        if w is None:  # the loss is the shard's mean: weigh it by the shard's share of rows
            loss, dZ = loss_function(Z, Y)
            loss = loss * share
            dZ *= share
        else:  # the loss divides by the whole batch's weight sum
            loss, dZ = loss_function(Z, Y, w, sw_sum)
        network.backward(dZ)
        return loss


def _network_copy(trainer):
    """A copy of the trainer's network sharing its parameters, with its own gradients."""
    network = trainer.network
    memo = {id(network.backend): network.backend}
    for _, each in walk(network.layers):
        for value in vars(each).values():
            arrays = value.values() if isinstance(value, dict) else (value,)
            for array in arrays:
                if isinstance(array, np.ndarray):
                    memo[id(array)] = array  # shared: parameters, state, weights
    twin = copy.deepcopy(network, memo)
    for _, each in walk(twin.layers):
        if "_buffers" in vars(each):
            each._buffers, each._cache = {}, {}
    flat = np.zeros_like(trainer.parameters.flat_grads)
    base = trainer.parameters.flat_grads.__array_interface__["data"][0]
    itemsize = flat.itemsize
    for (_, leaf), (_, twin_leaf) in zip(network.leaves(), twin.leaves()):
        for key, grad in leaf.grads.items():
            if np.shares_memory(grad, trainer.parameters.flat_grads):
                start = (grad.__array_interface__["data"][0] - base) // itemsize
                view = flat[start : start + grad.size].reshape(grad.shape)
            else:  # a frozen layer's scratch array
                view = np.zeros_like(grad)
            twin_leaf.grads[key] = view  # in place: TimeDistributed shares the dict
    return twin, flat

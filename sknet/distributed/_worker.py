"""What runs on a Dask worker: a replica of the model training on its shard.

Each worker keeps one :class:`_Replica` per shard of a running fit (network,
trainer, optimizer and its rows on the worker's device); :func:`_train_period`
loads the state the driver sends, runs the period's batches and returns the
new state. The state's format (:func:`replica_state`) is shared with the
driver, which imports it from here.
"""

import copy
import time
import types

import numpy as np
from sklearn.utils import check_array

from sknet.backend import get_backend
from sknet.engine._optimizers import make_optimizer
from sknet.engine._trainer import Trainer
from sknet.engine._types import BackendData


def layer_states(network):
    """The network's non-trained arrays (running statistics), live."""
    return network.weights()[len(network.params()) :]


def training_flags(network):
    return [
        (getattr(layer, "trainable", True), getattr(layer, "lr_scale", 1.0))
        for _, layer in network.leaves()
    ]


def replica_state(trainer, optimizer):
    """A trainer's parameters, running statistics, optimizer state and flags, as NumPy arrays.

    What every replica starts a period from, and what it hands back.
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


#: The replicas of the fits running on this worker, by (fit id, shard).
_REPLICAS = {}


class _Replica:
    """One shard's network, trainer and optimizer, on a worker's device."""

    def __init__(self, shard, template, index):
        backend = get_backend(template.device)
        self.backend = backend
        with backend.device_context():
            # copies: a threaded (in-process) worker gets the driver's own objects
            network = copy.deepcopy(template.network).to_backend(backend).astype(template.dtype)
            t0, n_shards = template.seed_offset
            if n_shards > 1:
                network.reseed(t0 * n_shards + index)  # one dropout stream a shard
            self.trainer = Trainer(
                network,
                copy.deepcopy(template.loss),
                alpha=template.alpha,
                clip_norm=template.clip_norm,
            )
            self.optimizer = make_optimizer(types.SimpleNamespace(**template.hyper), self.trainer)
            X, Y, w = shard
            dtype = template.dtype
            self.data = BackendData(
                backend.asarray(X, dtype),
                backend.asarray(Y, dtype),
                None if w is None else backend.asarray(w, dtype),
            )

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

    def train(self, order, sw_sums, batch_size):
        total = self.trainer.run_batches(
            self.data,
            self.optimizer,
            batch_size=batch_size,
            order=self.backend.asarray(order),
            sw_sums=sw_sums,
        )
        return float(total)

    def dump(self):
        state = replica_state(self.trainer, self.optimizer)
        del state["flags"]
        return state


def _train_period(shard, template, fit_id, index, state, order, sw_sums, batch_size):
    """On a worker: load the averaged state, run this period's batches, return the new state."""
    key = (fit_id, index)
    replica = _REPLICAS.get(key)
    if replica is None:
        replica = _REPLICAS[key] = _Replica(shard, template, index)
    with replica.backend.device_context():
        replica.load(state)
        started = time.perf_counter()
        loss = replica.train(order, sw_sums, batch_size)
        seconds = time.perf_counter() - started
        return {
            "state": replica.dump(),
            "loss": loss,
            "rows": int(order.shape[0]),
            "batches": -(-int(order.shape[0]) // batch_size),
            "seconds": seconds,
            "device": replica.backend.name,
        }


def _dask_shard(keep, Y, w, dtype, *blocks):
    """On a worker: a shard from its Dask blocks, checked as the estimator checks X."""
    X = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
    X = check_array(X[keep], dtype=[dtype.type, np.float64, np.float32], input_name="X")
    return X, Y, w


def _forget(fit_id):
    for key in [key for key in _REPLICAS if key[0] == fit_id]:
        del _REPLICAS[key]

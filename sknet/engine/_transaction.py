"""The fit transaction: a fit either completes or leaves the previous model.

``with FitTransaction(estimator): ...`` snapshots the fitted state the
estimator owns on entry, and on any ``BaseException`` inside the block (an
error, ``KeyboardInterrupt`` outside the epoch loop, running out of memory)
puts that state back, or removes every fitted attribute when there was none,
so "fitted" always means complete and usable. It restores only what it owns:
the fitted attributes (names ending in ``_``) and the estimator's private fit
state (``_fit_state``); whatever else is set on the estimator (by a
scikit-learn ``Pipeline``, say) is left alone.

The snapshot is cheap: references for what a fit replaces, copies of the
lists it appends to, and, for the model a fit continues (a warm start,
``partial_fit``), one copy of its weights and of the optimizer's moments as
arrays (no object graph copied); a refit from scratch builds a new network
and optimizer and leaves the previous ones as they are, so it copies nothing.
``partial_fit`` (``release_memory=False``) keeps that copy's arrays with the
optimizer when the call ends (``_spare``, never pickled) and the next call
writes its snapshot into them: a call allocates no copy of the model, only
what training needs (the gradients).
What the snapshot holds until the fit ends is memory the fit needs:
:func:`held_by_transaction` says how much, for the fit's plan. On every exit
it releases what training allocated (layer buffers and gradients, the loss's
buffer, optionally the device memory pool) and keeps only the model.
"""

import contextvars

from sknet.engine._optimizers import NOT_STATE, copy_arrays
from sknet.layers._tree import walk

#: ``{id(estimator): transaction}`` of the fits under way in this context.
_ACTIVE = contextvars.ContextVar("sknet_fit_transactions", default=None)


def owns(estimator, name):
    """Whether ``name`` is fitted state the fit transaction restores."""
    fitted = name.endswith("_") and not name.startswith("__")
    return fitted or name in getattr(estimator, "_fit_state", ())


class FitTransaction:
    """Snapshot, abort on any BaseException, release.

    Parameters
    ----------
    estimator : BaseNeuralNetwork
    release_memory : bool, default=True
        Also return the backend's cached device memory at the end (``fit``;
        ``partial_fit`` keeps it for the next call).
    continues : bool, default=True
        Whether the block may change the fitted model in place (a warm start,
        ``partial_fit``): its weights and the optimizer's state are copied.
        A refit from scratch passes False: it builds a new network and
        optimizer, and the previous ones, kept as they are, are put back.
    """

    def __init__(self, estimator, *, release_memory=True, continues=True):
        self.estimator = estimator
        self.release_memory = release_memory
        self.continues = continues
        self.backend = None  # set by the fit once resolved, for release_memory

    def __enter__(self):
        est = self.estimator
        self._snapshot = self._freed = None
        if est.__sklearn_is_fitted__():
            self._snapshot = {
                name: _shallow(value) for name, value in vars(est).items() if owns(est, name)
            }
            network, optimizer = est.network_, est.__dict__.get("_optimizer")
            continues = self.continues  # else the fit builds a new model: nothing to copy
            # the arrays of the last partial_fit's snapshot, written into where they fit
            spare = optimizer.__dict__.pop("_spare", {}) if optimizer is not None else {}
            saved = copy_arrays(network.weights(), spare.get("weights")) if continues else None
            self._network = (network, network.dtype, saved, _flags(network))
            self._optimizer = None
            if optimizer is not None:
                state = optimizer.snapshot(into=spare) if continues else None
                self._optimizer = (optimizer, state)
        self._token = _ACTIVE.set({**(_ACTIVE.get() or {}), id(est): self})
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None:
                self.abort()
        finally:
            _ACTIVE.reset(self._token)
            self.release()
            self._keep_spare()
        return False  # the exception, if any, propagates

    def held(self):
        """``(weights, optimizer state)``: bytes of arrays the snapshot keeps that the
        fit does not train: the copies of a continued model, or the previous model
        that a refit from scratch replaced."""
        if self._snapshot is None:
            return 0, 0
        est = self.estimator
        network, _, saved, _ = self._network
        weights = _nbytes(saved or ())
        if network is not est.__dict__.get("network_"):
            weights += _nbytes(network.weights())
        state = 0
        if self._optimizer is not None:
            optimizer, snapshot = self._optimizer
            if snapshot is not None:
                state += _nbytes(a for arrays in snapshot[0].values() for a in arrays)
            if optimizer is not est.__dict__.get("_optimizer"):
                state += optimizer_nbytes(optimizer)
        return weights, state

    def abort(self):
        """Put the estimator back as it was before the fit."""
        est = self.estimator
        for name in [k for k in vars(est) if owns(est, k)]:
            delattr(est, name)
        if self._snapshot is None:
            return
        est.__dict__.update(self._snapshot)
        network, dtype, weights, flags = self._network
        if weights is not None:  # a refit from scratch left the previous model as it was
            network.astype(dtype)  # a warm fit in another dtype cast it
            network.load_weights(weights)  # the model the fit continued, in place
        for layer, (trainable, lr_scale) in flags:
            layer.__dict__.update(trainable=trainable, lr_scale=lr_scale)
        if self._optimizer is not None and self._optimizer[1] is not None:
            optimizer, (arrays, scalars) = self._optimizer
            # the failed fit's arrays, of the state lists it still has (it may have stopped
            # averaging the weights), and nothing it added (it may have started)
            self._freed = {n: optimizer.__dict__[n] for n in arrays if n in optimizer.__dict__}
            kept = {*arrays, *scalars, *NOT_STATE}
            for name in [n for n in vars(optimizer) if n not in kept]:
                del optimizer.__dict__[name]
            optimizer.__dict__.update(scalars)  # its layout too: the next fit follows it
            for name, values in arrays.items():
                setattr(optimizer, name, values)
        est._place_network()

    def release(self):
        """Free what training allocated; keep the model."""
        est = self.estimator
        network = est.__dict__.get("network_")
        if network is not None:
            network.release()
        loss = est.__dict__.get("_loss")
        if loss is not None:
            loss.release()
        if self.release_memory and self.backend is not None:
            self.backend.release_memory()

    def _keep_spare(self):
        """Give the snapshot's arrays, free again, to the optimizer for the next ``partial_fit``.

        Only without ``release_memory`` (``partial_fit``), and only to the
        optimizer they were copied from: after an abort the optimizer took the
        copies back, and the arrays the failed fit trained are the free ones.
        """
        if self.release_memory or self._snapshot is None or self._optimizer is None:
            return
        optimizer, snapshot = self._optimizer
        if snapshot is None or optimizer is not self.estimator.__dict__.get("_optimizer"):
            return
        state = self._freed if self._freed is not None else snapshot[0]
        optimizer._spare = {"weights": self._network[2], **state}


def held_by_transaction(estimator):
    """:meth:`FitTransaction.held` of the fit of ``estimator`` under way, or ``(0, 0)``."""
    transaction = (_ACTIVE.get() or {}).get(id(estimator))
    return (0, 0) if transaction is None else transaction.held()


def optimizer_nbytes(optimizer):
    """Bytes of a stochastic optimizer's state and work array (0 for None)."""
    if optimizer is None:
        return 0
    state = [a for name in optimizer.state_names for a in getattr(optimizer, name)]
    tmp = vars(optimizer).get("_tmp")  # its work array (dropped when pickled)
    return _nbytes(state) + (0 if tmp is None else int(tmp.nbytes))


def _nbytes(arrays):
    return sum(int(a.nbytes) for a in arrays)


def _shallow(value):
    """What a fit may append to is copied; what it replaces is kept as it is."""
    return list(value) if isinstance(value, list) else value


def _flags(network):
    """Every layer's ``trainable``/``lr_scale`` (Unfreeze and warm starts change them)."""
    return [
        (layer, (layer.__dict__.get("trainable", True), layer.__dict__.get("lr_scale", 1.0)))
        for _, layer in walk(network.layers)
    ]

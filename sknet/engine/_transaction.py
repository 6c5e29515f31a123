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
lists it appends to, and, for the model a fit continues, one copy of its
weights and of the optimizer's moments as arrays (no object graph copied). On
every exit it releases what training allocated (layer buffers and gradients,
the loss's buffer, optionally the device memory pool) and keeps only the
model.
"""

from sknet.layers._tree import walk


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
    """

    def __init__(self, estimator, *, release_memory=True):
        self.estimator = estimator
        self.release_memory = release_memory
        self.backend = None  # set by the fit once resolved, for release_memory

    def __enter__(self):
        est = self.estimator
        self._snapshot = None
        if est.__sklearn_is_fitted__():
            self._snapshot = {
                name: _shallow(value) for name, value in vars(est).items() if owns(est, name)
            }
            network, optimizer = est.network_, est.__dict__.get("_optimizer")
            self._network = (network, network.dtype, network.save_weights(), _flags(network))
            self._optimizer = None if optimizer is None else (optimizer, optimizer.snapshot())
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None:
                self.abort()
        finally:
            self.release()
        return False  # the exception, if any, propagates

    def abort(self):
        """Put the estimator back as it was before the fit."""
        est = self.estimator
        for name in [k for k in vars(est) if owns(est, k)]:
            delattr(est, name)
        if self._snapshot is None:
            return
        est.__dict__.update(self._snapshot)
        network, dtype, weights, flags = self._network
        network.astype(dtype)  # a warm fit in another dtype cast it
        network.load_weights(weights)  # the model the fit continued, in place
        for layer, (trainable, lr_scale) in flags:
            layer.__dict__.update(trainable=trainable, lr_scale=lr_scale)
        if self._optimizer is not None:
            optimizer, (arrays, scalars) = self._optimizer
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


def _shallow(value):
    """What a fit may append to is copied; what it replaces is kept as it is."""
    return list(value) if isinstance(value, list) else value


def _flags(network):
    """Every layer's ``trainable``/``lr_scale`` (Unfreeze and warm starts change them)."""
    return [
        (layer, (layer.__dict__.get("trainable", True), layer.__dict__.get("lr_scale", 1.0)))
        for _, layer in walk(network.layers)
    ]

"""The fit transaction: a fit either completes or leaves the previous model.

``with FitTransaction(estimator): ...`` snapshots the estimator's fitted
state on entry (when it has one), and on any ``BaseException`` inside the
block (an error, ``KeyboardInterrupt`` outside the epoch loop, running out
of memory) puts that state back, or removes every fitted attribute when
there was none, so "fitted" always means complete and usable. On every exit
it releases what training allocated (layer buffers and gradients, the loss's
buffer, optionally the device memory pool) and keeps only the model.
"""

import copy


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
            # Parameters are shared (fit never modifies them); the rest is copied,
            # as a pickle would copy it: arrays on the host.
            params = set(est.get_params(deep=False))
            self._snapshot = {
                k: v if k in params else copy.deepcopy(v) for k, v in vars(est).items()
            }
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
        params = set(est.get_params(deep=False))
        for name in [k for k in vars(est) if k not in params]:
            delattr(est, name)
        if self._snapshot is not None:
            # Copies pickle their arrays to the host: put them back on the device.
            est.__dict__.update(self._snapshot)
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

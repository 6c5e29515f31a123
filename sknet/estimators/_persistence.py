"""How an estimator pickles and loads: NumPy arrays, sknet's version, the device it finds.

A mixin of :class:`~sknet.estimators._base.BaseNeuralNetwork`: the pickle
records sknet's version (another version warns on load), and a loaded model
puts its network on the device it was trained on, or on the CPU when that
device is not there: a model trained on a GPU loads and predicts on a laptop.
"""

import warnings

from sknet import _version
from sknet.backend import get_backend
from sknet.exceptions import SknetVersionWarning


class PersistenceMixin:
    """Pickling with the version, loading onto the device that is there."""

    def _place_network(self):
        """Put the network on its device, or on the CPU when that is missing here."""
        try:
            backend = get_backend(self.device_)
        except ValueError:
            warnings.warn(
                f"This {type(self).__name__} was fitted on {self.device_!r}, "
                "which is not available here; it runs on the CPU instead.",
                UserWarning,
            )
            backend = get_backend("cpu")
            self.device_ = backend.name
        self.network_.to_backend(backend)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_sknet_version"] = _version.__version__
        return state

    def __setstate__(self, state):
        version, current = state.pop("_sknet_version", None), _version.__version__
        if version is not None and version != current:
            warnings.warn(
                f"This {type(self).__name__} was saved with sknet {version} and is "
                f"loaded with sknet {current}; it may not work as before. "
                "Refit it with this version to be sure.",
                SknetVersionWarning,
            )
        super().__setstate__(state)
        if "network_" in self.__dict__:
            # Placed once, here: predictions never move the network (thread-safe).
            self._place_network()

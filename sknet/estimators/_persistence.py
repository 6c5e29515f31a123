"""How an estimator pickles and loads: NumPy arrays, sknet's version, the device it finds.

A mixin of :class:`~sknet.estimators._base.BaseNeuralNetwork`: the pickle
records sknet's version (another version warns on load), and a loaded model
puts its network on the device it was trained on, or on the CPU when that
device is not there: a model trained on a GPU loads and predicts on a laptop.

Before that, what the file holds is checked (:func:`check_loaded_network`):
every layer is rebuilt, one top-level layer at a time, from its parameters for
the shape the layer before it outputs, and its saved arrays must have the
shapes and dtype of the rebuilt ones. A skops file whose arrays were altered
(a weight matrix of another shape) is a ValueError naming the layer and both
shapes, when it loads, instead of an error inside NumPy at the first predict.
"""

import copy
import inspect
import warnings
from collections.abc import Mapping

import numpy as np
from sklearn.base import clone

from sknet import _version
from sknet.backend import get_backend
from sknet.exceptions import SknetVersionWarning
from sknet.layers import Layer
from sknet.layers._base import build_layer
from sknet.layers._tree import walk


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
        # A parameter added since the pickle was written takes its default, the
        # behaviour the model was trained with (clip_norm=None, weight_decay, ...).
        for name, default in _constructor_defaults(type(self)).items():
            self.__dict__.setdefault(name, default)
        if "network_" in self.__dict__:
            check_loaded_network(self)
            # Placed once, here: predictions never move the network (thread-safe).
            self._place_network()


def _constructor_defaults(cls):
    """The defaults of ``cls.__init__``'s parameters, by name."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not p.empty}


def check_loaded_network(est):
    """Refuse a loaded ``est.network_`` whose layers or arrays do not fit together.

    Each top-level layer is copied unbuilt (``clone``), built on the CPU for
    the shape the layer before it outputs, and compared with the saved one,
    node by node through the layer tree: the same kinds of layers, shapes and
    array names, each saved array of the rebuilt one's shape and dtype. This
    allocates one top-level layer's parameters at a time, freed after.
    """
    network, name = est.network_, type(est).__name__
    layers = getattr(network, "layers", None)
    if not isinstance(layers, list) or not layers or not all(isinstance(x, Layer) for x in layers):
        raise _altered(name, f"its network_ holds no list of layers ({type(layers).__name__})")
    dtype = layers[0].__dict__.get("dtype_")
    if not isinstance(dtype, np.dtype) or dtype.kind != "f":
        raise _altered(name, f"its first layer's dtype_ is {dtype!r}, not a floating dtype")
    shape = tuple(network.input_shape)
    expected = _expected_input_shape(est)
    if expected is not None and shape != expected:
        raise _altered(name, f"its network takes samples of shape {shape}, not {expected}")
    cpu, rng = get_backend("cpu"), np.random.RandomState(0)
    for i, layer in enumerate(layers):
        fresh = _unbuilt_copy(layer)
        out = build_layer(fresh, shape, backend=cpu, dtype=dtype, rng=rng)
        _compare_trees(name, i, layer, fresh, shape)
        shape = out
    if tuple(network.output_shape) != shape:
        raise _altered(name, f"its network says it outputs {network.output_shape}, not {shape}")
    n_outputs = est.__dict__.get("n_outputs_")
    if n_outputs is not None and shape[-1:] != (n_outputs,):
        raise _altered(name, f"its last layer outputs {shape}, but n_outputs_ is {n_outputs!r}")
    _check_classes(est, name, n_outputs)


def _expected_input_shape(est):
    try:
        return tuple(est._network_input_shape(est.n_features_in_))
    except (AttributeError, TypeError, ValueError):
        return None


def _unbuilt_copy(layer):
    try:
        return clone(layer)
    except (RuntimeError, TypeError):  # a user's layer that does not clone
        return copy.deepcopy(layer)


def _compare_trees(name, index, saved_root, built_root, input_shape):
    saved, built = list(walk([saved_root])), list(walk([built_root]))
    kinds = [type(node).__name__ for _, node in saved]
    if [type(node) for _, node in saved] != [type(node) for _, node in built]:
        rebuilt = [type(node).__name__ for _, node in built]
        raise _altered(name, f"layers_[{index}] holds the layers {kinds}, not {rebuilt}")
    for (path, s), (_, b) in zip(saved, built):
        inner = "".join(f", inner layer {i}" for i in path[1:])
        where = f"layers_[{index}]{inner} ({type(s).__name__})"
        for attribute in ("input_shape_", "output_shape_"):
            if tuple(getattr(s, attribute, ())) != tuple(getattr(b, attribute)):
                raise _altered(
                    name,
                    f"{where} says its {attribute} is {getattr(s, attribute, None)!r}, but "
                    f"built for inputs of shape {b.input_shape_} it is {getattr(b, attribute)}",
                )
        for kind in ("params", "state"):
            _compare_arrays(name, where, kind, getattr(s, kind, None), getattr(b, kind), b)


def _compare_arrays(name, where, kind, saved, built, layer):
    if not isinstance(saved, Mapping) or sorted(saved) != sorted(built):
        keys = sorted(saved) if isinstance(saved, Mapping) else type(saved).__name__
        raise _altered(name, f"{where} holds the {kind} {keys}, not {sorted(built)}")
    for key, array in saved.items():
        want = built[key]
        got = (getattr(array, "shape", None), getattr(array, "dtype", None))
        if not isinstance(array, np.ndarray) or got != (want.shape, want.dtype):
            raise _altered(
                name,
                f"{where} holds {kind} {key!r} of shape {got[0]} and dtype {got[1]}, but the "
                f"layer built for inputs of shape {layer.input_shape_} needs shape "
                f"{want.shape} and dtype {want.dtype}",
            )


def _check_classes(est, name, n_outputs):
    classes = est.__dict__.get("classes_")
    binarizer = est.__dict__.get("_label_binarizer")
    if classes is None or n_outputs is None or binarizer is None:
        return
    multilabel = getattr(binarizer, "y_type_", None) == "multilabel-indicator"
    expected = 1 if len(classes) == 2 and not multilabel else len(classes)
    if n_outputs != expected:
        raise _altered(name, f"it has {len(classes)} classes_ but {n_outputs} outputs")


def _altered(name, what):
    return ValueError(
        f"This saved {name} does not fit together: {what}. The file was altered or is "
        "damaged; load another one, or refit the model."
    )

"""The ``layers`` parameter: a list of layer objects an estimator builds from.

:class:`LayerListMixin` gives an estimator with a ``layers`` parameter nested
parameters ``layers__<index>__<name>`` (so ``GridSearchCV`` can search the
entries of the list) and the check that the list holds layers.
"""

from numbers import Integral

from sklearn.base import clone

from sknet.layers import Dropout, Layer


def positive_ints(value, name, allow_empty=True):
    """``value`` (an int or a sequence of them) as a list of positive ints."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        value = (value,)
    values = list(value)
    if not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 for v in values):
        raise ValueError(f"{name} must be a sequence of positive integers, got {value!r}")
    if not values and not allow_empty:
        raise ValueError(f"{name} must not be empty")
    return [int(v) for v in values]


class LayerListMixin:
    """Nested ``layers__<i>__<param>`` parameters; list it first in the bases."""

    def get_params(self, deep=True):
        params = super().get_params(deep=False)
        if deep and isinstance(self.layers, (list, tuple)):
            for i, layer in enumerate(self.layers):
                params[f"layers__{i}"] = layer
                if isinstance(layer, Layer):
                    for key, value in layer.get_params(deep=True).items():
                        params[f"layers__{i}__{key}"] = value
        return params

    def set_params(self, **params):
        nested = {k: params.pop(k) for k in list(params) if k.startswith("layers__")}
        super().set_params(**params)
        if nested:
            if not isinstance(self.layers, (list, tuple)):
                raise ValueError(
                    f"Cannot set {sorted(nested)}: this {type(self).__name__} has no "
                    "`layers` list."
                )
            layers, copied = list(self.layers), set()
            for key, value in nested.items():
                _, index, *rest = key.split("__", 2)
                if not index.isdigit() or int(index) >= len(layers):
                    raise ValueError(
                        f"Invalid parameter {key!r}: `layers` has {len(layers)} entries."
                    )
                i = int(index)
                if not rest:
                    layers[i], copied = value, copied | {i}
                    continue
                if i not in copied:  # never modify the caller's layer objects
                    layers[i], copied = clone(layers[i]), copied | {i}
                layers[i].set_params(**{rest[0]: value})
            self.layers = layers
        return self

    def _check_layer_list(self):
        """The ``layers`` list holds layers; no dropout with the lbfgs solver."""
        if self.layers is not None:
            if len(self.layers) == 0 or not all(isinstance(x, Layer) for x in self.layers):
                raise ValueError(
                    "layers must be a non-empty list of sknet.layers.Layer objects, "
                    f"got {self.layers!r}"
                )
        uses_dropout = (
            self.dropout > 0
            if self.layers is None
            else any(isinstance(layer, Dropout) for layer in self.layers)
        )
        if uses_dropout and self.solver == "lbfgs":
            raise ValueError(
                "dropout is not supported with solver='lbfgs', whose line search "
                "needs a deterministic loss; use solver='adam' or 'sgd'."
            )

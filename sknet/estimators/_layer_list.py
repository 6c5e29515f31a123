"""The ``layers`` parameter: a list of layer objects an estimator builds from.

:class:`LayerListMixin` gives an estimator with a ``layers`` parameter nested
parameters ``layers__<index>__<name>`` (so ``GridSearchCV`` can search the
entries of the list) and the check that the list holds layers.
"""

from numbers import Integral

from sknet.layers import Dropout, Layer
from sknet.layers._params import NestedListParams


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


class LayerListMixin(NestedListParams):
    """Nested ``layers__<i>__<param>`` parameters; list it first in the bases."""

    def _check_layer_list(self):
        """The ``layers`` list holds layers; no dropout with the lbfgs solver."""
        layers = getattr(self, "layers", None)
        if layers is not None:
            if len(layers) == 0 or not all(isinstance(x, Layer) for x in layers):
                raise ValueError(
                    "layers must be a non-empty list of sknet.layers.Layer objects, "
                    f"got {layers!r}"
                )
        uses_dropout = (
            getattr(self, "dropout", 0) > 0
            if layers is None
            else any(isinstance(layer, Dropout) for layer in layers)
        )
        if uses_dropout and self.solver == "lbfgs":
            raise ValueError(
                "dropout is not supported with solver='lbfgs', whose line search "
                "needs a deterministic loss; use solver='adam' or 'sgd'."
            )

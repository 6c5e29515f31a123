"""The warm-start contract: a warm fit continues the same network.

The first fit records a fingerprint of every parameter that defines the
network (an estimator's ``_network_parameters``); ``warm_start`` and
``partial_fit`` compare it and refuse a change with a ``ValueError`` naming
the parameter. ``trainable`` and ``lr_scale`` of layers are left out (they say
how a network trains, not what it is), and another loss is accepted unless it
changes the output activation.
"""

import joblib
import numpy as np

from sknet.layers import Layer
from sknet.layers._tree import check_depth


def _canonical(value):
    """``value`` as a fingerprint sees it: lists as tuples, NumPy scalars as Python
    ones, layers as their type and parameters (``trainable`` and ``lr_scale``
    left out: they say how a network trains, not what it is)."""
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Layer):
        params = value.get_params(deep=False)
        return (type(value).__module__, type(value).__qualname__) + tuple(
            (k, _canonical(v))
            for k, v in sorted(params.items())
            if k not in ("trainable", "lr_scale")
        )
    return value


def _digest(value):
    """A fingerprint of a parameter's value (its repr if it cannot be pickled)."""
    value = _canonical(value)
    try:
        return joblib.hash(value)
    except Exception:  # e.g. a lambda initializer or a layer class defined locally
        return repr(value)


def _short_repr(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def network_signature(est):
    """What defines the network, to compare across warm fits.

    A parameter holding layers is checked for depth first (the layer tree's
    limit), so a tree too deep is refused with its message, not a RecursionError.
    """
    for name in est._network_parameters:
        value = getattr(est, name)
        items = value if isinstance(value, (list, tuple)) else [value]
        check_depth([item for item in items if isinstance(item, Layer)], root=name)
    return {
        name: (_digest(getattr(est, name)), getattr(est, name)) for name in est._network_parameters
    }


def check_same_network(est):
    """A warm fit continues the same network: refuse changed parameters."""
    recorded = getattr(est, "_network_spec", {})
    advice = (
        "warm_start and partial_fit continue the same network. Set it back, "
        "or fit with warm_start=False to build a new network."
    )
    for name, (digest, value) in network_signature(est).items():
        if name in recorded and recorded[name][0] != digest:
            raise ValueError(
                f"{name} changed from {_short_repr(recorded[name][1])} to "
                f"{_short_repr(value)} since this {type(est).__name__} was fitted; " + advice
            )
    # Another loss may continue the network, unless it changes the output.
    output = est._make_loss().out_activation
    if output != est.out_activation_:
        raise ValueError(
            f"loss changed to {_short_repr(est.loss)} since this "
            f"{type(est).__name__} was fitted, and with it the output activation "
            f"({est.out_activation_!r} -> {output!r}); " + advice
        )

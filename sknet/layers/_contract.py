"""What sknet adds to a user's layer class, and checks of what its code returns.

:class:`~sknet.layers.Layer` calls these from ``__init_subclass__`` for every
layer class written outside sknet:

- :func:`with_training_parameters`: ``trainable``, ``lr_scale`` and
  ``weights`` become constructor parameters of the class when its
  ``__init__`` does not take them, so every layer can be frozen, scaled,
  cloned, grid-searched and reused by ``from_estimator`` without declaring
  them;
- :func:`checked_forward` and :func:`checked_backward`: what the user's
  ``forward`` and ``backward`` return is checked for shape and dtype before
  the next layer (and its kernels) sees it, with a ValueError naming the
  layer and both shapes.
"""

import functools
import inspect

#: The parameters every layer takes, with their defaults.
TRAINING_PARAMETERS = {"trainable": True, "lr_scale": 1.0, "weights": None}


def with_training_parameters(cls):
    """Give ``cls.__init__`` the :data:`TRAINING_PARAMETERS` it lacks (keyword-only)."""
    init = cls.__init__
    signature = inspect.signature(init)
    parameters = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # **kwargs: scikit-learn cannot list its parameters anyway
    missing = [name for name in TRAINING_PARAMETERS if name not in parameters]
    if not missing:
        return

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        given = {name: kwargs.pop(name, TRAINING_PARAMETERS[name]) for name in missing}
        init(self, *args, **kwargs)
        for name, value in given.items():
            setattr(self, name, value)

    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=TRAINING_PARAMETERS[name])
        for name in missing
    ]
    __init__.__signature__ = signature.replace(parameters=[*parameters.values(), *added])
    cls.__init__ = __init__


def _shape_text(shape):
    return "(n, " + ", ".join(str(d) for d in shape) + ")" if shape else "(n,)"


def check_forward_output(layer, X, Y):
    """Fail clearly when ``layer.forward`` returned something the next layer cannot take."""
    name = type(layer).__name__
    if not hasattr(Y, "shape") or not hasattr(Y, "dtype"):
        raise TypeError(f"{name}.forward must return an array, got {type(Y).__name__}")
    expected = layer.__dict__.get("_declared_output_shape")  # what build() returned
    n = X.shape[0]
    if not Y.shape or Y.shape[0] != n:
        raise ValueError(
            f"{name}.forward returned shape {tuple(Y.shape)} for a batch of {n} rows; the "
            "first axis must stay the batch"
        )
    if expected is not None and tuple(Y.shape) != (n, *expected):
        raise ValueError(
            f"{name}.forward returned an array of shape {tuple(Y.shape)} for a batch of "
            f"{n} rows, but its build() declared samples of shape {tuple(expected)}: "
            f"expected {(n, *expected)}"
        )
    if Y.dtype != X.dtype and getattr(X, "dtype", None) is not None and X.dtype.kind == "f":
        raise ValueError(
            f"{name}.forward returned {Y.dtype} values for {X.dtype} inputs; keep the "
            "input's dtype (constants as Python numbers or arrays of X.dtype)"
        )


def check_backward_output(layer, dY, dX):
    """Fail clearly when ``layer.backward`` returned a gradient of the wrong shape or dtype."""
    name = type(layer).__name__
    if dX is None:
        if not layer.skip_input_grad:
            raise ValueError(
                f"{name}.backward returned None, but the layer below it needs the gradient "
                "of its input; only a layer whose skip_input_grad is True may skip it"
            )
        return
    if not hasattr(dX, "shape") or not hasattr(dX, "dtype"):
        raise TypeError(f"{name}.backward must return an array or None, got {type(dX).__name__}")
    expected = (dY.shape[0], *layer.input_shape_)
    if tuple(dX.shape) != expected:
        raise ValueError(
            f"{name}.backward returned a gradient of shape {tuple(dX.shape)}, but its "
            f"input had shape {expected} ({_shape_text(layer.input_shape_)} per sample)"
        )
    if dX.dtype != dY.dtype:
        raise ValueError(
            f"{name}.backward returned a {dX.dtype} gradient for {dY.dtype} outputs; "
            "keep the dtype of dY"
        )


def checked_forward(forward):
    """``forward`` with its output checked (:func:`check_forward_output`)."""
    if getattr(forward, "_sknet_checked", False):
        return forward

    @functools.wraps(forward)
    def run(layer, X, *, training, **kwargs):
        Y = forward(layer, X, training=training, **kwargs)
        check_forward_output(layer, X, Y)
        return Y

    run._sknet_checked = True
    return run


def checked_backward(backward):
    """``backward`` with its input gradient checked (:func:`check_backward_output`)."""
    if getattr(backward, "_sknet_checked", False):
        return backward

    @functools.wraps(backward)
    def run(layer, dY):
        dX = backward(layer, dY)
        check_backward_output(layer, dY, dX)
        return dX

    run._sknet_checked = True
    return run

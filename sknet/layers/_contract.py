"""What sknet adds to a user's layer class, and checks of what its code returns.

:class:`~sknet.layers.Layer` calls these from ``__init_subclass__`` for every
layer class written outside sknet:

- :func:`with_training_parameters`: ``trainable``, ``lr_scale`` and
  ``weights`` become constructor parameters of the class when its
  ``__init__`` does not take them, so every layer can be frozen, scaled,
  cloned, grid-searched and reused by ``from_estimator`` without declaring
  them;
- :func:`checked_build`: ``build`` must call ``super().build(...)`` and
  return the shape of one output sample, a tuple of positive integers
  (:func:`check_build_output`); :func:`checked_sublayers` and
  :func:`checked_values_per_sample`: an overridden ``sublayers`` returns a
  list of layers, ``values_per_sample`` a positive integer;
- :func:`with_checked_input` (every layer class, the stock ones too): a
  built layer's ``forward`` given samples of another shape than it was built
  for is a ValueError naming the layer and both shapes, not a broadcasting
  error from inside its arithmetic;
- :func:`checked_forward` and :func:`checked_backward`: what the user's
  ``forward`` and ``backward`` return is checked for shape and dtype before
  the next layer (and its kernels) sees it, with a ValueError naming the
  layer and both shapes. ``forward`` gets its input read-only
  (:func:`sknet.autodiff._variable.read_only`: a view, no copy, on NumPy; a
  copy on CuPy), so a layer that writes into it (``X *= 2``) gets a
  ValueError naming it instead of changing the caller's data or the output
  that the layer before it keeps for its backward pass.
"""

import functools
import inspect
from numbers import Integral

import numpy as np

from sknet.autodiff._variable import read_only, writable_again
from sknet.backend import is_device_array
from sknet.layers._tree import TreeNode

#: What ``Layer.build`` sets, which a ``build`` skipping ``super().build`` lacks.
_SET_BY_LAYER_BUILD = frozenset(
    {"backend_", "dtype_", "input_shape_", "params", "grads", "state", "_buffers", "_cache"}
)

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


def check_build_output(owner, shape):
    """``shape`` (what ``owner`` returned) as a tuple of ints, or a clear error naming ``owner``.

    ``owner`` is what to name, e.g. ``"MyLayer.build"``. The shape of one
    output sample must be a tuple (or list) of positive integers; ``()`` is a
    scalar per sample.
    """
    wanted = (
        "the shape of one output sample, a tuple of positive integers (return "
        "input_shape for a layer that keeps the shape of its input)"
    )
    if shape is None:
        raise TypeError(f"{owner} returned None; it must return {wanted}")
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{owner} must return {wanted}, got {type(shape).__name__} {shape!r:.60}")
    for size in shape:
        if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
            hint = " (divide sizes with //)" if isinstance(size, float) else ""
            raise ValueError(
                f"{owner} returned the output shape {tuple(shape)!r}: every size must be a "
                f"positive integer, got {size!r}{hint}"
            )
    return tuple(int(size) for size in shape)


def _no_super_build(layer, missing):
    name = type(layer).__name__
    return TypeError(
        f"{name}.build must call super().build(input_shape, backend=backend, dtype=dtype, "
        "rng=rng) first: it sets the layer's backend_, dtype_, input_shape_, params, grads "
        f"and state, which its arrays and the network need (this layer has no {missing})"
    )


def checked_build(build):
    """``build`` checked: ``super().build`` called, an output shape returned (a tuple of ints)."""
    if getattr(build, "_sknet_checked", False):
        return build

    @functools.wraps(build)
    def run(layer, input_shape, *args, **kwargs):
        try:
            shape = build(layer, input_shape, *args, **kwargs)
        except AttributeError as exc:  # self.params / self.backend_ before super().build
            missing = getattr(exc, "name", None)
            if missing in _SET_BY_LAYER_BUILD and getattr(exc, "obj", None) is layer:
                raise _no_super_build(layer, missing) from exc
            raise
        built = layer.__dict__
        missing = sorted(_SET_BY_LAYER_BUILD - {"_buffers", "_cache"} - set(built))
        backend = kwargs.get("backend")
        if missing or (backend is not None and built["backend_"] is not backend):
            raise _no_super_build(layer, missing[0] if missing else "backend_")
        return check_build_output(f"{type(layer).__name__}.build", shape)

    run._sknet_checked = True
    return run


def checked_values_per_sample(values_per_sample):
    """``values_per_sample`` checked: a positive integer (it sizes prediction chunks)."""
    if getattr(values_per_sample, "_sknet_checked", False):
        return values_per_sample

    @functools.wraps(values_per_sample)
    def run(layer):
        count = values_per_sample(layer)
        if isinstance(count, bool) or not isinstance(count, Integral) or count < 1:
            raise TypeError(
                f"{type(layer).__name__}.values_per_sample must return a positive integer (the "
                f"size of the largest array its forward makes per sample), got {count!r}"
            )
        return int(count)

    run._sknet_checked = True
    return run


def checked_sublayers(sublayers):
    """``sublayers`` checked: a list (or tuple) of layers, which the tree then walks."""
    if getattr(sublayers, "_sknet_checked", False):
        return sublayers

    @functools.wraps(sublayers)
    def run(layer):
        found = sublayers(layer)
        if not isinstance(found, (list, tuple)) or not all(
            isinstance(node, TreeNode) for node in found
        ):
            kinds = (
                [type(node).__name__ for node in found]
                if isinstance(found, (list, tuple))
                else f"{type(found).__name__} {found!r:.60}"
            )
            raise TypeError(
                f"{type(layer).__name__}.sublayers must return a list of the layers inside it "
                f"([] for none), got {kinds}"
            )
        return list(found)

    run._sknet_checked = True
    return run


def _shape_text(shape):
    return "(n, " + ", ".join(str(d) for d in shape) + ")" if shape else "(n,)"


def layer_name(layer):
    """How errors name ``layer``: its class, or what its ``_boundary_name()`` says."""
    describe = getattr(layer, "_boundary_name", None)
    return describe() if callable(describe) else type(layer).__name__


def _check_kind(owner, given, returned):
    """A TypeError unless ``returned`` is an array of the kind ``given`` is (NumPy or CuPy)."""
    numpy_result = isinstance(returned, (np.ndarray, np.generic))  # a scalar: a shape error
    if isinstance(given, np.ndarray) and not numpy_result:
        kind = "numpy.ndarray"
    elif is_device_array(given) and not is_device_array(returned):
        kind = "cupy.ndarray"
    else:
        return
    raise TypeError(
        f"{owner} returned a {type(returned).__module__}.{type(returned).__qualname__} "
        f"for {kind} inputs; compute with the input's array module (xp = "
        "sknet.backend.get_array_module(X), or the layer's self.xp)"
    )


def check_forward_output(layer, X, Y):
    """Fail clearly when ``layer.forward`` returned something the next layer cannot take."""
    name = layer_name(layer)
    if not hasattr(Y, "shape") or not hasattr(Y, "dtype"):
        raise TypeError(f"{name}.forward must return an array, got {type(Y).__name__}")
    _check_kind(f"{name}.forward", X, Y)
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
    name = layer_name(layer)
    if dX is None:
        if not layer.skip_input_grad:
            raise ValueError(
                f"{name}.backward returned None, but the layer below it needs the gradient "
                "of its input; only a layer whose skip_input_grad is True may skip it"
            )
        return
    if not hasattr(dX, "shape") or not hasattr(dX, "dtype"):
        raise TypeError(f"{name}.backward must return an array or None, got {type(dX).__name__}")
    _check_kind(f"{name}.backward", dY, dX)
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


def check_forward_input(layer, X):
    """A ValueError naming ``layer`` and both shapes unless ``X`` holds samples it was built for.

    Once per call (a tuple comparison): a built layer given samples of another
    shape would fail inside its arithmetic with a broadcasting error naming
    no layer, or broadcast silently. An unbuilt layer, or an input without a
    shape, is left to the layer.
    """
    expected = layer.__dict__.get("input_shape_")
    shape = getattr(X, "shape", None)
    if expected is None or shape is None or tuple(shape[1:]) == expected:
        return
    raise ValueError(
        f"{layer_name(layer)}.forward: built for samples of shape {expected}, got a batch "
        f"of shape {tuple(shape)} (samples of shape {tuple(shape[1:])}); give it batches "
        f"of shape {_shape_text(expected)}, or build it again for the new shape"
    )


def with_checked_input(forward):
    """``forward`` refusing inputs of another sample shape (:func:`check_forward_input`).

    What :class:`~sknet.layers.Layer` wraps every layer class's ``forward``
    with, the stock layers' too.
    """
    if getattr(forward, "_sknet_input_checked", False):
        return forward

    @functools.wraps(forward)
    def run(layer, X, *args, **kwargs):
        check_forward_input(layer, X)
        return forward(layer, X, *args, **kwargs)

    run._sknet_input_checked = True
    return run


def checked_forward(forward):
    """``forward`` with its output checked (:func:`check_forward_output`)."""
    if getattr(forward, "_sknet_checked", False):
        return forward

    @functools.wraps(forward)
    def run(layer, X, *, training, **kwargs):
        Y = call_with_read_only_input(
            f"{type(layer).__name__}.forward", forward, layer, X, training=training, **kwargs
        )
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
        try:
            dX = backward(layer, dY)
        except ValueError as exc:
            if "read-only" not in str(exc):
                raise
            raise ValueError(
                f"{type(layer).__name__}.backward wrote into a read-only array, most likely "
                "the input X that its forward kept: a layer must not change its input (the "
                "caller's data, or the output of the layer before it); compute new arrays"
            ) from exc
        check_backward_output(layer, dY, dX)
        return dX

    run._sknet_checked = True
    return run


def call_with_read_only_input(owner, function, *args, **kwargs):
    """``function(*args, **kwargs)`` with the last positional argument (the input) read-only.

    A write into it is a ValueError naming ``owner`` (``"MyLayer.forward"``);
    what the function returns is as writable as the input was.
    """
    *head, X = args
    try:
        Y = function(*head, read_only(X), **kwargs)
    except ValueError as exc:
        if "read-only" not in str(exc):
            raise
        raise ValueError(
            f"{owner} wrote into a read-only array, most likely its input X: a layer must "
            "not change its input (the caller's data, or the output of the layer before "
            "it, which that layer's backward needs); compute a new array (Y = X * 2, not "
            "X *= 2)"
        ) from exc
    return writable_again(Y, X)

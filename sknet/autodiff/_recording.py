"""Layers from their forward pass: record it while training, replay it backward.

:class:`sknet.layers.Layer` wraps the ``forward`` of every subclass that has
no ``backward`` of its own with :func:`recorded_forward`; its inherited
``backward`` is :func:`recorded_backward`.
"""

import functools

import numpy as np

from sknet.autodiff._variable import Variable, gradients, is_sparse, value
from sknet.backend import get_array_module


def recorded_forward(forward):
    """Wrap a layer's ``forward`` so that training passes are recorded.

    While training, the layer's input (unless nobody needs its gradient) and
    its parameters (unless it is frozen) are :class:`Variable` objects during
    the call, and what the forward returned is kept for :func:`recorded_backward`.
    Prediction runs ``forward`` on plain arrays.
    """

    @functools.wraps(forward)
    def forward_recorded(layer, X, *, training, **kwargs):
        if not training or layer.__dict__.get("_recording"):  # super().forward() inside
            return _checked(layer, forward(layer, X, training=training, **kwargs), X)
        inputs = None if layer.skip_input_grad else Variable(X)
        given = X if inputs is None else inputs
        if is_sparse(X):  # data, not differentiated: recorded so that `X @ W` dispatches here
            given = Variable(X)
        leaves = {k: Variable(v) for k, v in layer.params.items()} if layer.trainable else {}
        params = layer.params
        layer.params = {**params, **leaves}
        layer._recording = True
        try:
            Y = forward(layer, given, training=True, **kwargs)
        finally:
            layer.params = params
            del layer._recording
        layer._cache["autodiff"] = (Y, inputs, leaves, X.shape)
        return _checked(layer, value(Y), X)

    return forward_recorded


def recorded_backward(layer, dY):
    """Write ``layer.grads`` and return dX from the record of the last training forward."""
    record = layer.__dict__.get("_cache", {}).pop("autodiff", None)
    name = type(layer).__name__
    if record is None:
        raise RuntimeError(
            f"{name}.backward needs a forward pass with training=True first (a layer "
            "that defines only forward gets its gradients from that recorded pass)"
        )
    Y, inputs, leaves, input_shape = record
    wrt = ([] if inputs is None else [inputs]) + list(leaves.values())
    grads = gradients(Y, dY, wrt)
    dX = grads.pop(0) if inputs is not None else None
    xp = layer.backend_.xp
    for key, g in zip(leaves, grads):
        target = layer.grads.get(key)
        if target is None:
            target = layer.grads[key] = xp.zeros_like(layer.params[key])
        if g is None:  # the output does not depend on this parameter
            target.fill(0)
        else:
            target[...] = g
    if inputs is None or layer.skip_input_grad:
        return None
    if dX is None:
        return xp.zeros(input_shape, dtype=dY.dtype)
    flags = dX.flags
    if not flags.c_contiguous or not getattr(flags, "writeable", True) or dX.base is not None:
        dX = xp.array(dX, order="C")  # the layer below may overwrite what it gets
    return dX


def _checked(layer, Y, X):
    """Fail clearly when a forward returns the wrong dtype or number of rows."""
    if not hasattr(Y, "dtype") or not hasattr(Y, "shape"):
        raise TypeError(
            f"{type(layer).__name__}.forward must return an array, got {type(Y).__name__}"
        )
    if get_array_module(Y) is not get_array_module(X) or (
        isinstance(X, np.ndarray) and not isinstance(Y, (np.ndarray, np.generic))
    ):
        raise TypeError(
            f"{type(layer).__name__}.forward returned a {type(Y).__module__}."
            f"{type(Y).__qualname__} for {type(X).__module__}.{type(X).__qualname__} inputs; "
            "compute with the input's array module (xp = sknet.backend.get_array_module(X), "
            "or the layer's self.xp)"
        )
    if Y.dtype != X.dtype:
        raise TypeError(
            f"{type(layer).__name__}.forward returned {Y.dtype} values for {X.dtype} "
            "inputs; keep the input's dtype (constants as Python numbers or arrays "
            "of X.dtype)"
        )
    if Y.ndim == 0 or Y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{type(layer).__name__}.forward returned shape {Y.shape} for a batch of "
            f"{X.shape[0]} rows; the first axis must stay the batch"
        )
    return Y


def values_and_gradient(loss, Z, Y):
    """Per-sample values of ``loss.value(Z, Y)`` and their gradient with respect to ``Z``."""
    recorded = Variable(Z)
    values = loss.value(recorded, Y)
    name = type(loss).__name__
    if hasattr(values, "shape") and tuple(values.shape) == (Z.shape[0], 1):
        values = values.reshape(Z.shape[0])  # one column: one loss per sample, as (n,)
    if not hasattr(values, "shape") or tuple(values.shape) != (Z.shape[0],):
        shape = getattr(values, "shape", type(values).__name__)
        raise ValueError(
            f"{name}.value must return one loss per sample, shape ({Z.shape[0]},); got {shape}"
        )
    if values.dtype != Z.dtype:
        raise TypeError(
            f"{name}.value returned {values.dtype} values for {Z.dtype} outputs; keep the "
            "outputs' dtype (constants as Python numbers or arrays of Z.dtype)"
        )
    if type(values) is not Variable:
        raise TypeError(
            f"{name}.value returned a plain {type(values).__name__}, not values computed from "
            "Z: their gradient would be lost (zero). Compute them from Z with the operators "
            "and the functions of sknet.autodiff (not Z.data, nor NumPy's or CuPy's functions "
            "outside those sknet.autodiff dispatches)"
        )
    xp = get_array_module(Z)
    (dZ,) = gradients(values, xp.ones(Z.shape[0], dtype=Z.dtype), [recorded])
    if dZ is None:
        return value(values), xp.zeros_like(Z)
    if dZ.base is not None or not dZ.flags.c_contiguous or dZ is Y:
        dZ = xp.array(dZ, order="C")  # scaled in place by the caller
    return value(values), dZ

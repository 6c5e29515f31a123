"""Utilities for people writing their own layers and losses, and for sizing a fit."""

import copy

import numpy as np
from sklearn.utils._param_validation import HasMethods as _HasMethods
from sklearn.utils._param_validation import StrOptions as _StrOptions
from sklearn.utils._param_validation import validate_params as _validate_params

from sknet.backend import get_backend as _get_backend
from sknet.engine._estimate import estimate_memory as _estimate_memory
from sknet.engine._memory import MemoryEstimate
from sknet.layers._base import Layer as _Layer
from sknet.layers._base import build_layer as _build_layer
from sknet.layers._constraints import Count as _Count
from sknet.layers._constraints import Number as _Number
from sknet.layers._tree import leaves as _leaves
from sknet.losses import Loss as _Loss
from sknet.losses import make_loss as _make_loss

#: ``device``: a name (``'cpu'``, ``'cuda:0'``) or a Backend
_DEVICE = [str, _HasMethods(["asarray", "to_numpy"])]

__all__ = ["MemoryEstimate", "check_layer_gradients", "check_loss_gradients", "estimate_memory"]


#: :func:`~sknet.engine._estimate.estimate_memory` with its parameters checked first, by name
estimate_memory = _validate_params(
    {
        "estimator": [_HasMethods(["fit"])],
        "X": ["array-like", "sparse matrix"],
        "y": ["array-like", "sparse matrix", None],
        "sample_weight": ["array-like", _Number(0, None), None],
        "X_val": ["array-like", "sparse matrix", None],
        "y_val": ["array-like", "sparse matrix", None],
    },
    prefer_skip_nested_validation=True,
)(_estimate_memory)


def _run(layer, X, R):
    """Forward a fresh copy of ``layer``; return loss <Y, R>, dX and grads."""
    probe = copy.deepcopy(layer)
    probe.to_backend(layer.backend_)
    backend = layer.backend_
    X = backend.asarray(X)
    Y = probe.forward(X, training=True)
    loss = float((backend.to_numpy(Y) * R).sum())
    dX = probe.backward(backend.asarray(R.copy()))
    grads = {
        key: backend.to_numpy(holder.grads[name]).copy()
        for key, (holder, name) in _checked_arrays(probe).items()
    }
    return loss, (None if dX is None else backend.to_numpy(dX)), grads


def _checked_arrays(layer):
    """``{key: (holder, name)}`` of every parameter in ``layer``'s tree.

    ``layer.params`` by their keys (a stock container's gather its blocks'), then
    those of layers inside it that ``layer.params`` does not reach (a user's
    container with a parameter of its own holds only that one), keyed by their
    path below ``layer``: ``'0.W'``.
    """
    arrays = {key: (layer, key) for key in layer.params}
    reached = {id(array) for array in layer.params.values()}
    for path, holder in _leaves([layer]):
        for name, array in holder.params.items():
            if id(array) not in reached:
                arrays[".".join(str(i) for i in path[1:]) + "." + name] = (holder, name)
    return arrays


def _central_differences(value, base, eps):
    """The gradient of the scalar ``value(array)`` at ``base`` by central differences."""
    numeric = np.zeros_like(base)
    shifted = base.copy()
    flat, out, at = shifted.reshape(-1), numeric.reshape(-1), base.reshape(-1)
    for i in range(base.size):
        flat[i] = at[i] + eps
        plus = value(shifted)
        flat[i] = at[i] - eps
        minus = value(shifted)
        flat[i] = at[i]
        out[i] = (plus - minus) / (2 * eps)
    return numeric


def _relative_error(analytic, numeric, floor=0.0):
    """The largest difference relative to the largest entry of either, or to ``floor``.

    With ``floor = atol / tol`` the error is at most ``tol`` exactly when every
    difference is at most ``max(tol * scale, atol)``: relative for gradients
    of a normal size, absolute for gradients that are (nearly) zero, whose
    central differences are rounding noise (about ``1e-16 * |L| / eps``).
    """
    scale = max(np.abs(numeric).max(initial=0), np.abs(analytic).max(initial=0), floor)
    return 0.0 if scale == 0 else float(np.abs(analytic - numeric).max() / scale)


def _check_positive(name, value, kind):
    """A ValueError unless ``value`` is a positive (finite) number of ``kind``."""
    numbers = (int, np.integer) if kind == "integer" else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, numbers) or not 0 < value < np.inf:
        raise ValueError(f"{name} must be a positive {kind}, got {value!r}")


@_validate_params(
    {
        "layer": [_Layer],
        "input_shape": [tuple, list],
        "random_state": [_Count(0, 2**32 - 1, closed="both"), None],
        "device": _DEVICE,
    },
    prefer_skip_nested_validation=True,
)
def check_layer_gradients(
    layer,
    input_shape,
    *,
    n_samples=3,
    eps=1e-6,
    tol=1e-5,
    atol=1e-7,
    random_state=0,
    device="cpu",
):
    """Check a layer's ``backward`` against finite differences, in float64.

    The layer is built in float64 on ``device`` with inputs drawn from a
    standard normal. With a random projection ``R``, the scalar
    ``L = sum(forward(X) * R)`` has ``dL/dY = R``; ``backward(R)`` must then
    return ``dL/dX`` and write ``dL/dparam`` into ``grads``, which are compared
    with central differences of ``L``. Each evaluation runs on a fresh copy of
    the built layer, so random layers (dropout) draw the same mask every time.

    Parameters
    ----------
    layer : Layer
        An unbuilt layer (it is copied, never modified).
    input_shape : tuple of int
        Shape of one sample, without the batch axis.
    n_samples : int, default=3
        Batch size of the check (at least 1).
    eps : float, default=1e-6
        Finite-difference step.
    tol : float, default=1e-5
        Largest accepted error, relative to the largest gradient entry of each
        array.
    atol : float, default=1e-7
        Largest accepted difference for an array whose gradient is (nearly)
        zero: its finite differences are rounding noise, which no relative
        measure accepts. Each array's error is its largest difference divided
        by ``max(largest entry, atol / tol)``, so it is at most ``tol``
        exactly when every difference is at most ``max(tol * largest entry,
        atol)``.
    random_state : int, default=0
        Seeds the parameters, the input and ``R``.
    device : str, default='cpu'
        Backend to build the layer on.

    Returns
    -------
    errors : dict of str to float
        Worst error for the input (``'X'``) and each parameter, as ``atol``
        describes.

    Raises
    ------
    AssertionError
        If any error exceeds ``tol``; the message names the worst array.
    ValueError
        If ``n_samples`` is not a positive integer, or ``eps``, ``tol`` or
        ``atol`` not a positive number (a check of no sample would pass
        whatever the gradient).

    Examples
    --------
    >>> from sknet.layers import Dense
    >>> from sknet.utils import check_layer_gradients
    >>> errors = check_layer_gradients(Dense(4, activation="tanh"), (3,))
    >>> sorted(errors)
    ['W', 'X', 'b']
    >>> max(errors.values()) < 1e-5
    True
    """
    _check_positive("n_samples", n_samples, "integer")
    for name, number in (("eps", eps), ("tol", tol), ("atol", atol)):
        _check_positive(name, number, "number")
    floor = atol / tol
    rng = np.random.RandomState(random_state)
    backend = _get_backend(device)
    built = copy.deepcopy(layer)
    out_shape = _build_layer(built, input_shape, backend=backend, dtype=np.float64, rng=rng)
    X = rng.standard_normal((int(n_samples),) + tuple(input_shape))
    R = rng.standard_normal((int(n_samples),) + tuple(out_shape))

    errors = _gradient_errors(built, backend, X, R, eps, floor)
    # NaN counts as the worst error (max() would skip it).
    worst = max(errors, key=lambda k: np.inf if np.isnan(errors[k]) else errors[k], default=None)
    if worst is not None and not errors[worst] <= tol:
        raise AssertionError(
            f"{type(layer).__name__}: the gradient of {worst!r} is off by "
            f"{errors[worst]:.3g} relative to finite differences (tol={tol:g}); "
            f"all errors: {errors}"
        )
    return errors


def _gradient_errors(built, backend, X, R, eps, floor):
    """Each array's error: ``backward``'s gradient against central differences of ``L``."""
    _, dX, grads = _run(built, X, R)
    errors = {}
    if dX is not None:
        numeric = _central_differences(lambda X_: _run(built, X_, R)[0], X, eps)
        errors["X"] = _relative_error(dX, numeric, floor)
    for key, (holder, name) in _checked_arrays(built).items():
        base = backend.to_numpy(holder.params[name]).copy()

        def at(value, holder=holder, name=name):
            holder.params[name] = backend.asarray(value)
            return _run(built, X, R)[0]

        numeric = _central_differences(at, base, eps)
        errors[key] = _relative_error(grads[key], numeric, floor)
        holder.params[name] = backend.asarray(base)
    return errors


def _loss_problem(loss, rng, n_samples, n_outputs):
    """Raw outputs and targets in the domain of ``loss``'s output activation."""
    Z = rng.standard_normal((n_samples, n_outputs)) * 2
    kind = loss.out_activation
    if kind == "softmax":
        Y = np.eye(n_outputs)[rng.randint(n_outputs, size=n_samples)]
    elif kind == "logistic":
        Y = (rng.rand(n_samples, n_outputs) > 0.5).astype(np.float64)
    elif kind == "exp":
        Y = rng.poisson(2.0, size=(n_samples, n_outputs)).astype(np.float64)
    else:
        Y = rng.standard_normal((n_samples, n_outputs)) * 2
    return Z, Y


@_validate_params(
    {
        "loss": [_Loss, str],
        "target_type": [
            _StrOptions({"binary", "multiclass", "multilabel-indicator", "continuous"}),
            None,
        ],
        "n_samples": [_Count(1)],
        "n_outputs": [_Count(1)],
        "eps": [_Number(0, None)],
        "tol": [_Number(0, None)],
        "random_state": [_Count(0, 2**32 - 1, closed="both"), None],
        "device": _DEVICE,
    },
    prefer_skip_nested_validation=True,
)
def check_loss_gradients(
    loss,
    *,
    target_type=None,
    n_samples=5,
    n_outputs=3,
    eps=1e-6,
    tol=1e-5,
    random_state=0,
    device="cpu",
):
    """Check a loss's gradient against finite differences, in float64.

    The loss is evaluated as training evaluates it: the sample-weighted mean
    of :meth:`~sknet.losses.Loss.loss_and_gradient`'s values, with random
    positive weights, and its gradient with respect to the raw outputs ``Z``
    is compared with central differences of that mean. Targets are drawn to
    suit the output activation (one-hot for softmax, 0/1 for logistic,
    counts for exp, normal otherwise).

    Parameters
    ----------
    loss : Loss or str
        The loss (copied, never modified), or a stock loss's name.
    target_type : str, default=None
        Passed to :meth:`~sknet.losses.Loss.for_target` first, e.g.
        ``'binary'`` to check the logistic form of a classification loss.
    n_samples, n_outputs : int, default=5, 3
        Shape of ``Z``.
    eps : float, default=1e-6
        Finite-difference step.
    tol : float, default=1e-5
        Largest accepted error, relative to the largest gradient entry.
    random_state : int, default=0
        Seeds ``Z``, the targets and the weights.
    device : str or Backend, default='cpu'
        Where to evaluate the loss.

    Returns
    -------
    error : float
        The worst relative error.

    Raises
    ------
    AssertionError
        If the error exceeds ``tol``.

    Examples
    --------
    >>> from sknet.losses import Huber
    >>> from sknet.utils import check_loss_gradients
    >>> check_loss_gradients(Huber(delta=0.5)) < 1e-6
    True
    """

    loss = _make_loss(loss, target_type)
    backend = _get_backend(device) if isinstance(device, str) else device
    rng = np.random.RandomState(random_state)
    Z, Y = _loss_problem(loss, rng, n_samples, n_outputs)
    w = rng.uniform(0.2, 2.0, n_samples)
    Y_dev, w_dev = backend.asarray(Y), backend.asarray(w)

    def value(z):
        return float(loss(backend.asarray(z), Y_dev, w_dev)[0])

    analytic = backend.to_numpy(loss(backend.asarray(Z), Y_dev, w_dev)[1]).copy()
    error = _relative_error(analytic, _central_differences(value, Z, eps))
    if not error <= tol:
        raise AssertionError(
            f"{type(loss).__name__}: the gradient is off by {error:.3g} relative to "
            f"finite differences (tol={tol:g})"
        )
    return error

"""The Loss contract: what a loss computes, and the checks at its boundary."""

import functools as _functools
import numbers as _numbers

import numpy as _np
from sklearn import base as _sklearn_base

from sknet.autodiff import _recording
from sknet.autodiff._variable import read_only as _read_only
from sknet.backend import ACTIVATIONS as _ACTIVATIONS
from sknet.backend import get_array_module as _get_array_module


class Loss(_sklearn_base.BaseEstimator):
    """Base class of losses.

    Subclass it for a loss of your own: store parameters in ``__init__``
    (as an estimator does, so it clones and grid-searches), and implement
    either :meth:`value` (the per-sample loss, written with the functions of
    :mod:`sknet.autodiff`: its gradient follows automatically) or
    :meth:`loss_and_gradient` (value and gradient by hand: fastest). For
    another output than the identity, set ``out_activation``: ``'softmax'``,
    ``'logistic'`` and ``'exp'`` need nothing more; any other name needs
    :meth:`output` too. A classifier's loss outputs probabilities (softmax
    for multiclass targets, logistic for binary and multilabel ones; choose
    per target in :meth:`for_target` to serve both). Check the gradient with
    :func:`sknet.utils.check_loss_gradients`.

    Subclassing a stock loss keeps your methods: a :meth:`value` of your
    own is differentiated (the stock gradient would not be its gradient), a
    :meth:`loss_and_gradient` of your own is called. Changing only the
    output of a stock loss is refused, since the stock gradient belongs to
    the stock output.

    Attributes
    ----------
    out_activation : str
        Name of the output activation, reported as ``out_activation_``
        (``'identity'``, ``'softmax'``, ``'logistic'``, ``'exp'``, or a name
        of your own with :meth:`output`).

    Examples
    --------
    The log-cosh loss for regression, from its value alone:

    >>> from sknet import autodiff as ad
    >>> from sknet.losses import Loss
    >>> from sknet.utils import check_loss_gradients
    >>> class LogCosh(Loss):
    ...     def value(self, Z, Y):  # log(cosh(r)) = |r| + log(1 + exp(-2|r|)) - log(2)
    ...         R = ad.absolute(Z - Y)
    ...         return ad.mean(R + ad.softplus(-2 * R) - 0.6931471805599453, axis=1)
    >>> check_loss_gradients(LogCosh()) < 1e-6
    True

    and with its gradient written by hand:

    >>> from sknet.backend import get_array_module
    >>> class LogCosh(Loss):
    ...     def loss_and_gradient(self, Z, Y):
    ...         xp = get_array_module(Z)  # NumPy or CuPy: one body for both
    ...         R = Z - Y
    ...         return xp.log(xp.cosh(R)).mean(axis=1), xp.tanh(R) / Z.shape[1]
    >>> check_loss_gradients(LogCosh()) < 1e-6
    True
    """

    out_activation = "identity"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "value" in vars(cls) and "loss_and_gradient" not in vars(cls):
            # The value defined here is the loss: its gradient follows from it,
            # not from a loss_and_gradient a base class wrote for another value.
            cls.loss_and_gradient = Loss.loss_and_gradient
        if "check_target" in vars(cls) and not cls.__module__.startswith("sknet."):
            cls.check_target = _read_only_targets(vars(cls)["check_target"])

    def output(self, Z):
        """Turn raw outputs into predictions, in place if you like; returns them.

        The default applies the function ``out_activation`` names
        (``'identity'``, ``'softmax'``, ``'logistic'`` or ``'exp'``).
        """
        name = self.out_activation
        function = _OUTPUT_FUNCTIONS.get(name) if isinstance(name, str) else None
        if function is None:
            raise ValueError(_unknown_output_message(self))
        return function(Z)

    def value(self, Z, Y):
        """Per-sample loss values, written with :mod:`sknet.autodiff`.

        Implement this *or* :meth:`loss_and_gradient`. ``Z`` is recorded while
        training, so compute with the operators and the functions of
        :mod:`sknet.autodiff` (``ad.log``, ``ad.sum(..., axis=1)``...).

        Parameters
        ----------
        Z : array of shape (n_samples, n_outputs)
            Raw network outputs.
        Y : array of shape (n_samples, n_outputs)
            Targets as floats (one-hot or indicator columns for classifiers).

        Returns
        -------
        values : array of shape (n_samples,)
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement value (the per-sample loss) "
            "or loss_and_gradient"
        )

    def loss_and_gradient(self, Z, Y):
        """Per-sample loss values and their gradient with respect to ``Z``.

        The default differentiates :meth:`value`.

        Parameters
        ----------
        Z : array of shape (n_samples, n_outputs)
            Raw network outputs; do not modify them.
        Y : array of shape (n_samples, n_outputs)
            Targets as floats (one-hot or indicator columns for classifiers).

        Returns
        -------
        values : array of shape (n_samples,)
            The loss of each sample.
        dZ : array of shape (n_samples, n_outputs)
            ``dZ[i] = d values[i] / d Z[i]``, a new array (it is scaled in
            place by the sample weights).
        """
        return _recording.values_and_gradient(self, Z, Y)

    def for_target(self, target_type):
        """The loss to train with for targets of ``target_type`` (default: itself).

        ``target_type`` is scikit-learn's ``type_of_target`` of ``y``
        (``'binary'``, ``'multiclass'``, ``'multilabel-indicator'``, or
        ``'continuous'`` for regressors). Classification losses return a
        variant with the right output (softmax or logistic).
        """
        return self

    def check_target(self, Y):
        """Raise a ValueError if the 2-D targets ``Y`` are outside the loss's domain.

        Called before training with ``Y`` as the estimator encodes it: floats
        for a regressor, boolean indicator columns for a classifier.
        """

    def __call__(self, Z, Y, sample_weight=None, sw_sum=None):
        """Return ``(loss, dZ)`` for a batch: the weighted mean and its gradient.

        ``sw_sum`` is ``sample_weight.sum()`` when the caller knows it (it
        saves a reduction on the device). ``loss`` stays on the device.

        What :meth:`loss_and_gradient` returns is checked first, without
        reading anything back from the device: a ``ValueError`` for values
        not of shape ``(n_samples,)`` or ``(n_samples, 1)`` (raveled) or a
        gradient not of ``Z``'s shape, a ``TypeError`` for anything that is
        not an array of ``Z``'s kind and dtype. NaN and inf pass (the
        training loop reports a diverging loss).
        """
        values, dZ = self._checked_call(Z, Y)
        if sample_weight is None:
            loss = values.mean()
            dZ *= 1.0 / Z.shape[0]
        else:
            if sw_sum is None:
                sw_sum = sample_weight.sum()
            loss = (values * sample_weight).sum() / sw_sum
            # one weight per sample, whatever the shape of its outputs
            dZ *= (sample_weight / sw_sum).reshape((-1,) + (1,) * (dZ.ndim - 1))
        return loss, dZ

    def _checked_call(self, Z, Y):
        """:meth:`loss_and_gradient` of ``Z`` and ``Y``, its result checked (:meth:`_checked`).

        A loss written outside sknet gets ``Z`` and ``Y`` read-only (views on
        NumPy, copies on CuPy): ``Z`` is what the last layer keeps for its
        backward pass, ``Y`` may be the caller's ``y``, so writing into either
        is a ValueError naming the loss.
        """
        if type(self).__module__.startswith("sknet."):
            return self._checked(self.loss_and_gradient(Z, Y), Z, Y)
        try:
            result = self.loss_and_gradient(_read_only(Z), _read_only(Y))
        except ValueError as exc:
            if "read-only" not in str(exc):
                raise
            raise ValueError(
                f"{type(self).__name__}.loss_and_gradient (or value) wrote into a read-only "
                "array, most likely Z or Y: a loss must not change them (Z is the last layer's "
                "output, which its backward needs; Y may be the caller's y); compute new arrays"
            ) from exc
        return self._checked(result, Z, Y)

    def _checked(self, result, Z, Y):
        """``(values, dZ)`` from :meth:`loss_and_gradient`, checked before anything uses them.

        A wrong shape or dtype would reach the kernels of the backward pass,
        which trust their arrays' shapes. A gradient of another dtype is
        refused, not cast: a cast would hide a float64 computation paying
        twice the time and memory of a float32 model's at every batch, or a
        float32 one that loses a float64 model's precision; the fix is to
        compute in ``Z.dtype``. A gradient that is a view of ``Z`` or ``Y``,
        read-only or not C-contiguous is copied, since it is scaled in place.
        """
        name = f"{type(self).__name__}.loss_and_gradient"
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"{name} must return a pair (values, dZ), got {_describe(result)}")
        values, dZ = result
        xp, n = _get_array_module(Z), Z.shape[0]
        for what, array in (("per-sample values", values), ("gradient dZ", dZ)):
            if not isinstance(array, xp.ndarray):
                raise TypeError(
                    f"{name} must return arrays of Z's kind ({xp.__name__}.ndarray), but "
                    f"its {what} are {_describe(array)}"
                )
        if values.shape == (n, 1):
            values = values.reshape(n)
        elif values.shape != (n,):
            raise ValueError(
                f"{name} returned per-sample values of shape {values.shape}; expected "
                f"({n},) (or ({n}, 1)): one loss per sample of Z, whose shape is {Z.shape}"
            )
        if dZ.shape != Z.shape:
            raise ValueError(
                f"{name} returned a gradient dZ of shape {dZ.shape}; expected {Z.shape}, "
                "the shape of Z"
            )
        for what, array in (("per-sample values", values), ("gradient dZ", dZ)):
            if array.dtype != Z.dtype:
                raise TypeError(
                    f"{name} returned {what} of dtype {array.dtype} for Z of dtype "
                    f"{Z.dtype}; expected {Z.dtype}. Compute in Z's dtype (constants as "
                    "Python numbers or arrays made with dtype=Z.dtype)."
                )
        if (
            not dZ.flags.c_contiguous
            or not getattr(dZ.flags, "writeable", True)
            or xp.may_share_memory(dZ, Z)
            or xp.may_share_memory(dZ, Y)
        ):
            dZ = xp.array(dZ, order="C")  # scaled in place by the caller
        return values, dZ

    def release(self):
        """Drop work buffers (end of ``fit``)."""
        self.__dict__.pop("_grad", None)

    def _buffer_like(self, Z):
        """A reused array shaped like ``Z`` (the gradient of stock losses)."""
        xp = _get_array_module(Z)
        buf = self.__dict__.get("_grad")
        if (
            buf is None
            or _get_array_module(buf) is not xp
            or buf.shape[1:] != Z.shape[1:]
            or buf.shape[0] < Z.shape[0]
            or buf.dtype != Z.dtype
        ):
            buf = self._grad = xp.empty_like(Z)
        return buf[: Z.shape[0]]

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_grad", None)
        return state


def _read_only_targets(check_target):
    """A user's ``check_target``, given ``Y`` read-only (it may be the caller's ``y``)."""

    @_functools.wraps(check_target)
    def run(self, Y):
        try:
            return check_target(self, _read_only(Y))
        except ValueError as exc:
            if "read-only" not in str(exc):
                raise
            raise ValueError(
                f"{type(self).__name__}.check_target wrote into the targets Y, which it must "
                "only read (they may be the caller's y)"
            ) from exc

    return run


def _check_real(loss, name, ok, requirement):
    """A ValueError unless the parameter ``name`` of ``loss`` is a real number that is ``ok``."""
    value = getattr(loss, name)
    if isinstance(value, bool) or not isinstance(value, _numbers.Real) or not ok(value):
        raise ValueError(f"{type(loss).__name__} needs {requirement}, got {value!r}")


def _softmax(Z):
    xp = _get_array_module(Z)
    Z -= Z.max(axis=1, keepdims=True)
    xp.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


def _logsumexp(Z):
    xp = _get_array_module(Z)
    m = Z.max(axis=1)
    return xp.log(xp.exp(Z - m[:, None]).sum(axis=1)) + m


def _softplus(xp, X):
    return xp.maximum(X, 0) + xp.log1p(xp.exp(-xp.abs(X)))


def _pow(xp, base, exponent):
    """``base ** exponent`` with ``0 ** negative`` read as 0 (it is multiplied by 0)."""
    if exponent >= 0:
        return base**exponent
    tiny = _np.finfo(base.dtype).tiny
    return xp.where(base > 0, xp.maximum(base, tiny) ** exponent, xp.zeros_like(base))


def _describe(obj):
    """What a returned object is, for error messages: an array's shape, else its type."""
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return f"{type(obj).__module__}.{type(obj).__qualname__} of shape {shape}"
    return f"{type(obj).__qualname__} {obj!r:.60}"


def _unknown_output_message(loss):
    name = type(loss).__name__
    return (
        f"{name}.out_activation is {loss.out_activation!r}, which has no function in sknet "
        f"(those that do: {sorted(_OUTPUT_FUNCTIONS)}); define {name}.output(Z) to compute it, "
        "or name one of those."
    )


def _logistic(Z):
    return _ACTIVATIONS["logistic"].forward(_get_array_module(Z), Z, Z)


def _exp(Z):
    return _get_array_module(Z).exp(Z, out=Z)


def _identity(Z):
    return Z


# Output activations for prediction, by ``out_activation`` name; each works in place.
_OUTPUT_FUNCTIONS = {
    "exp": _exp,
    "identity": _identity,
    "logistic": _logistic,
    "softmax": _softmax,
}


def output_activation(name, Z):
    """Apply the output activation ``name`` (an ``out_activation_``) in place."""
    try:
        function = _OUTPUT_FUNCTIONS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown output activation {name!r}; sknet's are {sorted(_OUTPUT_FUNCTIONS)}"
        ) from None
    return function(Z)

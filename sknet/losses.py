"""Losses: the stock ones and the base class for your own.

A loss maps the raw network outputs ``Z`` and a 2-D float target ``Y`` to a
per-sample value and its gradient with respect to ``Z``, and owns the output
activation that turns ``Z`` into predictions. The training loop averages the
per-sample values with the sample weights (``sample_weight`` times
``class_weight``), the same way for every loss, so a loss never sees them.

Give an estimator ``loss="name"`` or a loss object; objects are estimators'
parameters like any other (``clone``, ``set_params``, ``loss__gamma`` in a
grid search) and pickle with the model.

=====================  ==============  =====================================
loss                   output          per-sample value
=====================  ==============  =====================================
``"log_loss"``         softmax         ``-log P[y]`` (logistic outputs,
                                       summed over labels, for binary and
                                       multilabel targets)
``"focal"``            softmax         ``-(1 - p_t) ** gamma * log p_t``
``"squared_error"``    identity        ``mean_k (y - z)^2 / 2``
``"absolute_error"``   identity        ``mean_k |y - z|``
``"huber"``            identity        ``mean_k`` of ``r^2 / 2`` for
                                       ``|r| <= delta``, else
                                       ``delta (|r| - delta / 2)``
``"quantile"``         identity        ``mean_k`` pinball loss at ``quantile``
``"poisson"``          exp             ``sum_k y log(y / p) - y + p``
=====================  ==============  =====================================

The stock log-loss, squared error and Poisson deviance have the values of
scikit-learn's MLP losses, and their gradient is fused with the output
activation (``P - Y``: no softmax Jacobian is ever formed).

What a loss returns is checked before anything uses it (:meth:`Loss.__call__`):
per-sample values of shape ``(n_samples,)`` (or ``(n_samples, 1)``) and a
gradient of ``Z``'s shape, both arrays of ``Z``'s kind and dtype; anything
else is a ``ValueError`` (shapes) or ``TypeError`` (types, dtypes) naming
the loss. An estimator takes only a loss that fits it: a classifier's must
output probabilities (softmax for multiclass targets, logistic for binary and
multilabel ones), a regressor's must not be a classification loss.
"""

import numbers as _numbers

import numpy as _np
from sklearn import base as _sklearn_base

from sknet.autodiff import _recording
from sknet.backend import ACTIVATIONS as _ACTIVATIONS
from sknet.backend import get_array_module as _get_array_module

__all__ = [
    "CLASSIFIER_LOSSES",
    "LOSSES",
    "REGRESSOR_LOSSES",
    "AbsoluteError",
    "FocalLoss",
    "Huber",
    "LogLoss",
    "Loss",
    "Poisson",
    "Quantile",
    "SquaredError",
    "estimator_loss",
    "make_loss",
    "output_activation",
]


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
        values, dZ = self._checked(self.loss_and_gradient(Z, Y), Z, Y)
        if sample_weight is None:
            loss = values.mean()
            dZ *= 1.0 / Z.shape[0]
        else:
            if sw_sum is None:
                sw_sum = sample_weight.sum()
            loss = (values * sample_weight).sum() / sw_sum
            dZ *= (sample_weight / sw_sum)[:, None]
        return loss, dZ

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


class _CanonicalLoss(Loss):
    """A loss whose gradient through its output activation is ``(P - Y) * scale``."""

    def _per_sample(self, Z, Y, P):
        """Per-sample values from logits, targets and activations."""
        raise NotImplementedError

    def _grad_scale(self, Z):
        return 1.0

    def loss_and_gradient(self, Z, Y):
        P = self._buffer_like(Z)
        P[...] = Z
        self.output(P)
        values = self._per_sample(Z, Y, P)
        P -= Y
        scale = self._grad_scale(Z)
        if scale != 1.0:
            P *= scale
        return values, P


class LogLoss(_CanonicalLoss):
    """The log-loss (cross-entropy), scikit-learn's MLP classifier loss.

    Softmax outputs for multiclass targets; logistic outputs, with the binary
    log-loss summed over labels, for binary and multilabel targets. A
    subclass keeps its own methods for every target type; its
    ``out_activation`` says which output it trains.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import LogLoss
    >>> Z = np.array([[2.0, 0.0], [0.0, 1.0]])  # raw outputs for two classes
    >>> Y = np.array([[1.0, 0.0], [1.0, 0.0]])  # both samples of the first class
    >>> values, dZ = LogLoss().loss_and_gradient(Z, Y)
    >>> values.round(3)  # -log softmax(Z)[y]
    array([0.127, 1.313])
    >>> dZ.round(3)  # softmax(Z) - Y
    array([[-0.119,  0.119],
           [-0.731,  0.731]])
    >>> LogLoss().for_target("binary").out_activation
    'logistic'
    """

    def for_target(self, target_type):
        loss = _sklearn_base.clone(self)
        loss._logistic = target_type != "multiclass"
        return loss

    @property
    def out_activation(self):
        return "logistic" if self.__dict__.get("_logistic", False) else "softmax"

    def _per_sample(self, Z, Y, P):
        if self.out_activation == "softmax":
            # -log softmax(Z)[y] = logsumexp(Z) - <Y, Z>, computed stably.
            return _logsumexp(Z) - (Y * Z).sum(axis=1)
        # softplus(z) - y z = max(z, 0) - y z + log1p(exp(-|z|)), summed over labels
        xp = _get_array_module(Z)
        values = xp.log1p(xp.exp(-xp.abs(Z)))
        values += xp.maximum(Z, 0)
        values -= Y * Z
        return values.sum(axis=1)


class _LogisticLogLoss(LogLoss):
    """Logistic outputs with the binary log-loss summed over outputs, for any target."""

    out_activation = "logistic"


class FocalLoss(Loss):
    """Focal loss (Lin et al., 2017): the log-loss with easy samples down-weighted.

    Each sample's log-loss is multiplied by ``(1 - p_t) ** gamma``, ``p_t``
    the probability given to the true class, so confident right answers
    count less and rare, hard classes more. ``gamma=0`` is the log-loss.
    Softmax outputs for multiclass targets, logistic outputs (one focal term
    per label) for binary and multilabel targets.

    Parameters
    ----------
    gamma : float, default=2.0
        Focusing exponent, ``>= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import FocalLoss, LogLoss
    >>> Z = np.array([[2.0, 0.0], [0.0, 1.0]])  # an easy sample, then a hard one
    >>> Y = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> LogLoss().loss_and_gradient(Z, Y)[0].round(3)
    array([0.127, 1.313])
    >>> focal = FocalLoss(gamma=2.0).for_target("multiclass")
    >>> focal.loss_and_gradient(Z, Y)[0].round(3)  # the easy sample counts far less
    array([0.002, 0.702])

    As an estimator's loss:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(loss=FocalLoss(gamma=1.0), hidden_layer_sizes=(16,), tol=1.0,
    ...                     n_iter_no_change=1, random_state=0, device="cpu")
    >>> clf.fit(X[:200] / 16, y[:200]).out_activation_
    'softmax'
    """

    def __init__(self, gamma=2.0):
        self.gamma = gamma

    def for_target(self, target_type):
        _check_real(self, "gamma", lambda gamma: gamma >= 0, "gamma >= 0")
        loss = _sklearn_base.clone(self)
        loss._softmax = target_type == "multiclass"
        return loss

    @property
    def out_activation(self):
        return "softmax" if self.__dict__.get("_softmax", True) else "logistic"

    def loss_and_gradient(self, Z, Y):
        xp, g = _get_array_module(Z), float(self.gamma)
        if self.out_activation == "softmax":
            lse = _logsumexp(Z)
            log_pt = (Y * Z).sum(axis=1) - lse  # log p of the true class
            q = -xp.expm1(log_pt)  # 1 - p_t, accurate near 1
            values = -(q**g) * log_pt
            # d/dz = [q^g - g q^(g-1) p_t log p_t] (softmax(z) - y)
            coef = q**g - g * _pow(xp, q, g - 1) * xp.exp(log_pt) * log_pt
            dZ = _softmax(Z.copy()) - Y
            dZ *= coef[:, None]
            return values, dZ
        s = 2 * Y - 1  # +1 for positives, -1 for negatives
        log_pt = -_softplus(xp, -s * Z)  # log p_t per label
        pt = xp.exp(log_pt)
        q = 1 - pt
        values = (-(q**g) * log_pt).sum(axis=1)
        # d/dz = s q^g (g p_t log p_t - q)
        dZ = s * (q**g) * (g * pt * log_pt - q)
        return values, dZ


class SquaredError(_CanonicalLoss):
    """Identity output with half the squared error, averaged over outputs.

    scikit-learn reports this loss averaged over outputs but steps along the
    gradient of the sum; here the gradient is that of the reported loss, so
    ``solver='lbfgs'`` sees a consistent pair. With one output the two agree.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import SquaredError
    >>> Z = np.array([[0.5], [3.0]])  # predictions (the output is the identity)
    >>> Y = np.array([[0.0], [1.0]])
    >>> values, dZ = SquaredError().loss_and_gradient(Z, Y)
    >>> values  # (z - y)^2 / 2
    array([0.125, 2.   ])
    >>> dZ  # z - y
    array([[0.5],
           [2. ]])
    """

    def _per_sample(self, Z, Y, P):
        diff = Z - Y
        diff *= diff
        return 0.5 * diff.mean(axis=1)

    def _grad_scale(self, Z):
        return 1.0 / Z.shape[1]


class AbsoluteError(Loss):
    """Identity output with the absolute error, averaged over outputs (a median).

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import AbsoluteError
    >>> Z = np.array([[0.5], [3.0]])
    >>> Y = np.array([[0.0], [1.0]])
    >>> values, dZ = AbsoluteError().loss_and_gradient(Z, Y)
    >>> values  # |z - y|
    array([0.5, 2. ])
    >>> dZ.ravel()  # sign(z - y)
    array([1., 1.])
    """

    def loss_and_gradient(self, Z, Y):
        xp = _get_array_module(Z)
        R = Z - Y
        return xp.abs(R).mean(axis=1), xp.sign(R) / Z.shape[1]


class Huber(Loss):
    """Identity output with the Huber loss, averaged over outputs.

    Quadratic for residuals up to ``delta``, linear beyond: the squared
    error's efficiency with the absolute error's robustness to outliers.

    Parameters
    ----------
    delta : float, default=1.0
        Where the loss turns linear, in the units of ``y`` (scale ``y``, or
        choose ``delta`` from the residuals you expect).

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import Huber
    >>> Z = np.array([[0.5], [3.0]])  # residuals 0.5 and 2
    >>> Y = np.array([[0.0], [1.0]])
    >>> values, dZ = Huber(delta=1.0).loss_and_gradient(Z, Y)
    >>> values  # quadratic, then linear
    array([0.125, 1.5  ])
    >>> dZ.ravel()  # the residual, clipped to [-delta, delta]
    array([0.5, 1. ])
    """

    def __init__(self, delta=1.0):
        self.delta = delta

    def check_target(self, Y):
        _check_real(self, "delta", lambda delta: delta > 0, "delta > 0")

    def loss_and_gradient(self, Z, Y):
        xp, delta = _get_array_module(Z), float(self.delta)
        R = Z - Y
        A = xp.abs(R)
        values = xp.where(A <= delta, 0.5 * R * R, delta * (A - 0.5 * delta)).mean(axis=1)
        return values, xp.clip(R, -delta, delta) / Z.shape[1]


class Quantile(Loss):
    """Identity output with the pinball loss: predicts the ``quantile`` of ``y``.

    Parameters
    ----------
    quantile : float, default=0.5
        In ``(0, 1)``; 0.5 is the median, 0.9 a value that 90% of targets
        fall below.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import Quantile
    >>> Z = np.array([[0.0], [0.0]])
    >>> Y = np.array([[1.0], [-1.0]])  # one target above the prediction, one below
    >>> values, dZ = Quantile(quantile=0.9).loss_and_gradient(Z, Y)
    >>> values.round(3)  # predicting too low costs 9 times more than too high
    array([0.9, 0.1])

    As an estimator's loss, predicting the 90th percentile:

    >>> from sknet import MLPRegressor
    >>> X = np.linspace(0, 1, 50).reshape(-1, 1)
    >>> reg = MLPRegressor(loss=Quantile(quantile=0.9), hidden_layer_sizes=(8,), tol=1.0,
    ...                    n_iter_no_change=1, random_state=0, device="cpu")
    >>> reg.fit(X, X.ravel()).predict(X[:3]).shape
    (3,)
    """

    def __init__(self, quantile=0.5):
        self.quantile = quantile

    def check_target(self, Y):
        _check_real(self, "quantile", lambda q: 0 < q < 1, "0 < quantile < 1")

    def loss_and_gradient(self, Z, Y):
        xp, q = _get_array_module(Z), float(self.quantile)
        R = Y - Z
        values = xp.maximum(q * R, (q - 1) * R).mean(axis=1)
        dZ = (1 - q) - (R > 0).astype(Z.dtype)  # -q above the target, 1 - q below
        dZ /= Z.shape[1]
        return values, dZ


class Poisson(_CanonicalLoss):
    """Exponential output (log link) with half the Poisson deviance; ``y >= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import Poisson
    >>> Z = np.array([[0.0], [1.0]])  # raw outputs: the log of the predictions
    >>> Poisson().output(Z.copy()).round(3)
    array([[1.   ],
           [2.718]])
    >>> Z = np.array([[0.0], [0.0]])  # predicting 1 for both samples
    >>> Y = np.array([[0.0], [1.0]])
    >>> values, dZ = Poisson().loss_and_gradient(Z, Y)
    >>> values  # y log(y / p) - y + p: zero for the exact prediction
    array([1., 0.])

    As an estimator's loss (``loss="poisson"`` is the same):

    >>> from sknet import MLPRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(size=(50, 2))
    >>> counts = rng.poisson(3 * X[:, 0])
    >>> reg = MLPRegressor(loss=Poisson(), hidden_layer_sizes=(8,), tol=1.0,
    ...                    n_iter_no_change=1, random_state=0, device="cpu")
    >>> bool((reg.fit(X, counts).predict(X) > 0).all())  # exp output: always positive
    True
    """

    out_activation = "exp"

    def check_target(self, Y):
        if (Y < 0).any():
            raise ValueError(
                f"loss='poisson' requires y >= 0, but y has values down to {Y.min()}."
            )

    def _per_sample(self, Z, Y, P):
        # y log(y / p) - y + p, with 0 log 0 = 0 and log p = z.
        xp = _get_array_module(Z)
        positive = Y > 0
        ylogy = xp.where(positive, Y * xp.log(xp.where(positive, Y, 1)), 0)
        values = ylogy - Y * Z
        values -= Y
        values += P
        return values.sum(axis=1)


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


#: Loss names an estimator's ``loss`` parameter takes.
CLASSIFIER_LOSSES = {"log_loss": LogLoss, "focal": FocalLoss}
REGRESSOR_LOSSES = {
    "squared_error": SquaredError,
    "absolute_error": AbsoluteError,
    "huber": Huber,
    "quantile": Quantile,
    "poisson": Poisson,
}
#: Every stock loss by name (``binary_log_loss``: the logistic log-loss itself).
LOSSES = {**CLASSIFIER_LOSSES, **REGRESSOR_LOSSES, "binary_log_loss": _LogisticLogLoss}


# The output a classifier's loss needs, by target type: probabilities.
_CLASSIFIER_OUTPUTS = {
    "binary": "logistic",
    "multiclass": "softmax",
    "multilabel-indicator": "logistic",
}
# The stock losses for classification, which no regressor takes.
_CLASSIFICATION_LOSSES = (LogLoss, FocalLoss)


def make_loss(loss, target_type=None):
    """A loss object for ``loss`` (a name or a :class:`Loss`), ready to train.

    Objects are cloned, never modified; with ``target_type`` the result is
    resolved with :meth:`Loss.for_target` (``'multiclass'`` gives the
    softmax log-loss). A subclass of a stock loss that changes its output
    but not its loss is refused (``TypeError``), as is an ``out_activation``
    with no function (``ValueError``).
    """
    if isinstance(loss, Loss):
        _check_overrides(loss)
        loss = _sklearn_base.clone(loss)
    else:
        try:
            loss = LOSSES[loss]()
        except (KeyError, TypeError):
            raise ValueError(
                f"loss must be a Loss or one of {sorted(LOSSES)}, got {loss!r}"
            ) from None
    if target_type is not None:
        resolved = loss.for_target(target_type)
        if not isinstance(resolved, Loss):
            raise TypeError(
                f"{type(loss).__name__}.for_target({target_type!r}) must return a Loss, "
                f"got {_describe(resolved)}"
            )
        loss = resolved
    if type(loss).output is Loss.output and loss.out_activation not in _OUTPUT_FUNCTIONS:
        raise ValueError(_unknown_output_message(loss))
    return loss


def estimator_loss(loss, target_type, estimator):
    """:func:`make_loss` for an estimator, refusing a loss that does not fit it.

    A classifier (``target_type`` ``'binary'``, ``'multiclass'`` or
    ``'multilabel-indicator'``) needs probabilities from its loss, for ``predict_proba``: softmax
    outputs for multiclass targets, logistic ones for binary and multilabel
    targets. A regressor (``target_type='continuous'``) refuses the stock
    classification losses. Either is a ``ValueError`` naming the loss and
    what to change, raised before any training.

    Examples
    --------
    >>> from sknet import MLPClassifier
    >>> from sknet.losses import Huber, estimator_loss
    >>> estimator_loss("log_loss", "binary", MLPClassifier()).out_activation
    'logistic'
    >>> estimator_loss(Huber(), "multiclass", MLPClassifier())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: MLPClassifier needs probabilities from its loss, but Huber outputs 'identity'...
    """
    resolved = make_loss(loss, target_type)
    who, name = type(estimator).__name__, type(resolved).__name__
    needed = _CLASSIFIER_OUTPUTS.get(target_type)
    if needed is not None and resolved.out_activation != needed:
        raise ValueError(
            f"{who} needs probabilities from its loss, but {name} outputs "
            f"{resolved.out_activation!r}: for {target_type} targets, predict_proba needs "
            f"out_activation={needed!r}. Define out_activation = {needed!r} in {name} (its "
            "output follows; write value or loss_and_gradient for that output), choose the "
            "output per target type in for_target (as LogLoss does), or use one of the "
            f"classifier losses {sorted(CLASSIFIER_LOSSES)}."
        )
    if needed is None and isinstance(resolved, _CLASSIFICATION_LOSSES):
        raise ValueError(
            f"{who} is a regressor, but {name} is a classification "
            f"loss (outputs {resolved.out_activation!r} for class labels): use one of "
            f"{sorted(REGRESSOR_LOSSES)} or a Loss of your own, or a classifier."
        )
    return resolved


def _check_overrides(loss):
    """Refuse a subclass of a stock loss that changes its output but not its loss."""
    cls = type(loss)
    mine = []  # the user's classes, down to the nearest stock one
    for base in cls.__mro__:
        if base.__module__ == __name__:
            stock = base
            break
        mine.append(base)
    if not mine or stock is Loss:
        return
    defines = {name for base in mine for name in vars(base)}
    if {"value", "loss_and_gradient"} & defines:
        return  # its own loss, run as written
    changed = sorted({"output", "out_activation"} & defines)
    if changed:
        raise TypeError(
            f"{cls.__name__} changes {' and '.join(changed)} of {stock.__name__} but not "
            f"its loss: {stock.__name__}'s gradient is written for its own output "
            f"({stock().out_activation!r}), so training and predictions would disagree. "
            "Override value (its gradient follows) or loss_and_gradient as well, or "
            "subclass Loss."
        )


def _check_real(loss, name, ok, requirement):
    """A ValueError unless the parameter ``name`` of ``loss`` is a real number that is ``ok``."""
    value = getattr(loss, name)
    if isinstance(value, bool) or not isinstance(value, _numbers.Real) or not ok(value):
        raise ValueError(f"{type(loss).__name__} needs {requirement}, got {value!r}")


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

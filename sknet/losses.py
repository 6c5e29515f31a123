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
"""

import numpy as np
from sklearn.base import BaseEstimator, clone

from sknet.autodiff._recording import values_and_gradient
from sknet.backend import ACTIVATIONS, get_array_module

__all__ = [
    "AbsoluteError",
    "FocalLoss",
    "Huber",
    "LogLoss",
    "Loss",
    "Poisson",
    "Quantile",
    "SquaredError",
    "make_loss",
]


class Loss(BaseEstimator):
    """Base class of losses.

    Subclass it for a loss of your own: store parameters in ``__init__``
    (as an estimator does, so it clones and grid-searches), and implement
    either :meth:`value` (the per-sample loss, written with the functions of
    :mod:`sknet.autodiff`: its gradient follows automatically) or
    :meth:`loss_and_gradient` (value and gradient by hand: fastest). For
    another output than the identity, also :meth:`output` and
    ``out_activation``. Check the gradient with
    :func:`sknet.utils.check_loss_gradients`.

    Attributes
    ----------
    out_activation : str
        Name of the output activation, reported as ``out_activation_``.

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

    def output(self, Z):
        """Turn raw outputs into predictions, in place if you like; returns them."""
        return Z

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
        return values_and_gradient(self, Z, Y)

    def for_target(self, target_type):
        """The loss to train with for targets of ``target_type`` (default: itself).

        ``target_type`` is scikit-learn's ``type_of_target`` of ``y``
        (``'binary'``, ``'multiclass'``, ``'multilabel-indicator'``, or
        ``'continuous'`` for regressors). Classification losses return a
        variant with the right output (softmax or logistic).
        """
        return self

    def check_target(self, Y):
        """Raise a ValueError if the 2-D targets ``Y`` are outside the loss's domain."""

    def __call__(self, Z, Y, sample_weight=None, sw_sum=None):
        """Return ``(loss, dZ)`` for a batch: the weighted mean and its gradient.

        ``sw_sum`` is ``sample_weight.sum()`` when the caller knows it (it
        saves a reduction on the device). ``loss`` stays on the device.
        """
        values, dZ = self.loss_and_gradient(Z, Y)
        if sample_weight is None:
            loss = values.mean()
            dZ *= 1.0 / Z.shape[0]
        else:
            if sw_sum is None:
                sw_sum = sample_weight.sum()
            loss = (values * sample_weight).sum() / sw_sum
            dZ *= (sample_weight / sw_sum)[:, None]
        return loss, dZ

    def release(self):
        """Drop work buffers (end of ``fit``)."""
        self.__dict__.pop("_grad", None)

    def _buffer_like(self, Z):
        """A reused array shaped like ``Z`` (the gradient of stock losses)."""
        xp = get_array_module(Z)
        buf = self.__dict__.get("_grad")
        if (
            buf is None
            or get_array_module(buf) is not xp
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

    def per_sample(self, Z, Y, P):
        """Per-sample values from logits, targets and activations."""
        raise NotImplementedError

    def _grad_scale(self, Z):
        return 1.0

    def loss_and_gradient(self, Z, Y):
        P = self._buffer_like(Z)
        P[...] = Z
        self.output(P)
        values = self.per_sample(Z, Y, P)
        P -= Y
        scale = self._grad_scale(Z)
        if scale != 1.0:
            P *= scale
        return values, P


class _SoftmaxLogLoss(_CanonicalLoss):
    """Softmax output with the multiclass log-loss (one-hot ``Y``)."""

    out_activation = "softmax"

    def output(self, Z):
        return _softmax(Z)

    def per_sample(self, Z, Y, P):
        # -log softmax(Z)[y] = logsumexp(Z) - <Y, Z>, computed stably.
        return _logsumexp(Z) - (Y * Z).sum(axis=1)


class _LogisticLogLoss(_CanonicalLoss):
    """Logistic outputs with the binary log-loss summed over outputs."""

    out_activation = "logistic"

    def output(self, Z):
        return ACTIVATIONS["logistic"].forward(get_array_module(Z), Z, Z)

    def per_sample(self, Z, Y, P):
        # softplus(z) - y z = max(z, 0) - y z + log1p(exp(-|z|))
        xp = get_array_module(Z)
        values = xp.log1p(xp.exp(-xp.abs(Z)))
        values += xp.maximum(Z, 0)
        values -= Y * Z
        return values.sum(axis=1)


class LogLoss(_SoftmaxLogLoss):
    """The log-loss (cross-entropy), scikit-learn's MLP classifier loss.

    Softmax outputs for multiclass targets; logistic outputs, with the binary
    log-loss summed over labels, for binary and multilabel targets.

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
        return LogLoss() if target_type == "multiclass" else _LogisticLogLoss()


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
        if not self.gamma >= 0:
            raise ValueError(f"FocalLoss needs gamma >= 0, got {self.gamma!r}")
        loss = clone(self)
        loss._softmax = target_type == "multiclass"
        return loss

    @property
    def out_activation(self):
        return "softmax" if self.__dict__.get("_softmax", True) else "logistic"

    def output(self, Z):
        if self.out_activation == "softmax":
            return _softmax(Z)
        return ACTIVATIONS["logistic"].forward(get_array_module(Z), Z, Z)

    def loss_and_gradient(self, Z, Y):
        xp, g = get_array_module(Z), float(self.gamma)
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

    def per_sample(self, Z, Y, P):
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
        xp = get_array_module(Z)
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
        if not self.delta > 0:
            raise ValueError(f"Huber needs delta > 0, got {self.delta!r}")

    def loss_and_gradient(self, Z, Y):
        xp, delta = get_array_module(Z), float(self.delta)
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
        if not 0 < self.quantile < 1:
            raise ValueError(f"Quantile needs 0 < quantile < 1, got {self.quantile!r}")

    def loss_and_gradient(self, Z, Y):
        xp, q = get_array_module(Z), float(self.quantile)
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

    def output(self, Z):
        xp = get_array_module(Z)
        return xp.exp(Z, out=Z)

    def per_sample(self, Z, Y, P):
        # y log(y / p) - y + p, with 0 log 0 = 0 and log p = z.
        xp = get_array_module(Z)
        positive = Y > 0
        ylogy = xp.where(positive, Y * xp.log(xp.where(positive, Y, 1)), 0)
        values = ylogy - Y * Z
        values -= Y
        values += P
        return values.sum(axis=1)


def _softmax(Z):
    xp = get_array_module(Z)
    Z -= Z.max(axis=1, keepdims=True)
    xp.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


def _logsumexp(Z):
    xp = get_array_module(Z)
    m = Z.max(axis=1)
    return xp.log(xp.exp(Z - m[:, None]).sum(axis=1)) + m


def _softplus(xp, X):
    return xp.maximum(X, 0) + xp.log1p(xp.exp(-xp.abs(X)))


def _pow(xp, base, exponent):
    """``base ** exponent`` with ``0 ** negative`` read as 0 (it is multiplied by 0)."""
    if exponent >= 0:
        return base**exponent
    tiny = np.finfo(base.dtype).tiny
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


def make_loss(loss, target_type=None):
    """A loss object for ``loss`` (a name or a :class:`Loss`), ready to train.

    Objects are cloned, never modified; with ``target_type`` the result is
    resolved with :meth:`Loss.for_target` (``'multiclass'`` gives the
    softmax log-loss).
    """
    if isinstance(loss, Loss):
        loss = clone(loss)
    else:
        try:
            loss = LOSSES[loss]()
        except (KeyError, TypeError):
            raise ValueError(
                f"loss must be a Loss or one of {sorted(LOSSES)}, got {loss!r}"
            ) from None
    if target_type is not None:
        loss = loss.for_target(target_type)
    return loss


# Output activations for prediction, by ``out_activation_`` name.
_OUTPUTS = {
    "softmax": _SoftmaxLogLoss,
    "logistic": _LogisticLogLoss,
    "identity": SquaredError,
    "exp": Poisson,
}


def output_activation(name, Z):
    """Apply the output activation ``name`` (an ``out_activation_``) in place."""
    return _OUTPUTS[name]().output(Z)

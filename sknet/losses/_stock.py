"""The stock losses: log-loss, focal, squared and absolute error, Huber, quantile, Poisson."""

from numbers import Real as _Real

from sklearn import base as _sklearn_base
from sklearn.utils._param_validation import Interval as _Interval

from sknet.backend import get_array_module as _get_array_module
from sknet.losses._base import Loss, _check_real, _logsumexp, _pow, _softmax, _softplus


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

    With label smoothing, the targets are mixed with the uniform distribution:

    >>> LogLoss(label_smoothing=0.2).loss_and_gradient(Z, Y)[1].round(3)
    array([[-0.019,  0.019],
           [-0.631,  0.631]])

    Parameters
    ----------
    label_smoothing : float in [0, 1), default=0.0
        Train on ``(1 - label_smoothing) * Y + label_smoothing / K`` instead
        of the one-hot targets ``Y`` (``K`` the classes for softmax outputs,
        2 for each logistic output), as PyTorch's ``cross_entropy`` does.
    """

    #: (models pickled before the parameter existed have none)
    label_smoothing = 0.0

    def __init__(self, label_smoothing=0.0):
        self.label_smoothing = label_smoothing

    def check_target(self, Y):
        _check_real(self, "label_smoothing", lambda e: 0 <= e < 1, "0 <= label_smoothing < 1")

    def loss_and_gradient(self, Z, Y):
        eps = float(self.label_smoothing)
        if eps:
            classes = Z.shape[1] if self.out_activation == "softmax" else 2
            Y = Y.astype(Z.dtype)  # a copy
            Y *= 1.0 - eps
            Y += eps / classes
        return super().loss_and_gradient(Z, Y)

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

    _parameter_constraints: dict = {"gamma": [_Interval(_Real, 0, None, closed="left")]}

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

    _parameter_constraints: dict = {"delta": [_Interval(_Real, 0, None, closed="neither")]}

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

    _parameter_constraints: dict = {"quantile": [_Interval(_Real, 0, 1, closed="neither")]}

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

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

What it holds: the :class:`Loss` contract (``_base``), the stock losses
(``_stock``), the losses by name (``_registry``) and the mean over an
ensemble's members (``_ensemble``). What it may import:
:mod:`sknet.autodiff` and :mod:`sknet.backend`.
"""

from sknet.losses._base import Loss, output_activation
from sknet.losses._ensemble import EnsembleLoss
from sknet.losses._registry import (
    CLASSIFIER_LOSSES,
    LOSSES,
    REGRESSOR_LOSSES,
    estimator_loss,
    make_loss,
)
from sknet.losses._stock import (
    AbsoluteError,
    FocalLoss,
    Huber,
    LogLoss,
    Poisson,
    Quantile,
    SquaredError,
    _LogisticLogLoss,  # noqa: F401 (models pickled with binary targets name it here)
)

__all__ = [
    "CLASSIFIER_LOSSES",
    "LOSSES",
    "REGRESSOR_LOSSES",
    "AbsoluteError",
    "EnsembleLoss",
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

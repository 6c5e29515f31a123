"""Losses by name, and the loss an estimator trains with (one that fits it)."""

from sklearn import base as _sklearn_base

from sknet.losses._base import _OUTPUT_FUNCTIONS, Loss, _describe, _unknown_output_message
from sknet.losses._stock import (
    AbsoluteError,
    FocalLoss,
    Huber,
    LogLoss,
    Poisson,
    Quantile,
    SquaredError,
    _LogisticLogLoss,
)

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
        if hasattr(loss, "_parameter_constraints"):  # scikit-learn's, as the stock losses list
            loss._validate_params()
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
        if base.__module__.startswith("sknet.losses"):  # a stock loss, or Loss itself
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

"""The model's outputs: the loss's output activation, a classifier's labels and probabilities.

The output is the loss's: export checks that the loss's ``output`` computes
the function its ``out_activation`` names (applied to a few random raw
outputs on the host), so that the exported model predicts what ``predict``
and ``predict_proba`` do, and refuses the model otherwise. A classifier's
outputs follow skl2onnx's for scikit-learn's classifiers (``zipmap=False``):
``'label'`` (the class labels, or a 0/1 indicator matrix for multilabel
targets) and ``'probabilities'`` (``n_classes`` columns, two for binary
targets); a regressor's is ``'variable'``, ``(n, n_outputs)``.
"""

import numpy as np

from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.losses import EnsembleLoss

#: Output activations ONNX export supports (a classifier's: logistic or softmax).
SUPPORTED_OUTPUTS = ("exp", "identity", "logistic", "softmax")
_CLASSIFIER_OUTPUTS = ("logistic", "softmax")

_NUMPY_OUTPUTS = {
    "exp": np.exp,
    "identity": lambda Z: Z,
    "logistic": lambda Z: 1.0 / (1.0 + np.exp(-Z)),
    "softmax": lambda Z: np.exp(Z - _logsumexp(Z)),
}


def _logsumexp(Z):
    m = Z.max(axis=1, keepdims=True)
    return np.log(np.exp(Z - m).sum(axis=1, keepdims=True)) + m


def is_classifier(model):
    return isinstance(model, NetworkClassifierMixin)


def member_loss(loss):
    """The loss of one member for an ensemble's :class:`~sknet.losses.EnsembleLoss`."""
    return loss.loss if isinstance(loss, EnsembleLoss) else loss


def check_output(model):
    """The model's output activation, once checked exportable (else a ValueError)."""
    declared = model.out_activation_
    supported = _CLASSIFIER_OUTPUTS if is_classifier(model) else SUPPORTED_OUTPUTS
    if declared not in supported:
        raise ValueError(
            f"ONNX export of a {type(model).__name__} supports the output activations "
            f"{supported}; this model's is {declared!r} (loss={getattr(model, 'loss', None)!r})"
        )
    loss = model.__dict__.get("_loss")
    computed = declared if loss is None else _computed_output(model, member_loss(loss))
    if computed != declared:
        name = type(member_loss(loss)).__name__
        advice = (
            f"set out_activation = {computed!r} in {name}"
            if computed in supported
            else f"ONNX export supports outputs computing one of {supported}"
        )
        raise ValueError(
            f"{name} names its output activation {declared!r}, but its output computes "
            f"{'another function' if computed is None else repr(computed)}: the exported "
            f"model would not predict what {type(model).__name__} predicts. To export, "
            f"{advice}."
        )
    return declared


def _computed_output(model, loss):
    """Which of the exportable outputs ``loss.output`` computes (None: none of them)."""
    Z = np.random.RandomState(0).standard_normal((7, model.n_outputs_)) * 3
    try:
        P = np.asarray(loss.output(Z.astype(model._np_dtype)), dtype=np.float64)
    except Exception as exc:
        raise ValueError(
            f"ONNX export checks what the loss's output computes, but "
            f"{type(loss).__name__}.output failed on a NumPy array: {exc!r}"
        ) from exc
    names = [model.out_activation_] + sorted(set(SUPPORTED_OUTPUTS) - {model.out_activation_})
    for name in names:
        function = _NUMPY_OUTPUTS.get(name)
        if (
            function is not None
            and P.shape == Z.shape
            and np.allclose(P, function(Z), rtol=1e-4, atol=1e-6)
        ):
            return name
    return None


_ONNX_OUTPUTS = {"exp": "Exp", "logistic": "Sigmoid"}


def output_activation(builder, name, Z, members):
    """The predictions from raw outputs ``Z``: each member's, averaged for an ensemble."""
    if name == "softmax":
        P = builder.node("Softmax", [Z], axis=-1)
    elif name == "identity":
        P = Z
    else:
        P = builder.node(_ONNX_OUTPUTS[name], [Z])
    if members:  # (n, k, n_outputs): the members' mean
        P = builder.reduce("ReduceMean", P, [1], keepdims=False)
    return P


def classifier_outputs(builder, model, P):
    """``('label', 'probabilities')`` from the predictions ``P`` of a classifier."""
    binarizer = model._label_binarizer
    classes = np.asarray(model.classes_)
    if binarizer.y_type_ == "multilabel-indicator":
        labels = builder.cast(builder.node("Greater", [P, builder.constant(0.5)]), np.int64)
        proba = P
    else:
        if model.n_outputs_ == 1:  # binary: P(second class)
            p = P
            q = builder.node("Sub", [builder.constant(1.0), p])
            proba = builder.node("Concat", [q, p], axis=1)
            winner = builder.cast(builder.node("Greater", [p, builder.constant(0.5)]), np.int64)
            winner = builder.reshape(winner, [-1])
        else:
            proba = P
            winner = builder.node("ArgMax", [P], axis=1, keepdims=0)
        values = _label_values(classes)
        table = builder.constant(values, "classes", dtype=values.dtype)
        labels = builder.node("Gather", [table, winner], axis=0)
    # probabilities that underflow stop at the smallest normal number, as predict_proba's
    tiny = builder.constant(np.array(np.finfo(builder.dtype).tiny))
    proba = builder.node("Max", [proba, tiny])
    return labels, proba


def _label_values(classes):
    """The classes as an ONNX tensor holds them: int64, floats, booleans or strings."""
    if classes.dtype.kind in "iu":
        return classes.astype(np.int64)
    if classes.dtype.kind in "fb":
        return classes
    return np.array([str(c) for c in classes], dtype=object)

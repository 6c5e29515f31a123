"""ONNX export of the MLP estimators, through skl2onnx.

Needs the ``onnx`` extra (``pip install "sknet-nn[onnx]"``: skl2onnx and
onnxruntime). sknet's MLPs hold the attributes scikit-learn's MLPs hold
(``coefs_``, ``intercepts_``, ``activation``, ``out_activation_``, ``classes_``),
so skl2onnx's own MLP converter serves the classifiers once registered for
sknet's classes; the regressors have a converter of their own here, for every
output activation and any number of outputs. :func:`to_onnx` registers both
and converts.

Exported networks compute in float32. The activations ONNX export supports
are scikit-learn's (``'identity'``, ``'logistic'``, ``'tanh'``, ``'relu'``);
the output activations are those of :data:`SUPPORTED_OUTPUTS` (a classifier's
are its probabilities: softmax or logistic). The output is the loss's: export
checks that the loss's ``output`` computes the function its
``out_activation`` names, so that the exported model predicts what
``predict`` and ``predict_proba`` do, and refuses the model otherwise.
Dropout only acts while training and is not part of the exported graph.
"""

import numpy as _np
from sklearn.utils.validation import check_is_fitted as _check_is_fitted

from sknet.estimators import _mlp

__all__ = ["SUPPORTED_ACTIVATIONS", "SUPPORTED_OUTPUTS", "register_onnx_converters", "to_onnx"]

#: Hidden activations ONNX export supports (those of skl2onnx's MLP converter).
SUPPORTED_ACTIVATIONS = ("identity", "logistic", "relu", "tanh")
#: Output activations ONNX export supports (a classifier's: logistic or softmax).
SUPPORTED_OUTPUTS = ("exp", "identity", "logistic", "softmax")
_CLASSIFIER_OUTPUTS = ("logistic", "softmax")

# The ONNX operator of each activation, and what it computes in NumPy (float64).
_ONNX_OPERATORS = {
    "exp": "Exp",
    "identity": "Identity",
    "logistic": "Sigmoid",
    "relu": "Relu",
    "softmax": "Softmax",
    "tanh": "Tanh",
}
_NUMPY_OUTPUTS = {
    "exp": _np.exp,
    "identity": lambda Z: Z,
    "logistic": lambda Z: 1.0 / (1.0 + _np.exp(-Z)),
    "softmax": lambda Z: _np.exp(Z - _logsumexp(Z)),
}


def _logsumexp(Z):
    m = Z.max(axis=1, keepdims=True)
    return _np.log(_np.exp(Z - m).sum(axis=1, keepdims=True)) + m


def _check_exportable(model):
    """The model's output activation, once checked exportable (else a ValueError)."""
    if model.activation not in SUPPORTED_ACTIVATIONS:
        raise ValueError(
            f"ONNX export supports activation in {SUPPORTED_ACTIVATIONS} (those of "
            f"skl2onnx's MLP converter); this model uses {model.activation!r}"
        )
    declared = model.out_activation_
    supported = _CLASSIFIER_OUTPUTS if isinstance(model, _mlp.MLPClassifier) else SUPPORTED_OUTPUTS
    if declared not in supported:
        raise ValueError(
            f"ONNX export of a {type(model).__name__} supports the output activations "
            f"{supported}; this model's is {declared!r} (loss={getattr(model, 'loss', None)!r})"
        )
    loss = model.__dict__.get("_loss")
    computed = declared if loss is None else _computed_output(model, loss)
    if computed != declared:
        name = type(loss).__name__
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
    """Which of the exportable outputs ``loss.output`` computes (None: none of them).

    The loss's output is applied to a few random raw outputs on the host and
    compared with each activation, the one the loss names first.
    """
    Z = _np.random.RandomState(0).standard_normal((7, model.n_outputs_)) * 3
    try:
        P = _np.asarray(loss.output(Z.astype(model._np_dtype)), dtype=_np.float64)
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
            and _np.allclose(P, function(Z), rtol=1e-4, atol=1e-6)
        ):
            return name
    return None


def _checked(converter):
    def convert(scope, operator, container):
        _check_exportable(operator.raw_operator)
        return converter(scope, operator, container)

    return convert


def _regressor_output_shape(operator):
    """``[N, n_features] -> [N, n_outputs_]``, float64 for a float64 input, else float32."""
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    kind = (
        DoubleTensorType
        if isinstance(operator.inputs[0].type, DoubleTensorType)
        else FloatTensorType
    )
    n_rows = operator.inputs[0].get_first_dimension()
    operator.outputs[0].set_type(kind([n_rows, operator.raw_operator.n_outputs_]))


def _convert_regressor(scope, operator, container):
    """The regressor's forward pass: dense layers, then the loss's output activation."""
    from skl2onnx.common.data_types import DoubleTensorType
    from skl2onnx.proto import onnx_proto

    model = operator.raw_operator
    output = _check_exportable(model)
    double = isinstance(operator.inputs[0].type, DoubleTensorType)
    proto = onnx_proto.TensorProto.DOUBLE if double else onnx_proto.TensorProto.FLOAT
    dtype = _np.float64 if double else _np.float32

    def node(op_type, inputs, prefix, **attrs):
        result = scope.get_unique_variable_name(prefix)
        name = scope.get_unique_operator_name(op_type)
        container.add_node(op_type, inputs, result, name=name, **attrs)
        return result

    def constant(prefix, array):
        name = scope.get_unique_variable_name(prefix)
        container.add_initializer(name, proto, list(array.shape), array.astype(dtype).ravel())
        return name

    A = node("Cast", operator.inputs[0].full_name, "cast_input", to=proto)
    n_layers = len(model.coefs_)
    for i, (W, b) in enumerate(zip(model.coefs_, model.intercepts_)):
        Z = node("MatMul", [A, constant("coefficient", _np.asarray(W))], "mul_result")
        Z = node("Add", [Z, constant("intercepts", _np.asarray(b).reshape(1, -1))], "add_result")
        activation = output if i == n_layers - 1 else model.activation
        A = node(_ONNX_OPERATORS[activation], Z, "activations")
    container.add_node(
        "Identity",
        A,
        operator.outputs[0].full_name,
        name=scope.get_unique_operator_name("Identity"),
    )


def register_onnx_converters():
    """Register :class:`~sknet.MLPClassifier` and :class:`~sknet.MLPRegressor` with skl2onnx.

    After this call, ``skl2onnx.to_onnx`` and ``skl2onnx.convert_sklearn`` take
    sknet MLPs, alone or inside a Pipeline. Calling it again is harmless.

    Examples
    --------
    A pipeline with an sknet MLP, converted by skl2onnx itself:

    >>> import numpy as np
    >>> from skl2onnx import to_onnx
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sknet import MLPRegressor
    >>> from sknet.onnx import register_onnx_converters
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X[:200].astype(np.float32)
    >>> reg = MLPRegressor(hidden_layer_sizes=(8,), tol=1.0, n_iter_no_change=1,
    ...                    random_state=0, device="cpu")
    >>> pipe = make_pipeline(StandardScaler(), reg).fit(X, y[:200])
    >>> register_onnx_converters()
    >>> onx = to_onnx(pipe, X[:1])
    >>> type(onx).__name__, [output.name for output in onx.graph.output]
    ('ModelProto', ['variable'])
    """
    from skl2onnx import update_registered_converter
    from skl2onnx.common.shape_calculator import calculate_linear_classifier_output_shapes
    from skl2onnx.operator_converters.multilayer_perceptron import (
        convert_sklearn_mlp_classifier,
    )

    update_registered_converter(
        _mlp.MLPClassifier,
        "SknetMLPClassifier",
        calculate_linear_classifier_output_shapes,
        _checked(convert_sklearn_mlp_classifier),
        options={"zipmap": [True, False, "columns"], "nocl": [True, False]},
    )
    update_registered_converter(
        _mlp.MLPRegressor, "SknetMLPRegressor", _regressor_output_shape, _convert_regressor
    )


def to_onnx(estimator, *, target_opset=None):
    """Convert a fitted sknet MLP to an ONNX model.

    Parameters
    ----------
    estimator : MLPClassifier or MLPRegressor
        Fitted, on any device.
    target_opset : int, default=None
        ONNX opset; skl2onnx's default when ``None``.

    Returns
    -------
    onnx_model : onnx.ModelProto
        One float32 input ``'X'`` of shape ``(n, n_features_in_)``. A classifier
        has outputs ``'label'`` and ``'probabilities'`` (an array, not a list of
        dicts); a regressor has ``'variable'``, of shape ``(n, n_outputs_)``.

    Raises
    ------
    ValueError
        If the model's hidden activation is not in :data:`SUPPORTED_ACTIVATIONS`,
        its output activation not in :data:`SUPPORTED_OUTPUTS` (for a classifier,
        logistic or softmax), or its loss's ``output`` does not compute the
        output activation the loss names.

    Examples
    --------
    >>> import numpy as np
    >>> import onnxruntime
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.onnx import to_onnx
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu").fit(X, y)
    >>> model = to_onnx(clf)
    >>> session = onnxruntime.InferenceSession(model.SerializeToString())
    >>> labels, proba = session.run(None, {"X": X.astype("float32")})
    >>> labels.shape, np.allclose(proba, clf.predict_proba(X), atol=1e-5)
    ((200,), True)
    """
    if not isinstance(estimator, (_mlp.MLPClassifier, _mlp.MLPRegressor)):
        raise TypeError(
            f"to_onnx converts MLPClassifier and MLPRegressor, got {type(estimator).__name__}"
        )
    _check_is_fitted(estimator)
    _check_exportable(estimator)
    register_onnx_converters()
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    classifier = isinstance(estimator, _mlp.MLPClassifier)
    options = {id(estimator): {"zipmap": False}} if classifier else None
    return convert_sklearn(
        estimator,
        initial_types=[("X", FloatTensorType([None, estimator.n_features_in_]))],
        options=options,
        target_opset=target_opset,
    )

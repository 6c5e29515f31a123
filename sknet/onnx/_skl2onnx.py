"""skl2onnx's converters for sknet's MLPs, so ``skl2onnx.to_onnx`` takes them in pipelines.

sknet's MLPs hold the attributes scikit-learn's MLPs hold (``coefs_``,
``intercepts_``, ``activation``, ``out_activation_``, ``classes_``), so
skl2onnx's own MLP converter serves the classifiers once registered for
sknet's classes; the regressors have a converter of their own here, for every
output activation and any number of outputs. Through skl2onnx the hidden
activations are scikit-learn's (skl2onnx's MLP converter knows no others);
:func:`sknet.onnx.to_onnx` exports every activation and every network.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from sknet.estimators import _mlp
from sknet.onnx._outputs import check_output

#: the hidden activations of skl2onnx's MLP converter
_SKL2ONNX_ACTIVATIONS = ("identity", "logistic", "relu", "tanh")
# The ONNX operator of each activation.
_ONNX_OPERATORS = {
    "exp": "Exp",
    "identity": "Identity",
    "logistic": "Sigmoid",
    "relu": "Relu",
    "softmax": "Softmax",
    "tanh": "Tanh",
}


def _check_exportable(model):
    """The model's output activation, once checked exportable through skl2onnx."""
    check_is_fitted(model)
    if model.activation not in _SKL2ONNX_ACTIVATIONS:
        raise ValueError(
            f"skl2onnx's MLP converter supports activation in {_SKL2ONNX_ACTIVATIONS}; "
            f"this model uses {model.activation!r} (sknet.onnx.to_onnx exports it)"
        )
    return check_output(model)


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
    dtype = np.float64 if double else np.float32

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
        Z = node("MatMul", [A, constant("coefficient", np.asarray(W))], "mul_result")
        Z = node("Add", [Z, constant("intercepts", np.asarray(b).reshape(1, -1))], "add_result")
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

"""skl2onnx's converters for sknet's estimators, so ``skl2onnx.to_onnx`` takes them in pipelines.

:func:`register_onnx_converters` registers every network estimator and the
FeatureExtractor with skl2onnx. Each converter writes, into skl2onnx's
graph, the nodes :func:`~sknet.onnx.to_onnx` writes (the same converters of
layers, users' registered ones included), from the tensor skl2onnx hands
it: flat rows, reshaped to ``input_shape_``, computed in the input's float
type. A tabular estimator, or a FeatureExtractor over one, applies its
column plan first, by the function ``to_onnx`` applies it with
(``sknet.onnx._tabular.encode_table``), to the inputs skl2onnx is given:
the table's columns, named as ``to_onnx`` names them, and the graph
computes in the float type of the first. A classifier's outputs are the
label and probability tensors of skl2onnx's classifiers (a ZipMap follows
unless ``zipmap=False``).
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from sknet.estimators import (
    ConvNetClassifier,
    ConvNetRegressor,
    FeatureExtractor,
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    RNNClassifier,
    RNNRegressor,
    TabularClassifier,
    TabularRegressor,
)
from sknet.onnx._builder import MIN_OPSET, GraphBuilder
from sknet.onnx._export import network_outputs, predictions
from sknet.onnx._outputs import check_output, classifier_outputs, is_classifier
from sknet.onnx._tabular import GivenInput, given_table, plan_of

_CLASSIFIERS = (
    ConvNetClassifier,
    MLPClassifier,
    NeuralNetClassifier,
    RNNClassifier,
    TabularClassifier,
)
_REGRESSORS = (ConvNetRegressor, MLPRegressor, NeuralNetRegressor, RNNRegressor, TabularRegressor)


class _ScopeNames:
    """The builder's names, made unique by skl2onnx's scope."""

    def __init__(self, scope):
        self.scope = scope
        self.used = set()

    def unique(self, hint):
        return self.scope.get_unique_variable_name(hint)


def _tensor_kinds():
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    return {
        "b": BooleanTensorType,
        "f8": DoubleTensorType,
        "f4": FloatTensorType,
        "i": Int64TensorType,
        "O": StringTensorType,
    }


def _float_type(operator):
    """The dtype the graph computes in: its first input's, as skl2onnx's converters guess it."""
    kinds = _tensor_kinds()
    double = isinstance(operator.inputs[0].type, kinds["f8"])
    return (np.float64, kinds["f8"]) if double else (np.float32, kinds["f4"])


def _network(operator):
    model = operator.raw_operator
    return model.estimator_ if isinstance(model, FeatureExtractor) else model


def _output_shapes(operator):
    model, estimator = operator.raw_operator, _network(operator)
    n = operator.inputs[0].get_first_dimension()
    _, float_type = _float_type(operator)
    if isinstance(model, FeatureExtractor):
        operator.outputs[0].set_type(float_type([n, model._n_features_out]))
    elif not is_classifier(estimator):
        operator.outputs[0].set_type(float_type([n, estimator.n_outputs_]))
    else:
        kinds, classes = _tensor_kinds(), np.asarray(estimator.classes_)
        n_classes = len(classes)
        multilabel = estimator._label_binarizer.y_type_ == "multilabel-indicator"
        if multilabel:  # a 0/1 indicator matrix
            operator.outputs[0].set_type(kinds["i"]([n, n_classes]))
        elif _nocl(operator.scope_inst, model):  # class indices
            operator.outputs[0].set_type(kinds["i"]([n]))
        else:
            kind = {"i": "i", "u": "i", "b": "b", "f": "f8"}.get(classes.dtype.kind, "O")
            operator.outputs[0].set_type(kinds[kind]([n]))
        operator.outputs[1].set_type(float_type([n, n_classes]))


def _convert(scope, operator, container):
    """The estimator's prediction, into skl2onnx's container."""
    model, estimator = operator.raw_operator, _network(operator)
    check_is_fitted(model)
    opset = container.target_opset
    if opset is None or opset < MIN_OPSET:
        raise ValueError(
            f"sknet's ONNX converters write opset {MIN_OPSET} or later; skl2onnx was asked "
            f"for target_opset={opset!r}"
        )
    dtype, _ = _float_type(operator)
    builder = GraphBuilder(dtype, opset)
    builder._names = _ScopeNames(scope)
    network = estimator.network_
    X = _network_input(builder, operator, estimator)
    outputs = [o.full_name for o in operator.outputs]
    if isinstance(model, FeatureExtractor):
        Z = network_outputs(builder, network, X, stop=model._stop)
        results = [builder.node("Flatten", [Z], axis=1)]
    else:
        output = check_output(estimator)
        P = predictions(builder, estimator, output, network_outputs(builder, network, X))
        results = [P]
        if is_classifier(estimator):
            labels, proba = classifier_outputs(builder, estimator, P)
            multilabel = estimator._label_binarizer.y_type_ == "multilabel-indicator"
            if _nocl(container, model) and not multilabel:
                labels = _class_index(builder, estimator, P)
            results = [labels, proba]
    _copy_into(builder, container)
    for source, target in zip(results, outputs):
        name = scope.get_unique_operator_name("Identity")
        container.add_node("Identity", [source], [target], name=name)


def _network_input(builder, operator, estimator):
    """The tensor the network's first layer takes, from the inputs skl2onnx gives."""
    encoder = plan_of(estimator)
    if encoder is not None:  # the table's columns, through its column plan
        given = [_given(variable) for variable in operator.inputs]
        return given_table(builder, encoder, given, type(operator.raw_operator).__name__)
    network = estimator.network_
    X = operator.inputs[0].full_name
    shape = tuple(network.input_shape)
    if len(shape) > 1 and not getattr(network.layers[0], "takes_token_ids", False):
        X = builder.reshape(X, (-1, *shape))  # flat rows, as predict reshapes them
    return X


def _given(variable):
    """A skl2onnx variable as the column plan takes it (see GivenInput)."""
    shape = list(getattr(variable.type, "shape", None) or [])
    width = shape[1] if len(shape) == 2 and isinstance(shape[1], int) else None
    element = variable.type.to_onnx_type().tensor_type.elem_type
    return GivenInput(variable.raw_name, variable.full_name, element, width, repr(variable.type))


def _nocl(options, model):
    """skl2onnx's ``nocl`` option: class indices instead of the labels."""
    return bool(options.get_options(model, dict(nocl=False))["nocl"])


def _class_index(builder, estimator, P):
    """The index of each sample's class (``nocl``: no class labels in the graph)."""
    if estimator.n_outputs_ == 1:
        winner = builder.cast(builder.node("Greater", [P, builder.constant(0.5)]), np.int64)
        return builder.reshape(winner, [-1])
    return builder.node("ArgMax", [P], axis=1, keepdims=0)


def _copy_into(builder, container):
    import onnx

    for node in builder.nodes:
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        container.add_node(
            node.op_type,
            list(node.input),
            list(node.output),
            op_domain=node.domain,
            op_version=3 if node.domain == "ai.onnx.ml" else None,
            name=node.name,
            **attributes,
        )
    container.initializers.extend(builder.initializers)


def register_onnx_converters():
    """Register sknet's network estimators and FeatureExtractor with skl2onnx.

    After this call, ``skl2onnx.to_onnx`` and ``skl2onnx.convert_sklearn``
    take sknet's MLP, ConvNet, RNN, NeuralNet and Tabular estimators and
    FeatureExtractor, alone or inside a Pipeline, writing the graph
    :func:`~sknet.onnx.to_onnx` writes (from flat rows, the type skl2onnx
    gives them: float32 or float64). A tabular estimator, or a
    FeatureExtractor over one, applies its column plan to the initial
    types: the inputs ``to_onnx`` gives its graph (one ``(N, 1)`` per column,
    named after it, numbers of any type or strings, then a boolean
    ``'missingindicator_<column>'`` per column of strings), or one tensor of
    every column in order when all are numbers; other inputs are refused.
    Classifiers take skl2onnx's ``zipmap`` and ``nocl`` (class indices for
    labels) options. Calling it again is harmless.

    Examples
    --------
    A pipeline with an sknet ConvNet, converted by skl2onnx itself:

    >>> import numpy as np
    >>> from skl2onnx import to_onnx
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sknet import ConvNetRegressor
    >>> from sknet.onnx import register_onnx_converters
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X[:200].astype(np.float32)
    >>> reg = ConvNetRegressor(conv_filters=(4,), dense_units=(8,), tol=1e3,
    ...                        n_iter_no_change=1, random_state=0, device="cpu")
    >>> pipe = make_pipeline(StandardScaler(), reg).fit(X, y[:200])
    >>> register_onnx_converters()
    >>> onx = to_onnx(pipe, X[:1])
    >>> type(onx).__name__, [output.name for output in onx.graph.output]
    ('ModelProto', ['variable'])
    """
    from skl2onnx import update_registered_converter

    for cls in _CLASSIFIERS:
        update_registered_converter(
            cls,
            f"Sknet{cls.__name__}",
            _output_shapes,
            _convert,
            options={"zipmap": [True, False, "columns"], "nocl": [True, False]},
        )
    for cls in (*_REGRESSORS, FeatureExtractor):
        update_registered_converter(cls, f"Sknet{cls.__name__}", _output_shapes, _convert)

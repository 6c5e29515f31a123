"""``to_onnx``: a fitted sknet estimator as an ONNX model.

The graph is the estimator's prediction: its input as ``predict`` takes it
(rows, or samples reshaped to ``input_shape_``; token ids as int64), the
padding mask ``padding_value`` gives, every layer of ``network_`` by its
converter (:mod:`sknet.onnx._registry`), then the loss's output and, for a
classifier, the labels (:mod:`sknet.onnx._outputs`).
"""

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from sknet._version import __version__
from sknet.estimators._base import BaseNeuralNetwork
from sknet.estimators._features import FeatureExtractor
from sknet.onnx._builder import DEFAULT_OPSET, MIN_OPSET, GraphBuilder, tensor_type
from sknet.onnx._outputs import (
    check_output,
    classifier_outputs,
    is_classifier,
    output_activation,
)
from sknet.onnx._tabular import plan_of, table_inputs

#: the opsets of the other domains a graph may use (ai.onnx.ml's LabelEncoder-2)
_DOMAIN_OPSETS = {"ai.onnx.ml": 3}


def _onnx():
    import onnx

    return onnx


def check_opset(target_opset):
    """``target_opset`` as an int the converters write (``None``: :data:`DEFAULT_OPSET`)."""
    if target_opset is None:
        return DEFAULT_OPSET
    highest = _onnx().defs.onnx_opset_version()
    if (
        not isinstance(target_opset, numbers.Integral)
        or isinstance(target_opset, bool)
        or not MIN_OPSET <= target_opset <= highest
    ):
        raise ValueError(
            f"target_opset must be an int from {MIN_OPSET} to {highest} (the installed "
            f"onnx's newest), got {target_opset!r}"
        )
    return int(target_opset)


def check_dtype(estimator, dtype):
    if dtype is None:
        return estimator._np_dtype
    if (
        isinstance(dtype, str)
        and dtype in ("float32", "float64")
        or dtype
        in (
            np.float32,
            np.float64,
        )
    ):
        return np.dtype(dtype)
    raise ValueError(f"dtype must be None, 'float32' or 'float64', got {dtype!r}")


def check_estimator(estimator):
    if not isinstance(estimator, BaseNeuralNetwork):
        raise TypeError(
            "to_onnx converts fitted sknet network estimators (MLP*, ConvNet*, RNN*, "
            f"NeuralNet*, Tabular*) and FeatureExtractor, got {type(estimator).__name__}"
        )
    check_is_fitted(estimator)


def _value_info(name, dtype, shape):
    element = _onnx().TensorProto.STRING if np.dtype(dtype).kind in "OUS" else tensor_type(dtype)
    return _onnx().helper.make_tensor_value_info(name, element, shape)


def network_input(builder, estimator, flat_input):
    """The graph's input ``'X'``: its value info, and the tensor the first layer takes."""
    builder.reserve("X")
    network = estimator.network_
    shape = tuple(network.input_shape)
    if getattr(network.layers[0], "takes_token_ids", False):
        return _value_info("X", np.int64, ["N", *shape]), "X"
    if len(shape) == 1 or not flat_input:
        return _value_info("X", builder.dtype, ["N", *shape]), "X"
    # flat rows (n, n_features_in_), reshaped to samples as predict reshapes them
    info = _value_info("X", builder.dtype, ["N", int(np.prod(shape))])
    return info, builder.reshape("X", (-1, *shape))


def input_mask(builder, network, X):
    """The padding mask of the network's input ``X`` (true on real steps) and its ndim."""
    value = network.padding_value
    if value is None:
        return None, 2
    if getattr(network.layers[0], "takes_token_ids", False):
        if float(value) != int(value):  # no id equals it: every step is real
            return None, 2
        pad = builder.constant(np.array(int(value), np.int64), "padding_value")
        return builder.node("Not", [builder.node("Equal", [X, pad])], "mask"), 2
    ndim = len(network.input_shape)  # the mask drops the features axis
    # in the input's dtype, whatever the number's (0 is an int: an int64 constant
    # beside a float input is a model ONNX Runtime refuses to load)
    pad = builder.constant(np.array(value, dtype=builder.dtype), "padding_value")
    differs = builder.node("Not", [builder.node("Equal", [X, pad])])
    return builder.any(differs, [ndim]), ndim


def network_outputs(builder, network, X, stop=None):
    """The raw outputs of the network's layers (``layers[:stop]``) on the tensor ``X``."""
    mask, ndim = input_mask(builder, network, X)
    with builder.masked(mask, ndim):
        for layer in network.layers[:stop]:
            X = builder.convert(layer, X)
    return X


def to_onnx(estimator, *, target_opset=None, dtype=None, flat_input=False):
    """Convert a fitted sknet estimator to an ONNX model.

    Every stock layer and container has a converter (``Lambda`` excepted: its
    function is Python code); a layer of your own gets one with
    :func:`~sknet.onnx.register_converter`. The model computes what ``predict`` and
    ``predict_proba`` compute: Dropout is the identity, BatchNorm uses its
    running statistics, recurrent layers carry their state over padded steps
    (``padding_value``, compared in the input's dtype) and the other layers
    that take the padding mask see padded steps as zeros, an ensemble
    averages its members' predictions. Where ``predict`` refuses its input
    the graph cannot: an ``Embedding``'s token id outside ``[0, input_dim)``
    gives the zero vector (on every runtime, never another token's row, as
    ONNX's ``Gather`` would read a negative id from the end of the table);
    check the ids before the session where they must be refused.

    Parameters
    ----------
    estimator : fitted sknet estimator
        :class:`~sknet.MLPClassifier`, :class:`~sknet.ConvNetClassifier`,
        :class:`~sknet.RNNClassifier`, :class:`~sknet.NeuralNetClassifier`
        and their regressors, on any device, or a
        :class:`~sknet.FeatureExtractor` (its features as ``'variable'``).
    target_opset : int, default=None
        The ONNX opset of the model, from 17; ``None``:
        :data:`~sknet.onnx.DEFAULT_OPSET` (17).
    dtype : {'float32', 'float64'}, default=None
        What the graph computes in; ``None``: the model's ``dtype``.
    flat_input : bool, default=False
        Whether ``'X'`` takes samples that are not flat (images, sequences)
        as flat rows ``(n, n_features_in_)``, reshaped to ``input_shape_``
        in the graph (a ConvNet fitted on flat rows, say). Ignored for flat
        samples and token ids.

    Returns
    -------
    onnx_model : onnx.ModelProto
        One input ``'X'``: samples ``(n, *input_shape_)`` as the first layer
        takes them (rows ``(n, n_features_in_)`` for flat samples, or with
        ``flat_input``), floats in ``dtype``; token ids as int64 ``(n,
        timesteps)``. A classifier has outputs ``'label'`` (the
        labels, or a 0/1 int64 indicator matrix for multilabel targets)
        and ``'probabilities'`` ``(n, n_classes)``, as skl2onnx writes
        scikit-learn's classifiers with ``zipmap=False``; a regressor has
        ``'variable'``, of shape ``(n, n_outputs_)``, a FeatureExtractor
        ``'variable'`` of its features, one flat row per sample. A tabular
        estimator (or a FeatureExtractor over one) takes its table as one
        input per column, then a boolean ``'missingindicator_<column>'``
        per column of strings, true where it is missing (see the user
        guide).

    Raises
    ------
    TypeError
        If the estimator is not an sknet network estimator, or a layer has
        no converter (the message says what to register).
    ValueError
        If the model's output activation is not in :data:`~sknet.onnx.SUPPORTED_OUTPUTS`
        (for a classifier, logistic or softmax), or its loss's ``output``
        does not compute the output activation the loss names.

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
    if not isinstance(flat_input, (bool, np.bool_)):
        raise ValueError(f"flat_input must be True or False, got {flat_input!r}")
    if isinstance(estimator, FeatureExtractor):
        return _feature_extractor(estimator, target_opset, dtype, flat_input)
    check_estimator(estimator)
    builder = GraphBuilder(check_dtype(estimator, dtype), check_opset(target_opset))
    outputs = ("label", "probabilities") if is_classifier(estimator) else ("variable",)
    for name in outputs:  # the model's own names
        builder.reserve(name)
    output = check_output(estimator)
    network = estimator.network_
    infos, X = model_inputs(builder, estimator, flat_input)
    P = predictions(builder, estimator, output, network_outputs(builder, network, X))
    outputs = _graph_outputs(builder, estimator, P)
    return make_model(builder, infos, outputs, type(estimator).__name__)


def predictions(builder, estimator, output, Z):
    """The loss's ``output`` of the network's raw outputs ``Z``, targets mapped back.

    What ``predict_proba`` (a classifier) or ``predict`` (a regressor) returns.
    """
    members = getattr(estimator.network_.layers[-1], "n_members_", None) is not None
    P = output_activation(builder, output, Z, members)
    if hasattr(estimator, "target_scale_"):  # standardized targets, mapped back
        P = builder.node("Mul", [P, builder.constant(estimator.target_scale_, "target_scale")])
        P = builder.node("Add", [P, builder.constant(estimator.target_mean_, "target_mean")])
    return P


def model_inputs(builder, estimator, flat_input):
    """The graph's inputs (value infos) and the tensor the network's first layer takes."""
    encoder = plan_of(estimator)
    if encoder is not None:  # a table's columns, through its column plan
        return table_inputs(builder, encoder)
    info, X = network_input(builder, estimator, flat_input)
    return [info], X


def _feature_extractor(extractor, target_opset, dtype, flat_input):
    """A FeatureExtractor's features: its layer's outputs, flat, as ``'variable'``."""
    check_is_fitted(extractor)
    estimator = extractor.estimator_
    check_estimator(estimator)
    builder = GraphBuilder(check_dtype(estimator, dtype), check_opset(target_opset))
    builder.reserve("variable")
    infos, X = model_inputs(builder, estimator, flat_input)
    Z = network_outputs(builder, estimator.network_, X, stop=extractor._stop)
    builder.nodes.append(_identity(builder.node("Flatten", [Z], axis=1), "variable"))
    width = extractor._n_features_out
    outputs = [_value_info("variable", builder.dtype, ["N", width])]
    return make_model(builder, infos, outputs, type(extractor).__name__)


def _graph_outputs(builder, estimator, P):
    if not is_classifier(estimator):
        builder.nodes.append(_identity(P, "variable"))
        return [_value_info("variable", builder.dtype, ["N", estimator.n_outputs_])]
    labels, proba = classifier_outputs(builder, estimator, P)
    builder.nodes += [_identity(labels, "label"), _identity(proba, "probabilities")]
    n_classes = len(estimator.classes_)
    multilabel = estimator._label_binarizer.y_type_ == "multilabel-indicator"
    classes = np.asarray(estimator.classes_)
    label_dtype = np.int64 if multilabel or classes.dtype.kind in "iu" else classes.dtype
    return [
        _value_info("label", label_dtype, ["N", n_classes] if multilabel else ["N"]),
        _value_info("probabilities", builder.dtype, ["N", n_classes]),
    ]


def _identity(source, name):
    return _onnx().helper.make_node("Identity", [source], [name], name=f"{name}_output")


def make_model(builder, inputs, outputs, name):
    """The checked ONNX model of the builder's graph."""
    onnx = _onnx()
    graph = onnx.helper.make_graph(
        builder.nodes, f"sknet_{name}", inputs, outputs, initializer=builder.initializers
    )
    opsets = [onnx.helper.make_opsetid("", builder.opset)]
    opsets += [
        onnx.helper.make_opsetid(domain, _DOMAIN_OPSETS[domain]) for domain in builder.domains
    ]
    model = onnx.helper.make_model(
        graph, opset_imports=opsets, producer_name="sknet", producer_version=__version__
    )
    model.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    onnx.checker.check_model(model)
    return model

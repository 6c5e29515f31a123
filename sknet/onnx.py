"""ONNX export of the MLP estimators, through skl2onnx.

Needs the ``onnx`` extra (``pip install "sknet-nn[onnx]"``: skl2onnx and
onnxruntime). sknet's MLPs hold the attributes scikit-learn's MLPs hold
(``coefs_``, ``intercepts_``, ``activation``, ``out_activation_``, ``classes_``),
so skl2onnx's own MLP converters serve them once registered for sknet's
classes; :func:`to_onnx` does that and converts.

Exported networks compute in float32. The activations ONNX export supports
are scikit-learn's (``'identity'``, ``'logistic'``, ``'tanh'``, ``'relu'``), with
softmax, logistic or identity outputs; dropout only acts while training and
is not part of the exported graph.
"""

from sklearn.utils.validation import check_is_fitted

from sknet.estimators._mlp import MLPClassifier, MLPRegressor

__all__ = ["SUPPORTED_ACTIVATIONS", "register_onnx_converters", "to_onnx"]

#: Hidden activations skl2onnx's MLP converter knows.
SUPPORTED_ACTIVATIONS = ("identity", "logistic", "relu", "tanh")
_SUPPORTED_OUTPUTS = ("identity", "logistic", "softmax")


def _check_exportable(model):
    if model.activation not in SUPPORTED_ACTIVATIONS:
        raise ValueError(
            f"ONNX export supports activation in {SUPPORTED_ACTIVATIONS} (those of "
            f"skl2onnx's MLP converter); this model uses {model.activation!r}"
        )
    if model.out_activation_ not in _SUPPORTED_OUTPUTS:
        raise ValueError(
            f"ONNX export supports the output activations {_SUPPORTED_OUTPUTS}; this "
            f"model's is {model.out_activation_!r} (loss={getattr(model, 'loss', None)!r})"
        )


def _checked(converter):
    def convert(scope, operator, container):
        _check_exportable(operator.raw_operator)
        return converter(scope, operator, container)

    return convert


def register_onnx_converters():
    """Register :class:`MLPClassifier` and :class:`MLPRegressor` with skl2onnx.

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
    from skl2onnx.common.shape_calculator import (
        calculate_linear_classifier_output_shapes,
        calculate_linear_regressor_output_shapes,
    )
    from skl2onnx.operator_converters.multilayer_perceptron import (
        convert_sklearn_mlp_classifier,
        convert_sklearn_mlp_regressor,
    )

    update_registered_converter(
        MLPClassifier,
        "SknetMLPClassifier",
        calculate_linear_classifier_output_shapes,
        _checked(convert_sklearn_mlp_classifier),
        options={"zipmap": [True, False, "columns"], "nocl": [True, False]},
    )
    update_registered_converter(
        MLPRegressor,
        "SknetMLPRegressor",
        calculate_linear_regressor_output_shapes,
        _checked(convert_sklearn_mlp_regressor),
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
        dicts); a regressor has ``'variable'``.

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
    if not isinstance(estimator, (MLPClassifier, MLPRegressor)):
        raise TypeError(
            f"to_onnx converts MLPClassifier and MLPRegressor, got {type(estimator).__name__}"
        )
    check_is_fitted(estimator)
    _check_exportable(estimator)
    register_onnx_converters()
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    options = {id(estimator): {"zipmap": False}} if isinstance(estimator, MLPClassifier) else None
    return convert_sklearn(
        estimator,
        initial_types=[("X", FloatTensorType([None, estimator.n_features_in_]))],
        options=options,
        target_opset=target_opset,
    )

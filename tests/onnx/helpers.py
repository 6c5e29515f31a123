"""What the ONNX tests share: running a model in onnxruntime, comparing with predict."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

rt = pytest.importorskip("onnxruntime", reason="needs onnxruntime (the onnx extra)")
pytest.importorskip("onnx", reason="needs onnx (the onnx extra)")

from sknet.onnx import to_onnx  # noqa: E402

#: warnings of short fits and of onnx's internals
FILTERS = (
    "ignore::sklearn.exceptions.ConvergenceWarning",
    "ignore::DeprecationWarning",
)


def run(onnx_model, X, dtype=np.float32):
    """The outputs of ``onnx_model`` on ``X`` (cast to ``dtype``), by onnxruntime."""
    session = rt.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    X = np.asarray(X)
    return session.run(None, {"X": X if X.dtype.kind in "iu" else X.astype(dtype)})


def assert_round_trip(estimator, X, *, atol=None, **kwargs):
    """The exported model predicts what ``estimator`` predicts on ``X``; returns the model.

    To ``atol``: 1e-5 in float32, 1e-10 in float64 (unless given).
    """
    model = to_onnx(estimator, **kwargs)
    dtype = np.dtype(kwargs.get("dtype") or estimator.dtype)
    if atol is None:
        atol = 1e-5 if dtype == np.float32 else 1e-10
    outputs = run(model, X, dtype)
    if hasattr(estimator, "predict_proba"):
        labels, proba = outputs
        assert proba.dtype == dtype
        assert_allclose(proba, estimator.predict_proba(X), atol=atol, rtol=0)
        assert_array_equal(labels, estimator.predict(X))
    else:
        (pred,) = outputs
        assert pred.dtype == dtype
        expected = estimator.predict(X)
        assert_allclose(pred.reshape(expected.shape), expected, atol=atol, rtol=atol)
    return model


def fitted(layers, X, y=None, *, classifier=False, max_iter=3, **params):
    """A NeuralNet estimator with ``layers`` fitted a few epochs on ``X``."""
    from sknet import NeuralNetClassifier, NeuralNetRegressor

    rng = np.random.RandomState(0)
    if y is None:
        y = rng.randint(0, 3, len(X)) if classifier else rng.standard_normal((len(X), 2))
    cls = NeuralNetClassifier if classifier else NeuralNetRegressor
    params = {"random_state": 0, "device": "cpu", "max_iter": max_iter, **params}
    return cls(layers, **params).fit(X, y)


def op_types(model):
    """The operators of a model's graph (not of its subgraphs)."""
    return {node.op_type for node in model.graph.node}

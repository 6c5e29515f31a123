"""skl2onnx's converters of sknet's MLPs (sknet/onnx/_skl2onnx.py): pipelines by skl2onnx."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from tests.onnx.helpers import FILTERS, run

pytest.importorskip("skl2onnx", reason="needs skl2onnx (the onnx extra)")

from sknet import MLPClassifier, MLPRegressor  # noqa: E402
from sknet.onnx import register_onnx_converters  # noqa: E402
from tests.onnx.test_outputs import Tempered, UnnamedSigmoid  # noqa: E402

pytestmark = pytest.mark.filterwarnings(*FILTERS)


def test_skl2onnx_takes_registered_models_in_a_pipeline(digits):
    from skl2onnx import to_onnx as skl2onnx_to_onnx
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = digits
    register_onnx_converters()
    pipe = make_pipeline(StandardScaler(), MLPClassifier(max_iter=5, device="cpu")).fit(X, y)
    model = skl2onnx_to_onnx(
        pipe, X[:1].astype(np.float32), options={id(pipe[-1]): {"zipmap": False}}
    )
    labels, _ = run(model, X)
    assert_array_equal(labels, pipe.predict(X))


def test_a_regressor_pipeline(digits):
    from skl2onnx import to_onnx as skl2onnx_to_onnx
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = digits
    register_onnx_converters()
    reg = MLPRegressor(hidden_layer_sizes=(8,), max_iter=5, random_state=0, device="cpu")
    pipe = make_pipeline(StandardScaler(), reg).fit(X, y / 9.0)
    (pred,) = run(skl2onnx_to_onnx(pipe, X[:1].astype(np.float32)), X)
    np.testing.assert_allclose(pred.ravel(), pipe.predict(X), rtol=1e-4, atol=1e-5)


def test_an_activation_skl2onnx_lacks_is_refused_through_it(digits):
    from skl2onnx import to_onnx as skl2onnx_to_onnx

    X, y = digits
    clf = MLPClassifier(activation="gelu", max_iter=2, device="cpu").fit(X, y)
    register_onnx_converters()
    with pytest.raises(ValueError, match=r"skl2onnx's MLP converter supports activation in"):
        skl2onnx_to_onnx(clf, X[:1].astype(np.float32))


@pytest.mark.parametrize(
    "loss, message",
    [
        (UnnamedSigmoid(), r"names its output activation 'identity', but its output computes"),
        (Tempered(), r"output computes another function"),
    ],
)
def test_an_output_the_export_would_not_compute_is_refused_alike(loss, message, digits):
    from skl2onnx import to_onnx as skl2onnx_to_onnx

    X, y = digits
    if isinstance(loss, Tempered):
        model = MLPClassifier(loss=loss, max_iter=2, device="cpu").fit(X, y)
    else:
        model = MLPRegressor(loss=loss, max_iter=2, device="cpu").fit(X, y / 9.0)
    register_onnx_converters()
    with pytest.raises(ValueError, match=message):
        skl2onnx_to_onnx(model, X[:1].astype(np.float32))

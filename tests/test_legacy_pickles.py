"""Models pickled before the package layout moved still load and predict as they did.

``tests/fixtures/legacy_models.joblib`` and ``legacy_mlp.skops`` were written
by ``tests/fixtures/write_legacy_models.py`` when the estimators, the network,
the optimizers and the initializer lived in flat private modules
(``sknet._mlp``, ``sknet._network``, ...); the pickles name those modules.
"""

from pathlib import Path

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

import sknet

FIXTURES = Path(__file__).parent / "fixtures"


def assert_predicts_as_before(got, expected):
    """Equal to rounding: another NumPy or BLAS may round a float32 product differently."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
    elif got.dtype == np.float64:
        assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    else:
        assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def legacy():
    return joblib.load(FIXTURES / "legacy_models.joblib")


MODELS = [
    "mlp_classifier",
    "mlp_classifier_sgd_f64",
    "mlp_regressor",
    "convnet",
    "rnn_classifier",
    "rnn_regressor",
    "feature_extractor",
]


@pytest.mark.parametrize("name", MODELS)
def test_legacy_model_predicts_what_it_predicted(legacy, name):
    model, X = legacy["models"][name], legacy["X"]
    if hasattr(model, "predict_proba"):
        got = model.predict_proba(X)
    elif hasattr(model, "transform"):
        got = model.transform(X)
    else:
        got = model.predict(X)
    assert_predicts_as_before(got, legacy["outputs"][name])


def test_legacy_string_labels_round_trip(legacy):
    model = legacy["models"]["mlp_classifier_sgd_f64"]
    assert model.predict(legacy["X"]).dtype.kind == "U"


def test_legacy_model_keeps_training(legacy):
    model = legacy["models"]["mlp_regressor"]
    X = legacy["X"]
    y = model.predict(X) + 0.1
    before = len(model.loss_curve_)
    with pytest.warns(ConvergenceWarning):
        model.set_params(warm_start=True, max_iter=1).fit(X, y)
    assert len(model.loss_curve_) == before + 1


def test_legacy_skops_file_loads_with_the_published_trusted_types(legacy):
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    model = sio.load(FIXTURES / "legacy_mlp.skops", trusted=sknet.TRUSTED_TYPES)
    X = legacy["X"]
    assert_predicts_as_before(model.predict_proba(X), legacy["outputs"]["mlp_classifier"])
    assert isinstance(model.coefs_[0], np.ndarray)

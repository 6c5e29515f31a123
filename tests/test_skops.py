"""Secure persistence with skops: round trips and the trusted-types list."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import sknet
from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor
from sknet.callbacks import EarlyStopping, TerminateOnNaN
from tests.conftest import needs_gpu

sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def models():
    return [
        MLPClassifier(
            hidden_layer_sizes=(16, 8),
            dropout=0.1,
            max_iter=3,
            random_state=0,
            callbacks=[EarlyStopping("train_loss"), TerminateOnNaN()],
        ),
        MLPClassifier(solver="sgd", activation="gelu", max_iter=2, random_state=0),
        MLPRegressor(max_iter=3, random_state=0),
        MLPRegressor(loss="poisson", solver="lbfgs", max_iter=5, random_state=0),
        ConvNetClassifier(
            conv_filters=(4,),
            dense_units=(8,),
            batch_norm=True,
            dropout=0.2,
            max_iter=2,
            random_state=0,
        ),
    ]


def fitted(model, digits, device="cpu"):
    X, y = digits
    target = y if not isinstance(model, MLPRegressor) else y / 9.0
    return model.set_params(device=device).fit(X, target)


@pytest.mark.parametrize("model", models(), ids=lambda m: type(m).__name__)
def test_round_trip_with_the_published_trusted_types(model, digits, tmp_path):
    X, _ = digits
    model = fitted(model, digits)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert untrusted and all(name.startswith("sknet.") for name in untrusted)
    assert set(untrusted) <= set(sknet.TRUSTED_TYPES)
    loaded = sio.load(path, trusted=sknet.TRUSTED_TYPES)
    assert_array_equal(loaded.predict(X), model.predict(X))
    if hasattr(model, "predict_proba"):
        assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_loading_without_trust_is_refused(digits):
    data = sio.dumps(fitted(MLPClassifier(max_iter=2), digits))
    with pytest.raises(Exception, match="Untrusted types"):
        sio.loads(data)


def test_a_cuda_model_round_trips_on_the_cpu(digits, monkeypatch):
    """What a fit on a GPU records (device_), loaded where there is none."""
    import sys

    import sknet.backend as backend_module

    X, _ = digits
    model = fitted(MLPClassifier(max_iter=2, random_state=0), digits)
    model.device_ = "cuda:0"
    data = sio.dumps(model)
    monkeypatch.setitem(sys.modules, "cupy", None)
    backend_module.cuda_device_count.cache_clear()
    try:
        with pytest.warns(UserWarning, match="runs on the CPU"):
            loaded = sio.loads(data, trusted=sknet.TRUSTED_TYPES)
        proba = loaded.predict_proba(X)
    finally:
        backend_module.cuda_device_count.cache_clear()
    np.testing.assert_allclose(proba, model.predict_proba(X))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("model", models(), ids=lambda m: type(m).__name__)
def test_round_trip_of_a_model_fitted_on_the_gpu(model, digits):
    X, _ = digits
    model = fitted(model, digits, device="cuda")
    loaded = sio.loads(sio.dumps(model), trusted=sknet.TRUSTED_TYPES)
    np.testing.assert_allclose(
        loaded.predict_proba(X) if hasattr(model, "predict_proba") else loaded.predict(X),
        model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X),
        atol=1e-5,
    )

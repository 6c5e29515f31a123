"""Persistence: pickle and joblib round trips, NumPy-only state, versions, CUDA models on CPU."""

import io
import pickle
import sys
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import make_regression

import sknet
import sknet.backend as backend_module
from sknet import MLPClassifier, MLPRegressor
from sknet.exceptions import SknetVersionWarning

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def fitted(digits):
    X, y = digits
    return MLPClassifier(
        hidden_layer_sizes=(32, 16), dropout=0.1, max_iter=5, random_state=0, device="cpu"
    ).fit(X, y)


class RecordingUnpickler(pickle.Unpickler):
    """Unpickler that records every global the pickle refers to."""

    def __init__(self, file):
        super().__init__(file)
        self.globals = set()

    def find_class(self, module, name):
        self.globals.add((module, name))
        return super().find_class(module, name)


def referenced_globals(obj):
    unpickler = RecordingUnpickler(io.BytesIO(pickle.dumps(obj)))
    unpickler.load()
    return unpickler.globals


def test_pickle_round_trip_gives_identical_predictions(fitted, digits):
    X, _ = digits
    restored = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    assert_array_equal(restored.predict(X), fitted.predict(X))


def test_joblib_round_trip_gives_identical_predictions(fitted, digits, tmp_path):
    X, _ = digits
    path = tmp_path / "model.joblib"
    joblib.dump(fitted, path)
    restored = joblib.load(path)
    assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    mapped = joblib.load(path, mmap_mode="r")  # read-only arrays still predict
    assert_array_equal(mapped.predict_proba(X), fitted.predict_proba(X))


def test_regressor_round_trip(tmp_path):
    X, y = make_regression(n_samples=100, n_features=4, random_state=0)
    reg = MLPRegressor(max_iter=5, random_state=0, device="cpu").fit(X, y)
    joblib.dump(reg, tmp_path / "reg.joblib")
    assert_array_equal(joblib.load(tmp_path / "reg.joblib").predict(X), reg.predict(X))


def test_pickle_holds_only_numpy_and_plain_python(fitted):
    modules = {module.split(".")[0] for module, _ in referenced_globals(fitted)}
    assert modules <= {"numpy", "sknet", "sklearn", "builtins", "copyreg", "_codecs"}
    names = referenced_globals(fitted)
    assert not any(module.startswith("sknet.backend") for module, _ in names)
    assert not any("cupy" in module for module, _ in names)
    state = fitted.__getstate__()
    assert "_backend" not in state and state["_sknet_version"] == sknet.__version__
    assert "layers_" not in state  # a view of network_.layers, not stored twice
    for layer in state["network_"].layers:
        layer_state = layer.__getstate__()
        assert "backend_" not in layer_state and "_buffers" not in layer_state
        assert all(type(v) is np.ndarray for v in layer_state["params"].values())


def test_training_continues_after_loading(fitted, digits):
    X, y = digits
    restored = pickle.loads(pickle.dumps(fitted))
    t = restored._optimizer.t
    restored.partial_fit(X, y)
    fitted_copy = pickle.loads(pickle.dumps(fitted))
    fitted_copy.partial_fit(X, y)
    assert restored._optimizer.t > t
    assert_array_equal(restored.coefs_[0], fitted_copy.coefs_[0])


def test_loading_under_another_version_warns(fitted, monkeypatch):
    payload = pickle.dumps(fitted)
    monkeypatch.setattr(sknet._version, "__version__", "99.0")
    with pytest.warns(SknetVersionWarning, match="saved with sknet 0.1.0 and is loaded with"):
        pickle.loads(payload)


def test_same_version_loads_silently(fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(fitted))


def test_cuda_model_loads_and_predicts_without_cupy(fitted, digits, monkeypatch):
    """A model trained on CUDA pickles NumPy state; without CuPy it predicts on CPU."""
    X, _ = digits
    expected = fitted.predict_proba(X)
    gpu_model = pickle.loads(pickle.dumps(fitted))
    gpu_model.device_ = "cuda:0"  # what a fit on a GPU records
    payload = pickle.dumps(gpu_model)

    monkeypatch.setitem(sys.modules, "cupy", None)  # "CuPy is not installed"
    backend_module.cuda_device_count.cache_clear()
    try:
        # the network is placed once, when loading: predictions never move it
        with pytest.warns(UserWarning, match="fitted on 'cuda:0'.*runs on the CPU") as record:
            loaded = pickle.loads(payload)
        assert len(record) == 1
        assert loaded.device_ == "cpu"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            proba = loaded.predict_proba(X)
        np.testing.assert_allclose(proba, expected)
        with warnings.catch_warnings():  # one warning, not one per call
            warnings.simplefilter("error")
            loaded.predict(X)
    finally:
        backend_module.cuda_device_count.cache_clear()


def test_deepcopy_and_clone_of_fitted_model(fitted, digits):
    import copy

    from sklearn.base import clone

    X, _ = digits
    twin = copy.deepcopy(fitted)
    assert_array_equal(twin.predict(X), fitted.predict(X))
    assert not hasattr(clone(fitted), "layers_")

"""Secure persistence with skops: round trips and the trusted-types list."""

import inspect
import io
import json
import re
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import sknet
from sknet import ConvNetClassifier, MLPClassifier, MLPRegressor, NeuralNetClassifier
from sknet.callbacks import Checkpoint, EarlyStopping, LRScheduler, TerminateOnNaN
from sknet.layers import (
    CategoricalEmbedding,
    Concatenate,
    EnsembleDense,
    EnsembleInput,
    PeriodicEmbedding,
    PiecewiseLinearEncoding,
    SelectColumns,
    Sequential,
    quantile_bins,
)
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
        MLPClassifier(
            solver="adamw",
            label_smoothing=0.1,
            clip_norm=1.0,
            max_iter=2,
            random_state=0,
            callbacks=[LRScheduler("cosine", warmup=1)],
        ),
        NeuralNetClassifier(tabular_ensemble(), solver="adamw", max_iter=2, random_state=0),
    ]


def tabular_ensemble():
    """Embeddings of a table's columns, then an ensemble (on the digits' pixels)."""
    bins = quantile_bins(np.linspace(0, 1, 50)[:, None].repeat(8, axis=1), n_bins=4)
    columns = Concatenate(
        [
            Sequential([SelectColumns(list(range(8))), PiecewiseLinearEncoding(bins, 2, "relu")]),
            Sequential([SelectColumns([8, 9]), CategoricalEmbedding([1, 1])]),
            Sequential([SelectColumns([10, 11]), PeriodicEmbedding(4, 0.5, 2)]),
        ]
    )
    return [columns, EnsembleInput(2), EnsembleDense(8, activation="relu")]


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


def test_a_file_carrying_a_checkpoint_is_refused_by_default(digits, tmp_path):
    # A Checkpoint holds a path its next fit writes to: trusted by default, a file
    # could make a warm fit of the loaded model overwrite any file of the machine.
    assert not any("Checkpoint" in name for name in sknet.TRUSTED_TYPES)
    model = MLPClassifier(
        max_iter=2,
        random_state=0,
        callbacks=[Checkpoint(str(tmp_path / "m.joblib"), monitor=None)],
    )
    data = sio.dumps(fitted(model, digits))
    name = f"{Checkpoint.__module__}.{Checkpoint.__qualname__}"  # sknet.callbacks._stopping
    assert name in sio.get_untrusted_types(data=data)
    with pytest.raises(Exception, match=r"Untrusted types.*Checkpoint"):
        sio.loads(data, trusted=sknet.TRUSTED_TYPES)
    # Trusted by name, once the reader has looked at the path, it loads.
    loaded = sio.loads(data, trusted=[*sknet.TRUSTED_TYPES, name])
    assert loaded.callbacks[0].path == str(tmp_path / "m.joblib")


def test_no_trusted_type_holds_a_path():
    # The parameters of every trusted class: none names a file.
    classes = [
        cls
        for module in (sknet, sknet.layers, sknet.losses, sknet.callbacks)
        for cls in vars(module).values()
        if isinstance(cls, type) and f"{cls.__module__}.{cls.__qualname__}" in sknet.TRUSTED_TYPES
    ]
    assert len(classes) > 20
    for cls in classes:
        names = set(inspect.signature(cls.__init__).parameters)
        assert not names & {"path", "file", "filename", "directory", "dirname"}, cls


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


def _arrays_of(schema, path=""):
    """``(path, node)`` of every array a skops schema names."""
    if isinstance(schema, dict):
        if "file" in schema:
            yield path, schema
        for key, value in schema.items():
            yield from _arrays_of(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _arrays_of(value, f"{path}[{i}]")


def tampered(data, suffix, array):
    """The skops file ``data`` with the array whose schema path ends with ``suffix`` replaced."""
    source = zipfile.ZipFile(io.BytesIO(data))
    schema = json.loads(source.read("schema.json"))
    (name,) = {node["file"] for path, node in _arrays_of(schema) if path.endswith(suffix)}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for member in source.namelist():
            content = source.read(member)
            if member == name:
                buffer = io.BytesIO()
                np.save(buffer, array, allow_pickle=False)
                content = buffer.getvalue()
            target.writestr(member, content)
    return out.getvalue()


FIRST = "layers/content[0]/content/content/params/content/"
SECOND = "layers/content[1]/content/content/params/content/"


@pytest.mark.parametrize(
    "suffix, array, words",
    [
        (
            FIRST + "W",
            np.zeros((64, 9), np.float32),
            "layers_[0] (Dense) holds params 'W' of "
            "shape (64, 9) and dtype float32, but the layer built for inputs of shape (64,) needs "
            "shape (64, 8)",
        ),
        (FIRST + "W", np.zeros((63, 8), np.float32), "'W' of shape (63, 8)"),
        (FIRST + "b", np.zeros(9, np.float32), "'b' of shape (9,) and dtype float32"),
        (
            SECOND + "W",
            np.zeros(80, np.float32),
            "layers_[1] (Dense) holds params 'W' of shape (80,)",
        ),
        (FIRST + "W", np.zeros((64, 8), np.int64), "'W' of shape (64, 8) and dtype int64"),
        (FIRST + "W", np.zeros((64, 8), "U2"), "dtype <U2"),
        ("/content/content/classes_", np.arange(5), "it has 5 classes_ but 10 outputs"),
    ],
    ids=["wider", "fewer-rows", "bias", "flat", "int", "str", "classes"],
)
def test_a_file_whose_arrays_were_altered_is_refused_naming_the_layer(
    suffix, array, words, digits
):
    # Before: loading worked, and predict failed in NumPy's matmul or the bias kernel
    # (or, for the classes, predicted labels of the wrong classes without a word).
    X, y = digits
    model = MLPClassifier(hidden_layer_sizes=(8,), max_iter=2, random_state=0, device="cpu")
    data = tampered(sio.dumps(model.fit(X, y)), suffix, array)
    with pytest.raises(ValueError, match=re.escape(words)) as info:
        sio.loads(data, trusted=sknet.TRUSTED_TYPES)
    assert str(info.value).startswith("This saved MLPClassifier does not fit together")


def test_an_unaltered_container_model_loads(digits):
    # The check walks the layer tree: a Residual's arrays are its blocks'.
    from sknet import NeuralNetClassifier
    from sknet.layers import Dense, Residual

    X, y = digits
    model = NeuralNetClassifier(
        [Dense(8), Residual([Dense(8, activation="relu")])], max_iter=2, device="cpu"
    ).fit(X, y)
    loaded = sio.loads(sio.dumps(model), trusted=sknet.TRUSTED_TYPES)
    assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))

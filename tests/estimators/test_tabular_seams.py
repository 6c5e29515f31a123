"""TabularClassifier and TabularRegressor where they meet the rest of sknet.

Data parallelism over a Dask cluster, frozen layers on a warm start, the
trained layers reused in another network, batches split over threads, data
streamed from host memory, random small configurations (fit, pickle, clone),
and a ``ColumnTransformer`` before the estimator in a pipeline saved with
joblib. The frames are those of ``tests/estimators/test_tabular.py``: every
dtype a table holds, missing values in most columns.
"""

import pickle

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

import sknet.engine._sharding as sharding
from sknet import (
    FeatureExtractor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    TabularClassifier,
    TabularRegressor,
)
from sknet.engine._trainer import Trainer
from sknet.exceptions import DeviceMemoryError
from sknet.layers import (
    CategoricalEmbedding,
    EnsembleDense,
    EnsembleHead,
    PeriodicEmbedding,
    PiecewiseLinearEncoding,
    from_estimator,
)
from sknet.layers._tree import walk
from sknet.utils import estimate_memory
from tests.estimators.test_tabular import SMALL, labels, table

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: The categorical columns of ``table()``.
CATEGORICAL = ["category", "object", "string", "bool", "nullable_bool"]


def float64(**params):
    """SMALL in float64, where two ways of training compare to rounding."""
    return {**SMALL, "dtype": "float64", **params}


def host_arrays(model):
    """A copy of every array of the fitted network, in the order of ``weights()``."""
    return [np.array(w, copy=True) for w in model.network_.weights()]


def layer_types(model):
    return [type(layer) for layer in model.layers_]


def snapshot(layer):
    return {key: value.copy() for key, value in layer.params.items()}


def assert_same_model(a, b, rtol):
    assert_allclose(b.loss_curve_, a.loss_curve_, rtol=rtol)
    for wa, wb in zip(a.network_.weights(), b.network_.weights(), strict=True):
        assert_allclose(wb, wa, rtol=rtol, atol=1e-12)


# -- 1. DataParallel: a frame with categories and missing values, on two workers -----------
def test_data_parallel_trains_the_plain_fit_of_a_frame_with_adamw():
    pytest.importorskip("distributed", reason="needs dask.distributed (the distributed extra)")
    from sknet.distributed import DataParallel
    from tests.conftest import local_dask_client

    X, signal = table(n=200)
    y = labels(signal)
    assert X.isna().any().sum() >= 5  # missing values in numbers and categories
    est = TabularClassifier(**float64(max_iter=3, batch_size=64, weight_decay=0.01))
    assert est.solver == "adamw"  # the tabular default: decoupled decay on every replica
    local = clone(est).fit(X, y)
    with local_dask_client() as client:
        parallel = DataParallel(est, client=client, sync_every=1).fit(X, y)
    assert len(parallel.shard_rows_) == 2 and sum(parallel.shard_rows_) == 200
    fitted = parallel.estimator_
    # the column plan is the local fit's, learned on the driver from the frame
    assert_array_equal(fitted.encoder_.transform(X), local.encoder_.transform(X))
    assert parallel.feature_names_in_.tolist() == list(X.columns)
    assert parallel.classes_.tolist() == ["no", "yes"]
    # sync_every=1: the model one process trains (float64, to rounding)
    assert_same_model(local, fitted, rtol=1e-10)
    assert_allclose(fitted.validation_scores_, local.validation_scores_, rtol=1e-10)
    assert_allclose(parallel.predict_proba(X), local.predict_proba(X), rtol=1e-10)
    assert_array_equal(parallel.predict(X), local.predict(X))
    # one synchronization a batch: 180 training rows (20 held out) in batches of 64
    assert len(parallel.sync_history_) == 3 * len(local.history_)


def test_data_parallel_replicas_train_the_members_auto_gives_the_whole_table():
    # 'auto' counts the whole table's training rows on the driver (216: 108 batches of 2),
    # not a shard's (54 batches): every replica trains the driver's three members
    pytest.importorskip("distributed", reason="needs dask.distributed (the distributed extra)")
    from sknet.distributed import DataParallel
    from tests.conftest import local_dask_client

    X, signal = table(n=240)
    y = labels(signal)
    est = TabularClassifier(**float64(max_iter=1, batch_size=2, n_members="auto"))
    local = clone(est).fit(X, y)
    with local_dask_client() as client:
        parallel = DataParallel(est, client=client, sync_every=1).fit(X, y)
    fitted = parallel.estimator_
    assert local.n_members_ == fitted.n_members_ == fitted.layers_[-1].n_members_ == 3
    assert_same_model(local, fitted, rtol=1e-10)


# -- 2. frozen layers ------------------------------------------------------------------------
def test_a_tabular_estimator_has_no_layers_parameter_to_freeze_and_says_so():
    # Its network is built from its parameters: `layers__<i>__trainable` names a
    # parameter it does not have (an AttributeError from deep inside set_params before).
    clf = TabularClassifier(**SMALL)
    message = r"Cannot set \['layers__0__trainable'\]: this TabularClassifier has no `layers`"
    with pytest.raises(ValueError, match=message):
        clf.set_params(layers__0__trainable=False)
    assert "layers" not in clf.get_params()


def test_frozen_embeddings_of_a_tabular_network_stay_bit_identical_on_a_warm_fit():
    # The path to freezing a tabular network's layers: its trained layers, reused in a
    # NeuralNetClassifier (whose `layers` set_params reaches), over the encoded table.
    X, signal = table(n=200)
    y = labels(signal)
    tab = TabularClassifier(**float64(max_iter=3)).fit(X, y)
    encoded = tab.encoder_.transform(X)
    net = NeuralNetClassifier(
        from_estimator(tab, trainable=True),
        warm_start=True,
        dtype="float64",
        max_iter=3,
        learning_rate_init=0.01,
        random_state=0,
        device="cpu",
    ).fit(encoded, y)
    params = net.get_params()
    numeric, codes = "layers__0__branches__0__layers__1", "layers__0__branches__2__layers__1"
    assert isinstance(params[numeric], PiecewiseLinearEncoding)
    assert isinstance(params[codes], CategoricalEmbedding)
    built = {type(layer): layer for _, layer in walk(net.layers_)}
    embeddings = [built[PiecewiseLinearEncoding], built[CategoricalEmbedding]]
    others = [built[EnsembleDense], built[EnsembleHead]]
    before = {id(layer): snapshot(layer) for layer in embeddings + others}
    net.set_params(**{f"{numeric}__trainable": False, f"{codes}__trainable": False})
    net.fit(encoded, y)
    assert not any(layer.trainable for layer in embeddings)
    for layer in embeddings:
        for key, value in layer.params.items():
            assert_array_equal(value, before[id(layer)][key])
    for layer in others:
        assert layer.trainable
        for key, value in layer.params.items():
            assert not np.array_equal(value, before[id(layer)][key])


# -- 3. reuse --------------------------------------------------------------------------------
def test_the_trained_layers_reused_predict_what_the_tabular_model_predicts():
    X, signal = table(n=200)
    y = labels(signal)
    tab = TabularClassifier(**float64(max_iter=3, n_members=3)).fit(X, y)
    expected = tab.predict_proba(X)
    encoded = tab.encoder_.transform(X)
    reused = from_estimator(tab)  # every layer before the head, frozen
    net = NeuralNetClassifier(reused, dtype="float64", max_iter=2, random_state=0, device="cpu")
    net.fit(encoded, y)
    # the estimator appends the ensemble's head: the network is the tabular one's
    assert layer_types(net) == layer_types(tab)
    assert net.layers_[-1].n_members_ == 3
    # the frozen layers compute the tabular model's hidden features, bit for bit...
    hidden = len(reused)
    features = tab.network_.predict(encoded, stop=hidden)
    assert features.shape == (200, 3, 16)
    assert_array_equal(net.network_.predict(encoded, stop=hidden), features)
    # ... which FeatureExtractor reads from the frame through the column plan
    extractor = FeatureExtractor(FrozenEstimator(tab)).fit(X, y)
    assert_array_equal(extractor.transform(X), features.reshape(200, -1))
    # with the tabular head's weights, the same probabilities and labels
    for key, value in tab.network_.layers[-1].params.items():
        net.network_.layers[-1].params[key][...] = value
    assert_array_equal(net.predict_proba(encoded), expected)
    assert_array_equal(net.predict(encoded), tab.predict(X))
    assert_array_equal(tab.predict_proba(X), expected)  # the source is untouched


# -- 4. split batches ----------------------------------------------------------------------
@pytest.fixture
def batch_gradients(monkeypatch):
    """Each batch's loss, gradient and whether it ran split, for every fit from now on."""
    records = []
    original = Trainer.loss_and_gradients

    def spy(self, X, *args):
        loss = original(self, X, *args)
        shards = self._active_shards
        split = shards is not None and shards.usable(X.shape[0])
        records.append((float(loss), self.parameters.flat_grads.copy(), split))
        return loss

    monkeypatch.setattr(Trainer, "loss_and_gradients", spy)
    return records


def test_a_batch_split_over_threads_has_the_whole_batch_loss_and_gradient(
    monkeypatch, batch_gradients
):
    X, signal = table(n=200)
    y = labels(signal)

    def fit(threads):
        monkeypatch.setattr(sharding, "cpu_threads", lambda: threads)
        monkeypatch.setattr(sharding, "MIN_SHARD_WORK", 0)  # a tiny network splits too
        # a tabular fit runs its batches on one thread; the split path is the engine's
        monkeypatch.setattr(TabularClassifier, "_single_threaded_batches", False)
        params = float64(n_members=3, dropout=0.2, early_stopping=False, batch_size=200)
        model = TabularClassifier(**{**params, "max_iter": 3}).fit(X, y)
        records = list(batch_gradients)
        batch_gradients.clear()
        return model, records

    whole, whole_batches = fit(1)
    split, split_batches = fit(2)
    # one batch an epoch (batch_size is every training row), whole and split in two
    assert [s for *_, s in whole_batches] == [False] * 3
    assert [s for *_, s in split_batches] == [True] * 3
    for (loss_a, grad_a, _), (loss_b, grad_b, _) in zip(whole_batches, split_batches):
        assert loss_b == pytest.approx(loss_a, rel=1e-12)
        assert np.abs(grad_a).max() > 0
        assert_allclose(grad_b, grad_a, rtol=1e-9, atol=1e-15)
    assert_same_model(whole, split, rtol=1e-9)
    assert_allclose(split.predict_proba(X), whole.predict_proba(X), rtol=1e-9)


# -- 5. data streamed from host memory -----------------------------------------------------
def test_a_tabular_network_streamed_on_the_cpu_trains_the_in_memory_model():
    X, signal = table(n=1500)
    params = float64(max_iter=2, dropout=0.1, batch_size=64)
    reg = TabularRegressor(**params)
    estimate = estimate_memory(reg, X, signal)
    limit = int(estimate.total - estimate["data"] // 2)  # half the encoded table does not fit
    in_memory = clone(reg).fit(X, signal)
    too_small = estimate["parameters"]
    # On the CPU the encoded table, already in the fit's dtype, is used in place (as
    # any data of the fit's dtype): nothing to stream, the same model under the limit.
    limited = clone(reg).set_params(max_device_memory=limit).fit(X, signal)
    assert in_memory.data_placement_ == limited.data_placement_ == "device"
    assert_same_model(in_memory, limited, rtol=0)
    # Its network streams when the rows must be copied: float32 rows for float64.
    rows = in_memory.encoder_.transform(X).astype(np.float32)
    target = (signal - in_memory.target_mean_) / in_memory.target_scale_
    layers = [clone(layer) for layer in in_memory.layers_[:-1]]  # unfitted: the same plan
    net = NeuralNetRegressor(
        layers, max_iter=2, batch_size=64, dtype="float64", random_state=0, device="cpu"
    )
    estimate = estimate_memory(net, rows, target)
    limit = int(estimate.total - estimate["data"] // 2)  # copied rows: half do not fit
    whole = clone(net).fit(rows, target)
    streamed = clone(net).set_params(max_device_memory=limit).fit(rows, target)
    assert whole.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert layer_types(streamed) == layer_types(in_memory)
    assert_same_model(whole, streamed, rtol=0)
    assert_array_equal(streamed.predict(rows), whole.predict(rows))
    # and a limit without room for one batch says what would fit
    with pytest.raises(DeviceMemoryError, match="batch_size=64"):
        clone(reg).set_params(max_device_memory=too_small).fit(X, signal)


# -- 6. random small configurations ------------------------------------------------------------
def random_config(seed):
    """Parameters, whether the frame has categorical columns, the number of classes.

    Seeds 0 to 5 cover each numeric embedding with and without categories; the
    rest is drawn.
    """
    rng = np.random.RandomState(seed)
    params = dict(
        numeric_embedding=[None, "piecewise_linear", "periodic"][seed % 3],
        n_members=int(rng.randint(1, 4)),
        hidden_layer_sizes=tuple(int(u) for u in rng.choice([4, 8, 16], rng.randint(1, 3))),
        d_embedding=int(rng.choice([2, 4])),
        n_bins=int(rng.choice([3, 8])),
        dropout=float(rng.choice([0.0, 0.2])),
        dtype=["float32", "float64"][rng.randint(2)],
        early_stopping=bool(rng.randint(2)),
        batch_size=int(rng.choice([32, 64])),
        max_iter=2,
        random_state=seed,
        device="cpu",
    )
    return params, (seed // 3) % 2 == 0, int(rng.randint(2, 4))


@pytest.mark.parametrize("seed", range(8))
def test_a_random_small_configuration_fits_pickles_and_clones(seed):
    params, with_categories, n_classes = random_config(seed)
    X, signal = table(n=120, seed=seed)
    if not with_categories:
        X = X.drop(columns=CATEGORICAL)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_classes + 1)[1:-1]))
    y = np.array(["low", "mid", "high"])[y]
    clf = TabularClassifier(**params).fit(X, y)
    types = {type(layer) for _, layer in walk(clf.layers_)}
    embedding = {"piecewise_linear": PiecewiseLinearEncoding, "periodic": PeriodicEmbedding}
    for name, layer in embedding.items():
        assert (layer in types) == (params["numeric_embedding"] == name)
    coded = len(clf.encoder_.code_features_) > 0  # the integer columns coded again
    assert (CategoricalEmbedding in types) == (with_categories or coded)
    assert (EnsembleHead in types) == (params["n_members"] > 1)
    proba = clf.predict_proba(X)
    assert proba.shape == (120, n_classes) and proba.dtype == np.dtype(params["dtype"])
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0)
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-5 if params["dtype"] == "float32" else 1e-12)
    assert set(clf.predict(X)) <= set(clf.classes_)
    loaded = pickle.loads(pickle.dumps(clf))
    assert_array_equal(loaded.predict_proba(X), proba)
    assert_array_equal(loaded.encoder_.transform(X), clf.encoder_.transform(X))
    fresh = clone(clf)
    assert fresh.get_params() == clf.get_params()
    with pytest.raises(NotFittedError):
        check_is_fitted(fresh)
    assert_array_equal(fresh.fit(X, y).predict_proba(X), proba)  # seeded: the same fit


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_auto_members_of_a_large_table_in_a_pickled_pipeline(dtype):
    X, signal = table(n=240)
    y = labels(signal)
    params = {**SMALL, "n_members": "auto", "batch_size": 2, "max_iter": 2, "dtype": dtype}
    pipe = make_pipeline(TabularClassifier(**params, early_stopping=True)).fit(X, y)
    assert pipe[-1].n_members_ == 3  # 216 training rows: 108 batches, a large table
    proba = pipe.predict_proba(X)
    assert proba.dtype == np.dtype(dtype) and np.all(np.isfinite(proba))
    loaded = pickle.loads(pickle.dumps(pipe))
    assert loaded[-1].n_members_ == 3
    assert_array_equal(loaded.predict_proba(X), proba)
    assert_array_equal(clone(pipe).fit(X, y).predict_proba(X), proba)  # seeded: the same fit


# -- 7. a ColumnTransformer before the estimator, saved with joblib ------------------------
def test_a_pipeline_with_a_column_transformer_round_trips_through_joblib(tmp_path):
    rng = np.random.RandomState(0)
    n = 300
    X = np.column_stack([rng.normal(size=n), rng.uniform(0, 50, n), rng.randint(0, 4, n)])
    X[rng.rand(n) < 0.1, 0] = np.nan
    X[rng.rand(n) < 0.1, 2] = np.nan  # a missing category, kept for the estimator
    y = np.nan_to_num(X[:, 0]) + 0.05 * X[:, 1] + np.nan_to_num(X[:, 2]) ** 2 / 4
    columns = ColumnTransformer(
        [
            ("numbers", make_pipeline(SimpleImputer(), StandardScaler()), [0, 1]),
            ("codes", "passthrough", [2]),
        ]
    )
    reg = TabularRegressor(**{**SMALL, "categorical_features": [2]})
    pipe = make_pipeline(columns, reg).fit(X, y)
    fitted = pipe[-1]
    assert fitted.encoder_.is_categorical_.tolist() == [False, False, True]
    assert fitted.encoder_.categories_[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert pipe.score(X, y) > 0.5
    path = tmp_path / "pipe.joblib"
    joblib.dump(pipe, path)
    loaded = joblib.load(path)
    new = X[:5].copy()
    new[0, 2], new[1, 0] = 9.0, np.nan  # an unseen category, a missing number
    assert_array_equal(loaded.predict(X), pipe.predict(X))
    assert_array_equal(loaded.predict(new), pipe.predict(new))
    assert np.all(np.isfinite(loaded.predict(new)))

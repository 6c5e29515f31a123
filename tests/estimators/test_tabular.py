"""TabularClassifier and TabularRegressor (sknet/estimators/_tabular*.py) at the seams.

DataFrames with every dtype and missing values, unseen categories at predict
time, the column plan learned from training rows only (cross-validation,
grid search), plain arrays and a ColumnTransformer before it, labels, weights,
warm starts, frozen estimators, pickle and skops, float32 and float64, data
streamed to the device, the network it builds, and the GPU.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

import sknet
from sknet import TabularClassifier, TabularRegressor
from sknet.layers import (
    CategoricalEmbedding,
    Dense,
    EnsembleDense,
    EnsembleHead,
    EnsembleInput,
    PeriodicEmbedding,
    PiecewiseLinearEncoding,
)
from sknet.layers._tree import walk
from sknet.tabular import TabularEncoder
from sknet.utils import estimate_memory
from tests.conftest import needs_gpu

pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: A small network, so that each fit takes a fraction of a second.
SMALL = dict(
    hidden_layer_sizes=(16,),
    n_members=2,
    d_embedding=4,
    n_bins=8,
    max_iter=15,
    learning_rate_init=0.01,
    n_iter_no_change=100,
    random_state=0,
    device="cpu",
)


def table(n=300, seed=0):
    """A frame of every dtype a table holds, missing values in most."""
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {
            "float": x,
            "int": rng.randint(0, 5, n),
            "nullable_int": pd.array(rng.randint(0, 9, n), dtype="Int64"),
            "category": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "object": rng.choice(["u", "v", None], n).astype(object),
            "string": pd.array(rng.choice(["p", "q"], n), dtype="string"),
            "bool": rng.rand(n) > 0.5,
            "nullable_bool": pd.array(rng.rand(n) > 0.5, dtype="boolean"),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "float"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "nullable_int"] = pd.NA
    frame.loc[rng.rand(n) < 0.1, "category"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "string"] = pd.NA
    frame.loc[rng.rand(n) < 0.1, "nullable_bool"] = pd.NA
    signal = np.nan_to_num(frame["float"].to_numpy()) + (frame["category"] == "a") - 0.3
    return frame, signal


def categories_of(encoder, name):
    """The categories the plan learned for the categorical column ``name``."""
    names = list(encoder.feature_names_in_[encoder.categorical_features_])
    return encoder.categories_[names.index(name)]


def labels(signal):
    return np.where(signal > 0, "yes", "no")


def test_a_frame_of_every_dtype_fits_and_predicts_its_labels():
    X, signal = table()
    clf = TabularClassifier(**SMALL).fit(X, labels(signal))
    assert clf.encoder_.is_categorical_.tolist() == [False] * 3 + [True] * 5
    assert clf.feature_names_in_.tolist() == list(X.columns)
    assert clf.n_features_in_ == 8
    assert clf.classes_.tolist() == ["no", "yes"]
    proba = clf.predict_proba(X)
    assert proba.dtype == np.float32 and np.all(np.isfinite(proba))
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
    assert set(clf.predict(X)) <= {"no", "yes"}
    assert clf.score(X, labels(signal)) > 0.7


def test_unseen_categories_and_missing_values_at_predict_time():
    X, signal = table()
    clf = TabularClassifier(**SMALL).fit(X, labels(signal))
    new = X.head(4).copy()
    new["category"] = pd.Categorical(["zzz", None, "a", "b"])
    new["object"] = ["never", None, np.nan, "u"]
    new["float"] = [np.nan, np.nan, 1.0, 2.0]
    new["string"] = pd.array([pd.NA, "unseen", "p", "q"], dtype="string")
    encoded = clf.encoder_.transform(new)
    codes = encoded[:, clf.encoder_.output_groups_["categorical"]]
    assert codes[0, 0] == 4 and codes[1, 0] == 0  # category: unknown (3 + 1), missing
    assert codes[0, 1] == 3 and codes[1, 1] == 0  # object: unknown (2 + 1), missing
    assert np.all(np.isfinite(clf.predict_proba(new)))


def test_multiclass_string_labels_and_their_probabilities():
    X, signal = table()
    y = np.select([signal < -0.5, signal < 0.5], ["low", "mid"], "high")
    clf = TabularClassifier(**SMALL).fit(X, y)
    assert clf.classes_.tolist() == ["high", "low", "mid"]
    assert clf.predict_proba(X).shape == (300, 3)
    assert set(clf.predict(X)) <= set(clf.classes_)


@pytest.mark.parametrize(
    "features",
    [["category", "object"], [3, 4], [False, False, False, True, True, False, False, False]],
)
def test_categorical_features_as_boosting_takes_them(features):
    X, signal = table()
    clf = TabularClassifier(categorical_features=features, **SMALL)
    X = X[["float", "int", "nullable_int", "category", "object"]].assign(
        string=1.0, bool=0.0, nullable_bool=2.0
    )
    clf.fit(X, labels(signal))
    assert clf.encoder_.categorical_features_.tolist() == [3, 4]


def test_plain_arrays_numbers_and_objects():
    X, signal = table()
    numbers = X[["float", "int"]].to_numpy()
    clf = TabularClassifier(**SMALL).fit(numbers, labels(signal))
    assert not hasattr(clf, "feature_names_in_") and clf.n_features_in_ == 2
    assert clf.encoder_.categorical_features_.size == 0
    objects = X[["float", "object"]].to_numpy(dtype=object)
    clf = TabularClassifier(**SMALL).fit(objects, labels(signal))
    assert clf.encoder_.categorical_features_.tolist() == [1]
    assert clf.predict(objects).shape == (300,)


def test_after_a_column_transformer_in_a_pipeline():
    X, signal = table()
    X = X[["float", "int", "category"]].fillna({"float": 0.0})
    prepare = ColumnTransformer(
        [
            ("numbers", StandardScaler(), ["float", "int"]),
            ("categories", OneHotEncoder(sparse_output=False), ["category"]),
        ]
    )
    pipe = make_pipeline(prepare, TabularRegressor(**SMALL)).fit(X, signal)
    assert pipe[-1].n_features_in_ == 6  # two numbers and four one-hot columns
    assert pipe.score(X, signal) > 0.3


def test_cross_validation_learns_each_plan_from_its_training_rows():
    X, signal = table(n=200)
    # categories a test fold alone holds, which its model must code as unknown
    X["object"] = [f"only_{i // 40}" if i % 2 else "shared" for i in range(200)]
    X["row_id"] = [f"r{i}" for i in range(200)]
    folds = KFold(5)
    result = cross_validate(
        TabularClassifier(**SMALL), X, labels(signal), cv=folds, return_estimator=True
    )
    for (train, test), model in zip(folds.split(X), result["estimator"]):
        seen = set(X["object"].iloc[train])
        assert set(model.encoder_.categories_[1]) <= seen
        assert f"only_{test[0] // 40}" not in seen
        # and its whole plan (quantiles, bins, medians, codes) is its training rows':
        # those it trains on, the early-stopping rows held out first
        held = ~np.isin(X["row_id"].iloc[train], categories_of(model.encoder_, "row_id"))
        assert held.sum() == 16  # 10% of the fold's 160 training rows
        expected = model._make_encoder().fit(X.iloc[train][~held])
        assert_allclose(model.encoder_.medians_, expected.medians_)
        assert_array_equal(model.encoder_.transform(X), expected.transform(X))


def test_rows_a_fold_is_scored_on_change_nothing_in_its_model():
    X, signal = table(n=200)
    y = labels(signal)
    train, test = np.arange(150), np.arange(150, 200)
    other = X.copy()  # the scored rows rewritten: other numbers, other categories
    other.loc[test, "float"] = 1e6
    other.loc[test, "int"] = -50
    other.loc[test, "object"] = "leak"
    other["category"] = other["category"].cat.add_categories(["leak"])
    other.loc[test, "category"] = "leak"
    runs = [
        cross_validate(
            TabularClassifier(**SMALL), frame, y, cv=[(train, test)], return_estimator=True
        )
        for frame in (X, other)
    ]
    a, b = (run["estimator"][0] for run in runs)
    assert_array_equal(a.encoder_.transform(X), b.encoder_.transform(X))
    for wa, wb in zip(a.network_.weights(), b.network_.weights()):
        assert_array_equal(wa, wb)
    assert "leak" not in np.concatenate(b.encoder_.categories_[:2]).tolist()
    # cross_val_score scores the same models: one fit per fold on its training rows
    folds = list(KFold(3).split(X))
    scores = cross_val_score(TabularClassifier(**SMALL), X, y, cv=folds)
    by_hand = [
        TabularClassifier(**SMALL).fit(X.iloc[tr], y[tr]).score(X.iloc[te], y[te])
        for tr, te in folds
    ]
    assert_allclose(scores, by_hand)


def test_grid_search_over_a_pipeline_that_hands_it_a_frame():
    X, signal = table(n=200)
    drop_bool = FunctionTransformer(lambda frame: frame.drop(columns=["bool"]))
    pipe = make_pipeline(drop_bool, TabularClassifier(**SMALL))
    grid = GridSearchCV(pipe, {"tabularclassifier__n_bins": [4, 8]}, cv=2).fit(X, labels(signal))
    best = grid.best_estimator_[-1]
    assert "bool" not in best.feature_names_in_ and best.n_features_in_ == 7
    assert (
        max(len(b) for b in best.encoder_.bins_) - 1
        <= grid.best_params_["tabularclassifier__n_bins"]
    )
    assert grid.predict(X).shape == (200,)


def test_grid_search_over_the_network():
    X, signal = table(n=200)
    grid = GridSearchCV(
        TabularClassifier(**SMALL),
        {"n_members": [1, 2], "numeric_embedding": ["piecewise_linear", None]},
        cv=2,
    ).fit(X, labels(signal))
    assert len(grid.cv_results_["params"]) == 4
    assert grid.best_estimator_.predict(X).shape == (200,)


def test_clone_keeps_parameters_and_drops_the_plan():
    clf = TabularClassifier(**SMALL).fit(*table_and_labels())
    copy = clone(clf)
    assert copy.get_params() == clf.get_params()
    assert not hasattr(copy, "encoder_") and not hasattr(copy, "network_")


def table_and_labels(n=300):
    X, signal = table(n)
    return X, labels(signal)


@pytest.mark.parametrize("make", [TabularClassifier, TabularRegressor])
def test_pickle_round_trip_predicts_the_same(make):
    X, signal = table()
    y = labels(signal) if make is TabularClassifier else signal
    model = make(**SMALL).fit(X, y)
    loaded = pickle.loads(pickle.dumps(model))
    assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("make", [TabularClassifier, TabularRegressor])
def test_skops_round_trip_with_the_published_trusted_types(make, tmp_path):
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    X, signal = table()
    y = labels(signal) if make is TabularClassifier else signal
    model = make(**SMALL).fit(X, y)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert set(untrusted) <= set(sknet.TRUSTED_TYPES), set(untrusted) - set(sknet.TRUSTED_TYPES)
    loaded = sio.load(path, trusted=sknet.TRUSTED_TYPES)
    assert_array_equal(loaded.predict(X), model.predict(X))


def test_warm_start_continues_the_network_and_keeps_the_plan():
    X, signal = table()
    # (without early stopping: a warm fit keeps the previous best validation score,
    # and would keep its initial weights if no epoch beat it)
    clf = TabularClassifier(warm_start=True, early_stopping=False, **SMALL)
    clf.fit(X, labels(signal))
    plan, epochs = clf.encoder_, len(clf.history_)
    weights = [w.copy() for w in clf.network_.weights()]
    other, _ = table(seed=1)
    other["object"] = "castle"  # a new category on the warm fit: unknown to the plan
    clf.fit(other, labels(signal))
    assert clf.encoder_ is plan and "castle" not in plan.categories_[1]
    assert len(clf.history_) == epochs + clf.n_iter_
    assert any(not np.array_equal(a, b) for a, b in zip(weights, clf.network_.weights()))
    with pytest.raises(ValueError, match="n_members changed from 2 to 3"):
        clf.set_params(n_members=3).fit(X, labels(signal))


def test_a_frozen_estimator_in_a_pipeline_is_not_refitted():
    X, signal = table()
    fitted = TabularRegressor(**SMALL).fit(X, signal)
    before = fitted.predict(X)
    pipe = make_pipeline(FrozenEstimator(fitted)).fit(X.iloc[:50], signal[:50] * 10)
    assert_array_equal(pipe.predict(X), before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float32_and_float64_models(dtype):
    X, signal = table()
    reg = TabularRegressor(dtype=dtype, **SMALL).fit(X, signal)
    assert reg.predict(X).dtype == np.dtype(dtype)
    assert all(w.dtype == np.dtype(dtype) for w in reg.network_.weights())
    assert reg.encoder_.transform(X).dtype == np.dtype(dtype)


def test_the_regression_target_is_standardized_and_mapped_back():
    X, signal = table()
    y = 1000.0 + 50.0 * np.asarray(signal)
    reg = TabularRegressor(**SMALL).fit(X, y)
    trained = ~held_out_rows(TabularRegressor, X, y)  # the rows it trains on
    assert_allclose(reg.target_mean_, [y[trained].mean()], rtol=1e-12)
    assert_allclose(reg.target_scale_, [y[trained].std()], rtol=1e-12)
    assert abs(reg.predict(X).mean() - y.mean()) < 0.2 * y.std()
    raw = TabularRegressor(standardize_target=False, **SMALL).fit(X, y)
    assert_array_equal(raw.target_mean_, [0.0]) and raw.score(X, y) < reg.score(X, y)
    with pytest.raises(ValueError, match="standardize_target=True needs a loss with an identity"):
        TabularRegressor(loss="poisson", **SMALL).fit(X, np.abs(y))
    assert TabularRegressor(loss="poisson", standardize_target=False, **SMALL).fit(X, np.abs(y))


def test_sample_and_class_weights():
    X, signal = table()
    y = labels(signal)
    rows = np.random.RandomState(0).rand(300) < 0.5
    zero = TabularClassifier(**{**SMALL, "early_stopping": False, "dropout": 0.0})
    weighted = clone(zero).fit(X, y, sample_weight=rows.astype(float))
    # a weight of 0 is a row left out: of the column plan too
    removed = TabularEncoder(n_bins=8).fit(X[rows])
    assert_allclose(weighted.encoder_.medians_, removed.medians_)
    balanced = TabularClassifier(class_weight="balanced", **SMALL).fit(X, y)
    plain = TabularClassifier(**SMALL).fit(X, y)
    assert not np.allclose(balanced.predict_proba(X), plain.predict_proba(X))


def test_early_stopping_is_on_and_keeps_the_best_epoch():
    X, signal = table()
    clf = TabularClassifier(**{**SMALL, "max_iter": 60, "n_iter_no_change": 5})
    clf.fit(X, labels(signal))
    scores = clf.validation_scores_
    assert clf.early_stopping and len(scores) == clf.n_iter_
    assert clf.best_validation_score_ == max(scores)
    assert all("valid_loss" in row for row in clf.history_)
    # the model kept is the best epoch's: its validation loss is the best one
    best = int(np.argmax(scores))
    assert_allclose(-clf.history_[best]["valid_loss"], clf.best_validation_score_)


def test_a_validation_set_given_as_a_frame_goes_through_the_plan():
    X, signal = table()
    X_val, signal_val = table(n=100, seed=3)
    # a category and an outlier only the validation set has: the plan never sees them
    X_val["object"] = "only_in_validation"
    X_val.loc[0, "float"] = 1e9
    y, y_val = labels(signal), labels(signal_val)
    clf = TabularClassifier(**{**SMALL, "n_members": 1}).fit(X, y, X_val=X_val, y_val=y_val)
    expected = clf._make_encoder().fit(X)
    assert_array_equal(clf.encoder_.transform(X_val), expected.transform(X_val))
    assert "only_in_validation" not in clf.encoder_.categories_[1]
    # the validation loss was computed through the plan: the kept (best) epoch's is
    # the log-loss of the model's probabilities on X_val
    best = int(np.argmax(clf.validation_scores_))
    assert_allclose(
        clf.history_[best]["valid_loss"],
        log_loss(y_val, clf.predict_proba(X_val), labels=clf.classes_),
        rtol=1e-5,
    )


def held_out_rows(make, X, y):
    """The rows a default fit holds out for early stopping (an id column tells them)."""
    ids = X.assign(row_id=[f"r{i}" for i in range(len(X))])
    model = make(**SMALL).fit(ids, y)
    kept = set(categories_of(model.encoder_, "row_id"))
    return np.array([f"r{i}" not in kept for i in range(len(X))])


@pytest.mark.parametrize("make", [TabularClassifier, TabularRegressor])
def test_the_plan_and_the_target_scale_come_from_the_training_rows_only(make):
    X, signal = table(n=200)
    y = labels(signal) if make is TabularClassifier else 10 * signal + 3
    held = held_out_rows(make, X, y)
    assert held.sum() == 20  # validation_fraction=0.1 of 200 rows
    # rewrite the held-out rows: a category and an outlier they alone have
    other = X.copy()
    other.loc[held, "object"] = "held_out_only"
    other.loc[held, "float"] = 1e6
    other["category"] = other["category"].astype(object)
    other.loc[np.flatnonzero(held)[0], "category"] = "z_held"
    other["category"] = other["category"].astype("category")
    y_other = y.copy()
    if make is TabularRegressor:
        y_other[held] = 1e4  # the target scale would move by far
    model = make(**SMALL).fit(other, y_other)
    plan = model.encoder_
    assert "held_out_only" not in plan.categories_[1]
    assert "z_held" not in plan.categories_[0]
    expected = model._make_encoder().fit(X[~held])
    assert_allclose(plan.medians_, expected.medians_)
    for got, want in zip(plan.bins_, expected.bins_):
        assert_allclose(got, want)
    assert_array_equal(plan.transform(X[~held]), expected.transform(X[~held]))
    if make is TabularRegressor:
        trained = np.asarray(y)[~held]
        assert_allclose(model.target_mean_, [trained.mean()])
        assert_allclose(model.target_scale_, [trained.std()])


def test_small_data_still_holds_rows_out_and_too_few_are_refused():
    X, signal = table(n=6)
    y = np.array(["a", "b"] * 3)
    TabularClassifier(**SMALL).fit(X, y)
    with pytest.raises(ValueError, match="2 sample"):
        TabularRegressor(**SMALL).fit(X.head(2), signal[:2])


def test_partial_fit_needs_early_stopping_off():
    X, signal = table()
    clf = TabularClassifier(**SMALL)
    assert not hasattr(clf, "partial_fit")
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'") as raised:
        clf.partial_fit(X, labels(signal), classes=["no", "yes"])
    assert "not available with early_stopping=True" in str(raised.value.__cause__)
    clf.set_params(early_stopping=False).partial_fit(X, labels(signal), classes=["no", "yes"])
    assert clf.n_iter_ == 1


def layer_types(model):
    return [type(layer) for _, layer in walk(model.layers_)]


@pytest.mark.parametrize(
    "params, present, absent",
    [
        ({}, [PiecewiseLinearEncoding, CategoricalEmbedding, EnsembleInput, EnsembleHead], []),
        ({"n_members": 1}, [Dense], [EnsembleInput, EnsembleDense, EnsembleHead]),
        ({"numeric_embedding": "periodic"}, [PeriodicEmbedding], [PiecewiseLinearEncoding]),
        ({"numeric_embedding": None}, [], [PiecewiseLinearEncoding, PeriodicEmbedding]),
    ],
)
def test_the_network_built_from_the_plan(params, present, absent):
    X, signal = table()
    types = layer_types(TabularClassifier(**{**SMALL, **params}).fit(X, labels(signal)))
    assert all(t in types for t in present) and not any(t in types for t in absent)


def test_the_ensemble_members_differ_and_predict_their_mean():
    X, signal = table()
    clf = TabularClassifier(**{**SMALL, "n_members": 3}).fit(X, labels(signal))
    head = clf.layers_[-1]
    assert isinstance(head, EnsembleHead) and head.n_members_ == 3
    Z = clf.network_.predict(clf.encoder_.transform(X), output=None)
    assert Z.shape == (300, 3, 1)
    assert not np.allclose(Z[:, 0], Z[:, 1])
    p = 1 / (1 + np.exp(-Z.astype(np.float64)))  # each member's probability, averaged
    assert_allclose(clf.predict_proba(X)[:, 1], p.mean(axis=1)[:, 0], rtol=1e-4)


@pytest.mark.parametrize(
    "batch_size, members",
    [
        (10, 4),  # 270 training rows: 27 batches an epoch
        (3, 4),  # 90 batches
        (2, 3),  # 135 batches: a large table
    ],
)
def test_auto_members_are_fewer_on_a_large_table(batch_size, members):
    X, signal = table()
    params = {**SMALL, "n_members": "auto", "early_stopping": True, "batch_size": batch_size}
    clf = TabularClassifier(**params).fit(X, labels(signal))
    assert clf.n_members_ == members == clf.layers_[-1].n_members_
    assert clf.network_.predict(clf.encoder_.transform(X.head(5))).shape == (5, members, 1)
    assert clone(clf).get_params()["n_members"] == "auto"  # a parameter, left as given


def test_auto_members_count_the_training_rows_of_the_first_fit():
    X, signal = table()
    params = {**SMALL, "n_members": "auto", "batch_size": 2, "early_stopping": False}
    clf = TabularClassifier(warm_start=True, **params).fit(X.head(150), labels(signal)[:150])
    assert clf.n_members_ == 4  # 75 batches an epoch
    clf.fit(X, labels(signal))  # 150 batches, but the warm fit continues the network
    assert clf.n_members_ == clf.layers_[-1].n_members_ == 4
    assert TabularClassifier(**params).fit(X, labels(signal)).n_members_ == 3
    given = TabularClassifier(**{**params, "n_members": 5}).fit(X, labels(signal))
    assert given.n_members_ == given.layers_[-1].n_members_ == 5


def test_the_memory_estimate_counts_the_members_of_the_fit_rows():
    # the estimate's probe learns the plan from a sample of the rows, but sizes the
    # network as the fit will: 270 training rows of 135 batches, a large table
    X, signal = table()
    params = {**SMALL, "early_stopping": True, "batch_size": 2}

    def estimate(**changed):
        return estimate_memory(TabularClassifier(**{**params, **changed}), X, labels(signal))

    auto = estimate(n_members="auto")
    assert auto["parameters"] == estimate(n_members=3)["parameters"]
    assert auto["parameters"] < estimate(n_members=4)["parameters"]
    smaller = estimate(n_members="auto", batch_size=3)  # 90 batches: four members
    assert smaller["parameters"] == estimate(n_members=4, batch_size=3)["parameters"]
    held_out = estimate_memory(  # a given validation set: all 300 rows train, 150 batches
        TabularClassifier(**{**params, "batch_size": 3, "n_members": "auto"}),
        X,
        labels(signal),
        X_val=X.head(30),
        y_val=labels(signal)[:30],
    )
    assert held_out["parameters"] == auto["parameters"]


def test_the_memory_estimate_of_a_frame_counts_its_encoded_copy():
    X, signal = table(n=2000)
    reg = TabularRegressor(**SMALL)
    encoded = reg._make_encoder().fit(X).transform(X)
    # 8 columns, 2 missing-value indicators, the two integer columns coded again
    assert encoded.shape == (2000, 12)
    estimate = estimate_memory(reg, X, signal)
    in_place = estimate_memory(TabularRegressor(**SMALL), encoded, signal)
    assert estimate["data"] > in_place["data"]  # the frame is encoded into a copy
    fitted = clone(reg).set_params(max_device_memory=estimate.total).fit(X, signal)
    assert fitted.data_placement_ == "device"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_members": 0}, "n_members"),
        ({"n_members": "many"}, "n_members"),
        ({"n_members": -1}, "n_members"),
        ({"n_members": 2.5}, "n_members"),
        ({"n_members": float("nan")}, "n_members"),
        ({"numeric_embedding": "spline"}, "numeric_embedding"),
        ({"hidden_layer_sizes": (16, 0)}, "hidden_layer_sizes"),
        ({"dropout": 1.0}, "dropout"),
    ],
)
def test_bad_parameters_are_named(params, message):
    X, signal = table(n=50)
    with pytest.raises(ValueError, match=message):
        TabularClassifier(**{**SMALL, **params}).fit(X, labels(signal))


def test_columns_must_match_the_fit():
    X, signal = table()
    clf = TabularClassifier(**SMALL).fit(X, labels(signal))
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(X[list(reversed(X.columns))])


@pytest.mark.gpu
@needs_gpu
def test_on_the_gpu_and_back_on_the_cpu():
    import cupy

    X, signal = table()
    clf = TabularClassifier(**{**SMALL, "device": "cuda"}).fit(X, labels(signal))
    assert clf.device_.startswith("cuda")
    on_cpu = TabularClassifier(**SMALL).fit(X, labels(signal))
    assert_allclose(clf.predict_proba(X), on_cpu.predict_proba(X), atol=1e-3)
    numbers = cupy.asarray(X[["float", "int"]].fillna(0).to_numpy())
    reg = TabularRegressor(**{**SMALL, "device": "cuda"}).fit(numbers, signal)
    assert isinstance(reg.predict(numbers), cupy.ndarray)
    loaded = pickle.loads(pickle.dumps(clf))
    assert_array_equal(loaded.predict(X), clf.predict(X))


@pytest.mark.gpu
@needs_gpu
def test_a_table_larger_than_the_device_room_streams_to_the_same_model():
    X, signal = table(n=4000)
    reg = TabularRegressor(**{**SMALL, "max_iter": 2, "dropout": 0.0, "device": "cuda"})
    estimate = estimate_memory(reg, X, signal)
    limit = int(estimate.total - estimate["data"] // 2)  # half the encoded rows fit
    in_memory = clone(reg).fit(X, signal)
    streamed = clone(reg).set_params(max_device_memory=limit).fit(X, signal)
    assert in_memory.data_placement_ == "device" and streamed.data_placement_ == "streamed"
    assert_allclose(streamed.loss_curve_, in_memory.loss_curve_, rtol=1e-5)
    assert_allclose(streamed.predict(X), in_memory.predict(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["all_missing", "all_rare"])
def test_a_categorical_column_left_without_categories_trains(case):
    X, signal = table(n=200)
    if case == "all_missing":
        X["object"] = pd.Series([None] * 200, dtype=object)
        params = {}
    else:  # every level of one column rarer than min_frequency
        X["object"] = [f"level_{i}" for i in range(200)]
        params = {"min_frequency": 3}
    clf = TabularClassifier(**SMALL, **params).fit(X, labels(signal))
    plan = clf.encoder_
    column = list(plan.categorical_features_).index(X.columns.get_loc("object"))
    assert plan.cardinalities_[column] == 0 and len(plan.categories_[column]) == 0
    new = X.head(3).copy()
    new["object"] = [None, "never_seen", "level_0"]
    codes = plan.transform(new)[:, plan.output_groups_["categorical"]][:, column]
    assert_array_equal(codes, [0, 1, 1])  # missing, then unknown
    assert np.isfinite(clf.predict_proba(new)).all()


def test_a_fold_whose_training_rows_miss_a_column_entirely_still_fits():
    X, signal = table(n=200)
    X["object"] = [None] * 100 + ["a", "b"] * 50  # the first half: all missing
    scores = cross_val_score(TabularClassifier(**SMALL), X, labels(signal), cv=KFold(2))
    assert np.isfinite(scores).all()


@pytest.mark.parametrize("kind", ["polars", "pyarrow"])
def test_polars_and_pyarrow_tables_keep_their_names_through_fit_and_predict(kind):
    X, signal = table(n=200)
    X = X.drop(columns=["nullable_bool"], errors="ignore")
    if kind == "polars":
        pl = pytest.importorskip("polars")
        pytest.importorskip("pyarrow")
        native = pl.from_pandas(X)
        reorder = lambda frame: frame.select(list(reversed(frame.columns)))  # noqa: E731
    else:
        pa = pytest.importorskip("pyarrow")
        native = pa.Table.from_pandas(X, preserve_index=False)
        reorder = lambda frame: frame.select(list(reversed(frame.column_names)))  # noqa: E731
    y = labels(signal)
    clf = TabularClassifier(**SMALL).fit(native, y)
    assert clf.feature_names_in_.tolist() == list(X.columns)
    reference = TabularClassifier(**SMALL).fit(X, y)
    whole = clf.predict_proba(native)
    assert_allclose(whole, reference.predict_proba(X), rtol=1e-6)
    for start, length in [(3, 1), (10, 2), (0, 64)]:  # a few rows: the paths of a predict
        rows = clf.predict_proba(native.slice(start, length))
        assert_allclose(rows, whole[start : start + length], rtol=1e-6, atol=1e-7)
        assert_allclose(rows, reference.predict_proba(X.iloc[start : start + length]), rtol=1e-6)
    with pytest.raises(ValueError, match="same order as they were in fit"):
        clf.predict_proba(reorder(native))


def test_the_batches_of_a_tabular_fit_run_on_one_blas_thread(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    from sknet.layers import EnsembleDense

    seen = []
    forward = EnsembleDense.forward

    def recording(self, X, *, training):
        if training:
            seen.append(
                max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
            )
        return forward(self, X, training=training)

    monkeypatch.setattr(EnsembleDense, "forward", recording)
    X, signal = table(n=200)
    with threadpool_limits(limits=2, user_api="blas"):
        TabularClassifier(**{**SMALL, "max_iter": 2}).fit(X, labels(signal))
        after = max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
    assert seen and set(seen) == {1}  # small products: OpenBLAS's threads collapse under load
    assert after == 2  # the user's setting is back after the fit


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_row_predicts_what_the_whole_table_predicts_under_pandas_output(dtype):
    # A one-row predict takes the few rows' paths (codes a value at a time, the numbers
    # ranked all at once), in a Pipeline and pickled too; scikit-learn's
    # transform_output="pandas" changes nothing inside.
    from sklearn import config_context

    X, signal = table(200, seed=3)
    X["wide"] = X["float"] * 2  # enough numeric columns for the few rows' ranking
    for i in range(7):
        X[f"extra{i}"] = np.random.RandomState(i).normal(size=len(X))
    clf = TabularClassifier(**SMALL, dtype=dtype).fit(X, labels(signal))
    whole = clf.predict_proba(X)
    rows = [clf.predict_proba(X.iloc[[i]])[0] for i in range(0, len(X), 7)]
    tol = 1e-6 if dtype == "float32" else 1e-12
    assert_allclose(rows, whole[::7], rtol=tol, atol=tol / 10)
    pipe = pickle.loads(pickle.dumps(make_pipeline(FunctionTransformer(), clf)))
    assert_allclose(pipe.predict_proba(X.iloc[[7]])[0], whole[7], rtol=tol, atol=tol / 10)
    with config_context(transform_output="pandas"):
        assert_array_equal(clf.predict_proba(X), whole)
        refit = clone(clf).fit(X, labels(signal))
    assert_array_equal(refit.predict_proba(X), whole)

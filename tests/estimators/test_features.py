"""Tests for sknet/estimators/_features.py (FeatureExtractor) and sknet models inside
scikit-learn's ensembles (VotingClassifier, StackingClassifier)."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import StackingClassifier, VotingClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sknet import ConvNetClassifier, FeatureExtractor, MLPClassifier, RNNClassifier

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def split(digits):
    X, y = digits
    return train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)


def mlp(**params):
    return MLPClassifier(
        **{
            "hidden_layer_sizes": (32, 16),
            "max_iter": 30,
            "random_state": 0,
            "device": "cpu",
            **params,
        }
    )


def test_features_are_the_hidden_activations(split):
    X_train, X_test, y_train, _ = split
    features = FeatureExtractor(mlp(), layer=0).fit(X_train, y_train)
    W, b = features.estimator_.coefs_[0], features.estimator_.intercepts_[0]
    assert_allclose(
        features.transform(X_test), np.maximum(X_test @ W + b, 0), rtol=1e-5, atol=1e-5
    )
    last = FeatureExtractor(mlp()).fit(X_train, y_train)  # layer=-1: the last hidden
    W2, b2 = last.estimator_.coefs_[1], last.estimator_.intercepts_[1]
    hidden = np.maximum(
        np.maximum(X_test @ last.estimator_.coefs_[0] + last.estimator_.intercepts_[0], 0) @ W2
        + b2,
        0,
    )
    assert_allclose(last.transform(X_test), hidden, rtol=1e-4, atol=1e-4)
    assert last.transform(X_test).shape == (len(X_test), 16)
    assert list(last.get_feature_names_out()[:2]) == ["featureextractor0", "featureextractor1"]


def test_a_convnet_as_the_feature_step_of_a_pipeline(split):
    X_train, X_test, y_train, y_test = split
    net = ConvNetClassifier(
        conv_filters=(4,),
        dense_units=(16,),
        learning_rate_init=0.01,
        max_iter=30,
        random_state=0,
        device="cpu",
    )
    pipe = make_pipeline(FeatureExtractor(net), LogisticRegression(max_iter=1000))
    assert pipe.fit(X_train, y_train).score(X_test, y_test) > 0.9
    conv_maps = FeatureExtractor(net, layer=0).fit(X_train, y_train)
    assert conv_maps.transform(X_test[:3]).shape == (3, 4 * 8 * 8)  # flattened images
    assert net.__dict__.get("network_") is None  # the estimator passed is not fitted


def test_a_column_transformer_with_a_network_on_some_columns(split):
    X_train, X_test, y_train, y_test = split
    columns = ColumnTransformer(
        [("net", FeatureExtractor(mlp()), list(range(64))), ("raw", "passthrough", [0, 1])]
    )
    Z = columns.fit(X_train, y_train).transform(X_test)
    assert Z.shape == (len(X_test), 16 + 2)
    assert_array_equal(Z[:, -2:], X_test[:, :2])


def test_a_frozen_fitted_network_is_used_as_it_is(split):
    X_train, X_test, y_train, _ = split
    fitted = mlp().fit(X_train, y_train)
    before = [c.copy() for c in fitted.coefs_]
    features = FeatureExtractor(FrozenEstimator(fitted)).fit(X_test[:10], y_train[:10])
    assert features.estimator_ is fitted
    for a, b in zip(fitted.coefs_, before):
        assert_array_equal(a, b)
    assert_allclose(
        features.transform(X_test), FeatureExtractor(mlp()).fit(X_train, y_train).transform(X_test)
    )


def test_bad_layers_and_estimators(split):
    X_train, _, y_train, _ = split
    with pytest.raises(
        ValueError, match="layer=2 is out of range: this MLPClassifier has 2 layer"
    ):
        FeatureExtractor(mlp(), layer=2).fit(X_train, y_train)
    with pytest.raises(TypeError, match="needs an sknet estimator"):
        FeatureExtractor(LogisticRegression()).fit(X_train, y_train)


def test_feature_names_pickling_and_sequences(split):
    pd = pytest.importorskip("pandas")
    X_train, X_test, y_train, _ = split
    frame = pd.DataFrame(X_train, columns=[f"px{i}" for i in range(64)])
    features = FeatureExtractor(mlp()).fit(frame, y_train)
    assert list(features.feature_names_in_[:2]) == ["px0", "px1"]
    restored = pickle.loads(pickle.dumps(features))
    test_frame = pd.DataFrame(X_test, columns=frame.columns)
    assert_array_equal(restored.transform(test_frame), features.transform(test_frame))
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5, 2))
    rnn = FeatureExtractor(
        RNNClassifier(units=(6,), max_iter=2, random_state=0, device="cpu")
    ).fit(X, (X[:, 0, 0] > 0).astype(int))
    assert rnn.transform(X).shape == (60, 6)


def test_sknet_models_in_soft_voting_and_stacking(split):
    X_train, X_test, y_train, y_test = split
    members = [
        ("mlp", mlp()),
        (
            "cnn",
            ConvNetClassifier(
                conv_filters=(4,), dense_units=(16,), max_iter=15, random_state=0, device="cpu"
            ),
        ),
        ("lr", LogisticRegression(max_iter=1000)),
    ]
    voting = VotingClassifier(members, voting="soft").fit(X_train, y_train)
    proba = voting.predict_proba(X_test)
    expected = np.mean([est.predict_proba(X_test) for est in voting.estimators_], axis=0)
    assert_allclose(proba, expected, rtol=1e-5)
    assert voting.score(X_test, y_test) > 0.93
    stacking = StackingClassifier(
        members, final_estimator=LogisticRegression(max_iter=1000), cv=3
    ).fit(X_train, y_train)
    assert stacking.score(X_test, y_test) > 0.93

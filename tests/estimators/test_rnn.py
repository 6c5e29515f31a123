"""Behaviour tests for sknet/estimators/_rnn.py."""

import os
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV, train_test_split

from sknet import MLPClassifier, RNNClassifier, RNNRegressor
from sknet.callbacks import EarlyStopping
from sknet.layers import GRU, LSTM, Dense, Embedding, GlobalAvgPool1D, TimeDistributed
from tests.conftest import needs_gpu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(units=(16,), learning_rate_init=0.01, random_state=0, device="cpu")


def order_task(n=800, T=30, seed=0):
    """Two markers, +1 and -1, at random steps of a noisy sequence: which came first?

    The answer depends on the order of two events far apart, which an MLP on
    the flattened sequence has to learn for every pair of positions.
    """
    rng = np.random.RandomState(seed)
    X = rng.normal(scale=0.3, size=(n, T, 1))
    first, second = np.sort(
        np.array([rng.choice(T, 2, replace=False) for _ in range(n)]), axis=1
    ).T
    y = rng.randint(0, 2, n)
    X[np.arange(n), first, 0] = np.where(y == 1, 1.0, -1.0) * 3
    X[np.arange(n), second, 0] = np.where(y == 1, -1.0, 1.0) * 3
    return X, y


@pytest.fixture(scope="module")
def memory_task():
    X, y = order_task()
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def test_a_task_that_needs_memory(memory_task):
    X_train, X_test, y_train, y_test = memory_task
    rnn = RNNClassifier(
        cell="lstm",
        units=(16,),
        learning_rate_init=0.01,
        max_iter=60,
        random_state=0,
        device="cpu",
    ).fit(X_train, y_train)
    mlp = MLPClassifier(
        hidden_layer_sizes=(64,),
        learning_rate_init=0.01,
        max_iter=200,
        random_state=0,
        device="cpu",
    ).fit(X_train.reshape(len(X_train), -1), y_train)
    rnn_score = rnn.score(X_test, y_test)
    mlp_score = mlp.score(X_test.reshape(len(X_test), -1), y_test)
    assert rnn_score > 0.9
    assert rnn_score > mlp_score + 0.1


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_every_cell_learns(cell, bidirectional, memory_task):
    X_train, X_test, y_train, y_test = memory_task
    clf = RNNClassifier(
        cell=cell, bidirectional=bidirectional, max_iter=25, **{**FAST, "units": (8,)}
    ).fit(X_train, y_train)
    assert clf.score(X_test, y_test) > 0.6
    kinds = [type(layer).__name__ for layer in clf.layers_]
    assert kinds[0] == {"lstm": "LSTM", "gru": "GRU", "rnn": "SimpleRNN"}[cell]
    assert clf.layers_[0].bidirectional is bidirectional


def test_stacked_layers_dense_and_dropout():
    X, y = order_task(n=200)
    clf = RNNClassifier(
        units=(8, 6),
        dense_units=(5,),
        dropout=0.1,
        max_iter=2,
        **{k: v for k, v in FAST.items() if k != "units"},
    ).fit(X, y)
    assert [type(layer).__name__ for layer in clf.layers_] == [
        "LSTM",
        "Dropout",
        "LSTM",
        "Dropout",
        "Dense",
        "Dropout",
        "Dense",
    ]
    assert clf.layers_[0].return_sequences and not clf.layers_[2].return_sequences


# -- input forms -----------------------------------------------------------------------


def test_flat_input_with_input_shape_equals_3d_input():
    X, y = order_task(n=200, T=10)
    a = RNNClassifier(max_iter=3, **FAST).fit(X, y)
    b = RNNClassifier(max_iter=3, input_shape=(10, 1), **FAST).fit(X.reshape(200, -1), y)
    assert a.input_shape_ == b.input_shape_ == (10, 1)
    assert_allclose(a.predict_proba(X), b.predict_proba(X.reshape(200, -1)), rtol=1e-5)
    c = RNNClassifier(max_iter=3, **FAST).fit(X.reshape(200, -1), y)  # one feature per step
    assert c.input_shape_ == (10, 1)
    assert_allclose(c.predict_proba(X.reshape(200, -1)), a.predict_proba(X), rtol=1e-5)


def test_multivariate_sequences_and_shape_errors():
    rng = np.random.RandomState(0)
    X, y = rng.rand(60, 7, 3), np.arange(60) % 2
    clf = RNNClassifier(max_iter=2, **FAST).fit(X, y)
    assert clf.input_shape_ == (7, 3) and clf.n_features_in_ == 21
    with pytest.raises(ValueError, match=r"fitted on sequences of shape \(7, 3\)"):
        clf.predict(rng.rand(5, 3, 7))
    with pytest.raises(ValueError, match="holds 20 values per sample, but X has 21"):
        RNNClassifier(input_shape=(10, 2), **FAST).fit(X.reshape(60, -1), y)
    with pytest.raises(ValueError, match="does not match the sequences in X"):
        RNNClassifier(input_shape=(3, 7), **FAST).fit(X, y)
    with pytest.raises(ValueError, match="expected sequences"):
        RNNClassifier(**FAST).fit(rng.rand(60, 2, 2, 2), y)


def test_padding_value_masks_padded_steps():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(120, 6, 2))
    y = (X[:, :3, 0].sum(axis=1) > 0).astype(int)
    clf = RNNClassifier(max_iter=5, padding_value=-9.0, **FAST).fit(X, y)
    padded = np.concatenate([X, np.full((120, 4, 2), -9.0)], axis=1)  # post-padding
    front = np.concatenate([np.full((120, 4, 2), -9.0), X], axis=1)  # pre-padding
    reference = RNNClassifier(max_iter=5, padding_value=-9.0, input_shape=(10, 2), **FAST)
    reference.fit(padded, y)
    assert_allclose(
        reference.predict_proba(padded), reference.predict_proba(front), rtol=1e-5, atol=1e-6
    )
    # with the weights of the model fitted on unpadded sequences, the padded ones
    # give the same predictions: padding steps change nothing
    for mine, theirs in zip(reference.layers_, clf.layers_):
        for key in mine.params:
            mine.params[key][...] = theirs.params[key]
    assert_allclose(reference.predict_proba(padded), clf.predict_proba(X), rtol=1e-5, atol=1e-6)
    assert not np.allclose(clf.predict_proba(X)[:, 1], 0.5, atol=1e-3)  # not a constant


def test_token_ids_with_embedding_and_padding():
    rng = np.random.RandomState(0)
    n, T, vocab = 300, 12, 20
    lengths = rng.randint(3, T + 1, n)
    tokens = rng.randint(1, vocab, (n, T)).astype(float)
    for i, length in enumerate(lengths):
        tokens[i, length:] = 0  # post-padding with id 0
    y = (tokens == 7).any(axis=1).astype(int)  # does token 7 occur?
    clf = RNNClassifier(
        layers=[Embedding(vocab, 8), GRU(16, return_sequences=True), GlobalAvgPool1D()],
        input_shape=(T,),
        padding_value=0,
        max_iter=40,
        learning_rate_init=0.01,
        random_state=0,
        device="cpu",
    ).fit(tokens, y)
    assert clf.input_shape_ == (T,)
    assert clf.score(tokens, y) > 0.85
    with pytest.raises(ValueError, match=r"token ids \(X\) must be whole numbers"):
        clf.predict(tokens + 0.5)


def test_time_distributed_then_recurrent():
    X, y = order_task(n=200, T=8)
    clf = RNNClassifier(
        layers=[TimeDistributed(Dense(4, activation="tanh")), LSTM(8)],
        max_iter=3,
        **{k: v for k, v in FAST.items() if k != "units"},
    )
    clf.fit(X, y)
    assert clf.layers_[0].output_shape_ == (8, 4)


def test_grid_search_over_simple_parameters_and_layer_entries():
    X, y = order_task(n=200, T=8)
    grid = GridSearchCV(
        RNNClassifier(max_iter=3, **FAST), {"cell": ["lstm", "gru"], "units": [(4,), (8,)]}, cv=2
    ).fit(X, y)
    assert len(grid.cv_results_["params"]) == 4
    listed = RNNClassifier(
        layers=[LSTM(4, return_sequences=True), GlobalAvgPool1D()], max_iter=2, device="cpu"
    )
    grid = GridSearchCV(listed, {"layers__0__units": [2, 4]}, cv=2).fit(X, y)
    assert grid.best_estimator_.layers_[0].units == grid.best_params_["layers__0__units"]
    assert listed.layers[0].units == 4


# -- the shared contract -------------------------------------------------------------------


def test_partial_fit_sample_weight_and_callbacks(memory_task):
    X_train, X_test, y_train, y_test = memory_task
    clf = RNNClassifier(**FAST)
    for _ in range(3):
        clf.partial_fit(
            X_train,
            y_train,
            classes=[0, 1],
            sample_weight=np.ones(len(y_train)),
            X_val=X_test,
            y_val=y_test,
        )
    assert len(clf.history_) == 3 and clf.history_[-1]["valid_score"] is not None
    stopped = RNNClassifier(max_iter=200, callbacks=[EarlyStopping(patience=2)], **FAST)
    stopped.fit(X_train, y_train, X_val=X_test, y_val=y_test)
    assert stopped.callbacks_[0].stopped_epoch_ == len(stopped.history_) < 200


def test_string_labels_and_persistence(memory_task):
    X_train, X_test, y_train, _ = memory_task
    labels = np.array(["plus first", "minus first"])[y_train]
    clf = RNNClassifier(max_iter=3, **FAST).fit(X_train, labels)
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict(X_test), clf.predict(X_test))
    assert set(clf.predict(X_test)) <= set(labels)


def test_clip_norm_limits_each_update(memory_task):
    X_train, _, y_train, _ = memory_task
    tiny = RNNClassifier(
        max_iter=1,
        batch_size=len(y_train),
        solver="sgd",
        momentum=0.0,
        learning_rate_init=1.0,
        clip_norm=1e-3,
        **{k: v for k, v in FAST.items() if k != "learning_rate_init"},
    )
    start = RNNClassifier(
        max_iter=1,
        solver="sgd",
        momentum=0.0,
        learning_rate_init=1e-30,
        batch_size=len(y_train),
        clip_norm=None,
        **{k: v for k, v in FAST.items() if k != "learning_rate_init"},
    )
    tiny.fit(X_train, y_train)
    start.fit(X_train, y_train)
    moved = np.sqrt(
        sum(
            ((a.params[k] - b.params[k]) ** 2).sum()
            for a, b in zip(tiny.layers_, start.layers_)
            for k in a.params
        )
    )
    assert moved == pytest.approx(1e-3, rel=1e-3)  # one SGD step of norm lr * clip_norm


def test_regressor():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(400, 10, 1))
    y = X[:, :4, 0].sum(axis=1)  # needs the early steps
    reg = RNNRegressor(
        units=(16,), learning_rate_init=0.01, max_iter=60, random_state=0, device="cpu"
    ).fit(X, y)
    assert reg.predict(X).shape == (400,)
    assert reg.score(X, y) > 0.9
    multi = RNNRegressor(max_iter=2, **FAST).fit(X, np.column_stack([y, -y]))
    assert multi.predict(X).shape == (400, 2)


def test_bad_parameters():
    X, y = order_task(n=40, T=5)
    with pytest.raises(ValueError, match="The 'cell' parameter"):
        RNNClassifier(cell="transformer").fit(X, y)
    with pytest.raises(ValueError, match="units must be a sequence of positive integers"):
        RNNClassifier(units=(4, 0), device="cpu").fit(X, y)
    with pytest.raises(TypeError, match="Sparse data"):
        import scipy.sparse as sp

        RNNClassifier(device="cpu").fit(sp.csr_matrix(X.reshape(40, -1)), y)


def test_trains_on_every_device(device, memory_task):
    X_train, X_test, y_train, y_test = memory_task
    clf = RNNClassifier(cell="gru", max_iter=20, **{**FAST, "device": device})
    clf.fit(X_train, y_train)
    assert clf.device_.startswith(device) and clf.score(X_test, y_test) > 0.6


@pytest.mark.gpu
@needs_gpu
def test_token_ids_on_the_device_are_checked():
    """CuPy token ids get the same range check as NumPy ones, on the device."""
    import cupy as cp

    rng = np.random.RandomState(0)
    tokens = rng.randint(0, 10, (40, 6))
    y = (tokens == 3).any(axis=1).astype(int)
    clf = RNNClassifier(layers=[Embedding(10, 4), LSTM(4)], max_iter=2, device="cuda").fit(
        cp.asarray(tokens), y
    )
    assert clf.input_shape_ == (6,)
    with pytest.raises(ValueError, match="whole token ids"):
        clf.predict(cp.asarray(tokens + 5))
    with pytest.raises(ValueError, match="whole token ids"):
        clf.fit(cp.asarray(tokens - 1), y)


MNIST_DIR = os.environ.get("SKNET_MNIST_DIR")


@pytest.mark.skipif(not MNIST_DIR, reason="MNIST not configured (set SKNET_MNIST_DIR)")
@pytest.mark.slow
def test_sequential_mnist_reaches_95_percent():
    from sknet.datasets import load_mnist

    X, y = load_mnist(MNIST_DIR, subset="test", flatten=False)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=8000, test_size=2000, stratify=y, random_state=0
    )
    clf = RNNClassifier(
        units=(128,), batch_size=128, max_iter=15, random_state=0, device="cpu"
    ).fit(X_train, y_train)
    assert clf.score(X_test, y_test) >= 0.95

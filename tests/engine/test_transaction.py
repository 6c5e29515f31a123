"""Tests for sknet/engine/_transaction.py: a fit either completes or leaves the previous model."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet import MLPClassifier, NeuralNetClassifier
from sknet.callbacks import Callback
from sknet.engine._trainer import Trainer
from sknet.engine._transaction import FitTransaction
from sknet.layers import Dense
from tests.user_containers import Gate, Wrap

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def data(digits):
    X, y = digits
    return X[:300], y[:300]


def make_clf():
    return MLPClassifier(hidden_layer_sizes=(8,), max_iter=3, random_state=0, device="cpu")


@pytest.fixture
def fitted(data):
    return make_clf().fit(*data)


def train_one_batch(clf, X):
    """Give the layers gradients and buffers, as training would."""
    network = clf.network_
    Trainer(network, clf._loss)
    Z = network.forward(np.asarray(X[:20], dtype=np.float32), training=True)
    _, dZ = clf._loss(Z, np.eye(Z.shape[1], dtype=np.float32)[np.arange(20) % Z.shape[1]])
    network.backward(dZ)
    assert all(layer.grads for layer in network.layers)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_exception_restores_the_fitted_model(error, fitted, data):
    X, _ = data
    clf = fitted
    proba, n_iter, n_history = clf.predict_proba(X), clf.n_iter_, len(clf.history_)
    loss_curve = list(clf.loss_curve_)
    with pytest.raises(error, match="boom"):
        with FitTransaction(clf):
            for w in clf.network_.weights():
                w[...] = 0
            clf.n_iter_ = 99
            clf.history_.append({"epoch": 99})
            clf.loss_curve_.append(1.0)
            clf.added_ = "added inside the block"
            clf._no_improvement_count = 99  # private fit state the transaction owns
            clf._added = 1  # not the fit's: left alone (a Pipeline sets such attributes)
            raise error("boom")
    assert_allclose(clf.predict_proba(X), proba, rtol=1e-6)
    assert clf.n_iter_ == n_iter
    assert len(clf.history_) == n_history and clf.loss_curve_ == loss_curve
    assert not hasattr(clf, "added_") and clf._no_improvement_count != 99
    assert clf._added == 1
    assert clf.network_.backend.name == "cpu"
    assert all(type(w) is np.ndarray for w in clf.network_.weights())
    # still a working estimator: it refits
    clf.fit(*data)
    assert clf.n_iter_ == 3


def test_an_exception_on_an_unfitted_estimator_removes_every_fitted_attribute(fitted, data):
    clf = make_clf()
    before = set(vars(clf))
    params = set(clf.get_params(deep=False))
    assert before == params
    with pytest.raises(ValueError, match="bad data"):
        with FitTransaction(clf):
            clf.network_ = fitted.network_
            clf._loss = fitted._loss
            clf.n_iter_ = 1
            clf.history_ = [{}]
            clf._optimizer = object()
            clf._parent_callback_ctx = "set by a scikit-learn Pipeline, not by the fit"
            raise ValueError("bad data")
    assert set(vars(clf)) == params | {"_parent_callback_ctx"}
    assert not clf.__sklearn_is_fitted__()
    assert clf.get_params() == make_clf().get_params()
    assert clf._parent_callback_ctx.startswith("set by")
    # the network it was handed is not released by the abort: it is no longer this one's
    assert fitted.predict(data[0]).shape == (300,)


def test_without_an_exception_nothing_is_restored_and_training_memory_is_released(fitted, data):
    X, _ = data
    clf = fitted
    proba = clf.predict_proba(X)
    with FitTransaction(clf, release_memory=False):
        train_one_batch(clf, X)
        clf.network_.layers[-1].params["b"][0] += 5.0  # favours class 0
        clf.n_iter_ = 99
        clf.added_ = "kept"
    assert clf.n_iter_ == 99 and clf.added_ == "kept"
    assert not np.allclose(clf.predict_proba(X), proba)
    for layer in clf.network_.layers:
        assert layer.grads == {} and layer._buffers == {} and layer._cache == {}
        assert layer.params  # the model stays
    assert getattr(clf._loss, "_grad", None) is None  # the loss keeps no buffer


def test_an_exception_also_releases(fitted, data):
    clf = fitted
    with pytest.raises(RuntimeError):
        with FitTransaction(clf):
            train_one_batch(clf, data[0])
            raise RuntimeError("after a batch")
    for layer in clf.network_.layers:
        assert layer.grads == {} and layer._buffers == {}


class FakeBackend:
    def __init__(self):
        self.released = 0

    def release_memory(self):
        self.released += 1


@pytest.mark.parametrize("fails", [False, True])
@pytest.mark.parametrize("release_memory, expected", [(True, 1), (False, 0)])
def test_release_memory(release_memory, expected, fails, fitted):
    fake = FakeBackend()
    transaction = FitTransaction(fitted, release_memory=release_memory)
    try:
        with transaction:
            transaction.backend = fake
            if fails:
                raise RuntimeError("fail")
    except RuntimeError:
        assert fails
    assert fake.released == expected


def test_release_memory_without_a_backend_does_nothing(fitted):
    with FitTransaction(fitted) as transaction:
        assert transaction.backend is None
    assert fitted.__sklearn_is_fitted__()


def test_snapshot_is_a_copy(fitted, data):
    """The snapshot does not share arrays with the live model (in-place changes are undone)."""
    X, _ = data
    W = fitted.network_.layers[0].params["W"]
    saved = W.copy()
    with pytest.raises(RuntimeError):
        with FitTransaction(fitted):
            W += 1.0
            raise RuntimeError
    assert_array_equal(fitted.network_.layers[0].params["W"], saved)


@pytest.mark.parametrize(
    "make, n_holders",
    [
        (lambda: [Wrap(Dense(8, activation="tanh"))], 2),
        (lambda: [Wrap(Dense(8, activation="tanh")), Gate(Dense(6))], 4),
    ],
    ids=["discovered", "declared"],
)
def test_a_failed_warm_fit_rolls_back_every_inner_array_of_a_users_container(
    make, n_holders, data
):
    """The snapshot is the tree's arrays: a user's container's inner layers come back too."""

    class Fail(Callback):
        def on_epoch_end(self, state, epoch, logs):
            if epoch == 5:
                raise RuntimeError("boom")

    X, y = data
    clf = NeuralNetClassifier(
        make(),
        max_iter=3,
        warm_start=True,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    before = [
        {k: np.array(v) for k, v in {**leaf.params, **leaf.state}.items()}
        for _, leaf in clf.network_.leaves()
    ]
    assert len(before) == n_holders  # the inner layers, Gate's scalar, the head
    with pytest.raises(RuntimeError, match="boom"):
        clf.set_params(callbacks=[Fail()]).fit(X, y)
    after = [{**leaf.params, **leaf.state} for _, leaf in clf.network_.leaves()]
    for saved, now in zip(before, after, strict=True):
        for key, value in saved.items():
            assert_array_equal(now[key], value)


# -- what a partial_fit call allocates ------------------------------------------------


def _partial_fit_peak(clf, X, y):
    """The peak of what one ``partial_fit`` call allocates on the host (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        clf.partial_fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("solver", ["adam", "adamw", "sgd"])
def test_a_partial_fit_call_allocates_less_than_twice_the_model(solver):
    """No copy of the model per call: the rollback reuses its arrays from call to call."""
    rng = np.random.RandomState(0)
    X, y = rng.rand(16, 784).astype(np.float32), np.arange(16) % 10
    clf = MLPClassifier(hidden_layer_sizes=(1000, 1000), solver=solver, random_state=0)
    clf.set_params(device="cpu").partial_fit(X, y, classes=np.arange(10))
    model = sum(int(w.nbytes) for w in clf.network_.weights())
    clf.partial_fit(X, y)
    peaks = [_partial_fit_peak(clf, X, y) for _ in range(2)]
    assert max(peaks) < 2 * model, [peak / model for peak in peaks]


def _state(clf):
    optimizer = clf._optimizer
    arrays = [np.array(w) for w in clf.network_.weights()]
    for name in optimizer.state_names:
        arrays += [np.array(s) for s in getattr(optimizer, name)]
    return arrays


@pytest.mark.parametrize("solver", ["adam", "sgd"])
def test_a_failed_partial_fit_leaves_the_model_and_the_next_calls_go_on_as_without_it(
    solver, data
):
    class Fail(Callback):
        def on_epoch_end(self, state, epoch, logs):
            raise RuntimeError("boom")  # after the step: the model has changed

    X, y = data
    X = X.astype(np.float32)
    one, two = (
        MLPClassifier(hidden_layer_sizes=(8,), solver=solver, random_state=0, device="cpu")
        for _ in range(2)
    )
    for clf in (one, two):
        clf.partial_fit(X[:50], y[:50], classes=np.arange(10))
        clf.partial_fit(X[50:100], y[50:100])
    before = _state(two)
    with pytest.raises(RuntimeError, match="boom"):
        two.set_params(callbacks=[Fail()]).partial_fit(X[100:150], y[100:150])
    for saved, now in zip(before, _state(two), strict=True):
        assert_array_equal(now, saved)
    two.set_params(callbacks=None)
    for rows in (slice(100, 150), slice(150, 200), slice(200, 250)):
        for clf in (one, two):
            clf.partial_fit(X[rows], y[rows])
        for a, b in zip(_state(one), _state(two), strict=True):
            assert_array_equal(a, b)


def test_the_reused_copies_are_never_pickled_nor_part_of_the_optimizer_state(data):
    import pickle

    X, y = data
    clf = MLPClassifier(hidden_layer_sizes=(8,), random_state=0, device="cpu")
    clf.partial_fit(X[:50], y[:50], classes=np.arange(10)).partial_fit(X[50:100], y[50:100])
    spare = vars(clf._optimizer)["_spare"]  # kept for the next call
    assert len(spare["weights"]) == len(clf.network_.weights())
    arrays, scalars = clf._optimizer.snapshot()
    assert "_spare" not in scalars and set(arrays) == {"ms", "vs"}
    again = pickle.loads(pickle.dumps(clf))
    assert "_spare" not in vars(again._optimizer)
    assert_array_equal(again.predict_proba(X), clf.predict_proba(X))
    clf.fit(X, y)  # a fit from scratch: a new optimizer, no copies kept
    assert "_spare" not in vars(clf._optimizer)

"""Where capabilities meet: containers, frozen and forward-only layers, user layers, warm starts.

Each test here reproduces a defect found where two capabilities meet (a
forward-only layer inside a container after an unfreeze, ``Unfreeze`` on the
containers ``from_estimator`` returns, a user's layer returning a gradient of
the wrong shape...), and failed before the layer tree and the training plan.
"""

import pickle
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sknet import MLPClassifier, NeuralNetClassifier, NeuralNetRegressor
from sknet import autodiff as ad
from sknet.backend import get_backend
from sknet.callbacks import PrintLog, ProgressBar, Unfreeze
from sknet.engine._network import Network
from sknet.engine._sharding import cpu_threads
from sknet.engine._trainer import Trainer
from sknet.layers import (
    Concatenate,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool1D,
    Lambda,
    Layer,
    Residual,
    Sequential,
    TimeDistributed,
    from_estimator,
)
from sknet.layers._base import build_layer
from sknet.layers._tree import leaves
from sknet.losses import SquaredError
from sknet.utils import check_layer_gradients

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(max_iter=3, random_state=0, device="cpu")


class Swish(Layer):
    """A forward-only layer without parameters."""

    def forward(self, X, *, training):
        return X * ad.sigmoid(X)


class LayerNorm(Layer):
    """The README's layer, as written there: no trainable/lr_scale/weights declared."""

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        self.add_param("gamma", np.ones(input_shape))
        self.add_param("beta", np.zeros(input_shape))
        return input_shape

    def forward(self, X, *, training):
        centered = X - ad.mean(X, axis=1, keepdims=True)
        scale = ad.sqrt(ad.var(X, axis=1, keepdims=True) + 1e-5)
        return centered / scale * self.params["gamma"] + self.params["beta"]


def _host(network, array):
    return np.array(network.backend.to_numpy(array))


def _built(layer, input_shape):
    layer = clone(layer)
    build_layer(
        layer,
        input_shape,
        backend=get_backend("cpu"),
        dtype=np.float64,
        rng=np.random.RandomState(0),
    )
    return layer


# -- the training plan: no stale "no input gradient" decision --------------------------------


def _loss_of_first_weights(network, X, Y, W):
    network.layers[0].params["W"][...] = W
    Z = network.forward(X, training=False)
    return float(SquaredError()(Z, Y)[0])


def test_a_forward_only_branch_passes_its_input_gradient_after_an_unfreeze(digits):
    # Frozen bottom layer, then a Concatenate whose first branch is forward-only.
    # Unfreezing the bottom layer (a relayout, as Unfreeze and warm starts do) must
    # make the branch record its input again: its gradient reaches the bottom layer.
    X = np.asarray(digits[0][:20], dtype=np.float64)
    Y = np.random.RandomState(0).normal(size=(20, 7))
    layers = [Dense(5, trainable=False), Concatenate([Swish(), Dense(2)]), Dense(7)]
    network = Network.build(
        layers, (64,), backend=get_backend("cpu"), dtype=np.float64, rng=np.random.RandomState(0)
    )
    loss = SquaredError()
    trainer = Trainer(network, loss)
    trainer.loss_and_gradients(X, Y, None, 20)  # one batch with the bottom frozen
    network.layers[0].trainable = True
    trainer._lay_out_parameters()
    trainer.loss_and_gradients(X, Y, None, 20)
    analytic = _host(network, network.layers[0].grads["W"]).copy()
    W = _host(network, network.layers[0].params["W"]).copy()
    numeric, eps = np.zeros_like(W), 1e-6
    for index in [(0, 0), (10, 1), (33, 4), (63, 2)]:
        for sign in (1, -1):
            shifted = W.copy()
            shifted[index] += sign * eps
            numeric[index] += sign * _loss_of_first_weights(network, X, Y, shifted) / (2 * eps)
        assert_allclose(analytic[index], numeric[index], rtol=1e-5, atol=1e-9)


def test_a_forward_only_first_layer_in_a_container_trains_after_unfreeze(digits):
    X, y = digits
    layers = [Sequential([Swish(), Dense(16, trainable=False)]), Dense(8, activation="relu")]
    clf = NeuralNetClassifier(layers, callbacks=[Unfreeze(epoch=2)], **FAST).fit(X, y)
    assert clf.callbacks_[0].unfrozen_ == [0]
    first = clf.layers_[0].blocks_[1]
    assert first.trainable
    start = NeuralNetClassifier(layers, max_iter=1, random_state=0, device="cpu").fit(X, y)
    assert not np.array_equal(
        _host(clf.network_, first.params["W"]), start.layers_[0].blocks_[1].params["W"]
    )


# -- containers: one tree, flags for a whole subtree -----------------------------------------


def test_unfreeze_trains_the_containers_from_estimator_returns(digits):
    X, y = digits
    source = NeuralNetClassifier(
        [Residual([Dense(64, activation="relu")]), Sequential([Dense(16, activation="relu")])],
        **FAST,
    ).fit(X, y)
    reused = from_estimator(source)
    assert [type(layer).__name__ for layer in reused] == ["Residual", "Sequential"]
    target = NeuralNetClassifier(
        [*reused, Dense(8)], callbacks=[Unfreeze(epoch=2, lr_scale=0.5)], **FAST
    ).fit(X, y)
    assert target.callbacks_[0].unfrozen_ == [0, 1]
    for container, copy in zip(target.layers_[:2], reused):
        inner = container.sublayers()[0]
        assert inner.trainable and inner.lr_scale == 0.5
        before = (
            copy.sublayers()[0].weights["W"] if copy.sublayers() else copy.layers[0].weights["W"]
        )
        assert not np.array_equal(_host(target.network_, inner.params["W"]), before)


@pytest.mark.parametrize("container", ["Sequential", "Residual", "Concatenate", "TimeDistributed"])
def test_a_containers_trainable_sets_its_whole_subtree(container):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 4, 3))
    y = rng.normal(size=60)
    make = {
        "Sequential": lambda **kw: Sequential([Dense(3), Dense(3)], **kw),
        "Residual": lambda **kw: Residual([Dense(3)], **kw),
        "Concatenate": lambda **kw: Concatenate([Dense(2), Dense(3)], **kw),
        "TimeDistributed": lambda **kw: TimeDistributed(Dense(3), **kw),
    }[container]
    inner = make(trainable=False)
    wrapped = inner if container == "TimeDistributed" else TimeDistributed(inner)
    reg = NeuralNetRegressor([wrapped, GlobalAvgPool1D()], **FAST).fit(X, y)
    inside = [leaf for _, leaf in leaves([reg.layers_[0]])]
    assert inside and not any(leaf.trainable for leaf in inside)
    # and True unfreezes layers frozen inside
    frozen_inside = make(trainable=True)
    for _, layer in [(None, frozen_inside)]:
        for block in (
            getattr(layer, "layers", None) or getattr(layer, "branches", None) or [layer.layer]
        ):
            block.set_params(trainable=False)
    wrapped = frozen_inside if container == "TimeDistributed" else TimeDistributed(frozen_inside)
    reg = NeuralNetRegressor([wrapped, GlobalAvgPool1D()], **FAST).fit(X, y)
    assert all(leaf.trainable for _, leaf in leaves([reg.layers_[0]]))


def test_a_warm_start_checks_flags_as_a_fresh_fit_does(digits):
    X, y = digits
    clf = NeuralNetClassifier([Dense(8)], warm_start=True, **FAST).fit(X, y)
    for bad, message in [
        (dict(layers__0__lr_scale=-1.0), "lr_scale must be a positive number"),
        (dict(layers__0__trainable="no"), "trainable must be True or False"),
        (dict(layers__0__lr_scale=float("nan")), "lr_scale must be a positive number"),
    ]:
        with pytest.raises(ValueError, match=message):
            clf.set_params(**bad).fit(X, y)
        clf.set_params(layers__0__lr_scale=1.0, layers__0__trainable=True)
    clf.fit(X, y)  # and the model is still usable


@pytest.mark.parametrize("lr_scale", [-5, 0, float("inf"), "big"])
def test_unfreeze_refuses_an_lr_scale_that_would_not_train(digits, lr_scale):
    X, y = digits
    clf = NeuralNetClassifier(
        [Dense(8, trainable=False)], callbacks=[Unfreeze(epoch=1, lr_scale=lr_scale)], **FAST
    )
    with pytest.raises(ValueError, match="'lr_scale' parameter of Unfreeze must be a float"):
        clf.fit(X, y)


def test_empty_containers_are_refused():
    for layer, message in [
        (Sequential([]), "layers must hold at least one layer"),
        (Residual([]), "layers must hold at least one layer"),
        (Concatenate([]), "branches must hold at least one layer"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_layer_gradients(layer, (4,))


def test_concatenate_on_the_last_axis_when_branches_change_the_rank():
    # Sequences (6, 4) in; flat outputs (4,) and (3,) joined on their last axis.
    layer = Concatenate([GlobalAvgPool1D(), Sequential([Flatten(), Dense(3)])], axis=-1)
    assert _built(layer, (6, 4)).output_shape_ == (7,)
    errors = check_layer_gradients(layer, (6, 4))
    assert max(errors.values()) < 1e-6


def test_a_residual_shortcut_for_images_that_are_not_square():
    block = Residual([Conv2D(4, 3, stride=(2, 1), padding="same")])
    built = _built(block, (2, 8, 6))
    assert built.output_shape_ == (4, 4, 6)
    assert built.shortcut_[0]._stride == (2, 1)
    errors = check_layer_gradients(block, (2, 8, 6))
    assert max(errors.values()) < 1e-6


def test_time_distributed_reseeds_its_layer():
    layer = TimeDistributed(Dropout(0.5))
    backend = get_backend("cpu")
    layer.build((5, 8), backend=backend, dtype=np.float64, rng=np.random.RandomState(0))
    X = np.ones((4, 5, 8))

    def mask(seed):
        layer.reseed(seed)
        return layer.forward(X, training=True) != 0

    first = mask(1)
    assert not np.array_equal(first, mask(2))
    assert_array_equal(first, mask(1))  # the same stream again


# -- the contract of a user's layer ---------------------------------------------------------


def test_a_layer_declaring_no_training_parameters_freezes_clones_and_transfers(digits):
    X, y = digits
    layer = LayerNorm()
    assert {"trainable", "lr_scale", "weights"} <= set(layer.get_params())
    assert clone(layer.set_params(lr_scale=0.5)).lr_scale == 0.5
    clf = NeuralNetClassifier([Dense(16), LayerNorm(trainable=False)], **FAST).fit(X, y)
    assert_array_equal(_host(clf.network_, clf.layers_[1].params["gamma"]), np.ones(16))
    grid = GridSearchCV(
        NeuralNetClassifier([Dense(8), LayerNorm()], **FAST),
        {"layers__1__lr_scale": [0.5, 1.0]},
        cv=2,
    ).fit(X[:300], y[:300])
    assert grid.best_params_["layers__1__lr_scale"] in (0.5, 1.0)
    reused = from_estimator(clf)
    assert sorted(reused[1].weights) == ["beta", "gamma"] and reused[1].trainable is False


def test_add_param_declares_what_the_l2_penalty_reaches():
    class Scale(Layer):
        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.add_param("w", np.ones(input_shape), regularized=True)
            self.add_param("b", np.zeros(input_shape))
            return input_shape

        def forward(self, X, *, training):
            return X * self.params["w"] + self.params["b"]

    layer = _built(Scale(), (3,))
    assert max(check_layer_gradients(Scale(), (3,)).values()) < 1e-6
    assert layer.regularized == ("w",)
    assert type(layer).regularized == ()  # declared per layer, not for the class


def test_a_subclass_of_dense_overriding_forward_is_differentiated_from_it(digits):
    class DoubledDense(Dense):
        def forward(self, X, *, training):
            return 2.0 * (X @ self.params["W"] + self.params["b"])

    errors = check_layer_gradients(DoubledDense(3), (4,))
    assert max(errors.values()) < 1e-6  # Dense's own backward would be 50% off
    X, y = digits
    clf = NeuralNetClassifier([DoubledDense(16)], max_iter=30, random_state=0, device="cpu")
    assert clf.fit(X, y).score(X, y) > 0.9


class WideGradient(Layer):
    """Returns a gradient with one column too many."""

    def forward(self, X, *, training):
        return X

    def backward(self, dY):
        return self.xp.concatenate([dY, dY[:, :1]], axis=1)


class WideOutput(Layer):
    """Declares its input shape but returns one column more."""

    def forward(self, X, *, training):
        return self.xp.concatenate([X, X[:, :1]], axis=1)


def test_a_user_layer_returning_a_gradient_of_the_wrong_shape_is_a_clear_error(digits):
    X, y = digits
    clf = NeuralNetClassifier([Dense(8), WideGradient(), Dense(4)], **FAST)
    with pytest.raises(ValueError, match=r"WideGradient.backward returned a gradient of shape"):
        clf.fit(X, y)
    assert not clf.__sklearn_is_fitted__()


def test_a_user_layer_returning_an_output_of_the_wrong_shape_is_a_clear_error(digits):
    X, y = digits
    clf = NeuralNetClassifier([Dense(8), WideOutput(), Dense(4)], **FAST)
    with pytest.raises(ValueError, match=r"WideOutput.forward returned an array of shape"):
        clf.fit(X, y)


def test_a_wrong_gradient_never_reaches_a_kernel(tmp_path):
    # Before the boundary checks, the Numba kernel under the Dense layer wrote past
    # its array and the process died later (free(): invalid size, SIGSEGV). Each run
    # must end cleanly, with the message, several times over.
    script = tmp_path / "wide.py"
    script.write_text(
        textwrap.dedent(
            """
            import warnings
            from sklearn.datasets import load_digits
            from sknet import NeuralNetClassifier
            from sknet.layers import Dense, Layer

            class Wide(Layer):
                def forward(self, X, *, training):
                    return X
                def backward(self, dY):
                    return self.xp.concatenate([dY, dY, dY], axis=1)

            X, y = load_digits(return_X_y=True)
            warnings.simplefilter("ignore")
            for _ in range(3):
                try:
                    NeuralNetClassifier([Dense(32), Wide(), Dense(16)], max_iter=2,
                                        device="cpu").fit(X / 16, y)
                except ValueError as exc:
                    print("refused:", str(exc)[:40])
            """
        )
    )
    for _ in range(3):
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr[-1000:]
        assert result.stdout.count("refused: Wide.backward returned a gradient") == 3


def test_a_lambda_that_cannot_be_found_again_is_not_saved():
    layer = Lambda(lambda X: X * 2)
    with pytest.raises(TypeError, match="cannot be saved"):
        pickle.dumps(layer)
    sio = pytest.importorskip("skops.io", reason="needs skops (the skops extra)")
    with pytest.raises(TypeError, match="define the function at module level|Define the"):
        sio.dumps(layer)
    clone(layer)  # cloning and fitting need no pickling
    NeuralNetRegressor([Lambda(lambda X: X * 2)], max_iter=1, device="cpu").fit(
        np.ones((10, 2)), np.ones(10)
    )


def test_a_forward_only_first_layer_takes_sparse_input(digits):
    sp = pytest.importorskip("scipy.sparse")

    class SparseLinear(Layer):
        accepts_sparse = True

        def build(self, input_shape, *, backend, dtype, rng):
            super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
            self.add_param("W", rng.normal(0, 0.1, (input_shape[0], 16)), regularized=True)
            return (16,)

        def forward(self, X, *, training):
            return X @ self.params["W"]  # the operator, as a user writes it

    X, y = digits
    Xs = sp.csr_matrix(X)
    dense = NeuralNetClassifier([SparseLinear()], **FAST).fit(X, y)
    sparse = NeuralNetClassifier([SparseLinear()], **FAST).fit(Xs, y)
    assert_allclose(sparse.predict_proba(Xs), dense.predict_proba(X), rtol=1e-4, atol=1e-6)


# -- the estimator around the network -------------------------------------------------------


def test_an_error_inside_a_pipeline_surfaces_as_itself(digits):
    X, y = digits
    pipe = make_pipeline(StandardScaler(), NeuralNetClassifier([Conv2D(4, 3)], device="cpu"))
    with pytest.raises(ValueError, match="Conv2D"):
        pipe.fit(X, y)  # was AttributeError: no attribute '_parent_callback_ctx'


def test_two_fits_in_two_threads_leave_the_blas_as_it_was(digits):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    X, y = digits
    images = X.reshape(-1, 1, 8, 8)
    before = cpu_threads()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        expected = cpu_threads()
        errors = []

        def fit():
            try:
                NeuralNetClassifier(
                    [Conv2D(32, 3, padding="same"), Conv2D(32, 3, padding="same")],
                    batch_size=64,
                    **FAST,
                ).fit(images, y)
            except Exception as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=fit) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert cpu_threads() == expected
    assert cpu_threads() == before


def test_progress_bar_closes_before_print_log_prints(digits, monkeypatch, capsys):
    import sknet.callbacks._progress as progress

    events = []

    class FakeBar:
        def __init__(self, total, initial=0, unit="rows", **kwargs):
            self.total, self.n, self.unit = total, initial, unit
            if unit == "rows":  # the epoch's batches (the bar over the epochs stays open)
                events.append("open")

        def update(self, n):
            self.n += n

        def set_postfix(self, **kwargs):
            pass

        def close(self):
            events.append(
                f"close at {self.n}/{self.total}" + ("" if self.unit == "rows" else " epochs")
            )

    monkeypatch.setattr(progress, "_bar_class", lambda: FakeBar)
    real_print = print

    def recording_print(*args, **kwargs):
        events.append("print")
        real_print(*args, **kwargs)

    monkeypatch.setattr(progress, "print", recording_print, raising=False)
    X, y = digits
    MLPClassifier(hidden_layer_sizes=(8,), callbacks=[PrintLog(), ProgressBar()], **FAST).fit(
        X[:300], y[:300]
    )
    rows = [e for e in events if e != "print"]
    assert rows == ["open", "close at 300/300"] * 3 + ["close at 3/3 epochs"]
    # every batch bar is closed, full, before the row of its epoch is printed
    assert events[1:] == ["open", "close at 300/300", "print"] * 3 + ["close at 3/3 epochs"]


def test_a_one_batch_partial_fit_does_not_copy_the_estimator(digits, monkeypatch):
    import copy

    X, y = digits
    clf = MLPClassifier(hidden_layer_sizes=(32,), device="cpu").partial_fit(
        X[:50], y[:50], classes=np.arange(10)
    )
    calls = []
    original = copy.deepcopy

    def counting(obj, *args, **kwargs):
        calls.append(type(obj).__name__)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", counting)
    clf.partial_fit(X[50:100], y[50:100])
    assert "Network" not in calls and "MLPClassifier" not in calls and "Adam" not in calls


def test_a_loss_output_of_another_shape_never_reaches_the_predictions(digits):
    from sknet.losses import Loss

    class TruncatingSoftmax(Loss):
        out_activation = "softmax"

        def output(self, Z):
            return ad.softmax(Z)[:, :-1]  # drops a class

        def value(self, Z, Y):
            return -ad.sum(Y * ad.log_softmax(Z), axis=1)

    X, y = digits
    clf = NeuralNetClassifier([Dense(8)], loss=TruncatingSoftmax(), **FAST)
    with pytest.raises(ValueError, match=r"TruncatingSoftmax.output returned \(\d+, 9\)"):
        clf.fit(X, y, X_val=X[:50], y_val=y[:50])

"""Tests for sknet/engine/_trainer.py: the flat parameter layout, batches, epochs and callbacks."""

from types import SimpleNamespace

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.callbacks import Callback
from sknet.engine._callbacks import BestWeights, TrainingState
from sknet.engine._network import Network
from sknet.engine._optimizers import SGD, Adam
from sknet.engine._trainer import Trainer
from sknet.engine._types import BackendData, Diverged
from sknet.layers import BatchNorm, Dense
from sknet.losses import make_loss


def build(layers, n_features, backend, *, dtype=np.float32, seed=0):
    return Network.build(
        layers, (n_features,), backend=backend, dtype=dtype, rng=np.random.RandomState(seed)
    )


def host(backend, x):
    return np.array(backend.to_numpy(x))


@pytest.fixture(scope="module")
def digits_xy(digits):
    X, y = digits
    X, y = X[:600].astype(np.float32), y[:600]
    return X, np.eye(10, dtype=np.float32)[y]


def digits_setup(backend, digits_xy, *, clip_norm=None, callbacks=(), layers=None):
    X, Y = digits_xy
    layers = layers or [Dense(32, "relu"), Dense(10)]
    network = build(layers, X.shape[1], backend)
    trainer = Trainer(
        network, make_loss("log_loss"), alpha=1e-4, clip_norm=clip_norm, callbacks=callbacks
    )
    data = BackendData(backend.asarray(X), backend.asarray(Y), None)
    return network, trainer, data


# -- the flat layout ---------------------------------------------------------------------
def test_params_and_grads_are_views_of_the_flat_arrays(backend):
    network = build([Dense(5, "relu"), BatchNorm(), Dense(3)], 4, backend)
    before = {
        (i, k): host(backend, v)
        for i, layer in enumerate(network.layers)
        for k, v in layer.params.items()
    }
    trainer = Trainer(network, make_loss("log_loss"))
    shares = backend.xp.shares_memory
    total = 0
    for i, layer in enumerate(network.layers):
        assert set(layer.grads) == set(layer.params)
        for key, value in layer.params.items():
            assert shares(value, trainer.parameters.flat_params)
            assert shares(layer.grads[key], trainer.parameters.flat_grads)
            assert layer.grads[key].shape == value.shape
            assert_array_equal(host(backend, value), before[i, key])  # values preserved
            total += value.size
    assert trainer.parameters.flat_params.shape == trainer.parameters.flat_grads.shape == (total,)
    assert trainer.parameters.flat_params.dtype == np.float32
    # the regularized parameters (the two W) come first, in layer order
    W0, W2 = network.layers[0].params["W"], network.layers[2].params["W"]
    n_reg = W0.size + W2.size
    assert trainer.parameters.regularized_ranges == [(0, n_reg)]
    assert_array_equal(
        host(backend, trainer.parameters.flat_params[:n_reg]),
        np.concatenate([before[0, "W"].ravel(), before[2, "W"].ravel()]),
    )
    # and writing the flat array writes the layers' parameters
    trainer.parameters.flat_params[...] = 7
    assert all(bool((p == 7).all()) for p in network.params())


def test_loss_and_gradients_match_finite_differences(backend):
    rng = np.random.RandomState(0)
    network = build([Dense(4, "tanh"), Dense(3)], 3, backend, dtype=np.float64)
    trainer = Trainer(network, make_loss("log_loss"), alpha=0.3)
    X = backend.asarray(rng.standard_normal((6, 3)))
    Y = backend.asarray(np.eye(3)[rng.randint(0, 3, 6)])
    w = backend.asarray(rng.uniform(0.5, 2.0, 6))
    sw_sum = float(host(backend, w).sum())

    def loss_at():
        return float(trainer.loss_and_gradients(X, Y, w, sw_sum))

    loss_at()
    grads = host(backend, trainer.parameters.flat_grads)
    flat, eps = trainer.parameters.flat_params, 1e-6
    n = flat.shape[0]
    # entries of both W (regularized, first) and of the biases (last)
    n_reg = trainer.parameters.regularized_ranges[0][1]
    for i in (0, 5, n_reg - 1, n_reg, n - 1):
        value = float(flat[i])
        flat[i] = value + eps
        up = loss_at()
        flat[i] = value - eps
        down = loss_at()
        flat[i] = value
        assert_allclose(grads[i], (up - down) / (2 * eps), rtol=1e-6, atol=1e-9)
    # the L2 term is in the loss: the same point without it has a lower loss
    plain = Trainer(network, make_loss("log_loss"), alpha=0.0)
    assert float(plain.loss_and_gradients(X, Y, w, sw_sum)) < loss_at()


# -- run_batches (as a worker runs it: no estimator, no callbacks) -------------------------
def test_run_batches_lowers_the_loss_over_epochs(backend, digits_xy):
    network, trainer, data = digits_setup(backend, digits_xy)
    optimizer = Adam([trainer.parameters.flat_params], backend, learning_rate_init=0.01)
    order = backend.asarray(np.random.RandomState(0).permutation(data.X.shape[0]))
    losses = []
    for epoch in range(4):
        total = trainer.run_batches(
            data, optimizer, batch_size=100, order=order if epoch % 2 else None
        )
        assert total.shape == ()
        losses.append(float(total) / data.X.shape[0])
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.5 * losses[0]
    assert optimizer.t == 4 * 6


def test_run_batches_stops_after_n_batches(backend, digits_xy):
    network, trainer, data = digits_setup(backend, digits_xy)
    optimizer = Adam([trainer.parameters.flat_params], backend, learning_rate_init=0.01)
    seen = []
    trainer.run_batches(
        data,
        optimizer,
        batch_size=64,
        n_batches=3,
        on_batch=lambda i, size: seen.append((i, size)),
    )
    assert seen == [(0, 64), (1, 64), (2, 64)]
    assert optimizer.t == 3
    seen.clear()
    trainer.run_batches(
        data, optimizer, batch_size=250, on_batch=lambda i, size: seen.append((i, size))
    )
    assert seen == [(0, 250), (1, 250), (2, 100)]  # the last batch is short


def test_run_batches_skips_a_batch_of_zero_weight(backend, digits_xy):
    network, trainer, data = digits_setup(backend, digits_xy)
    X, Y = data.X[:300], data.Y[:300]
    w = np.ones(300, dtype=np.float32)
    w[100:200] = 0
    data = BackendData(X, Y, backend.asarray(w))
    sw_sums = np.add.reduceat(w, np.arange(0, 300, 100))
    optimizer = Adam([trainer.parameters.flat_params], backend, learning_rate_init=0.01)
    seen = []
    total = trainer.run_batches(
        data, optimizer, batch_size=100, sw_sums=sw_sums, on_batch=lambda i, size: seen.append(i)
    )
    assert seen == [0, 2]
    assert optimizer.t == 2
    assert np.isfinite(float(total))


def test_clip_norm_bounds_the_step(backend, digits_xy):
    lr, clip = 0.5, 0.01
    moves = []
    for clip_norm in (clip, None):
        network, trainer, data = digits_setup(backend, digits_xy, clip_norm=clip_norm)
        sgd = SGD(
            [trainer.parameters.flat_params],
            backend,
            learning_rate_init=lr,
            momentum=0.0,
            nesterov=False,
        )
        before = host(backend, trainer.parameters.flat_params)
        trainer.run_batches(data, sgd, batch_size=data.X.shape[0], n_batches=1)
        moves.append(np.linalg.norm(host(backend, trainer.parameters.flat_params) - before))
    clipped, free = moves
    assert clipped <= lr * clip * (1 + 1e-4)
    assert clipped == pytest.approx(lr * clip, rel=1e-3)  # the clip was active
    assert free > 10 * clipped


class ReplacesGradient(Dense):
    """A layer that breaks the contract: a new gradient array each batch."""

    def backward(self, dY):
        dX = super().backward(dY)
        self.grads["W"] = self.grads["W"].copy()
        return dX


def test_replacing_a_gradient_array_is_a_clear_error(backend, digits_xy):
    network, trainer, data = digits_setup(
        backend, digits_xy, layers=[ReplacesGradient(8, "relu"), Dense(10)]
    )
    optimizer = Adam([trainer.parameters.flat_params], backend)
    with pytest.raises(TypeError, match="write gradients in place") as info:
        trainer.run_batches(data, optimizer, batch_size=100)
    assert "ReplacesGradient" in str(info.value) and "'W'" in str(info.value)


# -- run_epochs with callbacks --------------------------------------------------------------
class Recorder(Callback):
    def __init__(self, stop_at=None, interrupt_at=None, handle_nan=False):
        self.stop_at = stop_at
        self.interrupt_at = interrupt_at
        self.handle_nan = handle_nan
        self.calls = []

    def on_train_begin(self, state):
        self.calls.append("train_begin")

    def on_epoch_begin(self, state, epoch):
        self.calls.append(("epoch_begin", epoch))

    def on_batch_end(self, state, batch, size):
        self.calls.append(("batch", batch, size))
        if self.interrupt_at == (state.epoch, batch):
            raise KeyboardInterrupt

    def on_epoch_end(self, state, epoch, logs):
        self.calls.append(("epoch_end", epoch, logs["train_loss"]))
        return self.stop_at == epoch

    def on_train_end(self, state):
        self.calls.append("train_end")

    def on_nan(self, state, epoch):
        self.calls.append(("nan", epoch))
        return self.handle_nan


def run(backend, digits_xy, callbacks, *, max_epochs=3, batch_size=250, loss=None, **kwargs):
    network, trainer, data = digits_setup(backend, digits_xy, callbacks=callbacks)
    if loss is not None:
        trainer.loss = loss
    optimizer = Adam([trainer.parameters.flat_params], backend, learning_rate_init=0.01)
    state = TrainingState(
        None,
        network,
        optimizer,
        n_train_rows=data.X.shape[0],
        batch_size=batch_size,
        history=[],
        has_validation=False,
    )
    trainer.run_epochs(
        data,
        optimizer,
        state,
        batch_size=batch_size,
        max_epochs=max_epochs,
        rng=np.random.RandomState(0),
        **kwargs,
    )
    return state


def test_run_epochs_calls_the_hooks_in_order(backend, digits_xy):
    recorder = Recorder()
    state = run(backend, digits_xy, [recorder])
    losses = [row["train_loss"] for row in state.history]
    expected = ["train_begin"]
    for epoch in (1, 2, 3):
        expected += [
            ("epoch_begin", epoch),
            ("batch", 0, 250),
            ("batch", 1, 250),
            ("batch", 2, 100),
            ("epoch_end", epoch, losses[epoch - 1]),
        ]
    assert recorder.calls == expected + ["train_end"]
    assert [row["epoch"] for row in state.history] == [1, 2, 3]
    assert set(state.history[0]) == set(TrainingState.TRAIN_KEYS + TrainingState.VALID_KEYS)
    assert state.history[0]["valid_loss"] is None
    assert state.history[0]["learning_rate"] == 0.01
    assert losses[2] < losses[0]
    assert state.epoch == 3


def test_run_epochs_with_sample_weight_and_train_rows(backend, digits_xy):
    recorder = Recorder()
    sample_weight = np.ones(600, dtype=np.float32)
    sample_weight[:100] = 0
    train_rows = np.arange(0, 500)
    state = run(
        backend,
        digits_xy,
        [recorder],
        max_epochs=1,
        batch_size=100,
        sample_weight=sample_weight,
        train_rows=train_rows,
        shuffle=False,
    )
    # rows 0..99 form the first batch, of zero weight: skipped
    assert [c[1] for c in recorder.calls if c[0] == "batch"] == [1, 2, 3, 4]
    assert len(state.history) == 1


def test_a_callback_returning_true_stops_training(backend, digits_xy):
    stopper, other = Recorder(stop_at=2), Recorder()
    state = run(backend, digits_xy, [stopper, other], max_epochs=5)
    assert len(state.history) == 2
    # every callback still sees the epoch that stopped, then the end
    assert other.calls[-2][:2] == ("epoch_end", 2) and other.calls[-1] == "train_end"
    assert stopper.calls[-1] == "train_end"


def test_keyboard_interrupt_ends_training_with_a_warning(backend, digits_xy):
    recorder = Recorder(interrupt_at=(2, 1))
    with pytest.warns(UserWarning, match="Training interrupted by user"):
        state = run(backend, digits_xy, [recorder], max_epochs=5)
    assert len(state.history) == 1  # epoch 2 never ended
    assert recorder.calls[-2:] == [("batch", 1, 250), "train_end"]


class NanLoss:
    """A loss whose value is not finite (its gradient is the real one)."""

    def __init__(self):
        self.inner = make_loss("log_loss")

    def __call__(self, Z, Y, sample_weight=None, sw_sum=None):
        loss, dZ = self.inner(Z, Y, sample_weight, sw_sum)
        return loss * np.nan, dZ


def test_a_non_finite_loss_raises_diverged(backend, digits_xy):
    recorder = Recorder()
    with pytest.raises(Diverged, match="nan at epoch 1"):
        run(backend, digits_xy, [recorder], loss=NanLoss())
    assert ("nan", 1) in recorder.calls
    assert recorder.calls[-1] == "train_end"
    assert not any(c[0] == "epoch_end" for c in recorder.calls if isinstance(c, tuple))


def test_a_callback_handling_nan_stops_without_error(backend, digits_xy):
    recorder, handler = Recorder(), Recorder(handle_nan=True)
    state = run(backend, digits_xy, [recorder, handler], loss=NanLoss(), max_epochs=4)
    assert state.history == []
    assert recorder.calls[-2:] == [("nan", 1), "train_end"]
    assert handler.calls[-2:] == [("nan", 1), "train_end"]


# -- TrainingState --------------------------------------------------------------------------
def make_state(optimizer=None, estimator=None, has_validation=False):
    return TrainingState(
        estimator,
        None,
        optimizer,
        n_train_rows=10,
        batch_size=5,
        history=[],
        has_validation=has_validation,
    )


def test_check_monitor(backend):
    params = [backend.xp.zeros(3, dtype=np.float32)]
    state = make_state(Adam(params, backend))
    for key in TrainingState.TRAIN_KEYS:
        state.check_monitor(key, "Stopper")
    with pytest.raises(ValueError, match="Stopper: monitor='val_loss' is not in the history"):
        state.check_monitor("val_loss", "Stopper")
    with pytest.raises(ValueError, match="needs a validation set"):
        state.check_monitor("valid_loss", "Stopper")
    with_validation = make_state(Adam(params, backend), has_validation=True)
    with_validation.check_monitor("valid_loss", "Stopper")
    with_validation.check_monitor("valid_score", "Stopper")
    with pytest.raises(ValueError, match="monitor='learning_rate'"):
        make_state(None).check_monitor("learning_rate", "Stopper")


class Provides(Callback):
    provides = ("my_metric",)

    def on_epoch_end(self, state, epoch, logs):
        logs["my_metric"] = epoch


class Monitors(Callback):
    def on_train_begin(self, state):
        state.check_monitor("my_metric", "Monitors")
        self.checked = state.extra_keys

    def on_epoch_end(self, state, epoch, logs):
        self.last = logs["my_metric"]


def test_check_monitor_accepts_keys_a_callback_provides(backend, digits_xy):
    with pytest.raises(ValueError, match="is not in the history"):
        make_state().check_monitor("my_metric", "Monitors")
    monitor = Monitors()
    state = run(backend, digits_xy, [Provides(), monitor], max_epochs=2)
    assert state.extra_keys == ("my_metric",)
    assert monitor.checked == ("my_metric",)
    assert monitor.last == 2 and state.history[-1]["my_metric"] == 2


def test_learning_rate_goes_to_the_optimizer(backend):
    params = [backend.xp.zeros(3, dtype=np.float32)]
    adam = Adam(params, backend, learning_rate_init=0.01)
    state = make_state(adam)
    assert state.learning_rate == 0.01
    state.learning_rate = 0.05
    assert adam.learning_rate_init == 0.05 and adam.base_learning_rate == 0.05
    sgd = SGD(params, backend, learning_rate_init=0.1)
    state = make_state(sgd)
    state.learning_rate = 0.2
    assert sgd.learning_rate == 0.2 and state.learning_rate == 0.2
    lbfgs = make_state(None, estimator=SimpleNamespace())
    with pytest.raises(ValueError, match="learning_rate needs solver='sgd', 'adam' or 'adamw'"):
        _ = lbfgs.learning_rate
    with pytest.raises(ValueError, match="learning_rate needs solver='sgd', 'adam' or 'adamw'"):
        lbfgs.learning_rate = 0.1
    with pytest.raises(ValueError, match="EarlyStop needs solver="):
        lbfgs.require_optimizer("EarlyStop")


def test_attributes_fall_back_to_the_estimator():
    estimator = SimpleNamespace(foo=3, classes_=np.array([0, 1]))
    state = make_state(estimator=estimator)
    assert state.foo == 3
    assert_array_equal(state.classes_, [0, 1])
    estimator.foo = 4
    assert state.foo == 4  # read live, not copied
    assert state.batch_size == 5  # the state's own attributes first
    with pytest.raises(AttributeError):
        _ = state.missing
    with pytest.raises(AttributeError):
        _ = make_state(estimator=None).foo


# -- BestWeights ------------------------------------------------------------------------------
def test_best_weights_save_restore_clear(backend):
    network = build([Dense(4), BatchNorm(), Dense(2)], 3, backend)
    best = BestWeights()
    assert best.restore(network) is False and best.epoch is None
    original = [host(backend, w) for w in network.weights()]

    best.save(network, 3)
    assert best.epoch == 3
    buffers = list(best._arrays)
    for w in network.weights():
        w += 1  # later changes do not reach the copy
    assert best.restore(network) is True
    for w, o in zip(network.weights(), original):
        assert_array_equal(host(backend, w), o)

    for w in network.weights():
        w *= 2
    at_epoch_5 = [host(backend, w) for w in network.weights()]
    best.save(network, 5)
    assert best.epoch == 5
    assert all(a is b for a, b in zip(best._arrays, buffers))  # the same buffers reused
    for w in network.weights():
        w[...] = 0
    assert best.restore(network)
    for w, o in zip(network.weights(), at_epoch_5):
        assert_array_equal(host(backend, w), o)

    best.clear()
    assert best.epoch is None and best.restore(network) is False

"""Tests for sknet/engine/_optimizers.py: updates checked against hand-computed values."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sknet.engine._optimizers import SGD, Adam, AdamW
from sknet.layers import Dense


def arrays(backend, *values):
    return [backend.asarray(np.array(v, dtype=np.float64)) for v in values]


def test_sgd_plain_step(backend):
    (p,) = arrays(backend, [1.0, -2.0])
    opt = SGD([p], backend, learning_rate_init=0.1, momentum=0.0, nesterov=False)
    opt.step(arrays(backend, [0.5, 1.0]))
    assert_allclose(backend.to_numpy(p), [0.95, -2.1])


def test_sgd_momentum_two_steps(backend):
    (p,) = arrays(backend, [1.0])
    opt = SGD([p], backend, learning_rate_init=0.1, momentum=0.9, nesterov=False)
    opt.step(arrays(backend, [1.0]))  # v = -0.1, p = 0.9
    opt.step(arrays(backend, [1.0]))  # v = 0.9 * -0.1 - 0.1 = -0.19, p = 0.71
    assert_allclose(backend.to_numpy(p), [0.71])
    assert_allclose(backend.to_numpy(opt.velocities[0]), [-0.19])


def test_sgd_nesterov_two_steps(backend):
    (p,) = arrays(backend, [1.0])
    opt = SGD([p], backend, learning_rate_init=0.1, momentum=0.9, nesterov=True)
    opt.step(arrays(backend, [1.0]))  # v = -0.1; p += 0.9 * -0.1 - 0.1 = -0.19
    opt.step(arrays(backend, [1.0]))  # v = -0.19; p += 0.9 * -0.19 - 0.1 = -0.271
    assert_allclose(backend.to_numpy(p), [1.0 - 0.19 - 0.271])


def test_adam_first_steps_move_by_the_learning_rate(backend):
    # With bias correction, Adam's first step is -lr * sign(g) (up to epsilon).
    (p,) = arrays(backend, [1.0, 1.0])
    opt = Adam([p], backend, learning_rate_init=0.01)
    opt.step(arrays(backend, [3.0, -0.5]))
    assert_allclose(backend.to_numpy(p), [0.99, 1.01], rtol=1e-7)
    # second step with the same gradient: m/sqrt(v) is again +-1 after correction
    opt.step(arrays(backend, [3.0, -0.5]))
    assert_allclose(backend.to_numpy(p), [0.98, 1.02], rtol=1e-7)
    assert opt.t == 2


def test_adam_by_hand(backend):
    (p,) = arrays(backend, [0.0])
    opt = Adam([p], backend, learning_rate_init=0.1, beta_1=0.5, beta_2=0.75, epsilon=0.0)
    opt.step(arrays(backend, [2.0]))
    opt.step(arrays(backend, [1.0]))
    # m1 = 1, v1 = 1, p1 = -0.1*sqrt(0.25)/0.5 * 1/1 = -0.1
    # m2 = 0.5 + 0.5 = 1, v2 = 0.75 + 0.25 = 1
    # lr2 = 0.1 * sqrt(1 - 0.5625) / (1 - 0.25) = 0.0881917...
    lr2 = 0.1 * np.sqrt(1 - 0.75**2) / (1 - 0.5**2)
    assert_allclose(backend.to_numpy(p), [-0.1 - lr2 * 1.0 / 1.0])


def test_invscaling_schedule():
    from sknet.backend import get_backend

    opt = SGD(
        [np.zeros(1)],
        get_backend("cpu"),
        learning_rate_init=0.5,
        lr_schedule="invscaling",
        power_t=0.5,
    )
    opt.iteration_ends(99)
    assert_allclose(opt.learning_rate, 0.05)


def test_adaptive_schedule_divides_by_five_then_stops(capsys):
    from sknet.backend import get_backend

    opt = SGD([np.zeros(1)], get_backend("cpu"), learning_rate_init=1e-5, lr_schedule="adaptive")
    assert opt.trigger_stopping("stalled.", verbose=True) is False
    assert_allclose(opt.learning_rate, 2e-6)
    assert opt.trigger_stopping("stalled.", verbose=True) is False
    assert opt.trigger_stopping("stalled.", verbose=True) is True
    assert "Learning rate too small. Stopping." in capsys.readouterr().out


def test_constant_schedule_stops_at_once():
    from sknet.backend import get_backend

    opt = SGD([np.zeros(1)], get_backend("cpu"))
    assert opt.trigger_stopping("stalled.", verbose=False) is True


def test_state_pickles_as_numpy_and_rebinds(backend):
    (p,) = arrays(backend, [1.0, 2.0])
    opt = Adam([p], backend, learning_rate_init=0.1)
    opt.step(arrays(backend, [1.0, 1.0]))
    state = opt.__getstate__()
    assert "params" not in state and "backend" not in state
    assert all(type(m) is np.ndarray for m in state["ms"])
    restored = pickle.loads(pickle.dumps(opt))
    (q,) = arrays(backend, backend.to_numpy(p))
    restored.rebind([q], backend)
    restored.step(arrays(backend, [1.0, 1.0]))
    opt.step(arrays(backend, [1.0, 1.0]))
    assert restored.t == 2
    assert_allclose(backend.to_numpy(q), backend.to_numpy(p))


# -- AdamW --------------------------------------------------------------------------


def adamw_oracle(p, grads, lr, wd, decayed, b1=0.9, b2=0.999, eps=1e-8):
    """Loshchilov & Hutter's AdamW as PyTorch writes it, step by step in float64."""
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p[:decayed] *= 1 - lr * wd  # decoupled: not through the moments
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        p -= lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


def adamw_run(backend, values, grads, lr, wd, decayed, lr_scales=(1.0,)):
    params = arrays(backend, *values)
    opt = AdamW(params, backend, learning_rate_init=lr, weight_decay=wd)
    opt.lr_scales, opt.decay_sizes = list(lr_scales), list(decayed)
    for g in grads:
        opt.step(arrays(backend, *g))
    return [backend.to_numpy(p) for p in params]


def test_adamw_matches_a_numpy_oracle(backend):
    rng = np.random.RandomState(0)
    a, b = rng.normal(size=7), rng.normal(size=3)
    grads = [(rng.normal(size=7) * 10**k, rng.normal(size=3)) for k in (-3, 0, 2, -1)]
    pa, pb = adamw_run(backend, (a, b), grads, 0.01, 0.5, decayed=(4, 0), lr_scales=(1.0, 0.5))
    assert_allclose(pa, adamw_oracle(a, [g for g, _ in grads], 0.01, 0.5, 4), rtol=1e-12)
    assert_allclose(pb, adamw_oracle(b, [g for _, g in grads], 0.005, 0.5, 0), rtol=1e-12)


def test_adamw_matches_torch_on_the_same_gradients(backend):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    w0, b0 = rng.normal(size=6), rng.normal(size=2)  # decayed weights, then biases
    grads = [rng.normal(size=8) * s for s in (1.0, 1e-3, 5.0, 0.1, 1.0)]
    W, B = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (w0, b0))
    reference = torch.optim.AdamW(
        [{"params": [W]}, {"params": [B], "weight_decay": 0.0}],
        lr=0.02,
        betas=(0.8, 0.99),
        eps=1e-6,
        weight_decay=0.3,
    )
    (flat,) = arrays(backend, np.concatenate([w0, b0]))
    ours = AdamW([flat], backend, 0.02, beta_1=0.8, beta_2=0.99, epsilon=1e-6, weight_decay=0.3)
    ours.decay_sizes = [6]
    for g in grads:
        W.grad, B.grad = torch.tensor(g[:6]), torch.tensor(g[6:])
        reference.step()
        ours.step(arrays(backend, g))
        expected = np.concatenate([W.detach().numpy(), B.detach().numpy()])
        assert_allclose(backend.to_numpy(flat), expected, rtol=1e-12, atol=1e-15)


def test_adamw_decays_only_the_regularized_weights_of_a_fit():
    # X = 0: the first layer's weights get no gradient, so AdamW only shrinks them,
    # by (1 - lr * lr_scale * weight_decay) a step, while its biases (not decayed) move.
    from sknet import NeuralNetRegressor

    rng = np.random.RandomState(0)
    W0, b0 = rng.normal(size=(3, 4)), rng.normal(size=4)
    X, y = np.zeros((40, 3)), rng.normal(size=40)
    first = Dense(4, weights={"W": W0, "b": b0}, lr_scale=0.5)
    reg = NeuralNetRegressor(
        [first],
        solver="adamw",
        weight_decay=0.2,
        learning_rate_init=0.01,
        alpha=0.0,
        batch_size=10,
        max_iter=3,
        shuffle=False,
        dtype="float64",
        device="cpu",
        tol=0.0,
        n_iter_no_change=100,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(X, y)
    layer = reg.layers_[0]
    steps = 3 * 4
    assert_allclose(layer.params["W"], W0 * (1 - 0.01 * 0.5 * 0.2) ** steps, rtol=1e-12)
    assert not np.allclose(layer.params["b"], b0)
    assert isinstance(reg._optimizer, AdamW) and reg._optimizer.weight_decay == 0.2


def test_adamw_follows_the_layout_when_layers_are_frozen_or_unfrozen(digits):
    from sknet import NeuralNetClassifier

    X, y = digits
    clf = NeuralNetClassifier(
        [Dense(16, activation="relu"), Dense(8, activation="relu")],
        solver="adamw",
        max_iter=1,
        warm_start=True,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X[:200], y[:200])
        assert clf._optimizer.decay_sizes == [64 * 16 + 16 * 8 + 8 * 10]  # every W, first
        clf.set_params(layers__0__trainable=False)  # a warm fit with a frozen layer
        clf.fit(X[:200], y[:200])
        assert clf._optimizer.decay_sizes == [16 * 8 + 8 * 10]
        clf.set_params(layers__0__trainable=True, layers__0__lr_scale=0.1)  # a segment of its own
        clf.fit(X[:200], y[:200])
    sizes = dict(zip(clf._optimizer.lr_scales, clf._optimizer.decay_sizes))
    assert sizes == {1.0: 16 * 8 + 8 * 10, 0.1: 64 * 16}


def test_adamw_writes_only_how_its_step_differs_from_adams():
    """One step loop (Adam's); AdamW adds the decoupled decay and torch's epsilon."""
    assert "step" not in vars(AdamW)
    assert AdamW.step is Adam.step


def test_adamw_without_decay_or_epsilon_is_adam(backend):
    """The two differ only in the decay and where epsilon goes: with neither, Adam's steps."""
    rng = np.random.RandomState(3)
    values = (rng.normal(size=6), rng.normal(size=2))
    grads = [(rng.normal(size=6), rng.normal(size=2)) for _ in range(5)]
    results = []
    for cls, extra in ((Adam, {}), (AdamW, {"weight_decay": 0.0})):
        params = arrays(backend, *values)
        opt = cls(params, backend, learning_rate_init=0.01, epsilon=0.0, **extra)
        opt.lr_scales = [1.0, 0.25]
        for g in grads:
            opt.step(arrays(backend, *g))
        results.append([backend.to_numpy(p) for p in params])
    for ours, adam in zip(results[1], results[0]):
        assert_allclose(ours, adam, rtol=1e-13)

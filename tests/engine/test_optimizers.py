"""Tests for sknet/engine/_optimizers.py: updates checked against hand-computed values."""

import pickle

import numpy as np
from numpy.testing import assert_allclose

from sknet.engine._optimizers import SGD, Adam


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

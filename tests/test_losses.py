"""Tests for sknet/_losses.py: values against scikit-learn, gradients by finite differences."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.neural_network._base import LOSS_FUNCTIONS as SKLEARN_LOSSES

from sknet._losses import LOSSES, make_loss, output_activation


def problem(name, n=7, k=3, seed=0):
    rng = np.random.RandomState(seed)
    Z = rng.standard_normal((n, k)) * 2
    if name == "log_loss":
        Y = np.eye(k)[rng.randint(k, size=n)]
    elif name == "binary_log_loss":
        Y = (rng.rand(n, k) > 0.5).astype(float)
    elif name == "poisson":
        Y = rng.poisson(2.0, size=(n, k)).astype(float)
    else:
        Y = rng.standard_normal((n, k))
    return Z, Y


def sklearn_value(name, Z, Y, w):
    P = output_activation(make_loss(name).out_activation, Z.copy())
    return SKLEARN_LOSSES[name](Y, P, w)


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("weighted", [False, True])
def test_values_match_scikit_learn(name, weighted, backend):
    Z, Y = problem(name)
    w = np.random.RandomState(1).rand(Z.shape[0]) if weighted else None
    loss, _ = make_loss(name)(
        backend.asarray(Z), backend.asarray(Y), None if w is None else backend.asarray(w)
    )
    assert_allclose(float(loss), sklearn_value(name, Z, Y, w), rtol=1e-10)


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_finite_differences(name, weighted, backend):
    Z, Y = problem(name, n=4)
    w = np.random.RandomState(1).rand(4) if weighted else None
    loss_fn = make_loss(name)

    def value(z):
        return float(loss_fn(backend.asarray(z), backend.asarray(Y),
                             None if w is None else backend.asarray(w))[0])

    _, dZ = loss_fn(backend.asarray(Z), backend.asarray(Y),
                    None if w is None else backend.asarray(w))
    dZ = backend.to_numpy(dZ).copy()
    numeric = np.zeros_like(Z)
    h = 1e-6
    for idx in np.ndindex(*Z.shape):
        zp, zm = Z.copy(), Z.copy()
        zp[idx] += h
        zm[idx] -= h
        numeric[idx] = (value(zp) - value(zm)) / (2 * h)
    assert_allclose(dZ, numeric, rtol=1e-6, atol=1e-7 * np.abs(numeric).max())


@pytest.mark.parametrize("name", ["log_loss", "binary_log_loss"])
def test_canonical_gradient_is_p_minus_y(name, backend):
    Z, Y = problem(name)
    w = np.random.RandomState(1).rand(Z.shape[0])
    loss_fn = make_loss(name)
    _, dZ = loss_fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w))
    P = output_activation(loss_fn.out_activation, Z.copy())
    assert_allclose(backend.to_numpy(dZ), (P - Y) * w[:, None] / w.sum(), rtol=1e-12)


def test_known_sum_of_weights_gives_the_same_result(backend):
    Z, Y = problem("log_loss")
    w = np.random.RandomState(1).rand(Z.shape[0])
    fn = make_loss("log_loss")
    l1, g1 = fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w))
    g1 = backend.to_numpy(g1).copy()
    l2, g2 = fn(backend.asarray(Z), backend.asarray(Y), backend.asarray(w), float(w.sum()))
    assert_allclose(float(l1), float(l2))
    assert_allclose(g1, backend.to_numpy(g2))


def test_softmax_log_loss_is_stable_for_huge_logits(backend):
    Z = np.array([[1000.0, 0.0, -1000.0], [-1e4, 1e4, 0.0]], dtype=np.float32)
    Y = np.array([[1.0, 0, 0], [1.0, 0, 0]], dtype=np.float32)
    loss, dZ = make_loss("log_loss")(backend.asarray(Z), backend.asarray(Y))
    assert np.isfinite(float(loss))
    assert_allclose(float(loss), (0 + 2e4) / 2, rtol=1e-6)
    assert np.isfinite(backend.to_numpy(dZ)).all()


def test_logistic_log_loss_is_stable_for_huge_logits(backend):
    Z = np.array([[500.0], [-500.0]], dtype=np.float32)
    Y = np.array([[0.0], [0.0]], dtype=np.float32)
    loss, dZ = make_loss("binary_log_loss")(backend.asarray(Z), backend.asarray(Y))
    assert_allclose(float(loss), 250.0, rtol=1e-6)
    assert np.isfinite(backend.to_numpy(dZ)).all()


def test_input_logits_are_not_modified(backend):
    Z, Y = problem("log_loss")
    Zb = backend.asarray(Z.copy())
    make_loss("log_loss")(Zb, backend.asarray(Y))
    assert_allclose(backend.to_numpy(Zb), Z)


@pytest.mark.parametrize("name, expected", [
    ("softmax", lambda z: np.exp(z) / np.exp(z).sum(1, keepdims=True)),
    ("logistic", lambda z: 1 / (1 + np.exp(-z))),
    ("identity", lambda z: z),
    ("exp", np.exp),
])
def test_output_activations(name, expected):
    Z = np.random.RandomState(0).standard_normal((5, 3))
    assert_allclose(output_activation(name, Z.copy()), expected(Z), rtol=1e-12)


def test_unknown_loss():
    with pytest.raises(ValueError, match="loss must be one of"):
        make_loss("hinge")

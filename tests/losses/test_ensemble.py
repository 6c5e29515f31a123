"""Tests for sknet/losses/_ensemble.py: the loss and predictions of an ensemble's members."""

import copy

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone

from sknet.losses import EnsembleLoss, Huber, LogLoss, SquaredError, make_loss


def weighted_loss(loss, Z, Y, w):
    value, _ = loss(Z.copy(), Y, w)
    return float(value)


@pytest.mark.parametrize(
    "member, target_type",
    [(LogLoss(), "multiclass"), (LogLoss(), "binary"), (SquaredError(), None), (Huber(0.5), None)],
)
def test_values_and_weighted_gradient_are_the_members_mean(member, target_type):
    rng = np.random.RandomState(0)
    n, k, m = 5, 3, 1 if target_type == "binary" else 4
    Z = rng.normal(size=(n, k, m)) * 2
    if target_type == "multiclass":
        Y = np.eye(m)[rng.randint(m, size=n)]
    elif target_type == "binary":
        Y = rng.randint(2, size=(n, 1)).astype(float)
    else:
        Y = rng.normal(size=(n, m))
    single = make_loss(member, target_type)
    loss = make_loss(EnsembleLoss(member), target_type)
    assert loss.out_activation == single.out_activation
    values, _ = loss.loss_and_gradient(Z.copy(), Y)
    per_member = np.stack([single.loss_and_gradient(Z[:, i].copy(), Y)[0] for i in range(k)], 1)
    assert_allclose(values, per_member.mean(axis=1), rtol=1e-12)
    w = rng.uniform(0.5, 2.0, size=n)
    value, dZ = loss(Z.copy(), Y, w)  # weights of shape (n,) on a gradient (n, k, m)
    assert_allclose(value, (per_member.mean(axis=1) * w).sum() / w.sum(), rtol=1e-12)
    numeric = np.zeros_like(Z)
    for index in np.ndindex(Z.shape):
        plus, minus = Z.copy(), Z.copy()
        plus[index] += 1e-6
        minus[index] -= 1e-6
        numeric[index] = (
            weighted_loss(loss, plus, Y, w) - weighted_loss(loss, minus, Y, w)
        ) / 2e-6
    assert_allclose(dZ, numeric, rtol=1e-5, atol=1e-7)


def test_predictions_average_each_members_output():
    Z = np.random.RandomState(1).normal(size=(4, 3, 5))
    loss = make_loss(EnsembleLoss(LogLoss()), "multiclass")
    P = loss.output(Z.copy())
    E = np.exp(Z - Z.max(axis=2, keepdims=True))
    assert_allclose(P, (E / E.sum(axis=2, keepdims=True)).mean(axis=1))
    assert P.shape == (4, 5)


def test_it_needs_a_member_axis_and_checks_targets_as_its_member():
    loss = EnsembleLoss(make_loss("poisson"))
    with pytest.raises(
        ValueError, match=r"takes outputs with a member axis, .* got shape \(3, 2\)"
    ):
        loss.loss_and_gradient(np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="requires y >= 0"):
        loss.check_target(np.array([[-1.0]]))
    assert clone(loss).get_params()["loss"] is not loss.loss


def test_a_copy_has_a_member_loss_and_work_buffer_of_its_own():
    loss = make_loss(EnsembleLoss(LogLoss()), "multiclass")
    loss.loss_and_gradient(np.zeros((4, 2, 3)), np.eye(3)[[0, 1, 2, 0]])
    twin = copy.copy(loss)  # what a thread of a split batch trains with
    assert twin.loss is not loss.loss and "_grad" not in twin.loss.__dict__
    assert twin.out_activation == "softmax"


def test_the_members_loss_is_checked_at_its_boundary():
    class Wrong(SquaredError):
        def loss_and_gradient(self, Z, Y):
            return Z.sum(axis=1)[:2], Z

    with pytest.raises(ValueError, match=r"Wrong.loss_and_gradient returned per-sample values"):
        EnsembleLoss(Wrong()).loss_and_gradient(np.zeros((3, 2, 1)), np.zeros((3, 1)))

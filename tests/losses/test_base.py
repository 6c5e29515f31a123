"""What a user's loss returns, and which losses an estimator takes (losses/_base, _registry).

Everything a loss returns is checked before anything uses it; a subclass of a
stock loss runs its own methods; a classifier's loss outputs probabilities
and a regressor refuses a classification loss, before training.
"""

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sknet import MLPClassifier, MLPRegressor
from sknet import autodiff as ad
from sknet.backend import get_array_module
from sknet.losses import FocalLoss, Huber, LogLoss, Loss, SquaredError, make_loss
from sknet.utils import check_loss_gradients

ROOT = Path(__file__).resolve().parents[1]


class Returns(Loss):
    """A loss returning what ``make(Z, Y, xp)`` gives, with a softmax output."""

    out_activation = "softmax"

    def __init__(self, make=None):
        self.make = make

    def loss_and_gradient(self, Z, Y):
        return self.make(Z, Y, get_array_module(Z))


def _good_values(Z, Y, xp):
    return ((Z - Y) ** 2).sum(axis=1) / 2


BAD_RETURNS = [
    # (what the loss returns, error, words the message holds)
    (
        lambda Z, Y, xp: (_good_values(Z, Y, xp), xp.ones((Z.shape[0], Z.shape[1] + 3), Z.dtype)),
        ValueError,
        ["Returns.loss_and_gradient", "gradient dZ of shape (6, 7)", "expected (6, 4)"],
    ),
    (
        lambda Z, Y, xp: (_good_values(Z, Y, xp), xp.ones((Z.shape[0] + 1, Z.shape[1]), Z.dtype)),
        ValueError,
        ["gradient dZ of shape (7, 4)", "expected (6, 4)"],
    ),
    (
        lambda Z, Y, xp: (_good_values(Z, Y, xp)[:-1], Z - Y),
        ValueError,
        ["per-sample values of shape (5,)", "expected (6,)"],
    ),
    (
        lambda Z, Y, xp: (float(_good_values(Z, Y, xp).mean()), Z - Y),
        TypeError,  # their mean, a number
        ["Returns.loss_and_gradient must return arrays", "per-sample values"],
    ),
    (
        lambda Z, Y, xp: ((Z - Y) ** 2 / 2, Z - Y),
        ValueError,
        ["per-sample values of shape (6, 4)", "expected (6,)"],
    ),
    (
        lambda Z, Y, xp: (_good_values(Z, Y, xp), (Z - Y).astype(np.float64)),
        TypeError,
        ["gradient dZ of dtype float64 for Z of dtype float32"],
    ),
    (
        lambda Z, Y, xp: (_good_values(Z, Y, xp).astype(np.float64), Z - Y),
        TypeError,
        ["per-sample values of dtype float64"],
    ),
    (
        lambda Z, Y, xp: (list(_good_values(Z, Y, xp)), Z - Y),
        TypeError,
        ["must return arrays", "list"],
    ),
    (
        lambda Z, Y, xp: (Z - Y).sum(axis=1),
        TypeError,
        ["must return a pair (values, dZ)"],
    ),
]


@pytest.mark.parametrize("make, error, words", BAD_RETURNS)
def test_what_a_loss_returns_is_checked_before_use(make, error, words, backend):
    rng = np.random.RandomState(0)
    Z = backend.asarray(rng.standard_normal((6, 4)), np.float32)
    Y = backend.asarray(np.eye(4)[rng.randint(4, size=6)], np.float32)
    with pytest.raises(error) as info:
        Returns(make)(Z, Y, backend.asarray(rng.rand(6), np.float32))
    for word in words:
        assert word in str(info.value)


def test_values_of_shape_n_1_are_one_per_sample_with_weights(backend):
    # (n, 1) values times (n,) weights broadcast to (n, n): a loss 30x too large.
    rng = np.random.RandomState(0)
    Z, Y = backend.asarray(rng.standard_normal((50, 1))), backend.asarray(np.zeros((50, 1)))
    w = backend.asarray(rng.rand(50))
    column = Returns(lambda Z, Y, xp: (((Z - Y) ** 2).mean(axis=1, keepdims=True) / 2, Z - Y))
    loss, dZ = column(Z, Y, w)
    dZ = backend.to_numpy(dZ).copy()
    expected, expected_dZ = make_loss("squared_error")(Z, Y, w)
    assert_allclose(float(loss), float(expected), rtol=1e-12)
    assert_allclose(dZ, backend.to_numpy(expected_dZ), rtol=1e-12)


def test_nan_passes_the_boundary(backend):
    nan = Returns(lambda Z, Y, xp: (xp.full(Z.shape[0], np.nan, Z.dtype), Z - Y))
    Z = backend.asarray(np.ones((3, 2)))
    loss, dZ = nan(Z, backend.asarray(np.zeros((3, 2))))
    assert np.isnan(float(loss)) and dZ.shape == (3, 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda Z, Y, xp: (_good_values(Z, Y, xp), Z),  # the gradient of z^2 / 2 is z itself
        lambda Z, Y, xp: (_good_values(Z, Y, xp), Y),
        lambda Z, Y, xp: (_good_values(Z, Y, xp), xp.broadcast_to(Z[:1], Z.shape)),
    ],
    ids=["Z", "Y", "broadcast"],
)
def test_a_gradient_sharing_memory_is_copied_not_scaled_in_place(make, backend):
    Z0, Y0 = np.arange(6.0).reshape(3, 2), np.ones((3, 2))
    Z, Y = backend.asarray(Z0.copy()), backend.asarray(Y0.copy())
    _, dZ = Returns(make)(Z, Y)
    assert_allclose(backend.to_numpy(Z), Z0)
    assert_allclose(backend.to_numpy(Y), Y0)
    assert_allclose(backend.to_numpy(dZ), make(Z0, Y0, np)[1] / 3)


def test_values_from_value_are_checked_too():
    class PerOutput(Loss):
        def value(self, Z, Y):
            return (Z - Y) ** 2  # one value per output

    with pytest.raises(ValueError, match=r"PerOutput.value must return one loss per sample"):
        PerOutput()(np.ones((4, 2)), np.zeros((4, 2)))


def test_one_column_from_value_is_one_loss_per_sample():
    class Column(Loss):
        def value(self, Z, Y):
            return ad.sum((Z - Y) ** 2, axis=1, keepdims=True)

    loss, grad = Column()(np.ones((4, 2)), np.zeros((4, 2)), np.arange(1.0, 5.0))
    assert float(loss) == pytest.approx(2.0)  # the weighted mean of 2 per sample
    assert grad.shape == (4, 2)


# A fit with a loss returning bad arrays: before the check, a gradient with too
# many columns reached the Numba kernel of the output layer's backward pass,
# which wrote past its array; the process died later (free(): invalid size,
# SIGSEGV), sometimes only at exit. It runs in fresh processes, several times.
FIT_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from sklearn.datasets import load_digits

    import sknet
    from sknet.backend import get_array_module
    from sknet.losses import Loss

    class BadLoss(Loss):
        out_activation = "softmax"

        def __init__(self, kind="columns"):
            self.kind = kind

        def loss_and_gradient(self, Z, Y):
            xp, (n, k) = get_array_module(Z), Z.shape
            values, dZ = ((Z - Y) ** 2).sum(axis=1), Z - Y
            if self.kind == "columns":
                dZ = xp.ones((n, k + 3), Z.dtype)
            elif self.kind == "dtype":
                dZ = dZ.astype(np.float64)
            elif self.kind == "length":
                values = values[: n // 2]
            elif self.kind == "not an array":
                values = values.tolist()
            return values, dZ

    X, y = load_digits(return_X_y=True)
    for kind in ["columns", "dtype", "length", "not an array"]:
        clf = sknet.MLPClassifier(loss=BadLoss(kind), max_iter=2, device="cpu")
        try:
            clf.fit(X / 16, y)
        except (ValueError, TypeError) as exc:
            print(f"{kind}: {type(exc).__name__}: {exc}")
    """
)
EXPECTED_LINES = [
    "columns: ValueError: BadLoss.loss_and_gradient returned a gradient dZ of shape (200, 13); "
    "expected (200, 10)",
    "dtype: TypeError: BadLoss.loss_and_gradient returned gradient dZ of dtype float64 for Z "
    "of dtype float32",
    "length: ValueError: BadLoss.loss_and_gradient returned per-sample values of shape (100,); "
    "expected (200,)",
    "not an array: TypeError: BadLoss.loss_and_gradient must return arrays of Z's kind",
]


@pytest.mark.parametrize("run", range(5))
def test_a_fit_with_bad_loss_returns_fails_cleanly_in_a_fresh_process(run):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SKNET_DEVICE": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", FIT_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == len(EXPECTED_LINES), done.stdout
    for line, expected in zip(lines, EXPECTED_LINES):
        assert line.startswith(expected), line


# -- subclasses of stock losses keep their methods ------------------------------------


class Called(Exception):
    pass


class MyLogLoss(LogLoss):
    def loss_and_gradient(self, Z, Y):
        raise Called(self.out_activation, Z.shape)


class MyHuber(Huber):
    def value(self, Z, Y):  # a pseudo-Huber loss, not Huber's
        d = self.delta
        return ad.mean(d * d * (ad.sqrt(1 + ((Z - Y) / d) ** 2) - 1), axis=1)


class MyFocal(FocalLoss):
    def value(self, Z, Y):
        return -ad.sum(Y * ad.log_softmax(Z, axis=1), axis=1) * (1 + self.gamma)


@pytest.mark.parametrize(
    "target_type, output", [("multiclass", "softmax"), ("binary", "logistic")]
)
def test_a_log_loss_subclass_runs_its_own_loss_and_gradient(target_type, output):
    loss = make_loss(MyLogLoss(), target_type)
    assert type(loss) is MyLogLoss and loss.out_activation == output
    with pytest.raises(Called, match=output):
        loss(np.zeros((3, 2)), np.zeros((3, 2)))


def test_a_log_loss_subclass_is_what_a_classifier_trains_with(digits):
    X, y = digits
    for target in (y, y == 3):
        with pytest.raises(Called):
            MLPClassifier(loss=MyLogLoss(), max_iter=1, device="cpu").fit(X, target)


@pytest.mark.parametrize("loss", [MyHuber(delta=0.5), MyFocal(gamma=1.0)])
def test_a_value_of_your_own_is_differentiated_not_the_stock_gradient(loss):
    resolved = make_loss(loss, "multiclass" if isinstance(loss, FocalLoss) else None)
    assert type(resolved) is type(loss)
    assert check_loss_gradients(resolved) < 1e-6
    Z, Y = np.random.RandomState(0).standard_normal((2, 5, 3))
    Y = np.eye(3)[[0, 1, 2, 0, 1]]
    values, _ = resolved.loss_and_gradient(Z, Y)
    assert_allclose(values, ad.value(resolved.value(Z, Y)))


def test_a_subclass_changing_only_the_output_is_refused(regression):
    class ExpHuber(Huber):
        out_activation = "exp"

    class Squashed(SquaredError):
        def output(self, Z):
            return np.tanh(Z, out=Z)

    for loss, changed in [(ExpHuber(), "out_activation"), (Squashed(), "output")]:
        with pytest.raises(TypeError, match=f"changes {changed} of .* but not its loss"):
            MLPRegressor(loss=loss, max_iter=1, device="cpu").fit(*regression)


def test_for_target_must_return_a_loss():
    class Lost(Loss):
        def for_target(self, target_type):
            return "log_loss"

    with pytest.raises(TypeError, match=r"Lost.for_target\('binary'\) must return a Loss"):
        make_loss(Lost(), "binary")


def test_an_output_with_no_function_is_refused_before_training(regression):
    class Softplus(Loss):
        out_activation = "softplus"

        def value(self, Z, Y):
            return ad.mean((ad.softplus(Z) - Y) ** 2, axis=1)

    reg = MLPRegressor(loss=Softplus(), max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="'softplus', which has no function.*define Softplus"):
        reg.fit(*regression)
    assert not hasattr(reg, "network_")


def test_out_activation_alone_names_the_output():
    class Probabilities(Loss):
        out_activation = "softmax"

    Z = np.array([[0.0, np.log(3.0)]])
    assert_allclose(Probabilities().output(Z), [[0.25, 0.75]])


# -- a loss fits its estimator ---------------------------------------------------------


class SquaredValue(Loss):
    """A loss from its value alone: identity output."""

    def value(self, Z, Y):
        return ad.sum((Z - Y) ** 2, axis=1)


class SmoothedLogLoss(Loss):
    """Cross-entropy with label smoothing, for multiclass targets."""

    out_activation = "softmax"

    def value(self, Z, Y):
        k = Y.shape[1]
        return -ad.sum((0.9 * Y + 0.1 / k) * ad.log_softmax(Z, axis=1), axis=1)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((60, 4))
    return X, X @ rng.standard_normal(4)


@pytest.mark.parametrize(
    "loss, target, words",
    [
        (SquaredValue(), "multiclass", ["SquaredValue outputs 'identity'", "'softmax'"]),
        (Huber(), "multiclass", ["Huber outputs 'identity'", "out_activation = 'softmax'"]),
        ("squared_error", "multiclass", ["SquaredError outputs 'identity'"]),
        (SmoothedLogLoss(), "binary", ["outputs 'softmax'", "out_activation = 'logistic'"]),
        (SmoothedLogLoss(), "multilabel", ["outputs 'softmax'", "out_activation = 'logistic'"]),
    ],
)
def test_a_classifier_refuses_a_loss_without_probabilities(loss, target, words, digits):
    X, y = digits
    targets = {"multiclass": y, "binary": y == 3, "multilabel": np.column_stack([y < 5, y == 3])}
    clf = MLPClassifier(loss=loss, max_iter=1, device="cpu")
    if isinstance(loss, str):  # not a classifier's loss name: the parameter check refuses it
        clf.set_params(loss=make_loss(loss))
    with pytest.raises(ValueError, match="MLPClassifier needs probabilities") as info:
        clf.fit(X, targets[target])
    for word in words:
        assert word in str(info.value)
    assert not hasattr(clf, "network_")  # refused before training


def test_a_classifier_loss_with_probabilities_trains(digits):
    X, y = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier(loss=SmoothedLogLoss(), max_iter=20, random_state=0, device="cpu")
        clf.fit(X, y)
    assert clf.out_activation_ == "softmax" and clf.score(X, y) > 0.9
    assert_allclose(clf.predict_proba(X).sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("loss", [LogLoss(), FocalLoss(gamma=1.0), MyLogLoss()])
def test_a_regressor_refuses_a_classification_loss(loss, regression):
    reg = MLPRegressor(loss=loss, max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="MLPRegressor is a regressor, but .* classification"):
        reg.fit(*regression)
    assert not hasattr(reg, "network_")


class ValueOfData(Loss):
    def value(self, Z, Y):
        return ((ad.value(Z) - Y) ** 2).sum(axis=1)  # Z.data: not recorded


def test_values_computed_without_recording_z_are_refused():
    # Before: the gradient was silently zero and the network never trained.
    with pytest.raises(TypeError, match="ValueOfData.value returned a plain ndarray"):
        ValueOfData()(np.ones((4, 2)), np.zeros((4, 2)))


class SubtractsInPlace(Loss):
    """Writes into Y (``where`` says which of Z and Y)."""

    def __init__(self, where="Y"):
        self.where = where

    def loss_and_gradient(self, Z, Y):
        if self.where == "Y":
            Y -= Z
            return (Y**2).sum(axis=1) / 2, -Y
        Z -= Y
        return (Z**2).sum(axis=1) / 2, Z.copy()


class ValueWritingY(Loss):
    def value(self, Z, Y):
        Y *= 2
        return ad.sum((Z - Y) ** 2, axis=1)


class CheckTargetWritingY(SquaredError):
    def check_target(self, Y):
        Y[:] = 0


@pytest.mark.parametrize(
    "loss", [SubtractsInPlace("Y"), SubtractsInPlace("Z"), ValueWritingY()], ids=repr
)
def test_a_loss_writing_into_z_or_y_is_named_and_the_callers_y_kept(loss):
    # Before: an in-order regressor's Y was the caller's y, which the loss rewrote at
    # every batch; writing Z corrupted the last layer's kept output.
    rng = np.random.RandomState(0)
    X = rng.rand(30, 3).astype(np.float32)
    y = X.sum(axis=1)
    y0 = y.copy()
    model = MLPRegressor(hidden_layer_sizes=(4,), loss=loss, max_iter=2, shuffle=False)
    with pytest.raises(ValueError, match=rf"{type(loss).__name__}\.loss_and_gradient \(or value"):
        model.set_params(device="cpu", random_state=0).fit(X, y)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("where", ["Y", "Z"])
def test_a_member_loss_of_an_ensemble_writing_into_z_or_y_is_named(where):
    # Before: EnsembleLoss handed its members' rows to the loss writable, so a loss
    # writing into Z changed the kept outputs of the ensemble head.
    from sknet import NeuralNetRegressor
    from sknet.layers import EnsembleDense, EnsembleInput

    rng = np.random.RandomState(0)
    X = rng.rand(30, 3).astype(np.float32)
    y = X.sum(axis=1)
    y0 = y.copy()
    layers = [EnsembleInput(2), EnsembleDense(4)]
    model = NeuralNetRegressor(layers, loss=SubtractsInPlace(where), max_iter=2, device="cpu")
    with pytest.raises(ValueError, match=r"SubtractsInPlace\.loss_and_gradient \(or value"):
        model.fit(X, y)
    np.testing.assert_array_equal(y, y0)


def test_a_check_target_writing_into_y_is_named():
    rng = np.random.RandomState(0)
    X = rng.rand(30, 3).astype(np.float32)
    y = X.sum(axis=1)
    y0 = y.copy()
    model = MLPRegressor(loss=CheckTargetWritingY(), max_iter=2, device="cpu")
    with pytest.raises(
        ValueError, match="CheckTargetWritingY.check_target wrote into the targets"
    ):
        model.fit(X, y)
    np.testing.assert_array_equal(y, y0)


def test_a_loss_reading_z_and_y_gets_no_copies():
    seen = []

    class Records(Loss):
        def loss_and_gradient(self, Z, Y):
            seen.extend([Z, Y])
            return ((Z - Y) ** 2).sum(axis=1) / 2, Z - Y

    Z, Y = np.ones((4, 2)), np.zeros((4, 2))
    Records()(Z, Y)
    assert np.shares_memory(seen[0], Z) and np.shares_memory(seen[1], Y)
    assert not seen[0].flags.writeable and Z.flags.writeable

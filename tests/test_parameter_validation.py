"""Every parameter of every public class and function is checked before the first epoch.

The walk at the end of this module finds the public names in the packages'
``__all__`` lists and, for every parameter of every constructor (and of the
public functions of :mod:`sknet.utils` and :mod:`sknet.datasets`), tries the
wrong type, a negative, zero, NaN and a string for a flag: each must be a
``ValueError`` or ``TypeError`` naming the parameter, raised by a one-epoch
fit at most (the trigger for layers, losses and callbacks). A value that is
legitimately valid is listed in :data:`VALID`, and the walk checks that it is
accepted; a public class the walk cannot exercise needs a recipe in
:data:`LAYER_RECIPES` (or a reason in :data:`NOT_CONSTRUCTED`), so a new class
or a new parameter cannot skip it.

Before it, the defects that the walk generalizes, each named.
"""

import numpy as np
import pytest

from sknet import MLPClassifier
from sknet.callbacks import Checkpoint, EarlyStopping, LRScheduler, Unfreeze
from sknet.layers import Dense

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

rng = np.random.RandomState(0)
X = rng.rand(30, 3)
y = np.arange(30) % 2


def fit_with_callback(callback, **kwargs):
    params = dict(hidden_layer_sizes=(3,), max_iter=2, early_stopping=True, random_state=0)
    return MLPClassifier(**params, device="cpu", callbacks=[callback], **kwargs).fit(X, y)


# -- callbacks ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "callback, message",
    [
        # trained by gradient ascent: a negative rate
        (LRScheduler(policy="cosine", min_lr=-1), "'min_lr' parameter of LRScheduler"),
        # divided by zero after an epoch
        (LRScheduler(step_size=0), "'step_size' parameter of LRScheduler"),
        (LRScheduler(gamma=0), "'gamma' parameter of LRScheduler"),
        (LRScheduler(T_max=0), "'T_max' parameter of LRScheduler"),
        (LRScheduler(policy="linear"), "'policy' parameter of LRScheduler"),
        # stopped early and restored epoch 1: no value improves on NaN
        (EarlyStopping(min_delta=np.nan), "'min_delta' parameter of EarlyStopping"),
        (EarlyStopping(patience=-1), "'patience' parameter of EarlyStopping"),
        (EarlyStopping(restore_best_weights="no"), "'restore_best_weights' parameter of"),
        (Checkpoint(path=3), "'path' parameter of Checkpoint"),
        (Unfreeze(epoch=0), "'epoch' parameter of Unfreeze"),
        (Unfreeze(lr_scale=np.nan), "'lr_scale' parameter of Unfreeze"),
    ],
)
def test_callback_parameters_are_checked_before_the_first_epoch(callback, message):
    with pytest.raises(ValueError, match=message):
        fit_with_callback(callback, max_device_memory="not a size either")  # callbacks first


def test_a_user_callback_without_constraints_is_not_checked():
    from sknet.callbacks import Callback

    class Count(Callback):
        def __init__(self, every=0):
            self.every = every

    assert fit_with_callback(Count(every=-1)).callbacks_[0].every == -1


# -- flags are bools, not truthy values ----------------------------------------------------------
def test_use_bias_no_is_refused_not_read_as_true():
    from sknet import NeuralNetRegressor

    reg = NeuralNetRegressor([Dense(3, use_bias="no")], max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="'use_bias' parameter of Dense must be an instance of"):
        reg.fit(X, y.astype(float))


@pytest.mark.parametrize("padding_value", [np.nan, np.inf, "0"])
def test_padding_value_must_be_a_finite_number(padding_value):
    """NaN padding would never match (NaN != NaN) and X is refused with NaN in it anyway."""
    from sknet import RNNClassifier

    clf = RNNClassifier(padding_value=padding_value, max_iter=1, device="cpu")
    with pytest.raises(ValueError, match="'padding_value' parameter of RNNClassifier"):
        clf.fit(X.reshape(30, 3, 1), y)

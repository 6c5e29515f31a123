"""The loss of an ensemble whose outputs carry a member axis: the mean over its members."""

import copy as _copy

from sknet.backend import get_array_module as _get_array_module
from sknet.losses._base import Loss


class EnsembleLoss(Loss):
    """A loss averaged over the members of an ensemble; predictions averaged too.

    The outputs ``Z`` of a parameter-efficient ensemble (see
    :class:`~sknet.layers.EnsembleInput`) have a member axis, ``(n_samples,
    k, n_outputs)``. Each sample's loss is the mean of ``loss`` over its
    ``k`` members' outputs, all scored against the sample's one target (the
    members' rows folded into one batch of ``n_samples * k`` for ``loss``,
    whose values and gradient are checked as any loss's); the sample weights
    then apply as for any loss. Predictions (:meth:`output`) are the mean
    over the members of each member's own prediction: probabilities averaged
    after each member's softmax or sigmoid, as TabM does.

    The estimators wrap their loss in it when their network ends with a
    member axis; a user need not.

    Parameters
    ----------
    loss : Loss
        The loss of one member, resolved for the targets (any stock or user
        loss).

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.losses import EnsembleLoss, SquaredError
    >>> Z = np.array([[[0.0], [2.0]]])  # one sample, two members
    >>> Y = np.array([[1.0]])
    >>> values, dZ = EnsembleLoss(SquaredError()).loss_and_gradient(Z, Y)
    >>> values  # the members' mean of (z - y)^2 / 2
    array([0.5])
    >>> EnsembleLoss(SquaredError()).output(Z.copy())  # the members' mean prediction
    array([[1.]])
    """

    #: Predictions drop the member axis of the outputs (:meth:`output`).
    reduces_members = True

    _parameter_constraints: dict = {"loss": [Loss]}

    def __init__(self, loss):
        self.loss = loss

    @property
    def out_activation(self):
        """The member loss's (what each member's prediction is)."""
        return self.loss.out_activation

    def for_target(self, target_type):
        return EnsembleLoss(self.loss.for_target(target_type))

    def check_target(self, Y):
        self.loss.check_target(Y)

    def _members(self, Z):
        if Z.ndim != 3:
            raise ValueError(
                f"EnsembleLoss takes outputs with a member axis, (n_samples, k, n_outputs), "
                f"got shape {Z.shape}"
            )
        return Z.shape

    def loss_and_gradient(self, Z, Y):
        n, k, m = self._members(Z)
        xp = _get_array_module(Z)
        Zm = xp.ascontiguousarray(Z).reshape(n * k, m)
        Ym = xp.repeat(Y, k, axis=0)  # each member against its sample's target
        values, dZ = self.loss._checked_call(Zm, Ym)  # a loss of yours: read-only Z and Y
        dZ = dZ.reshape(n, k, m)
        dZ *= 1.0 / k
        return values.reshape(n, k).mean(axis=1), dZ

    def output(self, Z):
        n, k, m = self._members(Z)
        P = self.loss.output(_get_array_module(Z).ascontiguousarray(Z).reshape(n * k, m))
        return P.reshape(n, k, m).mean(axis=1)

    def release(self):
        super().release()
        self.loss.release()

    def __copy__(self):
        # A copy (the loss of a thread's row shard) gets a member loss of its
        # own: the stock losses keep a work buffer, which threads must not share.
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.loss = _copy.copy(self.loss)
        twin.loss.__dict__.pop("_grad", None)
        return twin

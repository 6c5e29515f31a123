"""Losses fused with their output activation.

Each loss maps the raw network output ``Z`` (logits) and a 2-D float target
``Y`` to ``(loss, dZ)`` in one call, where ``dZ`` is the exact gradient of the
returned loss with respect to ``Z``. For the canonical link of each loss this
gradient is ``(P - Y) * w / sum(w)`` with ``P`` the output activation of ``Z``,
so no softmax Jacobian is ever formed. ``loss`` stays a 0-d array on the
backend: reading it is the caller's decision (once per epoch).

The values match scikit-learn's MLP losses (``sklearn.neural_network._base``):
the sample-weighted average over samples of

======================  =====================  ====================================
loss                    output activation      per-sample value
======================  =====================  ====================================
``log_loss``            softmax                ``-log P[y]``
``binary_log_loss``     logistic               ``sum_k -y log p - (1 - y) log(1 - p)``
``squared_error``       identity               ``mean_k (y - z)^2 / 2``
``poisson``             exp                    ``sum_k y log(y / p) - y + p``
======================  =====================  ====================================
"""

from abc import ABC, abstractmethod

from sknet.backend import get_array_module
from sknet.backend._base import ACTIVATIONS


class Loss(ABC):
    """A loss fused with its output activation.

    Attributes
    ----------
    name : str
        scikit-learn's name for the loss.
    out_activation : str
        scikit-learn's name for the output activation (``out_activation_``).
    """

    name = None
    out_activation = None

    def __init__(self):
        self._grad = None

    @abstractmethod
    def output(self, Z):
        """Apply the output activation to logits ``Z`` in place and return them."""

    @abstractmethod
    def per_sample(self, Z, Y, P):
        """Per-sample loss values (1-D) given logits, targets and activations."""

    def __call__(self, Z, Y, sample_weight=None, sw_sum=None):
        """Return ``(loss, dZ)`` for a batch; ``dZ`` is a reused buffer.

        Parameters
        ----------
        Z : array of shape (n_samples, n_outputs)
            Raw network outputs (not modified).
        Y : array of shape (n_samples, n_outputs)
            Targets, float (one-hot or indicator for classification).
        sample_weight : array of shape (n_samples,) or None
            Non-negative sample weights.
        sw_sum : float or None
            ``sample_weight.sum()`` when the caller knows it already (it saves
            a reduction on the device); the number of rows when unweighted.
        """
        xp = get_array_module(Z)
        P = self._grad_buffer(xp, Z)
        P[...] = Z
        self.output(P)
        values = self.per_sample(Z, Y, P)
        scale = self._grad_scale(Z)
        P -= Y
        if sample_weight is None:
            loss = values.mean()
            P *= scale / Z.shape[0]
        else:
            if sw_sum is None:
                sw_sum = sample_weight.sum()
            loss = (values * sample_weight).sum() / sw_sum
            P *= (sample_weight * (scale / sw_sum))[:, None]
        return loss, P

    def _grad_scale(self, Z):
        return 1.0

    def _grad_buffer(self, xp, Z):
        buf = self._grad
        if (
            buf is None
            or get_array_module(buf) is not xp
            or buf.shape[1:] != Z.shape[1:]
            or buf.shape[0] < Z.shape[0]
            or buf.dtype != Z.dtype
        ):
            buf = self._grad = xp.empty_like(Z)
        return buf[: Z.shape[0]]

    def release(self):
        """Drop the gradient buffer (end of ``fit``)."""
        self._grad = None

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self._grad = None

    def __repr__(self):
        return f"{type(self).__name__}()"


class SoftmaxLogLoss(Loss):
    """Softmax output with the multiclass log-loss (one-hot ``Y``)."""

    name = "log_loss"
    out_activation = "softmax"

    def output(self, Z):
        xp = get_array_module(Z)
        Z -= Z.max(axis=1, keepdims=True)
        xp.exp(Z, out=Z)
        Z /= Z.sum(axis=1, keepdims=True)
        return Z

    def per_sample(self, Z, Y, P):
        # -log softmax(Z)[y] = logsumexp(Z) - <Y, Z>, computed stably.
        xp = get_array_module(Z)
        m = Z.max(axis=1)
        lse = xp.log(xp.exp(Z - m[:, None]).sum(axis=1)) + m
        return lse - (Y * Z).sum(axis=1)


class LogisticLogLoss(Loss):
    """Logistic outputs with the binary log-loss summed over outputs.

    Used for binary (one output) and multilabel (one output per label) targets.
    """

    name = "binary_log_loss"
    out_activation = "logistic"

    def output(self, Z):
        return ACTIVATIONS["logistic"].forward(get_array_module(Z), Z, Z)

    def per_sample(self, Z, Y, P):
        # softplus(z) - y z = max(z, 0) - y z + log1p(exp(-|z|))
        xp = get_array_module(Z)
        values = xp.log1p(xp.exp(-xp.abs(Z)))
        values += xp.maximum(Z, 0)
        values -= Y * Z
        return values.sum(axis=1)


class SquaredError(Loss):
    """Identity output with half the squared error, averaged over outputs.

    scikit-learn reports this loss averaged over outputs but steps along the
    gradient of the sum; here the gradient is that of the reported loss, so
    ``solver='lbfgs'`` sees a consistent pair. With one output the two agree.
    """

    name = "squared_error"
    out_activation = "identity"

    def output(self, Z):
        return Z

    def per_sample(self, Z, Y, P):
        diff = Z - Y
        diff *= diff
        return 0.5 * diff.mean(axis=1)

    def _grad_scale(self, Z):
        return 1.0 / Z.shape[1]


class PoissonLoss(Loss):
    """Exponential output (log link) with half the Poisson deviance."""

    name = "poisson"
    out_activation = "exp"

    def output(self, Z):
        xp = get_array_module(Z)
        return xp.exp(Z, out=Z)

    def per_sample(self, Z, Y, P):
        # y log(y / p) - y + p, with 0 log 0 = 0 and log p = z.
        xp = get_array_module(Z)
        positive = Y > 0
        ylogy = xp.where(positive, Y * xp.log(xp.where(positive, Y, 1)), 0)
        values = ylogy - Y * Z
        values -= Y
        values += P
        return values.sum(axis=1)


LOSSES = {
    "log_loss": SoftmaxLogLoss,
    "binary_log_loss": LogisticLogLoss,
    "squared_error": SquaredError,
    "poisson": PoissonLoss,
}


def make_loss(name):
    """Return a new loss object for scikit-learn's loss name ``name``."""
    try:
        return LOSSES[name]()
    except KeyError:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {name!r}") from None


# Output activations for prediction, by ``out_activation_`` name.
OUTPUT_ACTIVATIONS = {cls.out_activation: cls for cls in LOSSES.values()}


def output_activation(name, Z):
    """Apply the output activation ``name`` (an ``out_activation_``) in place."""
    return OUTPUT_ACTIVATIONS[name]().output(Z)


__all__ = ["LOSSES", "Loss", "make_loss", "output_activation"]

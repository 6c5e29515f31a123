"""The weights' moving average between epochs: validated, kept, returned.

An optimizer that averages the weights (:meth:`StochasticOptimizer.start_averaging
<sknet.engine._optimizers.StochasticOptimizer.start_averaging>`) keeps an
exponential moving average of them, step by step. At the end of each epoch the
trainer puts the averages in the network (:func:`put_averages`): the validation
scores them, early stopping keeps them, callbacks see them. Training then goes on
from the weights the optimizer stepped (:func:`take_back`), unless a callback put
weights in meanwhile (early stopping's best ones, a user's, the epoch's averages
themselves), which training then goes on from, their average starting again
there. After the last epoch, and when training stops, the averages stay
(:func:`averages_in`).
"""

import contextlib


def averaging_decay(span, n_batches):
    """The decay a step of an average spanning ``span`` epochs of ``n_batches`` batches.

    ``1 - 1 / (span * n_batches)``; 0 where that span is one step or less (each
    average is then its weights: nothing to average).
    """
    steps = float(span) * max(int(n_batches), 1)
    return 0.0 if steps <= 1.0 else 1.0 - 1.0 / steps


def put_averages(optimizer):
    """Put ``optimizer``'s averages in its parameters; the stepped weights (copies) or None."""
    if optimizer is None or optimizer.average_decay is None:
        return None
    stepped = [p.copy() for p in optimizer.params]
    for p, average in zip(optimizer.params, optimizer.averages):
        p[...] = average
    return stepped


def take_back(optimizer, stepped, put_in=False):
    """Train on from the ``stepped`` weights, or from others a callback put in since.

    ``put_in``: a callback loaded weights (:meth:`Network.load_weights
    <sknet.engine._network.Network.load_weights>`), even the averages themselves;
    weights written otherwise are told from the averages by their values.
    """
    xp = optimizer.backend.xp
    pairs = list(zip(optimizer.params, optimizer.averages))
    if not put_in and all(bool(xp.array_equal(p, average)) for p, average in pairs):
        for p, weights in zip(optimizer.params, stepped):
            p[...] = weights
    else:
        for p, average in pairs:
            average[...] = p


class _Decision:
    """Records whether the epoch's averages stay: called with the epoch's stop flag."""

    def __init__(self, keep):
        self.keep = keep

    def __call__(self, stop):
        self.keep = self.keep or bool(stop)
        return stop


@contextlib.contextmanager
def averages_in(optimizer, network, keep=False):
    """Within the block, ``optimizer``'s averages are ``network``'s weights (no
    averages: no change).

    Yields a function that takes the epoch's stop flag and returns it: a true
    one, or ``keep`` (the last epoch), leaves the averages in after the block;
    otherwise training goes on from the stepped weights (:func:`take_back`).
    """
    decision = _Decision(keep)
    stepped = put_averages(optimizer)
    loads = network.loads
    yield decision
    if stepped is not None and not decision.keep:
        take_back(optimizer, stepped, put_in=network.loads != loads)


def configure_averaging(optimizer, span, n_batches):
    """Average ``optimizer``'s weights over ``span`` epochs (None or a single step: not)."""
    decay = None if span is None else averaging_decay(span, n_batches)
    if decay:
        optimizer.start_averaging(decay)
    else:
        optimizer.stop_averaging()

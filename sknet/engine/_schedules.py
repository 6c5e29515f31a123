"""Learning-rate schedules as functions of the training's progress.

What :class:`~sknet.callbacks.LRScheduler` sets between batches and epochs:
a linear warm-up over the first batches, then a cosine annealing over epochs.
Plain functions of numbers, so any callback (or a user's) can use them.
"""

import math


def warmup_rate(initial, step, warmup_steps):
    """The rate of batch ``step`` (1-based) of a linear warm-up to ``initial``.

    It rises by ``initial / warmup_steps`` a batch, from ``initial /
    warmup_steps`` at the first batch to ``initial`` at batch ``warmup_steps``
    and after (the warm-up of Goyal et al., 2017).
    """
    return initial * min(1.0, step / warmup_steps)


def cosine_rate(initial, minimum, epoch, epochs):
    """The cosine annealing from ``initial`` to ``minimum`` over ``epochs`` epochs.

    ``initial`` at epoch 0, ``minimum`` from epoch ``epochs`` on (Loshchilov &
    Hutter's SGDR without restarts).
    """
    progress = min(max(epoch, 0), epochs) / epochs
    return minimum + (initial - minimum) * 0.5 * (1 + math.cos(math.pi * progress))

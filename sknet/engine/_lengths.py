"""Training batches grouped by sequence length (``group_by_length=True``).

Padded sequences of very different lengths waste most of a batch's work on
padding. With ``group_by_length``, each epoch's shuffled rows are cut into
pools of :data:`POOL_BATCHES` batches and each pool is sorted by length,
longest first (Hugging Face's ``LengthGroupedSampler``), so that a batch
holds sequences of similar lengths, and the batches are shuffled (no
length at a set point of the epoch); each batch then runs cut to the fewest
steps that hold its longest sequence, rounded up to the fitted width halved
(``T``, ``T/2``, ``T/4``... down to :data:`MIN_STEPS`), on a copy of the
network built for that width. The copies share the network's parameters,
running state and gradient arrays (the optimizer sees one network) and draw
their random numbers from the network's own streams; only their work
buffers are their own: at most about twice one network's.

The padding is masked, so a batch cut to its longest sequence has the loss
and gradient of the same batch at the fitted width. What changes is which
rows share a batch.
"""

import numpy as np
from sklearn.base import clone

from sknet.engine._network import Network
from sknet.layers._tree import walk

#: Batches per pool sorted by length (the shuffle stays random across pools).
POOL_BATCHES = 50

#: The fewest steps a batch is cut to.
MIN_STEPS = 8


def sequence_lengths_of(network, X):
    """Each row's steps up to its last real one (host ints), ``X`` rows of ``network``."""
    X = np.asarray(X)
    steps = network.input_shape[0]
    real = network.input_mask(X.reshape((X.shape[0],) + tuple(network.input_shape)))
    real = real.reshape(X.shape[0], steps, -1).any(axis=2)  # (n, T): sequences of sequences too
    last = steps - real[:, ::-1].argmax(axis=1)
    return np.where(real.any(axis=1), last, 0)


def group_rows(rows, lengths, batch_size, rng=None):
    """``rows`` (an epoch's order) sorted by length, longest first, within each pool;
    then the whole batches in an order drawn from ``rng`` (``None``: as sorted), so
    that no length comes at a set point of the epoch. A last, smaller batch stays last."""
    pool = POOL_BATCHES * batch_size
    grouped = np.empty_like(rows)
    for start in range(0, rows.shape[0], pool):
        part = rows[start : start + pool]
        grouped[start : start + pool] = part[np.argsort(-lengths[part], kind="stable")]
    n_whole = rows.shape[0] // batch_size
    if rng is not None and n_whole > 1:
        whole = grouped[: n_whole * batch_size].reshape(n_whole, batch_size)
        grouped[: n_whole * batch_size] = whole[rng.permutation(n_whole)].ravel()
    return grouped


def batch_steps(rows, lengths, batch_size, steps):
    """The steps each batch of ``rows`` runs at: ``steps`` halved (rounded up) while
    that holds the batch's longest sequence, not below :data:`MIN_STEPS`."""
    widths = []
    for start in range(0, rows.shape[0], batch_size):
        longest = max(int(lengths[rows[start : start + batch_size]].max()), MIN_STEPS)
        width = steps
        while longest <= (width + 1) // 2 < width:
            width = (width + 1) // 2
        widths.append(width)
    return widths


def cut_steps(X, steps, per_step):
    """The first ``steps`` steps of rows ``X`` (flat rows or arrays of steps)."""
    return X[:, : steps * per_step] if X.ndim == 2 else X[:, :steps]


class NetworksByWidth:
    """The network, and copies of it built for fewer steps, sharing its arrays.

    Parameters
    ----------
    network : Network
        The training network; its training plan is applied
        (:meth:`~sknet.engine._network.Network.prepare_training`).
    """

    def __init__(self, network):
        self.network = network
        self.steps = network.input_shape[0]
        self.per_step = int(np.prod(network.input_shape[1:], dtype=np.int64))
        self._copies = {}

    def epoch(self, rows, lengths, batch_size, rng, shuffle=True):
        """An epoch's ``rows`` grouped (:func:`group_rows`, the batches shuffled by
        ``rng`` if ``shuffle``) and each batch's steps."""
        rows = group_rows(rows, lengths, batch_size, rng if shuffle else None)
        return rows, batch_steps(rows, lengths, batch_size, self.steps)

    def at(self, steps):
        """The network for batches of ``steps`` steps (built on first use)."""
        if steps == self.steps:
            return self.network
        if steps not in self._copies:
            self._copies[steps] = _copy_at(self.network, steps)
        return self._copies[steps]


def build_at_steps(network, steps):
    """A network of copies of ``network``'s layers built for ``steps`` steps (new
    arrays); the ValueError of a layer that cannot take them as it is."""
    return Network.build(
        [clone(layer) for layer in network.layers],
        (steps,) + tuple(network.input_shape[1:]),
        backend=network.backend,
        dtype=network.dtype,
        rng=np.random.RandomState(0),
        padding_value=network.padding_value,
    )


def _copy_at(network, steps):
    """``network`` built for ``steps`` steps, its arrays and random streams shared."""
    try:
        copy = build_at_steps(network, steps)
    except ValueError as exc:
        raise ValueError(
            f"group_by_length=True cuts batches to {steps} of the {network.input_shape[0]} "
            f"steps, which this network cannot run: {exc}. Set group_by_length=False"
        ) from exc
    for (key, leaf), (_, twin) in zip(network.leaves(), copy.leaves()):
        for name in ("params", "state", "grads"):
            ours, theirs = getattr(leaf, name), getattr(twin, name)
            if {k: a.shape for k, a in ours.items()} != {k: a.shape for k, a in theirs.items()}:
                raise ValueError(
                    f"group_by_length=True needs a network whose weights do not depend on "
                    f"the number of steps, but {type(leaf).__name__} (layers_[{key}]) has "
                    f"{name} of other shapes at {steps} steps. Set group_by_length=False"
                )
            for k in ours:  # in place: TimeDistributed shares the dict
                theirs[k] = ours[k]
    for (_, leaf), (_, twin) in zip(walk(network.layers), walk(copy.layers)):
        if hasattr(leaf, "_stream"):
            twin._stream = leaf._stream  # one random stream: the network's
    copy.prepare_training()
    return copy

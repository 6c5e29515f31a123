"""The training plan: what a fit decides per layer, computed once from the layer tree.

Before a fit trains (and again when ``trainable``/``lr_scale`` change during
it), :class:`TrainingPlan` walks the network's tree once
(:mod:`sknet.layers._tree`) and decides, for every layer:

- whether its parameters train (``trainable`` checked as a fresh fit checks
  it, on warm starts and after ``Unfreeze`` too);
- whether it computes the gradient of its input: not the lowest trainable
  layer of a chain whose input nobody needs, so backward stops there, and
  forward-only layers do not record what no gradient needs;
- whether batches may be split over threads (every layer row-independent).

The plan is the only writer of the decisions layers read while training
(``skip_input_grad``; where backward starts): nothing else sets them, so none
is left stale by an earlier fit.
"""

from sknet.layers._tree import check_flags, leaves, walk


class TrainingPlan:
    """The per-layer decisions of one fit (see the module docstring).

    Parameters
    ----------
    network : Network
        The built network; its layers' flags are checked here.

    Attributes
    ----------
    leaves : list of (key, Layer)
        The layers holding parameters, as ``Network.leaves`` lists them.
    trained : list of (key, Layer)
        The leaves whose parameters train.
    backward_from : int
        Index of the lowest top-level layer backward runs through
        (``len(network.layers)`` when nothing trains).
    shardable : bool
        Whether a batch may be split into row shards (every layer says so).
    """

    def __init__(self, network):
        layers = network.layers
        check_flags(layers)
        self.network = network
        self.leaves = network.leaves()
        self.trained = [(key, leaf) for key, leaf in self.leaves if leaf.params and leaf.trainable]
        trained = {id(leaf) for _, leaf in self.trained}
        self._trains = {
            id(node): any(id(leaf) in trained for _, leaf in leaves([node]))
            for _, node in walk(layers)
        }
        self._skips = []
        start = next((i for i, layer in enumerate(layers) if self._trains[id(layer)]), None)
        self.backward_from = len(layers) if start is None else start
        for i, layer in enumerate(layers):
            self._decide(layer, skip=i <= self.backward_from)
        self.shardable = all(layer.shardable for layer in layers)

    def _decide(self, layer, skip):
        """Record ``layer``'s decision, then its sublayers' (by the paths they form)."""
        self._skips.append((layer, bool(skip)))
        if not layer.sublayers():
            return
        chains = layer.chains()
        if chains is None:  # a user's container: every layer inside passes gradients on
            for _, node in walk(layer.sublayers()):
                self._skips.append((node, False))
            return
        for chain in chains:
            self._decide_chain(chain, skip)

    def _decide_chain(self, blocks, skip):
        """A path, run first to last: with ``skip``, backward stops at its lowest trainable."""
        if not blocks:
            return
        start = 0
        if skip:
            trains = [i for i, block in enumerate(blocks) if self._trains[id(block)]]
            start = trains[0] if trains else len(blocks) - 1
        for i, block in enumerate(blocks):
            self._decide(block, skip=skip and i <= start)

    def apply(self):
        """Give every layer its decision (``skip_input_grad``) and the network its start."""
        for layer, skip in self._skips:
            layer.skip_input_grad = skip
        self.network.backward_from = self.backward_from
        return self

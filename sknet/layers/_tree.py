"""The layer tree: one traversal of a network, containers and wrappers alike.

A network's layers are the roots of a tree. A layer's children are the built
layers inside it (:meth:`Layer.sublayers`): a container's blocks,
``TimeDistributed``'s layer, a user's container's built layers. Layers
without children hold the parameters: the leaves. Everything in sknet that
needs the layers walks them with the functions here: the trainer's parameter
layout and its training plan, freezing and ``Unfreeze``, reseeding, the thread
split, ``from_estimator``, the memory estimate, warm starts.

A node's children are built from unbuilt layers, its sources
(:meth:`Layer.source_layers`), in the same order: how a warm start carries
the flags of the estimator's ``layers`` onto the built tree, and how
``from_estimator`` turns a built tree back into unbuilt layers.
"""

from numbers import Real

import numpy as np
from sklearn.base import clone


def walk(layers, path=()):
    """``(path, layer)`` for every layer of the trees rooted at ``layers``, parents first.

    ``path`` is the tuple of indices from the roots down to the layer.
    """
    for i, layer in enumerate(layers):
        yield path + (i,), layer
        yield from walk(layer.sublayers(), path + (i,))


def leaves(layers):
    """``(path, layer)`` for the layers without children: those that hold parameters."""
    for path, layer in walk(layers):
        if not layer.sublayers():
            yield path, layer


def descendants(layer):
    """Every layer inside ``layer`` (not ``layer`` itself), parents first."""
    return [node for _, node in walk(layer.sublayers())]


def set_flags(layer, *, trainable=None, lr_scale=None):
    """Set ``trainable``/``lr_scale`` (those not None) on ``layer`` and its whole subtree.

    What freezing or unfreezing a container means, as in Keras: every layer
    inside it follows.
    """
    for node in [layer, *descendants(layer)]:
        if trainable is not None:
            node.trainable = trainable
        if lr_scale is not None:
            node.lr_scale = lr_scale


def apply_container_flags(layer):
    """Give ``layer``'s subtree the flags it sets for all of it (after building it).

    A container's ``trainable``/``lr_scale`` of ``None`` (the stock
    containers' default) leaves each inner layer its own. Any layer with
    children that says ``trainable=False`` freezes its subtree; an explicit
    ``lr_scale`` other than 1 scales its subtree.
    """
    if not layer.sublayers():
        return
    trainable, lr_scale = layer.__dict__.get("trainable"), layer.__dict__.get("lr_scale")
    if trainable is not None and (trainable is False or _declares_none(layer, "trainable")):
        set_flags(layer, trainable=bool(trainable))
    if lr_scale is not None and (lr_scale != 1.0 or _declares_none(layer, "lr_scale")):
        set_flags(layer, lr_scale=lr_scale)


def _declares_none(layer, name):
    """Whether ``layer``'s constructor defaults ``name`` to None (an explicit value is set)."""
    return type(layer)._init_defaults().get(name, True) is None


def copy_flags(source, built):
    """Carry ``trainable``/``lr_scale`` from an unbuilt tree onto the tree built from it.

    A warm fit after ``set_params(layers__0__trainable=True)`` continues the
    same network with the new flags (they do not define the network): each
    built layer takes its source's flags, then containers apply theirs to
    their subtrees, outermost last.
    """
    for name in ("trainable", "lr_scale"):
        if name in source.__dict__ or name in built.__dict__:
            value = getattr(source, name, None)
            if value is not None or _declares_none(built, name):
                setattr(built, name, value)
    for inner_source, inner_built in zip(source.source_layers(), built.sublayers()):
        copy_flags(inner_source, inner_built)
    apply_container_flags(built)


def check_flags(layers):
    """Check every layer's ``trainable`` and ``lr_scale``, as a fresh fit does.

    Raises a ValueError naming the layer (its path) and the value.
    """
    for path, layer in walk(layers):
        where = f"{type(layer).__name__} (layers_{''.join(f'[{i}]' for i in path)})"
        trainable = layer.__dict__.get("trainable", True)
        if not (trainable is None and layer.sublayers()) and not isinstance(
            trainable, (bool, np.bool_)
        ):
            raise ValueError(f"{where}: trainable must be True or False, got {trainable!r}")
        lr_scale = layer.__dict__.get("lr_scale", 1.0)
        if lr_scale is None and layer.sublayers():
            continue
        if (
            not isinstance(lr_scale, Real)
            or isinstance(lr_scale, bool)
            or not np.isfinite(lr_scale)
            or not lr_scale > 0
        ):
            raise ValueError(f"{where}: lr_scale must be a positive number, got {lr_scale!r}")


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


class TreeNode:
    """A layer as a node of the tree: its sublayers and what they were built from.

    A mixin of :class:`~sknet.layers.Layer` (the methods are documented there).
    """

    def sublayers(self):
        """The built layers inside this one, in order; ``[]`` for a leaf.

        By default, the built layers held in attributes named after a
        constructor parameter plus an underscore (``block_`` built from
        ``block``): what a container makes of the layers it is given. The
        training plan, freezing, reseeding and transfer walk them
        (:mod:`sknet.layers._tree`).
        """
        return [layer for _, layers in self._built_sublayers() for layer in layers]

    def chains(self):
        """The paths an input takes through :meth:`sublayers`, for the training plan.

        Each path is a list of sublayers that runs first to last on this
        layer's input (a sequence of blocks, a residual block and its
        shortcut, the branches of a concatenation): the plan lets backward
        stop at the lowest trainable layer of a path. ``None`` (the default):
        unknown, and every layer inside computes the gradient of its input.
        """
        return None

    def source_layers(self):
        """The unbuilt layers :meth:`sublayers` were built from, in the same order."""
        return [
            layer
            for name, built in self._built_sublayers()
            for layer in _as_list(getattr(self, name[:-1]))[: len(built)]
        ]

    def _built_sublayers(self):
        """``(attribute, [built layers])`` for each parameter ``p`` with a built ``p_``."""
        found = []
        for name in self._get_param_names():
            built = self.__dict__.get(name + "_")
            if (
                built is not None
                and _as_list(built)
                and all(isinstance(layer, TreeNode) for layer in _as_list(built))
            ):
                found.append((name + "_", _as_list(built)))
        return found

    def _copy_with(self, layers):
        """An unbuilt copy of this layer whose sublayers are ``layers`` (``from_estimator``)."""
        copy, start, changes = clone(self), 0, {}
        for name, built in self._built_sublayers():
            part = layers[start : start + len(built)]
            source = getattr(self, name[:-1])
            changes[name[:-1]] = list(part) if isinstance(source, (list, tuple)) else part[0]
            start += len(built)
        return copy.set_params(**changes)

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

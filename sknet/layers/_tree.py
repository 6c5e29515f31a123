"""The layer tree: one traversal of a network, containers and wrappers alike.

A network's layers are the roots of a tree. A layer's children are its
sublayers (:meth:`Layer.sublayers`): a container's blocks,
``TimeDistributed``'s layer, a user's container's layers. A layer declares
which of its constructor parameters hold its sublayers
(:attr:`Layer.sublayer_params`; without a declaration, the parameters that
hold layers), builds a copy of each in the attribute of the same name plus an
underscore, and answers the same built or not: an unbuilt layer's children
are the layers it will build (:meth:`Layer.source_layers`), a built one's the
copies it built, in the same order.

Everything in sknet that needs the layers walks them with the functions here:
the network's weights (early stopping's best weights, the fit transaction's
snapshot), moving and casting, the trainer's parameter layout and its training
plan, freezing and ``Unfreeze``, reseeding, the thread split, masks,
``from_estimator``, the memory estimate, warm starts. The layers that hold
parameters (:func:`leaves`) are those without children, and containers with
arrays of their own besides their sublayers'.

A tree is at most :data:`MAX_DEPTH` layers deep: :func:`walk` refuses a
deeper one with a ValueError naming where it goes deeper, before anything
recursive (copying, building) meets it.
"""

import functools
from numbers import Real

import numpy as np
from sklearn.base import clone

#: How deep layers may nest (a network's own layers are at depth 1). Far beyond
#: any network one writes; deeper trees would exhaust Python's recursion in
#: copying, cloning and pickling.
MAX_DEPTH = 64


@functools.cache
def _param_names(cls):
    """A layer class's constructor parameters (scikit-learn's ``_get_param_names``), read
    once a class: its signature is inspected on every call, and the tree is walked per batch."""
    return tuple(cls._get_param_names())


def where(path, root="layers_"):
    """A layer's place in a tree, as its user reads it: ``layers_[1][0]``."""
    return root + "".join(f"[{i}]" for i in path)


def walk(layers, path=(), *, root="layers_"):
    """``(path, layer)`` for every layer of the trees rooted at ``layers``, parents first.

    ``path`` is the tuple of indices from the roots down to the layer. Raises
    a ValueError naming the place where the tree goes deeper than
    :data:`MAX_DEPTH` (iterative: no recursion, whatever the depth).
    """
    stack = [(path + (i,), layer) for i, layer in enumerate(layers)][::-1]
    while stack:
        here, layer = stack.pop()
        yield here, layer
        children = layer.sublayers()
        if children and len(here) >= MAX_DEPTH:
            raise ValueError(
                f"The layers are nested deeper than {MAX_DEPTH} levels at "
                f"{type(layer).__name__} ({_short_where(here, root)}); sknet supports "
                f"layers nested at most {MAX_DEPTH} deep: flatten the nesting (a "
                "Sequential of Sequentials runs as one Sequential of their layers)"
            )
        stack.extend([(here + (i,), child) for i, child in enumerate(children)][::-1])


def _short_where(path, root):
    if len(path) <= 8:
        return where(path, root)
    return f"{where(path[:4], root)}...{''.join(f'[{i}]' for i in path[-2:])}, depth {len(path)}"


def check_depth(layers, *, root="layers_"):
    """Raise the ValueError of :func:`walk` if ``layers`` nest deeper than :data:`MAX_DEPTH`."""
    for _ in walk(layers, root=root):
        pass


def leaves(layers):
    """``(path, layer)`` for the layers that hold parameters (and state) of their own.

    The layers without children, and any layer with children whose
    ``params``/``state`` hold arrays of its own (a user's container with a
    learned gate); a container whose arrays are its sublayers' (the stock
    containers gather them, ``TimeDistributed`` shares them) holds none.
    """
    nodes = list(walk(layers))
    below = {}  # id(layer) -> ids of the arrays its descendants hold
    for _, layer in reversed(nodes):
        ids = set()
        for child in layer.sublayers():
            ids |= below[id(child)] | _array_ids(child)
        below[id(layer)] = ids
    for path, layer in nodes:
        if not layer.sublayers():
            yield path, layer
            continue
        own = _array_ids(layer)
        shared = own & below[id(layer)]
        if own and shared and own != shared:
            raise ValueError(
                f"{type(layer).__name__}.params holds arrays of its sublayers and arrays "
                "of its own; keep only its own parameters there (its sublayers' are "
                "reached through sublayers())"
            )
        if own and not shared:
            yield path, layer


def _array_ids(layer):
    arrays = [*getattr(layer, "params", {}).values(), *getattr(layer, "state", {}).values()]
    return {id(array) for array in arrays}


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
        set_flags(layer, trainable=trainable)
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


def check_flags(layers, *, root="layers_"):
    """Check every layer's ``trainable`` and ``lr_scale`` (built or not), as a fit does.

    ``trainable`` is True or False (``None`` where the constructor defaults to
    it: a container leaving each layer its own), ``lr_scale`` a positive
    finite number (or ``None`` likewise). Raises a ValueError naming the layer
    (its path under ``root``) and the value.
    """
    for path, layer in walk(layers, root=root):
        here = f"{type(layer).__name__} ({where(path, root)})"
        trainable = layer.__dict__.get("trainable", True)
        if not (trainable is None and _declares_none(layer, "trainable")) and not isinstance(
            trainable, (bool, np.bool_)
        ):
            raise ValueError(f"{here}: trainable must be True or False, got {trainable!r}")
        lr_scale = layer.__dict__.get("lr_scale", 1.0)
        if lr_scale is None and _declares_none(layer, "lr_scale"):
            continue
        if (
            not isinstance(lr_scale, Real)
            or isinstance(lr_scale, (bool, np.bool_))
            or not np.isfinite(lr_scale)
            or not lr_scale > 0
        ):
            raise ValueError(f"{here}: lr_scale must be a positive number, got {lr_scale!r}")


def check_tree(layers, *, root="layers"):
    """Check unbuilt ``layers`` before a fit copies and builds them; returns them.

    Their depth (:data:`MAX_DEPTH`) and every layer's flags (:func:`check_flags`).
    """
    layers = list(layers)
    check_flags(layers, root=root)
    return layers


def check_masks(layers):
    """Refuse a tree in which a layer taking a mask sits in a container that drops it.

    With ``padding_value`` a network hands the padding mask to the layers that
    take one (``supports_mask``); a container passes it on only if it takes one
    itself. A recurrent layer below one that does not would treat padding as data.
    """
    dropping = {}  # path -> the first container above that takes no mask
    for path, layer in walk(layers):
        parent = dropping.get(path[:-1])
        if parent is None and len(path) > 1:
            above = _node_at(layers, path[:-1])
            parent = None if above.supports_mask else (path[:-1], above)
        dropping[path] = parent
        if layer.supports_mask and parent is not None:
            (at, container) = parent
            raise ValueError(
                f"{type(layer).__name__} ({where(path)}) takes the padding mask, but "
                f"{type(container).__name__} ({where(at)}) above it does not pass masks "
                "on: it would treat padded steps as data. Give "
                f"{type(container).__name__} supports_mask = True and a forward(X, *, "
                "training, mask=None) that runs its layers with forward_with_mask, or "
                "fit without padding_value"
            )


def _node_at(layers, path):
    node = layers[path[0]]
    for i in path[1:]:
        node = node.sublayers()[i]
    return node


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _is_layers(value):
    """Whether ``value`` is a layer or a non-empty list of layers."""
    items = _as_list(value)
    return bool(items) and all(isinstance(item, TreeNode) for item in items)


class TreeNode:
    """A layer as a node of the tree: its sublayers and what they were built from.

    A mixin of :class:`~sknet.layers.Layer` (the methods are documented there).
    """

    #: The constructor parameters that hold this layer's sublayers (each a
    #: layer or a list of layers), in order; ``build`` builds a copy of each in
    #: the attribute of the same name plus an underscore (``block_`` from
    #: ``block``, a list for a list) with :meth:`build_sublayer`. ``None``: the
    #: parameters whose value is a layer or a list of layers.
    sublayer_params = None

    def _sublayer_names(self):
        """The declared :attr:`sublayer_params`, or those discovered from the values."""
        names = _param_names(type(self))
        declared = type(self).sublayer_params
        if declared is None:
            return [name for name in names if _is_layers(getattr(self, name, None))]
        if isinstance(declared, str) or not all(isinstance(name, str) for name in declared):
            raise ValueError(
                f"{type(self).__name__}.sublayer_params must be a tuple of parameter names, "
                f"got {declared!r}"
            )
        unknown = [name for name in declared if name not in names]
        if unknown:
            raise ValueError(
                f"{type(self).__name__}.sublayer_params names {unknown[0]!r}, which is not "
                f"a parameter of its __init__ ({', '.join(names) or 'none'})"
            )
        return list(declared)

    def source_layers(self):
        """The unbuilt layers the sublayers are built from, in order (built or not).

        What the parameters named by :attr:`sublayer_params` hold, a list's
        entries in order; ``None`` holds none.
        """
        found = []
        for name in self._sublayer_names():
            value = getattr(self, name)
            for layer in _as_list(value):
                if layer is not None and not isinstance(layer, TreeNode):
                    what = (
                        "a list of sknet layers"
                        if isinstance(value, (list, tuple))
                        else ("an sknet Layer or a list of sknet layers")
                    )
                    raise ValueError(
                        f"{type(self).__name__}: {name} must be {what}, got {value!r}"
                    )
                if layer is not None:
                    found.append(layer)
        return found

    def sublayers(self):
        """The layers inside this one, in order; ``[]`` for a layer without any.

        Built, the copies :meth:`build` made (``<param>_`` for each of
        :attr:`sublayer_params`); not yet built, :meth:`source_layers`: a
        tree answers the same built or not. Weights, early stopping, the fit
        transaction, moving, freezing, masks, reseeding and transfer walk
        them (:mod:`sknet.layers._tree`).
        """
        if "backend_" not in self.__dict__:
            return self.source_layers()
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

    def _built_sublayers(self):
        """``(attribute, [built layers])`` for each sublayer parameter ``p`` built in ``p_``."""
        found = []
        for name in self._sublayer_names():
            built = self.__dict__.get(name + "_")
            if built is not None and _is_layers(built):
                found.append((name + "_", _as_list(built)))
        return found

    def _check_built_sublayers(self):
        """After ``build``: every declared sublayer parameter has its built copy."""
        if type(self).sublayer_params is None or type(self).sublayers is not TreeNode.sublayers:
            return
        built = dict(self._built_sublayers())
        for name in self._sublayer_names():
            given = [layer for layer in _as_list(getattr(self, name)) if layer is not None]
            if given and len(built.get(name + "_", ())) != len(given):
                raise ValueError(
                    f"{type(self).__name__} declares sublayer_params "
                    f"{tuple(type(self).sublayer_params)!r}, but its build() left "
                    f"{name}_ without a built copy of each layer in {name} "
                    f"({len(given)}); build them with self.{name}_ = "
                    f"self.build_sublayer(self.{name}, input_shape, rng=rng)"
                )

    def _copy_with(self, layers):
        """An unbuilt copy of this layer whose sublayers are ``layers`` (``from_estimator``)."""
        copy, start, changes = clone(self), 0, {}
        for name, built in self._built_sublayers():
            part = layers[start : start + len(built)]
            source = getattr(self, name[:-1])
            changes[name[:-1]] = list(part) if isinstance(source, (list, tuple)) else part[0]
            start += len(built)
        return copy.set_params(**changes)

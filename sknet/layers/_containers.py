"""Container layers: networks beyond a plain stack.

:class:`Sequential` runs layers one after another, :class:`Residual` adds a
block's output to its input (``y = block(x) + shortcut(x)``) and
:class:`Concatenate` runs branches side by side and joins their outputs. They
are layers like any other, so they nest and go anywhere a layer goes (inside
``ConvNetClassifier(layers=...)``, or inside each other), and their entries
are grid-searchable parameters: ``layers__0__layers__1__filters``.

A container declares the parameters holding its layers
(:attr:`Layer.sublayer_params`) and builds copies of them (``blocks_``); its
``params``/``grads``/``state`` are views gathering its blocks' (keys
``'<block>.<key>'``); the trainer trains the blocks themselves
(:meth:`Layer.sublayers`). ``trainable``/``lr_scale`` given to a container
apply to every layer inside it; ``None`` (the default) leaves each its own;
``weights`` overwrites its blocks' arrays by those keys. A padding mask
reaches every block that takes one (:meth:`Layer.forward_with_mask`).
Which blocks compute the gradient of their input is the training plan's
decision (``skip_input_grad``, set on every block before a fit trains): a
container's backward stops at a block that skips it.
"""

import copy
import math
from collections.abc import MutableMapping

import numpy as np
from sklearn.base import clone

from sknet.backend._base import conv_outsize
from sknet.layers._base import Layer, build_layer
from sknet.layers._conv import Conv2D
from sknet.layers._dense import Dense
from sknet.layers._params import NestedListParams

_FLAGS_DOC = """\
    trainable : bool or None, default=None
        ``False`` freezes every layer inside, ``True`` trains every one;
        ``None`` leaves each layer's own ``trainable``.
    lr_scale : float or None, default=None
        The ``lr_scale`` of every layer inside; ``None`` leaves each its own.
    weights : dict of str to array, default=None
        Initial values of the inner layers' arrays by their keys in
        ``params``/``state`` (``'0.W'``: the first block's ``W``), instead of
        their own.
"""


class _Container(NestedListParams, Layer):
    """What every container shares: built blocks, gathered arrays, masks, recursion."""

    supports_mask = True  # handed on to the blocks that take one

    def _start_build(self, input_shape, backend, dtype):
        # Layer.build would assign params/grads/state, which are views here.
        self.backend_ = backend
        self.dtype_ = np.dtype(dtype)
        self.input_shape_ = tuple(int(d) for d in input_shape)
        self._buffers, self._cache = {}, {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__doc__ and "%(flags)s" in cls.__doc__:
            cls.__doc__ = cls.__doc__.replace("    %(flags)s\n", _FLAGS_DOC)

    def _build_blocks(self, layers, shape, backend, dtype, rng, name, allow_empty=False):
        if not isinstance(layers, (list, tuple)) or not all(
            isinstance(layer, Layer) for layer in layers
        ):
            raise ValueError(
                f"{type(self).__name__}: {name} must be a list of sknet layers, got {layers!r}"
            )
        if not layers and not allow_empty:
            raise ValueError(f"{type(self).__name__}: {name} must hold at least one layer")
        blocks = [copy.deepcopy(layer) for layer in layers]
        for block in blocks:
            shape = build_layer(block, shape, backend=backend, dtype=dtype, rng=rng)
        return blocks, shape

    def sublayers(self):
        if "blocks_" not in self.__dict__:
            return self.source_layers()
        return list(self.__dict__["blocks_"])

    def source_layers(self):
        return [layer for layer in super().source_layers() if isinstance(layer, Layer)]

    def chains(self):
        """The paths the input takes through the blocks, each a list run first to last."""
        return [self.sublayers()]

    def _copy_with(self, blocks):
        """An unbuilt copy of this container made of ``blocks`` (``from_estimator``)."""
        return clone(self).set_params(layers=blocks)

    params = property(lambda self: _Gathered(self.sublayers(), "params"))
    grads = property(lambda self: _Gathered(self.sublayers(), "grads"))
    state = property(lambda self: _Gathered(self.sublayers(), "state"))

    @property
    def regularized(self):
        return ()

    @property
    def shardable(self):
        """Whether every block is (see :attr:`Layer.shardable`)."""
        return all(block.shardable for block in self.sublayers())

    def values_per_sample(self):
        return max(block.values_per_sample() for block in self.sublayers())

    def _run(self, blocks, X, training, mask):
        for block in blocks:
            X = block.forward_with_mask(X, training=training, mask=mask)
        return X

    def _back(self, blocks, dY):
        """Back through ``blocks``, last to first, down to one that skips its input's gradient."""
        for block in reversed(blocks):
            dY = block.backward(dY)
            if block.skip_input_grad:
                return None
        return dY

    def release(self):
        for block in self.sublayers():
            block.release()
        self._buffers, self._cache = {}, {}

    def to_backend(self, backend):
        for block in self.sublayers():
            block.to_backend(backend)
        self.backend_ = backend
        self._buffers, self._cache = {}, {}
        return self

    def astype(self, dtype):
        for block in self.sublayers():
            block.astype(dtype)
        self.dtype_ = np.dtype(dtype)
        return self

    def reseed(self, offset):
        for block in self.sublayers():
            block.reseed(offset)

    def __setstate__(self, state):
        super().__setstate__(state)
        for block in self.__dict__.get("blocks_", ()):
            block.backend_ = self.backend_


class Sequential(_Container):
    """Layers run one after another, as one layer.

    Parameters
    ----------
    layers : list of Layer
        The layers, first to last (copied when built, never modified).
    %(flags)s

    Notes
    -----
    Input shape: the first layer's. Output shape: the last layer's.

    Examples
    --------
    >>> from sknet.layers import Dense, Sequential
    >>> block = Sequential([Dense(8, activation="relu"), Dense(4)])
    >>> block.get_params()["layers__0__units"]
    8
    """

    sublayer_params = ("layers",)

    def __init__(self, layers, *, trainable=None, lr_scale=None, weights=None):
        self.layers = layers
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        self._start_build(input_shape, backend, dtype)
        self.blocks_, shape = self._build_blocks(
            self.layers, self.input_shape_, backend, dtype, rng, "layers"
        )
        self.output_shape_ = shape
        return shape

    def forward(self, X, *, training, mask=None):
        return self._run(self.blocks_, X, training, mask)

    def backward(self, dY):
        return self._back(self.blocks_, dY)


class Residual(_Container):
    """A residual block: ``y = block(x) + shortcut(x)`` (He et al., 2016).

    Parameters
    ----------
    layers : list of Layer
        The block. Its output is added to the shortcut's.
    shortcut : list of Layer or None, default=None
        The other path. ``None``: the identity when the block keeps the shape
        of its input; otherwise a learned projection to the block's output
        shape (a 1x1 convolution with the block's stride for images, a
        ``Dense`` layer for flat samples). ``[]`` is the identity.
    %(flags)s

    Notes
    -----
    Input shape: any the block takes. Output shape: the block's.

    Examples
    --------
    >>> from sknet.layers import BatchNorm, Conv2D, Residual
    >>> block = Residual([Conv2D(8, 3, padding="same", activation="relu"),
    ...                   Conv2D(8, 3, padding="same"), BatchNorm()])
    >>> sorted(block.get_params())[:3]
    ['layers', 'layers__0', 'layers__0__activation']
    """

    _list_params = sublayer_params = ("layers", "shortcut")

    def __init__(self, layers, shortcut=None, *, trainable=None, lr_scale=None, weights=None):
        self.layers = layers
        self.shortcut = shortcut
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        self._start_build(input_shape, backend, dtype)
        self.block_, shape = self._build_blocks(
            self.layers, self.input_shape_, backend, dtype, rng, "layers"
        )
        shortcut = self.shortcut
        if shortcut is None and shape != self.input_shape_:
            shortcut = [_projection(self.input_shape_, shape)]
        self.shortcut_, short_shape = [], self.input_shape_
        if shortcut is not None:
            self.shortcut_, short_shape = self._build_blocks(
                shortcut, self.input_shape_, backend, dtype, rng, "shortcut", allow_empty=True
            )
        if short_shape != shape:
            raise ValueError(
                f"Residual: the block outputs samples of shape {shape} but the shortcut "
                f"{short_shape}; they must match to be added"
            )
        self.blocks_ = self.block_ + self.shortcut_
        self.output_shape_ = shape
        return shape

    def chains(self):
        return [self.block_, self.shortcut_]

    def _copy_with(self, blocks):
        n = len(self.block_)  # the shortcut's blocks follow (an automatic one too)
        return clone(self).set_params(layers=blocks[:n], shortcut=blocks[n:] or None)

    def forward(self, X, *, training, mask=None):
        Y = self._run(self.block_, X, training, mask)
        S = self._run(self.shortcut_, X, training, mask) if self.shortcut_ else X
        return Y + S

    def backward(self, dY):
        # Layers may overwrite the gradient they get: each path gets its own.
        dS = dY if not self.shortcut_ else self._back(self.shortcut_, dY.copy())
        dX = self._back(self.block_, dY.copy() if not self.shortcut_ else dY)
        if self.skip_input_grad:
            return None
        return dX + dS


class Concatenate(_Container):
    """Branches run side by side on the same input, their outputs joined.

    Parameters
    ----------
    branches : list of Layer
        One layer per branch (a :class:`Sequential` for several).
    axis : int, default=0
        The axis of one sample along which outputs are joined: 0 is the
        features of flat samples and the channels of images (NCHW). The
        other axes must match.
    %(flags)s

    Notes
    -----
    Input shape: what every branch takes. Output shape: the branches' joined.

    Examples
    --------
    >>> from sknet.layers import Concatenate, Dense
    >>> wide = Concatenate([Dense(4, activation="relu"), Dense(4, activation="tanh")])
    >>> wide.get_params()["branches__1__activation"]
    'tanh'
    """

    _list_params = sublayer_params = ("branches",)

    def __init__(self, branches, axis=0, *, trainable=None, lr_scale=None, weights=None):
        self.branches = branches
        self.axis = axis
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def build(self, input_shape, *, backend, dtype, rng):
        self._start_build(input_shape, backend, dtype)
        self.blocks_, shapes = [], []
        if isinstance(self.branches, (list, tuple)) and not self.branches:
            raise ValueError("Concatenate: branches must hold at least one layer")
        for branch in self.branches if isinstance(self.branches, (list, tuple)) else [None]:
            built, shape = self._build_blocks(
                [branch], self.input_shape_, backend, dtype, rng, "branches"
            )
            self.blocks_ += built
            shapes.append(shape)
        ndim = len(shapes[0])
        if not isinstance(self.axis, int) or not -ndim <= self.axis < ndim:
            raise ValueError(
                f"Concatenate: axis={self.axis!r} is out of range for samples "
                f"of {ndim} dimension(s)"
            )
        axis = self.axis % ndim
        others = {s[:axis] + s[axis + 1 :] for s in shapes}
        if len({len(s) for s in shapes}) != 1 or len(others) != 1:
            raise ValueError(
                f"Concatenate: branch outputs {shapes} differ outside axis {self.axis}"
            )
        self._sizes = [s[axis] for s in shapes]
        self._batch_axis = axis + 1  # the axis of a batch of outputs
        shape = list(shapes[0])
        shape[axis] = sum(self._sizes)
        self.output_shape_ = tuple(shape)
        return self.output_shape_

    def chains(self):
        return [[block] for block in self.sublayers()]

    def _copy_with(self, blocks):
        return clone(self).set_params(branches=blocks)

    def forward(self, X, *, training, mask=None):
        outputs = [
            block.forward_with_mask(X, training=training, mask=mask) for block in self.blocks_
        ]
        return self.xp.concatenate(outputs, axis=self._batch_axis)

    def backward(self, dY):
        axis = self._batch_axis
        bounds = np.cumsum([0] + self._sizes)
        dX = None
        for block, start, stop in zip(self.blocks_, bounds[:-1], bounds[1:]):
            index = (slice(None),) * axis + (slice(int(start), int(stop)),)
            part = block.backward(self.xp.ascontiguousarray(dY[index]))
            if part is not None:
                dX = part if dX is None else dX + part
        return None if self.skip_input_grad else dX


class _Gathered(MutableMapping):
    """The blocks' arrays of one kind (``params``, ...) as one dict: ``'<block>.<key>'``.

    Reads and writes go to the blocks' own dicts.
    """

    def __init__(self, blocks, name):
        self._blocks, self._name = blocks, name

    def _split(self, key):
        index, _, inner = key.partition(".")
        return getattr(self._blocks[int(index)], self._name), inner

    def __getitem__(self, key):
        arrays, inner = self._split(key)
        return arrays[inner]

    def __setitem__(self, key, value):
        arrays, inner = self._split(key)
        arrays[inner] = value

    def __delitem__(self, key):
        arrays, inner = self._split(key)
        del arrays[inner]

    def __iter__(self):
        for i, block in enumerate(self._blocks):
            for key in getattr(block, self._name, {}):
                yield f"{i}.{key}"

    def __len__(self):
        return sum(len(getattr(block, self._name, {})) for block in self._blocks)


def _projection(input_shape, output_shape):
    """The layer that maps the shortcut of a residual block to the block's shape."""
    if len(input_shape) == 3 and len(output_shape) == 3:
        (H, W), (OH, OW) = input_shape[1:], output_shape[1:]
        stride = (max(1, math.ceil(H / OH)), max(1, math.ceil(W / OW)))
        if (conv_outsize(H, 1, stride[0], 0), conv_outsize(W, 1, stride[1], 0)) == (OH, OW):
            return Conv2D(output_shape[0], 1, stride=stride, use_bias=False)
    if len(input_shape) == 1 and len(output_shape) == 1:
        return Dense(output_shape[0], use_bias=False)
    raise ValueError(
        f"Residual: no automatic shortcut from samples of shape {input_shape} to "
        f"{output_shape}; pass shortcut=[...]"
    )

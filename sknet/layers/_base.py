"""The Layer contract every built-in and user layer follows."""

import copy
import functools
import inspect
import math
import re

import numpy as np
from sklearn.base import BaseEstimator

from sknet.autodiff._recording import recorded_backward, recorded_forward
from sknet.layers._arrays import LayerArrays
from sknet.layers._contract import (
    checked_backward,
    checked_build,
    checked_forward,
    checked_sublayers,
    checked_values_per_sample,
    with_checked_input,
    with_training_parameters,
)
from sknet.layers._steps import as_mask
from sknet.layers._tree import TreeNode, apply_container_flags

_TRAINABLE_DOC = """\
    trainable : bool, default=True
        Whether ``fit`` trains the parameters; ``False`` freezes them
        (bit-identical, no gradient, no optimizer state, no L2 penalty).
    lr_scale : float, default=1.0
        Multiplies the optimizer's step for these parameters.
    weights : dict of str to array, default=None
        Initial values of ``params`` (and ``state``) by name, instead of the
        random initialization: how trained weights travel in a layer's
        parameters (see :func:`sknet.layers.from_estimator`).
"""

_TRAINING_PARAMETERS_DOC = """\
    trainable : bool, default=True
        Whether ``fit`` trains the layer's parameters, if it has any: every
        layer takes it, so that freezing a container reaches all its layers.
    lr_scale : float, default=1.0
        Multiplies the optimizer's step for the layer's parameters, if any.
    weights : dict of str to array, default=None
        Initial values of the layer's arrays by name, if it has any (see
        :func:`sknet.layers.from_estimator`).
"""

_SECTION = re.compile(r"\n\n    [A-Z][A-Za-z ]+\n    -{3,}\n")


def _document_training_parameters(doc):
    """``doc`` with the training parameters in its Parameters section, unless documented."""
    if not doc or "trainable :" in doc:
        return doc
    header = "    Parameters\n    ----------\n"
    start = doc.find(header)
    if start >= 0:
        end = _SECTION.search(doc, start)
        cut = end.start() + 1 if end else len(doc.rstrip()) + 1
        return doc[:cut] + _TRAINING_PARAMETERS_DOC + doc[cut:]
    first = _SECTION.search(doc)
    cut = first.start() + 2 if first else len(doc.rstrip()) + 1
    return doc[:cut] + header + _TRAINING_PARAMETERS_DOC + "\n" + doc[cut:]


class Layer(TreeNode, LayerArrays, BaseEstimator):
    """Base class of all layers.

    A layer is configured in ``__init__`` (which only stores its arguments, as
    a scikit-learn estimator does, so layers clone and grid-search), given
    parameters in :meth:`build`, and then run with :meth:`forward` and
    :meth:`backward`. Estimators never mutate a layer passed to them: ``fit``
    builds deep copies, stored in the fitted ``layers_``.

    Subclasses implement:

    ``build(input_shape, *, backend, dtype, rng) -> output_shape``
        Call ``super().build(...)`` first; then declare the parameters with
        :meth:`add_param` (and arrays the layer updates itself, such as
        running statistics, with :meth:`add_state`), and return the shape of
        one output sample. Shapes exclude the batch axis. Draw random initial
        values from ``rng`` (a NumPy ``RandomState``, on the host) so that
        every backend starts from the same weights. The network records the
        returned shape as ``output_shape_``.
    ``forward(X, *, training) -> Y``
        Cache what :meth:`backward` needs only when ``training`` is true.
    ``backward(dY) -> dX``
        Overwrite (never accumulate into) ``self.grads``; may overwrite ``dY``.
        May return ``None`` when ``self.skip_input_grad`` is true (the first
        layer of a network: nobody needs the gradient of the data).
        Optional: a layer without its own ``backward`` has its training
        ``forward`` recorded by :mod:`sknet.autodiff` (write it with the
        operators and that module's functions) and the gradients follow.

    Every layer takes ``trainable``, ``lr_scale`` and ``weights``: a layer
    class whose ``__init__`` does not list them gets them as keyword-only
    constructor parameters, so any layer can be frozen, scaled, cloned,
    grid-searched and reused by :func:`~sknet.layers.from_estimator`. Its
    ``backward`` may skip the weight gradients when ``trainable`` is False (a
    layer that writes them anyway gets throw-away arrays).

    A layer made of other layers (a container) declares the constructor
    parameters that hold them in :attr:`sublayer_params` (``("block",)``;
    each a layer or a list of layers) and builds a copy of each, with
    :meth:`build_sublayer`, in the attribute of the same name plus an
    underscore (``self.block_`` from ``self.block``, a list for a list). Its
    :meth:`sublayers` are then those copies (before it is built, the layers
    it was given: :meth:`source_layers`), and the network's weights, early
    stopping, the fit transaction, moving, casting, freezing, warm starts,
    reseeding and transfer reach them; arrays it declares itself
    (:meth:`add_param`) train with theirs. Its ``trainable=False`` freezes all
    of them. With a ``padding_value``, a container holding layers that take a
    mask (recurrent layers) takes one too: ``supports_mask = True``, a
    ``forward(X, *, training, mask=None)`` that runs its sublayers with
    :meth:`forward_with_mask`. Layers nest at most 64 deep (a deeper tree is
    a ValueError before anything is copied or built).

    A built layer's ``forward`` given samples of another shape than
    ``input_shape_`` is a ValueError naming the layer and both shapes. What a
    layer written outside sknet returns is checked before anything else uses
    it: ``forward``'s output must have the shape its ``build``
    declared (per sample) and the input's dtype, ``backward``'s gradient the
    shape and dtype of the input; a mismatch is a ValueError naming the layer
    and both shapes. Its ``build`` must call ``super().build`` and return a
    tuple of positive integers, and its ``forward`` gets ``X`` read-only
    (writing into it is a ValueError naming the layer: ``X`` may be the
    caller's data). A subclass of a built-in layer that overrides
    ``forward`` but not ``backward`` is differentiated from its new forward.

    Everything else the network uses has a default here: ``values_per_sample``
    (prediction chunk sizing, from ``output_shape_``), ``release``,
    ``to_backend``, ``astype`` and ``reseed``. A layer that keeps more arrays
    than ``params``/``grads``/``state``, or draws random numbers while
    training, overrides the matching method.

    Attributes
    ----------
    params : dict of str to array
        Trainable parameters, created by :meth:`build`.
    grads : dict of str to array
        Gradients of the loss with respect to ``params``, written by
        :meth:`backward` in place. During an estimator's training they are
        views of one flat array; they are dropped when training ends.
    state : dict of str to array
        Arrays a layer updates itself that are not trained (running statistics
        of :class:`BatchNorm`); moved, copied and pickled like ``params``.
    backend_ : Backend
        The backend the layer was built on.
    dtype_ : numpy.dtype
        The floating dtype of parameters and activations.
    input_shape_, output_shape_ : tuple of int
        Per-sample shapes, set by :meth:`build`.

    Examples
    --------
    A layer that scales its input by a learned scalar:

    >>> from sknet.layers import Layer
    >>> class Scale(Layer):
    ...     def build(self, input_shape, *, backend, dtype, rng):
    ...         super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
    ...         self.params = {"s": backend.xp.ones((1,), dtype=dtype)}
    ...         self.grads = {"s": backend.xp.zeros((1,), dtype=dtype)}
    ...         return input_shape
    ...
    ...     def forward(self, X, *, training):
    ...         if training:
    ...             self._cache["X"] = X
    ...         return X * self.params["s"]
    ...
    ...     def backward(self, dY):
    ...         self.grads["s"][...] = (dY * self._cache["X"]).sum()
    ...         return dY * self.params["s"]

    The same layer from its forward pass alone:

    >>> from sknet.utils import check_layer_gradients
    >>> class AutoScale(Layer):
    ...     def build(self, input_shape, *, backend, dtype, rng):
    ...         super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
    ...         self.add_param("s", [1.0])
    ...         return input_shape
    ...
    ...     def forward(self, X, *, training):
    ...         return X * self.params["s"]
    >>> sorted(check_layer_gradients(AutoScale(), (3,)))
    ['X', 's']
    >>> sorted(AutoScale().get_params())  # every layer can be frozen and reused
    ['lr_scale', 'trainable', 'weights']
    """

    def __init__(self, *, trainable=True, lr_scale=1.0, weights=None):
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Layers with parameters document trainable/lr_scale/weights in one place.
        if cls.__doc__ and "%(trainable)s" in cls.__doc__:
            cls.__doc__ = cls.__doc__.replace("    %(trainable)s\n", _TRAINABLE_DOC)
        if "forward" in cls.__dict__ and "backward" not in cls.__dict__:
            # Its own forward and no backward: the backward follows from the
            # recorded forward, also when a parent's hand-written backward would
            # not match the new forward (a subclass of Dense, say).
            cls.backward = Layer.backward
        if "forward" in cls.__dict__ and cls.backward is Layer.backward:
            cls.forward = recorded_forward(cls.__dict__["forward"])
        # Every layer takes trainable/lr_scale/weights, declared or not.
        with_training_parameters(cls)
        if cls.__module__.startswith("sknet.") and not cls.__name__.startswith("_"):
            cls.__doc__ = _document_training_parameters(cls.__doc__)
        if not cls.__module__.startswith("sknet."):  # a user's layer: checked at the boundary
            cls.build = checked_build(cls.build)
            cls.forward = checked_forward(cls.forward)
            if "sublayers" in cls.__dict__:
                cls.sublayers = checked_sublayers(cls.sublayers)
            if "values_per_sample" in cls.__dict__:
                cls.values_per_sample = checked_values_per_sample(cls.values_per_sample)
            cls.backward = checked_backward(cls.backward)
        if "forward" in cls.__dict__:  # every layer: samples of the shape it was built for
            cls.forward = with_checked_input(cls.forward)

    @classmethod
    @functools.cache
    def _init_defaults(cls):
        """The defaults of the constructor's parameters, by name."""
        parameters = inspect.signature(cls.__init__).parameters.values()
        return {p.name: p.default for p in parameters if p.default is not p.empty}

    #: Whether :meth:`forward` accepts a sparse matrix (only a first layer gets one).
    accepts_sparse = False
    #: Whether :meth:`forward` takes ``mask``: which steps of a batch of padded
    #: sequences are real (``padding_value``). A layer gets a boolean array
    #: ``(batch, timesteps)``; a container, the mask of its input's leading
    #: axes, ``(batch, timesteps, substeps)`` for sequences of sequences, which
    #: it hands on with :meth:`forward_with_mask`.
    supports_mask = False
    #: Whether ``fit`` trains the parameters; layers with parameters take it in
    #: ``__init__``. A frozen layer's ``backward`` need not write ``grads``.
    trainable = True
    #: Multiplier of the optimizer's step for this layer's parameters.
    lr_scale = 1.0
    #: Initial values of ``params``/``state`` by name (layers with parameters
    #: take it in ``__init__``); ``None``: the layer's own initialization.
    weights = None
    #: Names of parameters that receive the L2 penalty ``alpha``.
    regularized = ()
    #: Set on the first layer of a network: ``backward`` need not compute dX.
    skip_input_grad = False
    #: Whether a training batch may be split into row shards, each run by a
    #: copy of the built layer in its own thread (see :meth:`split_draws`).
    #: True when output row ``i`` depends on input row ``i`` alone and
    #: ``forward``/``backward`` keep what they need in attributes of the layer
    #: (each copy has its own), never in shared objects. Not BatchNorm (a batch
    #: statistic) nor, unless they say so, the user's layers.
    shardable = False

    def build(self, input_shape, *, backend, dtype, rng):
        """Record the backend and shapes; subclasses create parameters after.

        A layer class that lists ``_parameter_constraints`` (scikit-learn's,
        as the stock layers do) has its parameters checked here first.
        """
        if hasattr(self, "_parameter_constraints"):
            self._validate_params()
        self.backend_ = backend
        self.dtype_ = np.dtype(dtype)
        self.input_shape_ = tuple(int(d) for d in input_shape)
        self.params = {}
        self.grads = {}
        self.state = {}
        self.output_shape_ = self.input_shape_
        self._buffers = {}
        self._cache = {}
        return self.input_shape_

    def build_sublayer(self, layer, input_shape, *, rng):
        """A built copy of ``layer`` for this container's :meth:`build` (after ``super().build``).

        Copies ``layer`` (the one given is never modified), builds it for
        samples of ``input_shape`` on this layer's backend and dtype, records
        its ``output_shape_`` and loads its ``weights``. Store the copy in the
        attribute named after the parameter it comes from plus an underscore
        (see :attr:`sublayer_params`).

        Parameters
        ----------
        layer : Layer
            An unbuilt layer, from one of :attr:`sublayer_params`.
        input_shape : tuple of int
            The shape of one of its input samples.
        rng : numpy.random.RandomState
            The ``rng`` this layer's ``build`` was given.

        Returns
        -------
        built : Layer
            The built copy; ``built.output_shape_`` is its output shape.
        """
        if "backend_" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}.build called build_sublayer before "
                "super().build(input_shape, backend=backend, dtype=dtype, rng=rng)"
            )
        if not isinstance(layer, Layer):
            raise ValueError(
                f"{type(self).__name__}: a sublayer must be an sknet Layer, got {layer!r}"
            )
        built = copy.deepcopy(layer)
        build_layer(built, input_shape, backend=self.backend_, dtype=self.dtype_, rng=rng)
        return built

    def forward_with_mask(self, X, *, training, mask=None):
        """:meth:`forward`, given ``mask`` when this layer takes one (:attr:`supports_mask`).

        How a network runs its layers, and a container its sublayers: a mask
        of more axes than ``(batch, timesteps)`` reaches a layer without
        sublayers as ``(batch, timesteps)`` (a step is real if any of its
        substeps is). ``mask``: any array-like of booleans (else a TypeError
        naming it); padded steps enter the stock layers as zeros.
        """
        if mask is None or not self.supports_mask:
            return self.forward(X, training=training)
        mask = as_mask(self, mask)  # any array-like of booleans
        if mask.ndim > 2 and not self.sublayers():
            mask = mask.reshape(mask.shape[:2] + (-1,)).any(axis=2)
        return self.forward(X, training=training, mask=mask)

    def load_weights(self):
        """Overwrite the built parameters and state with ``weights``, checking shapes."""
        if self.weights is None:
            return
        if not isinstance(self.weights, dict):
            raise ValueError(
                f"{type(self).__name__}: weights must be a dict of arrays by name, got "
                f"{type(self.weights).__name__}"
            )
        arrays = {**self.params, **self.state}
        unknown, missing = set(self.weights) - set(arrays), set(arrays) - set(self.weights)
        if unknown or missing:
            raise ValueError(
                f"{type(self).__name__}: weights has {sorted(self.weights)}, but this "
                f"layer holds {sorted(arrays)}"
            )
        for key, value in self.weights.items():
            value = np.asarray(value.get() if hasattr(value, "get") else value)
            if value.shape != arrays[key].shape:
                raise ValueError(
                    f"{type(self).__name__}: the weights {key!r} have shape {value.shape}, "
                    f"but this layer, built for inputs of shape {self.input_shape_}, "
                    f"needs {tuple(arrays[key].shape)}"
                )
            arrays[key][...] = self.backend_.asarray(value, arrays[key].dtype)

    def forward(self, X, *, training):
        """Compute the layer's output for a batch ``X``."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward")

    def backward(self, dY):
        """Given dLoss/dY, write ``self.grads`` and return dLoss/dX.

        Layers that define only :meth:`forward` get this one: it runs the
        vector-Jacobian products their forward pass recorded.
        """
        return recorded_backward(self, dY)

    def split_draws(self, copies, bounds):
        """Draw a split batch's random numbers as one, for the copies of this layer.

        Called on ``copies[0]`` (this layer) before a batch is split into row
        shards ``bounds[k]:bounds[k + 1]`` run by ``copies[k]``; a layer that
        draws random numbers while training draws the whole batch's here and
        hands each copy its rows, so the model does not depend on the split.
        The default does nothing.
        """

    def values_per_sample(self):
        """Size of the largest array the forward pass makes per sample.

        The estimators size prediction chunks with it, so a chunk's
        intermediates stay small enough for the caches. Layers that build
        something larger than their output (patch matrices) say so.
        """
        return math.prod(int(size) for size in self.output_shape_)


def build_layer(layer, input_shape, *, backend, dtype, rng):
    """Build ``layer``, record its ``output_shape_``, load its ``weights``; returns the shape.

    What a network does with each of its layers (containers with their inner
    layers too).
    """
    shape = layer.build(tuple(input_shape), backend=backend, dtype=dtype, rng=rng)
    layer._check_built_sublayers()
    layer.output_shape_ = layer._declared_output_shape = tuple(int(d) for d in shape)
    layer.load_weights()
    apply_container_flags(layer)  # a container's trainable/lr_scale reach its subtree
    return layer.output_shape_

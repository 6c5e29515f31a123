"""The graph builder: what every converter writes its ONNX nodes with.

A :class:`GraphBuilder` holds the nodes and initializers of one graph (a
:class:`~sknet.onnx.GraphBuilder` for a Scan's body shares its parent's
names and initializers), gives every value a unique name, and writes the
operators whose form changed between opsets (reductions, ``Split``) for the
opset it targets. Converters see tensors by name: ``builder.node("Relu",
[X])`` returns the name of the result.
"""

import contextlib

import numpy as np

from sknet.onnx._activations import activation
from sknet.onnx._registry import converter_for

#: The opset a model targets when ``to_onnx`` is given none.
DEFAULT_OPSET = 17
#: The lowest opset the converters write (LayerNormalization's).
MIN_OPSET = 17


def _onnx():
    import onnx

    return onnx


def tensor_type(dtype):
    """The ``onnx.TensorProto`` element type of a NumPy dtype."""
    return _onnx().helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def host_array(value):
    """``value`` (NumPy, CuPy, a number or a list) as a NumPy array."""
    if hasattr(value, "get") and not isinstance(value, np.ndarray):
        value = value.get()  # CuPy
    return np.asarray(value)


class _Names:
    """Unique names across a graph and its subgraphs."""

    def __init__(self):
        self.used = set()

    def unique(self, hint):
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in str(hint)) or "value"
        name, i = hint, 0
        while name in self.used:
            i += 1
            name = f"{hint}_{i}"
        self.used.add(name)
        return name


class GraphBuilder:
    """The ONNX graph a network is written into; what a converter is given.

    A converter (see :func:`~sknet.onnx.register_converter`) receives the builder, its
    layer (built and fitted: its arrays in ``layer.params`` and
    ``layer.state``) and the name of its input tensor, adds the nodes
    computing the layer's forward pass at prediction time, and returns the
    name of its output tensor. Inputs and outputs have a batch axis first,
    then the layer's ``input_shape_`` and ``output_shape_``.

    Parameters
    ----------
    dtype : numpy.dtype
        The floating dtype the graph computes in.
    opset : int
        The ONNX opset of the default domain the graph targets.

    Attributes
    ----------
    dtype : numpy.dtype
        The floating dtype of the graph.
    opset : int
        The targeted opset.
    mask : str or None
        The padding mask the current layer gets (a boolean tensor
        ``(batch, timesteps)``, true on real steps), or ``None`` without
        padding; read it in a converter of a layer that takes a mask.
    nodes : list of onnx.NodeProto
        The nodes, in order.
    initializers : list of onnx.TensorProto
        The constants (the graph's, shared with subgraphs).
    domains : set of str
        The operator domains besides ONNX's own that the nodes use
        (``'ai.onnx.ml'``): the model imports them.

    Examples
    --------
    A converter for a layer computing ``X * s + 1``:

    >>> import numpy as np
    >>> from sknet.onnx import GraphBuilder
    >>> builder = GraphBuilder(np.float32, opset=17)
    >>> s = builder.constant(np.array([2.0, 3.0]), "s")
    >>> Y = builder.node("Add", [builder.node("Mul", ["X", s]), builder.constant(1.0)])
    >>> [node.op_type for node in builder.nodes], Y
    (['Mul', 'Add'], 'Add')
    """

    def __init__(self, dtype, opset, *, _parent=None):
        self.dtype = np.dtype(dtype)
        self.opset = int(opset)
        self.nodes = []
        self.mask = None
        self._mask_ndim = 2
        self._parent = _parent
        self._names = _parent._names if _parent is not None else _Names()
        self.initializers = _parent.initializers if _parent is not None else []
        self.domains = _parent.domains if _parent is not None else set()

    # -- names, constants, nodes ----------------------------------------------------
    def unique(self, hint):
        """A name used nowhere else in the graph, made from ``hint``."""
        return self._names.unique(hint)

    def reserve(self, name):
        """Keep ``name`` (a graph input's or output's) from the names :meth:`unique` makes.

        A ValueError if it is taken already.
        """
        if name in self._names.used:
            raise ValueError(f"the ONNX graph already has a value named {name!r}")
        self._names.used.add(name)
        return name

    def constant(self, value, hint="const", *, dtype=None):
        """An initializer holding ``value``; returns its name.

        Parameters
        ----------
        value : array-like
            NumPy or CuPy array, number or list.
        hint : str, default='const'
            What the name starts with.
        dtype : dtype, default=None
            The constant's dtype. ``None``: the graph's dtype for floating
            values, ``int64`` for integers, the value's own otherwise
            (booleans, strings).
        """
        array = host_array(value)
        if dtype is None:
            kind = array.dtype.kind
            dtype = self.dtype if kind == "f" else np.int64 if kind in "iu" else array.dtype
        array = np.ascontiguousarray(array.astype(dtype, copy=False))
        name = self.unique(hint)
        if array.dtype.kind in "OUS":
            tensor = _onnx().helper.make_tensor(
                name,
                _onnx().TensorProto.STRING,
                array.shape,
                [str(v).encode("utf-8") for v in array.ravel()],
            )
        else:
            tensor = _onnx().numpy_helper.from_array(array, name)
        self.initializers.append(tensor)
        return name

    def node(self, op_type, inputs, hint=None, *, n_outputs=1, domain="", **attributes):
        """Add a node; returns the name of its output (a list for ``n_outputs > 1``).

        ``inputs`` are tensor names (``""`` for an optional input left out);
        ``attributes`` are the operator's (``axis=1``, a subgraph for Scan).
        """
        hint = hint or op_type
        if domain:
            self.domains.add(domain)
        outputs = [self.unique(hint) for _ in range(n_outputs)]
        self.nodes.append(
            _onnx().helper.make_node(
                op_type,
                list(inputs),
                outputs,
                name=self.unique(f"{op_type}_node"),
                domain=domain,
                **attributes,
            )
        )
        return outputs[0] if n_outputs == 1 else outputs

    # -- layers -----------------------------------------------------------------------
    def convert(self, layer, X):
        """The output of ``layer`` on ``X``, by its converter (a container's sublayers).

        A layer that takes a mask and holds no layers gets it as
        ``(batch, timesteps)`` (a step is real if any of its substeps is),
        as :meth:`sknet.layers.Layer.forward_with_mask` hands it.
        """
        converter = converter_for(layer)
        mask, ndim = self.mask, self._mask_ndim
        if mask is not None and ndim > 2 and layer.supports_mask and not layer.sublayers():
            with self.masked(self.any(mask, list(range(2, ndim))), 2):
                return converter(self, layer, X)
        return converter(self, layer, X)

    def activation(self, name, X):
        """Activation ``name`` of ``X`` (``None``: identity).

        One of :data:`~sknet.onnx.SUPPORTED_ACTIVATIONS`.
        """
        return activation(self, name, X)

    @contextlib.contextmanager
    def masked(self, mask, ndim=2):
        """Converters called inside get ``mask`` (a boolean tensor of ``ndim`` axes)."""
        saved = self.mask, self._mask_ndim
        self.mask, self._mask_ndim = mask, ndim
        try:
            yield self
        finally:
            self.mask, self._mask_ndim = saved

    def padded_as_zeros(self, X):
        """``X`` (batch, timesteps, ...) with the padded steps (``mask`` false) as zeros.

        What a layer that takes a mask sees (``sknet.layers._steps.padded_as_zeros``):
        a ``Where``, not a product with the mask (``0 * NaN`` is NaN). ``X`` as
        it is without a mask.
        """
        if self.mask is None:
            return X
        real = self.unsqueeze(self.mask, [2])  # (batch, timesteps, 1)
        return self.node("Where", [real, X, self.constant(0.0)], "padded_as_zeros")

    @property
    def mask_ndim(self):
        """The number of axes of ``mask`` (``(batch, timesteps, ...)``)."""
        return self._mask_ndim

    def subgraph(self):
        """A builder for a subgraph (a Scan's body): same names, same initializers."""
        child = GraphBuilder(self.dtype, self.opset, _parent=self)
        return child

    # -- operators whose form depends on the opset ------------------------------------
    def reduce(self, op_type, X, axes, keepdims=True):
        """``op_type`` (``'ReduceMean'``, ``'ReduceMax'``...) over ``axes`` of ``X``.

        ``ReduceSum`` takes its axes as an input from opset 13, the other
        reductions from opset 18: written as the opset wants.
        """
        keep = int(bool(keepdims))
        if op_type == "ReduceSum" or self.opset >= 18:
            axes_name = self.constant(np.array(axes, dtype=np.int64), "axes")
            return self.node(op_type, [X, axes_name], keepdims=keep)
        return self.node(op_type, [X], axes=list(axes), keepdims=keep)

    def any(self, X, axes, keepdims=False):
        """Whether any of the booleans ``X`` along ``axes`` is true (a boolean tensor)."""
        counts = self.reduce("ReduceMax", self.cast(X, np.int32), axes, keepdims)
        return self.cast(counts, bool)

    def split(self, X, sizes, axis):
        """``X`` split along ``axis`` in parts of ``sizes``; a list of names."""
        if len(sizes) == 1:
            return [X]
        split = self.constant(np.array(sizes, dtype=np.int64), "split")
        return self.node("Split", [X, split], n_outputs=len(sizes), axis=int(axis))

    def reshape(self, X, shape):
        """``X`` reshaped to ``shape`` (``-1`` inferred, ``0`` copied, as ONNX's Reshape)."""
        return self.node("Reshape", [X, self.constant(np.array(shape, dtype=np.int64), "shape")])

    def unsqueeze(self, X, axes):
        return self.node("Unsqueeze", [X, self.constant(np.array(axes, np.int64), "axes")])

    def squeeze(self, X, axes):
        return self.node("Squeeze", [X, self.constant(np.array(axes, np.int64), "axes")])

    def slice(self, X, starts, ends, axes, steps=None):
        """``X[starts:ends:steps]`` along ``axes`` (lists of ints)."""
        inputs = [
            X,
            self.constant(np.array(starts, np.int64), "starts"),
            self.constant(np.array(ends, np.int64), "ends"),
            self.constant(np.array(axes, np.int64), "axes"),
        ]
        if steps is not None:
            inputs.append(self.constant(np.array(steps, np.int64), "steps"))
        return self.node("Slice", inputs)

    def cast(self, X, dtype):
        return self.node("Cast", [X], to=tensor_type(dtype))

    def matmul_add(self, X, W, b=None):
        """``X @ W (+ b)`` with ``W`` and ``b`` arrays (initializers)."""
        Y = self.node("MatMul", [X, self.constant(W, "W")])
        return Y if b is None else self.node("Add", [Y, self.constant(b, "b")])

"""Which converter writes a layer's ONNX nodes: one per layer class, users' included.

:func:`register_converter` records a converter for a layer class; the
stock converters register themselves when :mod:`sknet.onnx` is imported.
A layer is converted by the converter of its class or of the nearest base
class that has one, provided the layer computes that class's forward pass
(a subclass that writes its own ``forward`` needs its own converter). A
layer without one is refused with a message saying what to provide.
"""

import inspect

from sknet.layers import Lambda, Layer

#: converters by layer class
_CONVERTERS = {}

#: Layers of sknet.layers that have no ONNX form, and why.
NOT_EXPORTABLE = {
    Layer: "the base class of layers: a layer of your own needs a converter",
    Lambda: (
        "its function is Python code that ONNX cannot read: register a converter for "
        "Lambda that writes the nodes of your function"
    ),
}


def register_converter(layer_class, converter=None):
    """Register ``converter`` as the ONNX form of the layers of ``layer_class``.

    ``converter(builder, layer, X)`` is called with a
    :class:`~sknet.onnx.GraphBuilder`, the fitted layer and the name of its
    input tensor (a batch of the layer's input samples, in the graph's
    dtype); it adds the nodes computing the layer's output at prediction
    time (``builder.node``, with the layer's arrays as
    ``builder.constant``) and returns the name of the output tensor. A
    container converts its inner layers with ``builder.convert``. The
    converter serves subclasses of ``layer_class`` that keep its
    ``forward``; registering again replaces the previous converter (a stock
    one too).

    Parameters
    ----------
    layer_class : type
        A subclass of :class:`sknet.layers.Layer`.
    converter : callable, default=None
        ``converter(builder, layer, X) -> str``. ``None``: returns a
        decorator that registers the function it decorates.

    Returns
    -------
    converter : callable
        The converter (so that the function works as a decorator).

    Examples
    --------
    A layer of your own that scales its input by a learned vector:

    >>> import numpy as np
    >>> from sknet.layers import Layer
    >>> from sknet.onnx import register_converter
    >>> class Scale(Layer):
    ...     def build(self, input_shape, *, backend, dtype, rng):
    ...         super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
    ...         self.add_param("s", np.ones(input_shape))
    ...         return input_shape
    ...
    ...     def forward(self, X, *, training):
    ...         return X * self.params["s"]
    >>> @register_converter(Scale)
    ... def convert_scale(builder, layer, X):
    ...     return builder.node("Mul", [X, builder.constant(layer.params["s"], "s")])
    """
    if not (isinstance(layer_class, type) and issubclass(layer_class, Layer)):
        raise TypeError(
            f"layer_class must be a subclass of sknet.layers.Layer, got {layer_class!r}"
        )
    if converter is None:

        def decorate(function):
            return register_converter(layer_class, function)

        return decorate
    if not callable(converter):
        raise TypeError(
            f"converter must be a callable converter(builder, layer, X), got {converter!r}"
        )
    _CONVERTERS[layer_class] = converter
    return converter


def _forward(cls):
    return inspect.unwrap(cls.forward)


def find_converter(layer_class):
    """The converter of ``layer_class`` (its own or a base class's), or None."""
    for base in layer_class.__mro__:
        if base in _CONVERTERS:
            if base is layer_class or _forward(base) is _forward(layer_class):
                return _CONVERTERS[base]
            return None  # a subclass computing something else
    return None


def converter_for(layer):
    """The converter of ``layer``, or a TypeError saying what to provide."""
    cls = type(layer)
    converter = find_converter(cls)
    if converter is not None:
        return converter
    name = cls.__name__
    reason = NOT_EXPORTABLE.get(cls)
    base = next((b for b in cls.__mro__[1:] if b in _CONVERTERS), None)
    if reason is not None:
        why = f"{name} has no ONNX form: {reason}."
    elif base is not None:
        why = (
            f"{name} has no ONNX converter: it subclasses {base.__name__} but computes its "
            f"own forward, which {base.__name__}'s converter does not write."
        )
    else:
        why = f"{name} ({cls.__module__}.{cls.__qualname__}) has no ONNX converter."
    raise TypeError(
        f"{why} Register one before calling to_onnx: "
        f"sknet.onnx.register_converter({name}, convert), where convert(builder, layer, X) "
        "adds the layer's nodes with builder.node(...) (its arrays as "
        "builder.constant(layer.params[...])) and returns the name of its output "
        "(see sknet.onnx.GraphBuilder)."
    )

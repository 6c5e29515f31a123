"""ONNX export of sknet's estimators: every stock layer, and a hook for yours.

Needs the ``onnx`` extra (``pip install "sknet-nn[onnx]"``: onnx, skl2onnx
and onnxruntime). :func:`~sknet.onnx.to_onnx` writes a fitted estimator's prediction as
an ONNX graph of standard operators (opset :data:`~sknet.onnx.DEFAULT_OPSET` unless
asked for another, from 17): each layer by the converter registered for its
class, the loss's output activation, a classifier's labels and
probabilities. A layer of your own is exported once
:func:`~sknet.onnx.register_converter` gives its class a converter, which writes its
nodes with a :class:`~sknet.onnx.GraphBuilder`. :func:`~sknet.onnx.register_onnx_converters`
registers the MLPs with skl2onnx, for pipelines converted by skl2onnx.

What it holds: the public functions (``_export``), the graph builder
(``_builder``), the registry of converters (``_registry``), one module of
converters per kind of layer (``_core``, ``_conv``, ``_conv1d``,
``_containers``, ``_sequence``, ``_recurrent``, ``_attention``, ``_numeric``,
``_categorical``, ``_ensemble``), the activations (``_activations``), a
table's column plan (``_tabular``), the outputs (``_outputs``) and
skl2onnx's registration (``_skl2onnx``). What it may import:
``sknet.estimators``, ``sknet.layers``, ``sknet.losses``, ``sknet.tabular``
and ``sknet.backend`` (onnx and skl2onnx are imported when used).
"""

from sknet.onnx import (  # noqa: F401 (the stock converters register themselves)
    _attention,
    _categorical,
    _containers,
    _conv,
    _conv1d,
    _core,
    _ensemble,
    _numeric,
    _recurrent,
    _sequence,
)
from sknet.onnx._activations import SUPPORTED_ACTIVATIONS
from sknet.onnx._builder import DEFAULT_OPSET, GraphBuilder
from sknet.onnx._export import to_onnx
from sknet.onnx._outputs import SUPPORTED_OUTPUTS
from sknet.onnx._registry import register_converter
from sknet.onnx._skl2onnx import register_onnx_converters

__all__ = [
    "DEFAULT_OPSET",
    "SUPPORTED_ACTIVATIONS",
    "SUPPORTED_OUTPUTS",
    "GraphBuilder",
    "register_converter",
    "register_onnx_converters",
    "to_onnx",
]

"""The graph builder (sknet/onnx/_builder.py): names, constants, operators by opset."""

import numpy as np
import pytest

from sknet.onnx import GraphBuilder
from tests.onnx.helpers import rt

onnx = pytest.importorskip("onnx")


def _run(builder, output, inputs, out_dtype):
    infos = [
        onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape
        )
        for name, a in inputs.items()
    ]
    element = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
    out = onnx.helper.make_tensor_value_info(output, element, None)
    graph = onnx.helper.make_graph(
        builder.nodes, "g", infos, [out], initializer=builder.initializers
    )
    opsets = [onnx.helper.make_opsetid("", builder.opset)]
    model = onnx.helper.make_model(graph, opset_imports=opsets)
    model.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    session = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def test_names_are_unique():
    builder = GraphBuilder(np.float32, 17)
    names = {builder.unique("x") for _ in range(5)} | {builder.constant(1.0, "x")}
    assert len(names) == 6 and "x" in names


@pytest.mark.parametrize(
    "value, dtype",
    [(1.5, np.float32), (np.arange(3), np.int64), (np.array([True]), np.bool_)],
)
def test_constants_take_the_graph_dtype_when_floating(value, dtype):
    builder = GraphBuilder(np.float32, 17)
    name = builder.constant(value)
    (tensor,) = [t for t in builder.initializers if t.name == name]
    assert onnx.numpy_helper.to_array(tensor).dtype == dtype


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceMax", "ReduceSum"])
def test_reductions_take_their_axes_as_the_opset_wants(opset, op_type):
    builder = GraphBuilder(np.float32, opset)
    Y = builder.reduce(op_type, "X", [1], keepdims=False)
    X = np.random.RandomState(0).standard_normal((3, 4)).astype(np.float32)
    expected = {"ReduceMean": X.mean, "ReduceMax": X.max, "ReduceSum": X.sum}[op_type](axis=1)
    np.testing.assert_allclose(_run(builder, Y, {"X": X}, np.float32), expected, rtol=1e-6)
    as_input = op_type == "ReduceSum" or opset >= 18
    assert len(builder.nodes[-1].input) == (2 if as_input else 1)


def test_any():
    builder = GraphBuilder(np.float32, 17)
    Y = builder.any("X", [1])
    X = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(_run(builder, Y, {"X": X}, bool), [True, False])


def test_reserved_names_are_never_made():
    builder = GraphBuilder(np.float32, 17)
    builder.reserve("X")
    assert builder.unique("X") == "X_1" and builder.node("Relu", ["X"], "X") == "X_2"
    with pytest.raises(ValueError, match="already has a value named 'X'"):
        builder.reserve("X")

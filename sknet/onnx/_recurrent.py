"""Converters of the recurrent layers: ONNX's LSTM, GRU and RNN operators, or a Scan.

Without a padding mask, a layer is one ONNX ``LSTM``, ``GRU`` or ``RNN``
node: their equations are sknet's once the gate blocks are reordered
(sknet's LSTM gates are input, forget, output, cell; ONNX's input, output,
forget, cell), sknet's GRU is ONNX's with ``linear_before_reset=1`` (the
reset gate applied after the recurrent product, its bias ``bh`` ONNX's
``Rb``), and both directions run in one node.

onnxruntime has no float64 kernels of these operators: a float64 graph
runs every recurrent layer as a Scan (below), of standard operators.

With a mask the operators do not match: their ``sequence_lens`` describe
padding at the end only, and they output zeros on padded steps, where sknet
carries the state over padded steps wherever they are (before the sequence,
after it, or inside). A masked layer, and a SimpleRNN whose activation the
RNN operator lacks, is then a ``Scan`` over the time steps (one per
direction) whose body is sknet's step, the state kept where the mask is
false, so the exported model computes what ``predict`` does.
"""

import numpy as np

from sknet.layers import GRU, LSTM, SimpleRNN
from sknet.onnx._builder import host_array, tensor_type
from sknet.onnx._registry import register_converter

# sknet's gate blocks in the order of ONNX's operators
_LSTM_ORDER = (0, 2, 1, 3)  # sknet [i, f, o, g] -> ONNX [i, o, f, c]
_GRU_ORDER = (0, 1, 2)  # [z, r, n] in both
_RNN_ORDER = (0,)
#: activations of SimpleRNN the RNN operator computes, by ONNX name
_RNN_OPERATOR_ACTIVATIONS = {"tanh": "Tanh", "relu": "Relu", "logistic": "Sigmoid"}


def _blocks(array, order, H):
    return np.concatenate([array[..., k * H : (k + 1) * H] for k in order], axis=-1)


def _direction_arrays(layer, order):
    """ONNX's ``W``, ``R``, ``B``: (D, G H, F), (D, G H, H), (D, 2 G H) for D directions."""
    H = int(layer.units)
    p = {key: host_array(value) for key, value in layer.params.items()}
    W, R, B = [], [], []
    for d in layer._directions():
        W.append(_blocks(p["W" + d], order, H).T)
        R.append(_blocks(p["U" + d], order, H).T)
        recurrent = p.get("bh" + d, np.zeros_like(p["b" + d]))
        B.append(np.concatenate([_blocks(p["b" + d], order, H), _blocks(recurrent, order, H)]))
    return np.stack(W), np.stack(R), np.stack(B)


def _outputs(builder, layer, Y, Y_h):
    """The layer's output from an operator's ``Y`` (T, D, N, H) and ``Y_h`` (D, N, H)."""
    T = layer.input_shape_[0]
    width = int(layer.units) * len(layer._directions())
    if layer.return_sequences:
        return builder.reshape(builder.node("Transpose", [Y], perm=[2, 0, 1, 3]), (-1, T, width))
    return builder.reshape(builder.node("Transpose", [Y_h], perm=[1, 0, 2]), (-1, width))


def _operator(builder, layer, X, op_type, order, **attributes):
    W, R, B = _direction_arrays(layer, order)
    Xt = builder.node("Transpose", [X], perm=[1, 0, 2])  # time-major
    Y, Y_h = builder.node(
        op_type,
        [Xt, builder.constant(W, "W"), builder.constant(R, "R"), builder.constant(B, "B")],
        n_outputs=2,
        hidden_size=int(layer.units),
        direction="bidirectional" if layer.bidirectional else "forward",
        **attributes,
    )
    return _outputs(builder, layer, Y, Y_h)


# -- Scan: sknet's step, the state carried over padded steps -------------------------


def _zeros_state(builder, X, H):
    """A zero state ``(N, H)`` for the batch of ``X``."""
    n = builder.slice(builder.node("Shape", [X]), [0], [1], [0])
    shape = builder.node("Concat", [n, builder.constant(np.array([H], np.int64))], axis=0)
    zero = _tensor(builder, np.zeros(1, builder.dtype))
    return builder.node("ConstantOfShape", [shape], "zeros", value=zero)


def _tensor(builder, array):
    import onnx

    return onnx.numpy_helper.from_array(np.asarray(array), builder.unique("value"))


def _value_info(builder, name, dtype, shape):
    import onnx

    return onnx.helper.make_tensor_value_info(name, tensor_type(dtype), shape)


def _keep(body, m, new, old):
    return new if m is None else body.node("Where", [m, new, old])


def _simple_rnn_step(body, layer, d, p, states, m):
    (h,) = states
    z = body.node("Add", [p, body.node("MatMul", [h, body.constant(layer.params["U" + d], "U")])])
    return [_keep(body, m, body.activation(layer.activation, z), h)]


def _lstm_step(body, layer, d, p, states, m):
    h, c = states
    H = int(layer.units)
    U = body.constant(layer.params["U" + d], "U")
    gates = body.node("Add", [p, body.node("MatMul", [h, U])])
    i, f, o, g = body.split(gates, [H] * 4, axis=1)
    i, f, o = (body.node("Sigmoid", [t]) for t in (i, f, o))
    c_new = body.node(
        "Add", [body.node("Mul", [f, c]), body.node("Mul", [i, body.node("Tanh", [g])])]
    )
    h_new = body.node("Mul", [o, body.node("Tanh", [c_new])])
    return [_keep(body, m, h_new, h), _keep(body, m, c_new, c)]


def _gru_step(body, layer, d, p, states, m):
    (h,) = states
    H = int(layer.units)
    U, bh = (body.constant(layer.params[k + d], k) for k in ("U", "bh"))
    hu = body.node("Add", [body.node("MatMul", [h, U]), bh])
    pz, pr, pn = body.split(p, [H] * 3, axis=1)
    hz, hr, hn = body.split(hu, [H] * 3, axis=1)
    z = body.node("Sigmoid", [body.node("Add", [pz, hz])])
    r = body.node("Sigmoid", [body.node("Add", [pr, hr])])
    n = body.node("Tanh", [body.node("Add", [pn, body.node("Mul", [r, hn])])])
    # (1 - z) n + z h = n + z (h - n)
    h_new = body.node("Add", [n, body.node("Mul", [z, body.node("Sub", [h, n])])])
    return [_keep(body, m, h_new, h)]


_STEPS = {SimpleRNN: (_simple_rnn_step, 1), LSTM: (_lstm_step, 2), GRU: (_gru_step, 1)}


def _scan_direction(builder, layer, d, P, M, zeros, step, n_states):
    """One direction as a Scan over ``P`` (T, N, G H) and the mask ``M`` (T, N, 1)."""
    H = int(layer.units)
    body = builder.subgraph()
    states = [body.unique("state_in") for _ in range(n_states)]
    p, m = body.unique("p_t"), None if M is None else body.unique("m_t")
    new_states = step(body, layer, d, p, states, m)
    outputs = [body.node("Identity", [s], "state_out") for s in new_states]
    outputs.append(body.node("Identity", [new_states[0]], "h_out"))
    width = layer.n_gates * H
    inputs = [_value_info(body, s, body.dtype, [None, H]) for s in states]
    inputs.append(_value_info(body, p, body.dtype, [None, width]))
    if m is not None:
        inputs.append(_value_info(body, m, bool, [None, 1]))
    graph = _graph(body, inputs, [_value_info(body, o, body.dtype, [None, H]) for o in outputs])
    reverse = 1 if d == "r" else 0
    n_scan = 1 if M is None else 2
    results = builder.node(
        "Scan",
        [zeros] * n_states + [P] + ([] if M is None else [M]),
        n_outputs=n_states + 1,
        body=graph,
        num_scan_inputs=n_scan,
        scan_input_directions=[reverse] * n_scan,
        scan_output_directions=[reverse],
    )
    return results[0], results[-1]  # the last state (N, H), the states (T, N, H)


def _graph(body, inputs, outputs):
    import onnx

    return onnx.helper.make_graph(body.nodes, body.unique("step"), inputs, outputs)


def _scan(builder, layer, X):
    step, n_states = _STEPS[next(c for c in type(layer).__mro__ if c in _STEPS)]
    H = int(layer.units)
    zeros = _zeros_state(builder, X, H)
    mask = builder.mask
    M = None
    if mask is not None:  # (N, T) -> (T, N, 1)
        M = builder.unsqueeze(builder.node("Transpose", [mask], perm=[1, 0]), [2])
    outputs = []
    for d in layer._directions():
        P = builder.matmul_add(X, layer.params["W" + d], layer.params["b" + d])
        P = builder.node("Transpose", [P], perm=[1, 0, 2])  # (T, N, G H)
        last, seq = _scan_direction(builder, layer, d, P, M, zeros, step, n_states)
        outputs.append(
            builder.node("Transpose", [seq], perm=[1, 0, 2]) if layer.return_sequences else last
        )
    if len(outputs) == 1:
        return outputs[0]
    return builder.node("Concat", outputs, axis=-1)


def _needs_scan(builder):
    return builder.mask is not None or builder.dtype == np.float64


def convert_lstm(builder, layer, X):
    if _needs_scan(builder):
        return _scan(builder, layer, X)
    return _operator(builder, layer, X, "LSTM", _LSTM_ORDER)


def convert_gru(builder, layer, X):
    if _needs_scan(builder):
        return _scan(builder, layer, X)
    return _operator(builder, layer, X, "GRU", _GRU_ORDER, linear_before_reset=1)


def convert_simple_rnn(builder, layer, X):
    name = _RNN_OPERATOR_ACTIVATIONS.get(layer.activation)
    if _needs_scan(builder) or name is None:
        return _scan(builder, layer, X)
    activations = [name] * len(layer._directions())
    return _operator(builder, layer, X, "RNN", _RNN_ORDER, activations=activations)


register_converter(LSTM, convert_lstm)
register_converter(GRU, convert_gru)
register_converter(SimpleRNN, convert_simple_rnn)

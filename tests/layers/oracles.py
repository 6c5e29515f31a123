"""Plain NumPy oracles of the sequence layers, written from the equations, and PyTorch twins.

The oracles loop where the layers do not (over heads, windows, steps), so they
share no code with what they check. The ``torch_*`` helpers build the
:mod:`torch.nn` counterpart of a built sknet layer with the same weights
(float64), for the tests that ``pytest.importorskip("torch")``.
"""

import numpy as np


def build(layer, shape, backend, dtype=np.float64, seed=0):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def numpy_params(layer):
    return {k: layer.backend_.to_numpy(v) for k, v in layer.params.items()}


def perturb(layer, rng, names, scale=0.1):
    """Add noise to ``names`` (zero biases, unit gammas would hide mistakes)."""
    for name in names:
        value = layer.backend_.to_numpy(layer.params[name])
        noisy = value + scale * rng.standard_normal(value.shape)
        layer.params[name] = layer.backend_.asarray(noisy, layer.dtype_)


# -- NumPy oracles ---------------------------------------------------------------------
def layer_norm_oracle(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    var = ((X - mean) ** 2).mean(axis=-1, keepdims=True)
    return (X - mean) / np.sqrt(var + eps) * gamma + beta


def softmax_oracle(S, allowed):
    """Softmax of each row of ``S`` over its allowed entries; rows with none give zeros."""
    out = np.zeros_like(S)
    for index in np.ndindex(S.shape[:-1]):
        keep = allowed[index]
        if keep.any():
            e = np.exp(S[index][keep] - S[index][keep].max())
            out[index][keep] = e / e.sum()
    return out


def zero_padded(X, mask):
    """``X`` with the steps ``mask`` says are padding set to zeros: how layers see them."""
    return X if mask is None else np.where(mask[:, :, None], X, 0.0)


def attention_oracle(p, X, heads, mask=None, causal=False, query_steps=None):
    """Multi-head attention, one sample and one head at a time."""
    N, T, F = X.shape
    d = p["Wq"].shape[1] // heads
    q = T if query_steps is None else query_steps
    Xq, Xc = (X, X) if query_steps is None else (X[:, :q], X[:, q:])
    Tk = Xc.shape[1]
    keys = np.ones((N, Tk), bool) if mask is None else mask[:, T - Tk :]
    Y = np.zeros((N, q, F))
    for n in range(N):
        outputs = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            Q = Xq[n] @ p["Wq"][:, cols] + p["bq"][cols]
            K = Xc[n] @ p["Wk"][:, cols] + p["bk"][cols]
            V = Xc[n] @ p["Wv"][:, cols] + p["bv"][cols]
            allowed = np.repeat(keys[n][None, :], q, axis=0)
            if causal:
                allowed &= np.tril(np.ones((q, Tk), bool))
            P = softmax_oracle(Q @ K.T / np.sqrt(d), allowed)
            outputs.append(P @ V)
        Y[n] = np.concatenate(outputs, axis=1) @ p["Wo"] + p["bo"]
    return Y


def gelu_tanh(z):
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))


def block_oracle(p, X, heads, mask=None, norm_first=False, activation="relu", causal=False):
    """The transformer encoder block without dropout, from its equations."""
    X = zero_padded(X, mask)  # padded steps enter as zeros
    act = (lambda z: np.maximum(z, 0)) if activation == "relu" else gelu_tanh

    def ff(H):
        return act(H @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]

    def ln(Z, k):
        return layer_norm_oracle(Z, p["gamma" + k], p["beta" + k])

    if norm_first:
        X = X + attention_oracle(p, ln(X, "1"), heads, mask, causal)
        return X + ff(ln(X, "2"))
    X = ln(X + attention_oracle(p, X, heads, mask, causal), "1")
    return ln(X + ff(X), "2")


def conv1d_oracle(X, W, b, stride=1, padding=(0, 0), dilation=1):
    """``Y[n, t, f] = b[f] + sum_{j, c} Xp[n, t * stride + j * dilation, c] W[j, c, f]``."""
    N, T, C = X.shape
    k, _, F = W.shape
    Xp = np.concatenate([np.zeros((N, padding[0], C)), X, np.zeros((N, padding[1], C))], axis=1)
    OT = (Xp.shape[1] - dilation * (k - 1) - 1) // stride + 1
    Y = np.zeros((N, OT, F)) + b
    for t in range(OT):
        for j in range(k):
            Y[:, t] += Xp[:, t * stride + j * dilation] @ W[j]
    return Y


# -- PyTorch twins (float64) -------------------------------------------------------------
def copy_attention_weights(module, p):
    """sknet's attention parameters ``p`` into a ``torch.nn.MultiheadAttention``."""
    import torch

    with torch.no_grad():
        module.in_proj_weight.copy_(torch.tensor(np.concatenate([p["Wq"], p["Wk"], p["Wv"]], 1).T))
        module.in_proj_bias.copy_(torch.tensor(np.concatenate([p["bq"], p["bk"], p["bv"]])))
        module.out_proj.weight.copy_(torch.tensor(p["Wo"].T))
        module.out_proj.bias.copy_(torch.tensor(p["bo"]))


def attention_grads_from_torch(module):
    """The gradients of a ``MultiheadAttention`` by sknet's parameter names."""
    E = module.embed_dim
    W = module.in_proj_weight.grad.numpy().T
    b = module.in_proj_bias.grad.numpy()
    grads = {}
    for i, name in enumerate("qkv"):
        grads["W" + name] = W[:, i * E : (i + 1) * E]
        grads["b" + name] = b[i * E : (i + 1) * E]
    grads["Wo"] = module.out_proj.weight.grad.numpy().T
    grads["bo"] = module.out_proj.bias.grad.numpy()
    return grads


def torch_block(layer, activation):
    """A ``torch.nn.TransformerEncoderLayer`` with the weights of a built sknet block."""
    import functools

    import torch

    p = numpy_params(layer)
    F = layer.input_shape_[1]
    act = (
        "relu"
        if activation == "relu"
        else functools.partial(torch.nn.functional.gelu, approximate="tanh")
    )
    module = torch.nn.TransformerEncoderLayer(
        F,
        layer.num_heads,
        layer._units,
        dropout=0.0,
        activation=act,
        batch_first=True,
        norm_first=layer.norm_first,
        dtype=torch.float64,
    )
    copy_attention_weights(module.self_attn, p)
    with torch.no_grad():
        for k, linear in (("1", module.linear1), ("2", module.linear2)):
            linear.weight.copy_(torch.tensor(p["W" + k].T))
            linear.bias.copy_(torch.tensor(p["b" + k]))
        for k, norm in (("1", module.norm1), ("2", module.norm2)):
            norm.weight.copy_(torch.tensor(p["gamma" + k]))
            norm.bias.copy_(torch.tensor(p["beta" + k]))
    return module


def block_grads_from_torch(module):
    grads = attention_grads_from_torch(module.self_attn)
    for k, linear in (("1", module.linear1), ("2", module.linear2)):
        grads["W" + k] = linear.weight.grad.numpy().T
        grads["b" + k] = linear.bias.grad.numpy()
    for k, norm in (("1", module.norm1), ("2", module.norm2)):
        grads["gamma" + k] = norm.weight.grad.numpy()
        grads["beta" + k] = norm.bias.grad.numpy()
    return grads

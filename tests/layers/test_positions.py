"""Tests for sknet/layers/_positions.py: learned and sinusoidal position embeddings."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet.backend import get_backend
from sknet.layers import PositionEmbedding, SinusoidalPositionEmbedding
from sknet.layers._base import build_layer
from sknet.utils import check_layer_gradients
from tests.layers.oracles import build, numpy_params

T, F = 6, 4


def test_learned_positions_add_one_vector_per_step(backend):
    layer = build(PositionEmbedding(), (T, F), backend)
    X = np.random.RandomState(0).standard_normal((3, T, F))
    Y = backend.to_numpy(layer.forward(backend.asarray(X), training=False))
    assert_allclose(Y, X + numpy_params(layer)["P"][None])


def test_sinusoids_as_the_transformer_paper_writes_them(backend):
    layer = build(SinusoidalPositionEmbedding(max_wavelength=100.0), (T, F), backend)
    Y = backend.to_numpy(layer.forward(backend.asarray(np.zeros((1, T, F))), training=False))[0]
    for t in range(T):
        for i in range(F // 2):
            angle = t / 100.0 ** (2 * i / F)
            assert_allclose(Y[t, 2 * i], np.sin(angle), atol=1e-12)
            assert_allclose(Y[t, 2 * i + 1], np.cos(angle), atol=1e-12)


def test_learned_positions_equal_a_torch_embedding_of_the_step_indices():
    torch = pytest.importorskip("torch")
    layer = build(PositionEmbedding(), (T, F), get_backend("cpu"))
    rng = np.random.RandomState(1)
    X, R = rng.standard_normal((3, T, F)), rng.standard_normal((3, T, F))
    Y = layer.forward(X, training=True)
    dX = layer.backward(R.copy())
    table = torch.nn.Embedding(T, F, dtype=torch.float64)
    with torch.no_grad():
        table.weight.copy_(torch.tensor(numpy_params(layer)["P"]))
    Xt = torch.tensor(X, requires_grad=True)
    Yt = Xt + table(torch.arange(T))[None]
    (Yt * torch.tensor(R)).sum().backward()
    assert_allclose(Y, Yt.detach().numpy(), atol=1e-12)
    assert_allclose(dX, Xt.grad.numpy(), atol=1e-12)
    assert_allclose(layer.grads["P"], table.weight.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("layer", [PositionEmbedding(), SinusoidalPositionEmbedding()])
def test_gradients(layer):
    errors = check_layer_gradients(layer, (T, F), n_samples=3)
    assert max(errors.values()) < 1e-6, errors


def test_sinusoids_follow_the_dtype_and_pickle_without_their_table():
    layer = build(SinusoidalPositionEmbedding(), (T, F), get_backend("cpu"), dtype=np.float32)
    X = np.zeros((2, T, F), np.float32)
    assert layer.forward(X, training=False).dtype == np.float32
    restored = pickle.loads(pickle.dumps(layer))
    assert "_table" not in layer.__getstate__()
    assert_allclose(restored.forward(X, training=False), layer.forward(X, training=False))
    layer.astype(np.float64)
    assert layer.forward(X.astype(np.float64), training=False).dtype == np.float64


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (SinusoidalPositionEmbedding(max_wavelength=0), (T, F), "max_wavelength"),
        (PositionEmbedding(), (F,), r"sequences of shape \(timesteps, features\)"),
    ],
)
def test_bad_configurations_are_refused_at_build(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build_layer(
            layer,
            shape,
            backend=get_backend("cpu"),
            dtype=np.float32,
            rng=np.random.RandomState(0),
        )

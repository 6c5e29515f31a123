"""Tests for sknet/layers/_categorical.py: categorical embeddings and column selection."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.backend import get_backend
from sknet.layers import (
    CategoricalEmbedding,
    Concatenate,
    PiecewiseLinearEncoding,
    SelectColumns,
    Sequential,
    embedding_size,
)
from sknet.utils import check_layer_gradients


def build(layer, shape, backend, dtype=np.float64, seed=0):
    layer.build(shape, backend=backend, dtype=dtype, rng=np.random.RandomState(seed))
    return layer


def lookup_oracle(X, E, cards, dims, offsets):
    """Each code's row, sample by sample: 0/NaN missing, 1..c categories, else unknown."""
    out = []
    for x in X:
        row = []
        for code, c, d, o in zip(x, cards, dims, offsets):
            if np.isnan(code) or np.rint(code) == 0:
                index = 0
            elif 1 <= np.rint(code) <= c:
                index = int(np.rint(code))
            else:
                index = c + 1
            row.append(E[o + index, :d])
        out.append(np.concatenate(row))
    return np.array(out)


def test_embedding_size_is_fastais_rule_capped_at_50():
    for c in (1, 2, 5, 30, 200, 5000):
        assert embedding_size(c) == min(50, round(1.6 * (c + 1) ** 0.56))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lookup_matches_the_code_scheme(backend, dtype):
    cards, dims = [3, 5], [2, 4]
    layer = build(CategoricalEmbedding(cards, dims), (2,), backend, dtype)
    X = np.array(
        [
            [1, 5],
            [0, np.nan],  # missing, missing
            [3, 6],  # 6: unknown
            [2.4, -1],  # rounds to 2; negative: unknown
            [np.inf, 2.6],  # inf: unknown; rounds to 3
            [4, 1e9],  # above the cardinalities: unknown
        ]
    )
    E = layer.backend_.to_numpy(layer.params["E"])
    assert E.shape == (3 + 2 + 5 + 2, 4) and layer.offsets_ == [0, 5]
    assert_array_equal(E[:5, 2:], 0.0)  # the first column's vectors use 2 of 4 entries
    expected = lookup_oracle(X, E, cards, dims, layer.offsets_)
    for training in (True, False):
        Y = layer.forward(backend.asarray(X.astype(dtype)), training=training)
        assert Y.dtype == dtype and Y.shape == (6, 6)
        assert_allclose(backend.to_numpy(Y), expected)


def test_float32_holds_codes_exactly_up_to_2_to_the_24():
    cards = [2**24]
    layer = CategoricalEmbedding(cards, dims=1)
    layer.cardinalities = cards  # the table of 2**24 rows is not built: only the codes
    layer.backend_, layer.dtype_, layer.offsets_ = get_backend("cpu"), np.dtype("float32"), [0]
    layer.dims_ = [1]
    layer._valid = np.array([0])
    layer._place()
    codes = np.array([[2**24], [2**24 - 1], [2**24 + 1]], dtype=np.float32)
    assert_array_equal(layer.rows(codes).ravel(), [2**24, 2**24 - 1, 2**24])  # 2**24 + 1 rounds


def test_gradient_of_the_tables_matches_finite_differences():
    X = np.array([[1, 2], [3, 0], [1, 9], [2, 2], [np.nan, 4]], dtype=float)  # repeats add up
    layer = CategoricalEmbedding([3, 4], dims=[2, 3])
    errors = check_layer_gradients(layer, (2,), n_samples=5)  # normal draws: codes -2..2
    assert set(errors) == {"X", "E"} and errors["X"] == 0.0
    built = build(CategoricalEmbedding([3, 4], dims=[2, 3]), (2,), get_backend("cpu"))
    built.forward(X, training=True)
    dY = np.random.RandomState(0).normal(size=(5, 5))
    built.backward(dY.copy())
    expected = np.zeros_like(built.params["E"])
    rows = built.rows(X)
    for i in range(5):
        expected[rows[i, 0], :2] += dY[i, :2]
        expected[rows[i, 1], :3] += dY[i, 2:]
    assert_allclose(built.grads["E"], expected)


def test_a_column_without_categories_keeps_its_missing_and_unknown_rows():
    layer = build(CategoricalEmbedding([0, 2], dims=[2, 2]), (2,), get_backend("cpu"))
    assert layer.params["E"].shape == (2 + 4, 2)
    codes = np.array([[0, 1], [1, 2], [7, np.nan]])
    assert_array_equal(layer.rows(codes), [[0, 3], [1, 4], [1, 2]])  # 0 missing, else unknown
    errors = check_layer_gradients(CategoricalEmbedding([0, 2], dims=[2, 3]), (2,))
    assert max(errors.values()) < 1e-7


def test_a_first_embedding_returns_no_input_gradient():
    layer = build(CategoricalEmbedding([3]), (1,), get_backend("cpu"))
    layer.skip_input_grad = True
    layer.forward(np.array([[1.0]]), training=True)
    assert layer.backward(np.ones((1, layer.dims_[0]))) is None


@pytest.mark.parametrize(
    "layer, shape, message",
    [
        (CategoricalEmbedding([]), (0,), "cardinalities must be a non-empty list of integers"),
        (CategoricalEmbedding([3, -1]), (2,), r"cardinalities must be .* got \[3, -1\]"),
        (CategoricalEmbedding([3, True]), (2,), "cardinalities must be a non-empty list"),
        (CategoricalEmbedding([3], dims=[2, 2]), (1,), r"dims must be None, a positive integer"),
        (CategoricalEmbedding([3], dims=0), (1,), "'dims' parameter of CategoricalEmbedding"),
        (CategoricalEmbedding([3, 4]), (3,), "has 2 cardinalities, so it expects rows of 2"),
        (SelectColumns([]), (3,), "columns must be a non-empty list of column indices"),
        (SelectColumns([0, 3]), (3,), r"columns \[3\] are out of range for rows of 3"),
        (SelectColumns([0, 0]), (3,), "columns must not repeat a column"),
        (SelectColumns([0.5]), (3,), "columns must hold integer column indices"),
        (SelectColumns(slice(3, None)), (3,), "selects no column of 3"),
    ],
)
def test_bad_configuration_is_refused_at_build(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        build(layer, shape, get_backend("cpu"))


def test_select_columns_forward_and_backward(backend):
    X = np.arange(12.0).reshape(3, 4)
    layer = build(SelectColumns([3, -4]), (4,), backend)
    assert layer.output_shape_ == (2,)
    assert_array_equal(
        backend.to_numpy(layer.forward(backend.asarray(X), training=True)), X[:, [3, 0]]
    )
    dX = backend.to_numpy(layer.backward(backend.asarray(np.ones((3, 2)) * [1.0, 2.0])))
    assert_array_equal(dX, np.tile([2.0, 0.0, 0.0, 1.0], (3, 1)))
    assert set(check_layer_gradients(SelectColumns(slice(1, 3)), (4,))) == {"X"}


def test_a_table_in_one_network_numeric_and_categorical_side_by_side(backend):
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.normal(size=(6, 2)), [1, 2, 3, 0, 4, 2]])
    bins = [np.array([-1.0, 0.0, 1.0]), np.array([-2.0, 2.0])]
    table = build(
        Concatenate(
            [
                Sequential([SelectColumns([0, 1]), PiecewiseLinearEncoding(bins, 2, "relu")]),
                Sequential([SelectColumns([2]), CategoricalEmbedding([3], dims=3)]),
            ]
        ),
        (3,),
        backend,
    )
    Y = backend.to_numpy(table.forward(backend.asarray(X), training=False))
    ple, emb = table.blocks_[0].blocks_[1], table.blocks_[1].blocks_[1]
    expected = np.hstack(
        [
            backend.to_numpy(ple.forward(backend.asarray(X[:, :2]), training=False)),
            backend.to_numpy(emb.forward(backend.asarray(X[:, 2:]), training=False)),
        ]
    )
    assert_allclose(Y, expected)
    errors = check_layer_gradients(table.__class__(**table.get_params(deep=False)), (3,))
    assert max(errors.values()) < 1e-6


def test_embedding_moves_casts_and_pickles(backend):
    X = np.array([[1.0, 2.0], [0.0, 7.0]])
    layer = build(CategoricalEmbedding([2, 3]), (2,), get_backend("cpu"))
    expected = layer.forward(X, training=False)
    restored = pickle.loads(pickle.dumps(layer)).to_backend(backend).astype(np.float32)
    Y = restored.forward(backend.asarray(X.astype(np.float32)), training=False)
    assert Y.dtype == np.float32
    assert_allclose(backend.to_numpy(Y), expected, rtol=1e-6)

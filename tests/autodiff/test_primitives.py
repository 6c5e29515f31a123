"""Every primitive of sknet.autodiff against finite differences, in float64.

Each case differentiates ``L = sum(f(inputs) * R)`` for a random ``R`` with
respect to each floating input, on every backend, and compares with central
differences of ``L``; plus broadcasting, repeated indices, unrecorded calls and
the errors that stand in for unsupported operations.
"""

import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet import autodiff as ad
from sknet.backend import ACTIVATIONS, get_array_module
from tests.autodiff.gradcheck import check_primitive

rng = np.random.RandomState(0)


def normal(*shape):
    return rng.standard_normal(shape)


def positive(*shape):
    return rng.uniform(0.5, 2.0, shape)


def distinct(*shape):
    """Values far apart (no ties for max, min and pooling)."""
    return rng.permutation(np.arange(int(np.prod(shape)), dtype=float)).reshape(shape) * 0.1


def away_from_zero(*shape):
    return normal(*shape) + np.where(rng.rand(*shape) < 0.5, -0.5, 0.5)


INT_IDX = np.array([0, 2, 2, 1, 0])  # repeated indices: gradients must add up
MASK = np.array([True, False, True, True])


def like(a, index):
    """``index`` as an array of ``a``'s array module (NumPy or CuPy)."""
    return get_array_module(ad.value(a)).asarray(index)


CASES = {
    "add broadcast": (ad.add, [normal(3, 4), normal(4)]),
    "add broadcast both": (ad.add, [normal(3, 1), normal(1, 4)]),
    "subtract broadcast": (ad.subtract, [normal(2, 3, 4), normal(3, 1)]),
    "multiply broadcast": (ad.multiply, [normal(2, 3, 4), normal(3, 1)]),
    "divide": (ad.divide, [normal(3, 4), positive(4)]),
    "power constant": (lambda a: ad.power(a, 3), [normal(3, 4)]),
    "power variable": (ad.power, [positive(3, 4), normal(3, 4)]),
    "negative": (ad.negative, [normal(3, 4)]),
    "exp": (ad.exp, [normal(3, 4)]),
    "log": (ad.log, [positive(3, 4)]),
    "log1p": (ad.log1p, [positive(3, 4)]),
    "sqrt": (ad.sqrt, [positive(3, 4)]),
    "square": (ad.square, [normal(3, 4)]),
    "absolute": (ad.absolute, [away_from_zero(3, 4)]),
    "sin": (ad.sin, [normal(3, 4)]),
    "cos": (ad.cos, [normal(3, 4)]),
    "softplus": (ad.softplus, [normal(3, 4) * 5]),
    "clip": (lambda a: ad.clip(a, -0.5, 0.5), [distinct(3, 4) - 0.55]),
    "maximum": (ad.maximum, [distinct(3, 4), distinct(3, 4)]),
    "minimum broadcast": (ad.minimum, [distinct(3, 4), distinct(4)]),
    "where broadcast": (lambda a, b: ad.where(like(a, MASK), a, b), [normal(3, 4), normal(3, 1)]),
    "softmax": (ad.softmax, [normal(3, 4)]),
    "softmax axis 0": (lambda a: ad.softmax(a, axis=0), [normal(3, 4)]),
    "log_softmax": (ad.log_softmax, [normal(3, 4)]),
    "logsumexp": (lambda a: ad.logsumexp(a, axis=1), [normal(3, 4) * 10]),
    "matmul 2-D": (ad.matmul, [normal(3, 4), normal(4, 5)]),
    "matmul 1-D left": (ad.matmul, [normal(4), normal(4, 5)]),
    "matmul 1-D right": (ad.matmul, [normal(3, 4), normal(4)]),
    "matmul stacks broadcast": (ad.matmul, [normal(2, 3, 4), normal(4, 5)]),
    "matmul 1-D both": (ad.matmul, [normal(4), normal(4)]),
    "matmul operator 1-D both": (lambda a, b: a @ b, [normal(4), normal(4)]),
    "matmul stacks @ 1-D": (ad.matmul, [normal(2, 3, 4), normal(4)]),
    "matmul 1-D @ stacks": (ad.matmul, [normal(3), normal(2, 3, 4)]),
    "sum all": (ad.sum, [normal(3, 4)]),
    "sum axes keepdims": (lambda a: ad.sum(a, axis=(0, 2), keepdims=True), [normal(2, 3, 4)]),
    "mean axis": (lambda a: ad.mean(a, axis=1), [normal(2, 3, 4)]),
    "max axis": (lambda a: ad.max(a, axis=1), [distinct(3, 4)]),
    "min all": (ad.min, [distinct(3, 4)]),
    "var": (lambda a: ad.var(a, axis=-1), [normal(3, 4)]),
    "reshape": (lambda a: ad.reshape(a, (4, 3)), [normal(3, 4)]),
    "transpose axes": (lambda a: ad.transpose(a, (2, 0, 1)), [normal(2, 3, 4)]),
    "swapaxes": (lambda a: ad.swapaxes(a, 0, 2), [normal(2, 3, 4)]),
    # Equal lengths: a wrong inverse permutation keeps the shape, only the values tell.
    "transpose negative axes": (lambda a: ad.transpose(a, (-1, 0, 1)), [normal(2, 2, 2)]),
    "transpose method negative axes": (lambda a: a.transpose(0, -1, 1), [normal(2, 2, 2)]),
    "numpy transpose negative axes": (
        lambda a: np.transpose(a, (1, -1, 0)),
        [normal(2, 2, 2)],
    ),
    "swapaxes negative axes": (lambda a: ad.swapaxes(a, -1, 0), [normal(2, 2, 2)]),
    "broadcast_to": (lambda a: ad.broadcast_to(a, (2, 3, 4)), [normal(3, 1)]),
    "expand_dims squeeze": (lambda a: ad.squeeze(ad.expand_dims(a, 1), 1), [normal(3, 4)]),
    "slices": (lambda a: a[1:, ::-2], [normal(3, 4)]),
    "integer and None": (lambda a: a[1, None, ..., 2:], [normal(3, 4)]),
    "repeated integer indices": (lambda a: a[like(a, INT_IDX)], [normal(3, 4)]),
    "integer arrays per axis": (
        lambda a: a[like(a, INT_IDX), like(a, INT_IDX[::-1])],
        [normal(3, 4)],
    ),
    "boolean mask": (lambda a: a[:, like(a, MASK)], [normal(3, 4)]),
    "concatenate": (lambda a, b: ad.concatenate([a, b, a], axis=1), [normal(3, 2), normal(3, 4)]),
    "stack": (lambda a, b: ad.stack([a, b], axis=-1), [normal(3, 4), normal(3, 4)]),
    "conv2d": (ad.conv2d, [normal(2, 3, 5, 5), normal(4, 3, 3, 3), normal(4)]),
    "conv2d stride padding": (
        lambda x, w: ad.conv2d(x, w, stride=2, padding=1),
        [normal(2, 2, 6, 5), normal(3, 2, 3, 2)],
    ),
    "conv2d 1x1": (ad.conv2d, [normal(2, 3, 4, 4), normal(2, 3, 1, 1)]),
    "max_pool2d": (ad.max_pool2d, [distinct(2, 2, 4, 6)]),
    "max_pool2d overlap padding": (
        lambda x: ad.max_pool2d(x, 3, stride=2, padding=1),
        [distinct(2, 2, 5, 5)],
    ),
    "avg_pool2d padding": (lambda x: ad.avg_pool2d(x, 2, padding=1), [normal(2, 2, 4, 5)]),
    "avg_pool2d stride": (lambda x: ad.avg_pool2d(x, 3, stride=1), [normal(1, 2, 5, 5)]),
    "method astype same dtype": (lambda a: a.astype(np.float64) * 2.0, [normal(3, 4)]),
    "method copy": (lambda a: a.copy() * a, [normal(3, 4)]),
    "method ravel": (lambda a: a.ravel()[::2], [normal(3, 4)]),
    "method flatten": (lambda a: a.flatten() * 2.0, [normal(3, 4)]),
    "method squeeze": (lambda a: a.squeeze(1), [normal(3, 1, 4)]),
    "method swapaxes": (lambda a: a.swapaxes(0, 2), [normal(2, 2, 2)]),
    "method clip": (lambda a: a.clip(-0.5, 0.5), [distinct(3, 4) - 0.55]),
    "method var": (lambda a: a.var(axis=1, keepdims=True), [normal(3, 4)]),
    "method std": (lambda a: a.std(axis=0), [normal(3, 4)]),
    "method dot": (lambda a, b: a.dot(b), [normal(3, 4), normal(4, 2)]),
    "operators": (
        lambda a, b: (2.0 - a) * b / 3.0 + (a @ b.T) @ b - abs(b) ** 2,
        [
            normal(3, 4),
            away_from_zero(3, 4),
        ],
    ),
}
CASES.update(
    {
        f"activation {name}": (lambda a, n=name: ad.activation(n, a), [away_from_zero(3, 4)])
        for name in ACTIVATIONS
    }
)
# Activations of 0-d values (a sum, or a 0-d array itself).
CASES.update(
    {
        f"activation {name} of a sum": (
            lambda a, n=name: ad.activation(n, ad.sum(a)),
            [away_from_zero(3)],
        )
        for name in ACTIVATIONS
    }
)
CASES.update(
    {
        f"{name} 0-d": (getattr(ad, name), [away_from_zero()])
        for name in ("relu", "tanh", "sigmoid", "softplus")
    }
)
CASES.update(
    {
        f"{name} of a sum": (lambda a, n=name: getattr(ad, n)(ad.sum(a)), [away_from_zero(3)])
        for name in ("relu", "tanh", "sigmoid", "softplus")
    }
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_finite_differences(case, backend):
    fn, arrays = CASES[case]
    assert check_primitive(backend, fn, arrays) < 1e-6


def test_the_check_catches_a_wrong_vjp(backend):
    from sknet.autodiff._variable import record, value

    def wrong_exp(a):
        y = np.exp(value(a))
        return record(y, (a,), lambda g, needs: (g * y * 1.01,))

    assert check_primitive(backend, wrong_exp, [normal(3, 4)]) > 1e-3


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_and_minimum_propagate_nan_like_numpy(name):
    a = np.array([np.nan, 1.0, np.nan, 2.0, 3.0])
    b = np.array([0.0, np.nan, np.nan, 2.0, -1.0])
    A, B = ad.Variable(a), ad.Variable(b)
    out = getattr(ad, name)(A, B)
    assert_array_equal(out.data, getattr(np, name)(a, b))  # NaN where either is NaN
    assert_array_equal(getattr(np, name)(A, B).data, getattr(np, name)(a, b))
    ga, gb = ad.gradients(out, np.arange(1.0, 6.0), [A, B])
    # The NaN operand gets the gradient (a when both are NaN, and on ties).
    chose_a = [True, False, True, True, name == "maximum"]
    assert_array_equal(ga, np.where(chose_a, np.arange(1.0, 6.0), 0.0))
    assert_array_equal(gb, np.where(chose_a, 0.0, np.arange(1.0, 6.0)))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_reductions_give_nans_gradient_to_the_nans(name):
    a = np.array([[np.nan, 1.0, np.nan], [2.0, 3.0, -1.0]])
    A = ad.Variable(a)
    with np.errstate(all="raise"):  # no 0/0 on the way
        out = getattr(ad, name)(A, axis=1)
        (grad,) = ad.gradients(out, np.array([2.0, 1.0]), [A])
    assert_array_equal(out.data, getattr(np, name)(a, axis=1))
    expected = [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0] if name == "max" else [0.0, 0.0, 1.0]]
    assert_array_equal(grad, expected)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "logsumexp", "var"])
@pytest.mark.parametrize("shape, axis", [((2, 3), 2), ((2, 3), -3), ((2, 3), (0, 5)), ((), 0)])
def test_reductions_refuse_an_axis_out_of_bounds(name, shape, axis):
    # It used to wrap around (axis 2 of a 2-D array summed axis 0) or divide by zero.
    x = ad.Variable(np.ones(shape))
    with pytest.raises(ValueError, match=rf"axis {re.escape(repr(axis))} is out of bounds"):
        getattr(ad, name)(x, axis=axis)


def test_reductions_refuse_an_axis_named_twice():
    with pytest.raises(ValueError, match=r"axis \(0, -2\) names an axis twice"):
        ad.sum(ad.Variable(np.ones((2, 3))), axis=(0, -2))


def test_concatenate_flattens_with_axis_none_as_numpy_does(backend):
    a, b = normal(2, 3), normal(4)
    fn = lambda x, y: ad.concatenate([x, y], axis=None)  # noqa: E731
    assert_allclose(ad.concatenate([a, b], axis=None), np.concatenate([a, b], axis=None))
    assert check_primitive(backend, fn, [a, b]) < 1e-6


@pytest.mark.parametrize(
    "call",
    [
        lambda x: ad.swapaxes(x, 0, 2),
        lambda x: ad.swapaxes(x, -3, 1),
        lambda x: ad.concatenate([x, x], axis=2),
        lambda x: ad.transpose(x, (0, 2)),
    ],
)
def test_shape_functions_refuse_an_axis_out_of_bounds_like_numpy(call):
    with pytest.raises(ValueError, match="axis"):
        call(ad.Variable(np.ones((2, 3))))


def test_a_variable_used_twice_sums_its_gradients():
    x = ad.Variable(np.array([1.0, 2.0]))
    y = x * x + x  # d/dx = 2x + 1
    assert_allclose(ad.gradients(y, np.ones(2), [x])[0], [3.0, 5.0])


def test_repeated_indices_add_up():
    x = ad.Variable(np.zeros(3))
    (grad,) = ad.gradients(x[np.array([0, 0, 0, 2])], np.ones(4), [x])
    assert_array_equal(grad, [3.0, 0.0, 1.0])


def test_unrecorded_calls_return_plain_arrays_of_the_same_dtype():
    X = np.ones((2, 3), dtype=np.float32)
    for out in (ad.relu(X), ad.exp(X) * 2.0, ad.sum(X, axis=1), ad.softmax(X), X[:, ::2]):
        assert type(out) is np.ndarray and out.dtype == np.float32


def test_comparisons_are_plain_boolean_arrays():
    x = ad.Variable(np.array([-1.0, 2.0]))
    for mask in (x > 0, x >= 0, x < 0, x <= 0, x == 2.0, x != 2.0, ad.greater(x, 0)):
        assert type(mask) is np.ndarray and mask.dtype == bool
    assert_array_equal(ad.sign(x), [-1.0, 1.0])


def test_numpy_functions_dispatch_to_the_primitives():
    x = ad.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    y = np.sum(np.exp(x) * np.maximum(x, 2.5), axis=1)
    assert ad.is_variable(y)
    expected = np.exp(x.data) * np.maximum(x.data, 2.5) + np.exp(x.data) * (x.data >= 2.5)
    assert_allclose(ad.gradients(y, np.ones(2), [x])[0], expected)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda x: np.fft.fft(x), "numpy.fft.fft"),
        (lambda x: np.cumsum(x), "numpy.cumsum"),
        (lambda x: np.arctan(x), "numpy.arctan"),
        (lambda x: np.add.reduce(x), "numpy.add.reduce"),
        (lambda x: np.exp(x, out=np.empty(2)), "numpy.exp with ['out']"),
    ],
)
def test_unsupported_numpy_operations_name_themselves(call, name):
    x = ad.Variable(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="not differentiable") as info:
        call(x)
    assert name in str(info.value)


def test_conversions_that_would_drop_the_gradient_fail():
    x = ad.Variable(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="cannot become a plain array"):
        np.asarray(x)
    with pytest.raises(TypeError, match="where"):
        bool(x)
    with pytest.raises(TypeError, match="float"):
        float(x)
    with pytest.raises(TypeError, match="in place"):
        x[0] = 3.0
    with pytest.raises(TypeError, match="Indices"):
        x[ad.Variable(np.array([0]))]


def test_variables_know_their_array_attributes():
    x = ad.Variable(np.zeros((2, 3), dtype=np.float32))
    assert (x.shape, x.dtype, x.ndim, x.size, len(x)) == ((2, 3), np.float32, 2, 6, 2)
    assert x.T.shape == (3, 2) and x.reshape(3, 2).shape == (3, 2)
    assert x.transpose(1, 0).shape == (3, 2) and x.sum(axis=0).shape == (3,)
    assert "Variable(shape=(2, 3)" in repr(x)


def test_an_unknown_activation_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown activation 'swish'"):
        ad.activation("swish", np.ones(2))


def test_kernel_arguments_are_checked():
    with pytest.raises(ValueError, match=r"\(batch, C, H, W\)"):
        ad.conv2d(np.ones((2, 3)), np.ones((1, 1, 1, 1)))
    with pytest.raises(ValueError, match="channels"):
        ad.conv2d(np.ones((1, 2, 4, 4)), np.ones((1, 3, 3, 3)))
    with pytest.raises(ValueError, match="stride"):
        ad.max_pool2d(np.ones((1, 1, 4, 4)), 2, stride=-1)
    with pytest.raises(ValueError, match="at most half"):
        ad.avg_pool2d(np.ones((1, 1, 4, 4)), 2, padding=2)


def test_conv2d_refuses_a_kernel_that_is_not_4d():
    x = np.ones((1, 1, 5, 5))
    for W in (np.ones((3, 3)), ad.Variable(np.ones((1, 3, 3))), np.ones((1, 1, 1, 3, 3))):
        message = (
            r"conv2d: the kernel W must be 4-D \(out_channels, in_channels, kh, kw\), got "
            rf"shape {re.escape(str(ad.value(W).shape))}"
        )
        with pytest.raises(ValueError, match=message):  # before: "not enough values to unpack"
            ad.conv2d(x, W)


@pytest.mark.parametrize(
    "who, call, window",
    [
        ("max_pool2d", lambda x: ad.max_pool2d(x, 4), "(4, 4)"),
        ("max_pool2d", lambda x: ad.max_pool2d(x, (2, 4), stride=1), "(2, 4)"),
        ("avg_pool2d", lambda x: ad.avg_pool2d(x, 4), "(4, 4)"),
        ("conv2d", lambda x: ad.conv2d(x, np.ones((1, 1, 4, 4))), "(4, 4)"),
    ],
    ids=["max_pool2d", "max_pool2d-too-wide", "avg_pool2d", "conv2d"],
)
def test_a_window_larger_than_the_images_is_refused(who, call, window):
    x = ad.Variable(np.ones((2, 1, 3, 3)))
    message = (
        rf"{who}: the window {re.escape(window)} is larger than the images "
        r"\(3x3, padded by \(0, 0\)\)"
    )
    with pytest.raises(ValueError, match=message):  # before: an empty result
        call(x)


def test_a_window_that_fits_the_padded_images_is_taken():
    x = ad.Variable(np.arange(9.0).reshape(1, 1, 3, 3))
    assert_array_equal(ad.max_pool2d(x, 3).data, [[[[8.0]]]])
    assert ad.max_pool2d(x, 4, padding=(2, 1)).shape == (1, 1, 1, 1)  # 7x5 padded
    assert ad.conv2d(x, np.ones((1, 1, 3, 3))).shape == (1, 1, 1, 1)


def test_var_and_mean_of_no_elements_are_nan_as_in_numpy():
    """NumPy's value (NaN, float32 kept) and its RuntimeWarning, one per call."""
    for dtype in (np.float64, np.float32):
        a = np.empty((0, 3), dtype=dtype)
        for axis, keepdims in [(0, False), (None, False), (0, True), ((0, 1), True)]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's two
                expected = np.var(a, axis=axis, keepdims=keepdims)
            for var in (ad.var, lambda v, **kw: v.var(**kw)):
                with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0") as caught:
                    out = var(ad.Variable(a), axis=axis, keepdims=keepdims)  # before: 0
                assert len(caught) == 1
                assert out.shape == expected.shape and out.dtype == expected.dtype
                assert np.isnan(out.data).all()
            with pytest.warns(RuntimeWarning, match="Mean of empty slice") as caught:
                out = ad.mean(ad.Variable(a), axis=axis, keepdims=keepdims)  # before: 0
            assert len(caught) == 1 and np.isnan(out.data).all() and out.dtype == dtype
    A = ad.Variable(np.empty((0, 3)))
    with pytest.warns(RuntimeWarning):
        out = ad.var(A, axis=0)
    (grad,) = ad.gradients(out, np.ones(3), [A])
    assert grad.shape == (0, 3)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0"):
        assert np.isnan(ad.Variable(np.empty((0, 3))).std(axis=0).data).all()
    # reducing an axis that is not empty: no warning, an empty result as NumPy's
    assert ad.var(ad.Variable(np.empty((0, 3))), axis=1).shape == (0,)
    assert ad.mean(ad.Variable(np.empty((0, 3))), axis=1).shape == (0,)


def test_gradients_keep_each_input_dtype():
    x = ad.Variable(np.array([0.5, 1.5], dtype=np.float32))
    y = 2.0**x * np.float64(3.0)  # a NumPy float64 factor promotes the values
    (grad,) = ad.gradients(y, np.ones(2, dtype=y.dtype), [x])
    assert grad.dtype == np.float32
    assert_allclose(grad, 3.0 * np.log(2.0) * 2.0**x.data, rtol=1e-6)


def test_astype_to_another_float_casts_the_gradient_back():
    x = ad.Variable(np.array([0.5, 1.5], dtype=np.float32))
    y = x.astype(np.float64) * 3.0
    assert y.dtype == np.float64
    (grad,) = ad.gradients(y, np.ones(2), [x])
    assert grad.dtype == np.float32
    assert_array_equal(grad, [3.0, 3.0])
    assert x.astype("float32", copy=False) is x


def test_methods_without_a_gradient_give_plain_arrays():
    x = ad.Variable(np.array([[1.0, 3.0], [4.0, 2.0]]))
    assert_array_equal(x.argmax(axis=1), [1, 0])
    assert_array_equal(x.argsort(axis=1), [[0, 1], [1, 0]])
    assert not ad.is_variable(x.astype(np.int64)) and x.astype(np.int64).dtype == np.int64
    assert bool(x.any()) and not ad.is_variable(x.all())
    assert (x.itemsize, x.nbytes) == (8, 32)


@pytest.mark.parametrize(
    "name, why",
    [
        ("cumsum", "not differentiable by sknet.autodiff"),
        ("round", "not differentiable by sknet.autodiff"),
        ("fill", "write in place"),
        ("sort", "write in place"),
        ("tolist", "drop the gradient; use .data"),
        ("item", "drop the gradient; use .data"),
        ("strides", "the memory of the array inside"),
    ],
)
def test_other_array_methods_are_type_errors_naming_them(name, why):
    # Before: AttributeError "'Variable' object has no attribute 'cumsum'", naming
    # neither the operation nor what to write instead.
    x = ad.Variable(np.ones((2, 3)))
    with pytest.raises(
        TypeError, match=rf"X\.{name} is not available on a recorded array"
    ) as info:
        getattr(x, name)
    assert why in str(info.value) and "astype" in str(info.value)
    assert not hasattr(x, name)  # still an AttributeError to hasattr


def test_dot_of_stacks_points_to_matmul():
    with pytest.raises(TypeError, match="use the @ operator"):
        ad.Variable(np.ones((2, 3, 4))).dot(np.ones((4, 2)))


def test_a_forward_only_layer_may_cast_and_copy_its_recorded_input():
    from sknet.layers import Layer
    from sknet.utils import check_layer_gradients

    class Methods(Layer):
        def forward(self, X, *, training):
            Z = X.astype(X.dtype).copy().ravel().reshape(X.shape)
            return Z.clip(-1.0, 1.0) + Z.std(axis=1, keepdims=True) - Z.var()

    # Before: AttributeError 'Variable' object has no attribute 'astype' when trained.
    assert max(check_layer_gradients(Methods(), (4,)).values()) < 1e-6

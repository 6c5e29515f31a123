"""Every differentiable primitive of sknet.autodiff, found by name, against finite differences.

The primitives are the public names of :mod:`sknet.autodiff` (its ``__all__``)
less :data:`NO_GRADIENT`, the names that have no gradient to check, each with
its reason. A primitive added to the package is checked without anyone writing
a case for it: one taking one array is checked as a unary function (over 0-d,
1-d and 2-d operands, and over positive and negative axes when it has an
``axis`` parameter), one taking two arrays as a binary function broadcasting
both ways. Primitives whose arguments are not all arrays (shapes, axes,
indices, lists of arrays, images) have their operands in :data:`SPECIAL`; the
first test fails for a public name that is in neither place.

Each case is checked four ways: its VJP against central differences of
``sum(f(inputs) * R)`` in float64 (:func:`tests.autodiff.gradcheck.check_primitive`),
its value against NumPy (or a plain NumPy oracle), its other spellings (NumPy's
function of the same name where it dispatches, the operator, the method)
against the direct call, and float32 operands against a float32 result.
Operands come from NumPy generators seeded by the case. The unary and binary
primitives also meet NaN, infinities, signed zeros and ties, where their values
must be NumPy's.
"""

import functools
import inspect
import operator
import traceback
import zlib

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sknet import autodiff as ad
from sknet.autodiff import _protocol
from sknet.autodiff._variable import record
from sknet.backend import ACTIVATIONS, get_backend
from tests.autodiff.gradcheck import check_primitive

NO_GRADIENT = {
    "Variable": "the recorded array itself, not a function of arrays",
    "gradients": "the backward pass, not a primitive",
    "is_variable": "a predicate on the type of its argument",
    "value": "unwraps a Variable: what it returns is not recorded, by design",
    "greater": "a comparison: a boolean array, no gradient",
    "greater_equal": "a comparison: a boolean array, no gradient",
    "less": "a comparison: a boolean array, no gradient",
    "less_equal": "a comparison: a boolean array, no gradient",
    "equal": "a comparison: a boolean array, no gradient",
    "not_equal": "a comparison: a boolean array, no gradient",
    "sign": "piecewise constant (gradient 0 where it exists); a plain array, not recorded",
}

# What the operands of the inferred cases are drawn from, where not any real number.
DOMAIN = {
    "log": "positive",
    "log1p": "positive",
    "sqrt": "positive",
    "absolute": "away_from_zero",  # the kink at 0
    "relu": "away_from_zero",
    "max": "distinct",  # ties share the gradient, finite differences do not
    "min": "distinct",
}
BINARY_DOMAIN = {
    "power": ("positive", "normal"),  # a variable exponent needs a positive base
    "divide": ("normal", "away_from_zero"),
}

UNARY_SHAPES = [(), (5,), (3, 4)]
AXIS_SHAPE = (2, 3, 4)
BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (4,)),
    ((4,), (3, 1)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((), ()),
    ((2, 1, 4), (3, 1)),
]


# -- operands ----------------------------------------------------------------------
def draw(rng, shape, kind="normal"):
    """A float64 array of ``shape`` (a 0-d array for ``()``)."""
    n = int(np.prod(shape, dtype=int))
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "positive":
        x = rng.uniform(0.5, 2.0, n)
    elif kind == "away_from_zero":
        x = rng.uniform(0.3, 2.0, n) * rng.choice([-1.0, 1.0], n)
    elif kind == "distinct":  # 0.1 apart, and 0.025 from every multiple of 0.05
        x = (rng.permutation(n) - n // 2) * 0.1 + 0.025
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return np.asarray(x, dtype=np.float64).reshape(shape)


class Case:
    """``call(f, *arrays)`` applies the primitive ``f`` (or NumPy's namesake) to the operands."""

    def __init__(self, label, call, shapes, kinds=None, oracle=None):
        self.label, self.call, self.shapes = label, call, shapes
        self.kinds = kinds or ["normal"] * len(shapes)
        self.oracle = oracle  # a plain NumPy function of the operands, if not NumPy's namesake

    def arrays(self, name):
        rng = np.random.default_rng(zlib.crc32(f"{name}: {self.label}".encode()))
        return [draw(rng, s, k) for s, k in zip(self.shapes, self.kinds)]


def short(x):
    """A label for an argument: arrays by their shape and dtype (and tuples of them)."""
    if isinstance(x, np.ndarray):
        return f"<{x.dtype} array {x.shape}>"
    if isinstance(x, tuple):
        return "(" + ", ".join(map(short, x)) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def _apply(f, *xs):
    return f(*xs)


def _with(*args, **kwargs):
    """The call that passes the operands first, then ``args`` and ``kwargs``."""
    return lambda f, *xs: f(*xs, *args, **kwargs)


# -- inferred cases: one array, or two arrays ---------------------------------------
def required_parameters(function):
    params = inspect.signature(function).parameters.values()
    return [p for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]


def unary_cases(name, function):
    kind = DOMAIN.get(name, "normal")
    params = inspect.signature(function).parameters
    axis = params.get("axis")
    # A default axis of -1 (softmax) needs at least one dimension.
    shapes = [s for s in UNARY_SHAPES if axis is None or axis.default is None or s]
    cases = [Case(f"{s}", _apply, [s], [kind]) for s in shapes]
    if () in shapes:  # a reduction's 0-d result (a NumPy scalar on NumPy) as the operand
        summed = "positive" if kind == "away_from_zero" else kind  # a sum far from the kink
        cases.append(Case("() of a sum", lambda f, a: f(ad.sum(a)), [(3,)], [summed]))
    if axis is not None:
        axes = [0, 1, -1, -2, -3]
        if "keepdims" in params:
            axes += [(0, -1), (-1, -3), ()]
        for ax in axes:
            cases.append(Case(f"{AXIS_SHAPE} axis={ax}", _with(axis=ax), [AXIS_SHAPE], [kind]))
            if "keepdims" in params:
                call = _with(axis=ax, keepdims=True)
                cases.append(Case(f"{AXIS_SHAPE} axis={ax} keepdims", call, [AXIS_SHAPE], [kind]))
        cases.append(Case("(4,) axis=-1", _with(axis=-1), [(4,)], [kind]))
    return cases


def binary_cases(name):
    kinds = list(BINARY_DOMAIN.get(name, ("normal", "normal")))
    cases = [Case(f"{sa} with {sb}", _apply, [sa, sb], kinds) for sa, sb in BINARY_SHAPES]
    # A reduction's 0-d result (a NumPy scalar on NumPy) on either side.
    reduced = "positive" if "positive" in kinds else "normal"
    cases.append(
        Case(
            "() of a mean with (2, 3)",
            lambda f, a, b: f(ad.mean(a), b),
            [(4,), (2, 3)],
            [reduced, kinds[1]],
        )
    )
    cases.append(
        Case(
            "(2, 3) with () of a mean",
            lambda f, a, b: f(a, ad.mean(b)),
            [(2, 3), (4,)],
            [kinds[0], "positive" if "away_from_zero" in kinds else kinds[1]],
        )
    )
    # A Python number on either side: the other operand alone is recorded.
    left, right = (1.5 if kind == "positive" else 0.7 for kind in kinds)
    cases.append(Case(f"(3, 4) with {right}", lambda f, a: f(a, right), [(3, 4)], kinds[:1]))
    cases.append(Case(f"{left} with (3, 4)", lambda f, b: f(left, b), [(3, 4)], kinds[1:]))
    return cases


# -- cases of the primitives whose arguments are not all arrays ------------------
ZERO_BASE = np.array([0.0, 1.5, 0.0, 2.0], dtype=np.float32)  # float32 promotes nothing
MASK = np.array(
    [[True, False, False, True], [False, True, True, True], [True, True, False, False]]
)


def _matmul():
    pairs = [
        ((4,), (4,)),
        ((3, 4), (4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((2, 3, 4), (4,)),
        ((3,), (2, 3, 4)),
        ((1, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
    ]
    return [Case(f"{sa} @ {sb}", _apply, [sa, sb]) for sa, sb in pairs]


def _shapes(pairs):
    return [Case(f"{s} to {arg}", _with(arg), [s]) for s, arg in pairs]


def _getitem():
    keys = [
        (1, -1),
        slice(None, None, -2),
        (Ellipsis, -1),
        (None, 1),
        (-1, None, slice(1, None)),
        np.array([0, 2, 2, -1]),  # repeated indices add up
        [0, -1, 0],
        (np.array([0, -1, 0]), np.array([-1, 1, -1])),
        MASK,
        (slice(None), MASK[0]),
        np.int64(-2),
    ]
    cases = [Case(f"(3, 4)[{short(key)}]", _with(key), [(3, 4)]) for key in keys]
    cases += [Case(f"()[{short(key)}]", _with(key), [()]) for key in [(), Ellipsis, None]]
    for case in cases:
        case.oracle = operator.getitem
    return cases


def _joins(kind):
    lists = {
        "concatenate": [
            ([(3, 2), (3, 4)], -1),
            ([(2, 3), (1, 3), (2, 3)], 0),
            ([(2, 3), (1, 3)], -2),
            ([(4,), (2,)], -1),
            ([(2, 2), (3,)], None),
        ],
        "stack": [
            ([(3, 4), (3, 4)], -1),
            ([(3, 4), (3, 4), (3, 4)], 1),
            ([(3, 4), (3, 4)], -3),
            ([(), ()], 0),
            ([(4,), (4,)], -1),
        ],
    }[kind]
    return [
        Case(f"{shapes} axis={axis}", lambda f, *xs, axis=axis: f(list(xs), axis=axis), shapes)
        for shapes, axis in lists
    ]


def _where():
    def case(mask, sa, sb):
        call = lambda f, a, b: f(mask, a, b)  # noqa: E731
        return Case(f"{short(mask)} {sa} {sb}", call, [sa, sb])

    return [
        case(MASK, (3, 4), (3, 1)),
        case(MASK[0], (), (3, 4)),
        case(np.array(True), (), ()),
        case(MASK[:, :1], (4,), ()),
    ]


def _clip():
    bounds = [
        (-0.5, 0.5),
        (None, 0.3),
        (-0.3, None),
        (np.full((3, 1), -0.5, dtype=np.float32), 0.5),
    ]
    shapes = [(3, 4), (), (5,), (4,)]
    constant = [
        Case(f"{s} in [{short(lo)}, {short(hi)}]", _with(lo, hi), [s], ["distinct"])
        for s in shapes
        for lo, hi in bounds[: 4 if s == (4,) else 3]
    ]
    recorded = [  # bounds that are operands too (any order: above a_max, clip gives a_max)
        Case(f"{s} in recorded [{lo}, {hi}]", _apply, [s, lo, hi])
        for s, lo, hi in [((3, 4), (3, 1), (4,)), ((4,), (3, 1), ()), ((), (), ())]
    ]
    recorded.append(Case("(3, 4) above recorded a_min", _with(None), [(3, 4), (4,)]))
    return constant + recorded


def _activation():
    return [
        Case(f"{name} {s}", lambda f, a, n=name: f(n, a), [s], ["away_from_zero"])
        for name in ACTIVATIONS
        for s in UNARY_SHAPES
    ]


def _images(name):
    if name == "conv2d":
        return [
            Case("3x3 with bias", _apply, [(2, 3, 5, 5), (4, 3, 3, 3), (4,)]),
            Case("stride 2 padding 1", _with(stride=2, padding=1), [(2, 2, 6, 5), (3, 2, 3, 2)]),
            Case("1x1", _apply, [(1, 3, 4, 4), (2, 3, 1, 1)]),
        ]
    return [
        Case("2x2", _apply, [(2, 2, 4, 6)], ["distinct"]),
        Case(
            "3x3 stride 2 padding 1", _with(3, stride=2, padding=1), [(1, 2, 5, 5)], ["distinct"]
        ),
        Case("3x3 stride 1", _with(3, stride=1), [(1, 2, 5, 5)], ["distinct"]),
    ]


SPECIAL = {
    "matmul": _matmul,
    "reshape": lambda: _shapes([((3, 4), (4, 3)), ((3, 4), (-1,)), ((), (1, 1)), ((1,), ())]),
    "broadcast_to": lambda: _shapes([((3, 1), (2, 3, 4)), ((), (2, 3)), ((4,), (3, 4))]),
    "expand_dims": lambda: _shapes([((), 0), ((), -1), ((3, 4), -1), ((3, 4), (0, -1))]),
    "squeeze": lambda: _shapes([((3, 1, 4), -2), ((3, 1, 4), None), ((1,), None), ((1, 1), -1)]),
    "swapaxes": lambda: [
        Case(f"{s} {a1} {a2}", _with(a1, a2), [s])
        for s, a1, a2 in [
            ((2, 3, 4), 0, -1),
            ((2, 3, 4), -1, -2),
            ((2, 2, 2), -1, 0),
            ((3,), 0, -1),
        ]
    ],
    "getitem": _getitem,
    "concatenate": lambda: _joins("concatenate"),
    "stack": lambda: _joins("stack"),
    "where": _where,
    "clip": _clip,
    "activation": _activation,
    "conv2d": lambda: _images("conv2d"),
    "max_pool2d": lambda: _images("max_pool2d"),
    "avg_pool2d": lambda: _images("avg_pool2d"),
}
# Extra cases of inferred primitives (added to those).
EXTRA = {
    "transpose": lambda: [
        Case(f"{s} axes={axes}", _with(axes), [s])
        for s, axes in [
            ((2, 2, 2), (-1, 0, 1)),  # equal lengths: only the values tell a wrong inverse
            ((2, 2, 2), (1, -1, -3)),
            ((2, 3, 4), (1, -1, 0)),
            ((3, 4), (-1, -2)),
            ((), ()),
        ]
    ],
    "power": lambda: [
        Case("(3, 4) ** 3", _with(3), [(3, 4)]),  # any base, an integer exponent
        # A base of 0: 0 ** b is 0 for every b > 0, so its gradient in b is 0.
        Case("[0, 1.5, 0, 2] ** (4,)", lambda f, b: f(ZERO_BASE, b), [(4,)], ["positive"]),
        Case("0.0 ** (3, 4)", lambda f, b: f(0.0, b), [(3, 4)], ["positive"]),
    ],
    "maximum": lambda: [Case("(3, 4) with 0", _with(0.0), [(3, 4)], ["away_from_zero"])],
    "logsumexp": lambda: [Case("large", lambda f, a: f(a * 300, axis=-1), [(3, 4)])],
}

# Plain NumPy oracles of the primitives NumPy has no function for.
ORACLES = {
    "relu": lambda a: np.maximum(a, 0),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "softplus": lambda a: np.log1p(np.exp(a)),
    "logsumexp": lambda a, axis=None, keepdims=False: np.log(
        np.exp(a).sum(axis=axis, keepdims=keepdims)
    ),
    "softmax": lambda a, axis=-1: np.exp(a) / np.exp(a).sum(axis=axis, keepdims=True),
    "log_softmax": lambda a, axis=-1: a - np.log(np.exp(a).sum(axis=axis, keepdims=True)),
}


def public_primitives():
    return sorted(name for name in ad.__all__ if name not in NO_GRADIENT)


def cases_of(name):
    function = getattr(ad, name)
    if name in SPECIAL:
        return SPECIAL[name]()
    n_arrays = len(required_parameters(function))
    if n_arrays == 1:
        cases = unary_cases(name, function)
    elif n_arrays == 2:
        cases = binary_cases(name)
    else:
        raise AssertionError(
            f"sknet.autodiff.{name} takes {n_arrays} required arguments: give it cases in "
            "SPECIAL, or a reason in NO_GRADIENT"
        )
    return cases + EXTRA.get(name, lambda: [])()


OPERATORS = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "power": operator.pow,
    "matmul": operator.matmul,
    "negative": operator.neg,
    "absolute": abs,
    "getitem": operator.getitem,
}
METHODS = ["sum", "mean", "max", "min", "reshape", "transpose"]


def other_spellings(name):
    """The other ways to call the primitive ``name`` on variables: NumPy, an operator, a method."""
    spellings = {}
    function = getattr(np, name, None)
    dispatch = {**_protocol.UFUNCS, **_protocol.FUNCTIONS}
    if function is not None and dispatch.get(function) is getattr(ad, name):
        spellings[f"numpy.{name}"] = function
    if name in OPERATORS:
        spellings["the operator"] = OPERATORS[name]
    if name in METHODS:
        spellings[f"Variable.{name}"] = lambda x, *args, **kwargs: getattr(x, name)(
            *args, **kwargs
        )
    return spellings


# -- the tests ---------------------------------------------------------------------
def test_every_public_name_is_checked_or_excused():
    assert not set(NO_GRADIENT) - set(ad.__all__), "NO_GRADIENT names a name that is gone"
    for name in public_primitives():
        assert callable(getattr(ad, name))
        assert cases_of(name), name
    for name in set(SPECIAL) | set(EXTRA) | set(OPERATORS) | set(METHODS):
        assert name in ad.__all__, name


@pytest.mark.parametrize("name", sorted(set(NO_GRADIENT) - {"Variable", "gradients"}))
def test_the_excused_functions_record_nothing(name):
    x = ad.Variable(np.array([-1.0, 0.5]))
    args = (x,) if name in ("is_variable", "value", "sign") else (x, 0.0)
    assert not ad.is_variable(getattr(ad, name)(*args))


@pytest.mark.parametrize("name", public_primitives())
def test_vjp_matches_central_differences(name, device):
    backend = get_backend(device)
    function = getattr(ad, name)
    oracle = getattr(np, name, None) if name != "activation" else None
    failures = []
    for case in cases_of(name):
        arrays = case.arrays(name)
        try:
            fn = functools.partial(case.call, function)
            error = check_primitive(backend, fn, arrays)
            if not error < 1e-6:
                failures.append(f"{case.label}: relative error {error:.3g}")
            reference = case.oracle or ORACLES.get(name) or oracle
            if reference is not None:
                expected = case.call(reference, *arrays)
                got = backend.to_numpy(case.call(function, *map(backend.asarray, arrays)))
                assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
            for spelling, other in other_spellings(name).items():
                _check_same_record(backend, case, function, other, arrays, spelling)
            _check_float32(backend, case, function, arrays)
        except Exception as error:  # every failing case listed, not only the first
            where = traceback.extract_tb(error.__traceback__)[-1]
            failures.append(
                f"{case.label}: {type(error).__name__}: {error} "
                f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno}: {where.line})"
            )
    assert not failures, f"sknet.autodiff.{name}:\n  " + "\n  ".join(failures)


def _record(backend, case, f, arrays, dtype=np.float64):
    variables = [ad.Variable(backend.asarray(a, dtype)) for a in arrays]
    out = case.call(f, *variables)
    assert ad.is_variable(out), "a recorded input gave an unrecorded output"
    seed = backend.asarray(np.linspace(-1, 1, out.size).reshape(out.shape), out.dtype)
    return out, ad.gradients(out, seed, variables)


def _check_same_record(backend, case, function, other, arrays, spelling):
    """``other`` (NumPy's namesake, the operator, the method) records what ``function`` does."""
    direct, direct_grads = _record(backend, case, function, arrays)
    out, grads = _record(backend, case, other, arrays)
    for x, y in zip([direct.data, *direct_grads], [out.data, *grads]):
        assert_allclose(backend.to_numpy(y), backend.to_numpy(x), rtol=0, atol=0, err_msg=spelling)


def _check_float32(backend, case, function, arrays):
    """float32 operands give float32 values and gradients (constants do not promote)."""
    out, grads = _record(backend, case, function, arrays, np.float32)
    assert out.dtype == np.float32, f"float32 operands gave {out.dtype} values"
    for g in grads:
        assert g.dtype == np.float32, f"float32 operands gave a {g.dtype} gradient"


def test_getitem_oracle_is_numpy_indexing():
    # The indexing cases compare against NumPy's own indexing of the same keys.
    (case,) = [c for c in _getitem() if c.label == "(3, 4)[[0, -1, 0]]"]
    x = np.arange(12.0).reshape(3, 4)
    assert_allclose(case.call(operator.getitem, x), x[[0, -1, 0]])


SPECIAL_VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0])


def inferred_with_reference():
    """The unary and binary primitives of inferred cases that NumPy (or an oracle) computes too."""
    names = []
    for name in public_primitives():
        if name in SPECIAL or not (name in ORACLES or hasattr(np, name)):
            continue
        names.append((name, len(required_parameters(getattr(ad, name)))))
    return names


@pytest.mark.parametrize("name, n_arrays", inferred_with_reference())
def test_values_match_numpy_on_nan_infinities_zeros_and_ties(name, n_arrays, device):
    # NaN propagates as in NumPy (np.maximum, np.max...), infinities give NumPy's values.
    backend = get_backend(device)
    function, reference = getattr(ad, name), ORACLES.get(name) or getattr(np, name)
    if n_arrays == 2:
        calls = [((SPECIAL_VALUES[:, None], SPECIAL_VALUES), {})]  # every pair
    else:
        rows = [SPECIAL_VALUES[:, None] * np.ones(3), np.tile(SPECIAL_VALUES, (2, 1))]
        keywords = [{}, {"axis": -1}] if "axis" in inspect.signature(function).parameters else [{}]
        calls = [((x,), kw) for x in rows for kw in keywords]  # rows of one value: ties too
    for operands, kwargs in calls:
        with np.errstate(all="ignore"):
            expected = reference(*operands, **kwargs)
            variables = [ad.Variable(backend.asarray(x)) for x in operands]
            got = backend.to_numpy(function(*variables, **kwargs).data)
        err_msg = f"{name} of {[x.shape for x in operands]} {kwargs}"
        assert_allclose(got, expected, rtol=1e-12, atol=0, equal_nan=True, err_msg=err_msg)


# -- the backward pass refuses what would broadcast into a wrong gradient ------------
def test_gradients_refuses_a_seed_of_another_shape():
    x = ad.Variable(np.ones(3))
    with pytest.raises(
        ValueError, match=r"seed must have the output's shape \(3,\), got \(2, 3\)"
    ):
        ad.gradients(ad.exp(x), np.ones((2, 3)), [x])  # used to give x a (2, 3) gradient
    with pytest.raises(ValueError, match=r"got \(\)"):
        ad.gradients(ad.exp(x), np.array(1.0), [x])


def test_a_vjp_returning_another_shape_is_an_error():
    def sloppy(a):  # forgets to sum the gradient back over the broadcast axis
        return record(ad.value(a) + np.zeros((2, 3)), (a,), lambda g, needs: (g,))

    x = ad.Variable(np.ones(3))
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\) for an input of shape \(3,\)"):
        ad.gradients(sloppy(x), np.ones((2, 3)), [x])


def test_clip_takes_recorded_bounds():
    # np.clip on a recorded bound used to call itself until RecursionError.
    x, lo = ad.Variable(np.array([-2.0, 0.5, 2.0])), ad.Variable(np.array([-1.0, 0.0, 0.0]))
    y = np.clip(x, lo, 1.0)
    assert_allclose(y.data, [-1.0, 0.5, 1.0])
    gx, glo = ad.gradients(y, np.array([1.0, 2.0, 3.0]), [x, lo])
    assert_allclose(gx, [0.0, 2.0, 0.0])
    assert_allclose(glo, [1.0, 0.0, 0.0])

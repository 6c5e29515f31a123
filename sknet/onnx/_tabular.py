"""A tabular estimator's column plan as ONNX nodes: scaling, imputation, indicators, codes.

:func:`plan_of` says whether an estimator applies a column plan (a fitted
:class:`~sknet.tabular.TabularEncoder`, its ``encoder_``) before its network,
and :func:`encode_table` writes that plan: both exporters go through them,
:func:`~sknet.onnx.to_onnx` with the inputs :func:`table_inputs` declares,
skl2onnx's converter with the inputs its initial types declare
(:func:`given_table`).

The graph takes the table as skl2onnx takes a DataFrame: one input per
column, named after it, of shape ``(n, 1)``: float64 for numeric columns and
categorical columns of numbers (booleans as 0/1), strings for categorical
columns of strings. A column named ``''`` (no ONNX value has an empty name) is
the input ``'x<j>'``, ``j`` its position, as the columns of a table without
names are. After the columns, each categorical column of strings has a
boolean input ``'missingindicator_<input>'`` ``(n, 1)``, true where its value
is missing (None, NaN, ``pd.NA``): a string tensor holds no missing value,
and no string stands for one, the empty string being a value like any other
(the string a missing row holds is not read). A table without column names
whose columns are all numbers is one float64 input ``'X'`` ``(n,
n_features_in_)``. As :class:`~sknet.tabular.TabularEncoder` does, from its
public attributes, and in float64 as it does:

- a missing number (NaN) is put at its column's median (``medians_``), with
  a 0/1 indicator for the columns of ``indicator_features_``;
- ``'standard'`` and ``'robust'`` scalings subtract ``offsets_`` and divide
  by ``scales_``; the ``'quantile'`` map is NumPy's ``interp`` of the
  reference quantiles (``quantiles_``), forward and backward averaged, then
  the normal quantile function (Wichura's algorithm AS241, exact to float64
  rounding: ONNX has no inverse ``erf``);
- a category is coded ``1..K`` in sorted order, ``K + 1`` when unknown and 0
  when missing (NaN for numbers, the missing input for strings), looked up
  with ai.onnx.ml's LabelEncoder for strings; so is a numeric column of
  ``code_features_``, after the categorical columns.

The encoded matrix then goes to the network in the graph's dtype.
"""

from collections import namedtuple

import numpy as np

from sknet.onnx._builder import tensor_type
from sknet.tabular import TabularEncoder

_BOUND = 1e-7  # the normal quantiles stop at those of 1e-7 and 1 - 1e-7
_F64 = np.float64

# Wichura (1988), algorithm AS241 (PPND16): numerators and denominators, ascending powers.
_CENTRAL = (
    (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
     1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
     3.3430575583588128105e4, 2.5090809287301226727e3),
    (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
     2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
     5.2264952788528545610e3),
)  # fmt: skip
_INTERMEDIATE = (
    (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
     3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
     2.27238449892691845833e-2, 7.74545014278341407640e-4),
    (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
     1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
     1.05075007164441684324e-9),
)  # fmt: skip
_TAIL = (
    (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
     2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
     2.71155556874348757815e-5, 2.01033439929228813265e-7),
    (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
     7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
     2.04426310338993978564e-15),
)  # fmt: skip


def _c(builder, value, hint="c"):
    return builder.constant(np.asarray(value, _F64), hint, dtype=_F64)


def _polynomial(builder, r, coefficients):
    acc = _c(builder, coefficients[-1])
    for a in reversed(coefficients[:-1]):
        acc = builder.node("Add", [builder.node("Mul", [acc, r]), _c(builder, a)])
    return acc


def _ratio(builder, r, pair):
    return builder.node(
        "Div", [_polynomial(builder, r, pair[0]), _polynomial(builder, r, pair[1])]
    )


def ndtri(builder, p):
    """The standard normal quantile of probabilities ``p`` in (0, 1), float64 (AS241)."""
    q = builder.node("Sub", [p, _c(builder, 0.5)])
    r = builder.node("Sub", [_c(builder, 0.180625), builder.node("Mul", [q, q])])
    central = builder.node("Mul", [q, _ratio(builder, r, _CENTRAL)])
    below = builder.node("Less", [q, _c(builder, 0.0)])
    tail = builder.node("Where", [below, p, builder.node("Sub", [_c(builder, 1.0), p])])
    r = builder.node("Sqrt", [builder.node("Neg", [builder.node("Log", [tail])])])
    middle = _ratio(builder, builder.node("Sub", [r, _c(builder, 1.6)]), _INTERMEDIATE)
    far = _ratio(builder, builder.node("Sub", [r, _c(builder, 5.0)]), _TAIL)
    value = builder.node(
        "Where", [builder.node("LessOrEqual", [r, _c(builder, 5.0)]), middle, far]
    )
    value = builder.node("Where", [below, builder.node("Neg", [value]), value])
    inside = builder.node("LessOrEqual", [builder.node("Abs", [q]), _c(builder, 0.425)])
    return builder.node("Where", [inside, central, value], "ndtri")


def interp(builder, x, xp, fp):
    """NumPy's ``interp(x, xp, fp)`` of a column ``x`` (n, 1), ``xp`` increasing (ties too)."""
    n = len(xp)
    knots = _c(builder, xp, "knots")
    below = builder.cast(builder.node("LessOrEqual", [knots, x]), np.int64)  # (n_rows, n)
    j = builder.node("Sub", [builder.reduce("ReduceSum", below, [1]), builder.constant(1)])
    low = builder.node(
        "Min", [builder.node("Max", [j, builder.constant(0)]), builder.constant(n - 2)]
    )
    high = builder.node("Add", [low, builder.constant(1)])
    values = _c(builder, fp, "levels")
    x0, x1 = (builder.node("Gather", [knots, i]) for i in (low, high))
    f0, f1 = (builder.node("Gather", [values, i]) for i in (low, high))
    slope = builder.node("Div", [builder.node("Sub", [f1, f0]), builder.node("Sub", [x1, x0])])
    inner = builder.node("Add", [builder.node("Mul", [slope, builder.node("Sub", [x, x0])]), f0])
    inner = builder.node("Where", [builder.node("Equal", [x0, x]), f0, inner])
    last = builder.node("GreaterOrEqual", [j, builder.constant(n - 1)])
    inner = builder.node("Where", [last, _c(builder, fp[-1]), inner])
    first = builder.node("Less", [j, builder.constant(0)])
    return builder.node("Where", [first, _c(builder, fp[0]), inner], "interp")


def _quantile_rank(builder, x, quantiles):
    """The rank of ``x`` among the reference quantiles, ties in the middle; None: constant."""
    if quantiles.size < 2 or quantiles[0] == quantiles[-1]:
        return None
    levels = np.linspace(0, 1, quantiles.size)
    forward = interp(builder, x, quantiles, levels)
    backward = interp(builder, builder.node("Neg", [x]), -quantiles[::-1], -levels[::-1])
    return builder.node("Mul", [builder.node("Sub", [forward, backward]), _c(builder, 0.5)])


def _numeric_columns(builder, encoder, columns):
    """The scaled numeric columns (each (n, 1), float64) and the indicators."""
    quantiles, offsets, scales = encoder.quantiles_, encoder.offsets_, encoder.scales_
    scaled, ranks, zeros = [], [], []
    missing = [builder.node("IsNaN", [x]) for x in columns]
    for i, (x, nan) in enumerate(zip(columns, missing)):
        x = builder.node("Where", [nan, _c(builder, encoder.medians_[i]), x])
        if quantiles is not None:
            rank = _quantile_rank(builder, x, np.asarray(quantiles[i], _F64))
            if rank is None:
                zeros.append(i)
                rank = builder.node("Mul", [x, _c(builder, 0.0)])
            ranks.append(rank)
            continue
        if offsets is not None:
            x = builder.node("Sub", [x, _c(builder, offsets[i])])
            x = builder.node("Div", [x, _c(builder, scales[i])])
        scaled.append(x)
    if ranks:  # the normal quantile function once, on every column
        ranks = builder.node("Concat", ranks, axis=1)
        ranks = builder.node("Max", [ranks, _c(builder, _BOUND)])
        ranks = builder.node("Min", [ranks, _c(builder, 1 - _BOUND)])
        normal = ndtri(builder, ranks)
        if zeros:  # constant columns map to 0
            keep = np.ones(len(columns), dtype=bool)
            keep[zeros] = False
            normal = builder.node("Mul", [normal, _c(builder, keep.astype(_F64))])
        scaled = [normal]
    positions = np.flatnonzero(np.isin(encoder.numeric_features_, encoder.indicator_features_))
    return scaled, [builder.cast(missing[i], _F64) for i in positions]


def _number_codes(builder, x, categories):
    K = len(categories)
    codes = _c(builder, np.full(1, K + 1.0))
    if K:
        equal = builder.node("Equal", [x, _c(builder, categories, "categories")])  # (n, K)
        first = builder.node("ArgMax", [builder.cast(equal, np.int32)], axis=1, keepdims=1)
        code = builder.node("Add", [builder.cast(first, _F64), _c(builder, 1.0)])
        codes = builder.node("Where", [builder.any(equal, [1], keepdims=True), code, codes])
    return builder.node("Where", [builder.node("IsNaN", [x]), _c(builder, 0.0), codes])


def _string_codes(builder, x, categories, missing=None):
    """Codes of a column of strings ``x``; ``missing`` (booleans, or None): code 0 there."""
    K = len(categories)
    if K:  # every string is a value, the empty one too: a category, or unknown
        codes = builder.node(
            "LabelEncoder",
            [x],
            domain="ai.onnx.ml",
            keys_strings=[str(c) for c in categories],
            values_int64s=list(range(1, K + 1)),
            default_int64=K + 1,
        )
        codes = builder.cast(codes, _F64)
    else:  # no category: every value is unknown
        codes = builder.node("Expand", [_c(builder, [[1.0]]), builder.node("Shape", [x])])
    if missing is None:
        return codes
    return builder.node("Where", [missing, _c(builder, 0.0), codes])


def column_kind(categories, label="one column"):
    """``'number'`` or ``'string'``: how a categorical column enters the graph.

    A ValueError naming the column (``label``) and the types of its categories
    when they are neither all strings nor all numbers (bytes, decimals, a mix).
    """
    values = categories.tolist()
    if not values:  # no category learned (every value rare, or missing): by the dtype
        return "number" if categories.dtype.kind in "biuf" else "string"
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, (bool, int, float, np.bool_, np.number)) for v in values):
        as_floats = np.asarray(values, dtype=np.float64)
        if np.unique(as_floats).size < len(values):  # integers beyond 2**53
            merged = [v for v, f in zip(values, as_floats) if np.sum(as_floats == f) > 1]
            raise ValueError(
                f"ONNX export takes numeric categories as float64 inputs, where {label}'s "
                f"categories {merged[:4]!r} would read as one (integers beyond 2**53): "
                "make the column text (astype(str)) before fitting to export it"
            )
        return "number"
    types = sorted({type(v).__name__ for v in values})
    found = f"several types ({', '.join(types)})" if len(types) > 1 else f"type {types[0]}"
    raise ValueError(
        f"ONNX export takes a categorical column of strings or of numbers; {label} holds "
        f"categories of {found}: {values[:5]!r}"
    )


#: What a graph's input holds, as skl2onnx's converter describes one it is given:
#: its name, the tensor, its ``onnx.TensorProto`` element type, its second
#: dimension (None: unknown) and how to name its type in a message.
GivenInput = namedtuple("GivenInput", "name tensor element width description")

MISSING_PREFIX = "missingindicator_"


def plan_of(estimator):
    """The column plan ``estimator`` applies before its network (its ``encoder_``), or None.

    Every exporter asks this first, so that no estimator with a plan is
    exported without it.
    """
    encoder = getattr(estimator, "encoder_", None)
    if encoder is None:
        return None
    if not isinstance(encoder, TabularEncoder):
        raise TypeError(
            f"{type(estimator).__name__}'s encoder_ is a {type(encoder).__name__}: ONNX export "
            "writes the column plan of a TabularEncoder only"
        )
    return encoder


def _kinds(encoder):
    kinds, columns = ["number"] * encoder.n_features_in_, _columns(encoder)
    for j, categories in zip(encoder.categorical_features_, encoder.categories_):
        kinds[j] = column_kind(np.asarray(categories), f"the column {columns[j]!r}")
    return kinds


def _columns(encoder):
    names = getattr(encoder, "feature_names_in_", None)
    if names is None:
        return [f"x{j}" for j in range(encoder.n_features_in_)]
    return [str(name) for name in names]


def _owners(encoder, names, missing):
    """Each input's name and what it holds (for messages)."""
    columns = _columns(encoder)
    owners = [(name, f"the column {column!r}") for name, column in zip(names, columns)]
    return owners + [
        (name, f"the missing values of the column {columns[j]!r}") for j, name in missing.items()
    ]


def table_layout(encoder):
    """The graph's inputs of a table: names and kinds of the columns', then the missing ones.

    Returns ``names`` (the input of each column), ``kinds`` (``'number'`` or
    ``'string'`` for each) and ``missing`` (column index to the name of the
    boolean input of the missing values of a column of strings). A ValueError
    if two inputs would have one name.
    """
    n, kinds = encoder.n_features_in_, _kinds(encoder)
    names = [column or f"x{j}" for j, column in enumerate(_columns(encoder))]  # none empty
    missing = {j: MISSING_PREFIX + names[j] for j in range(n) if kinds[j] == "string"}
    seen = {}
    for name, owner in _owners(encoder, names, missing):
        if name in seen:
            raise ValueError(
                f"ONNX export names the graph's inputs after the table's columns, and "
                f"{seen[name]} and {owner} would both be the input {name!r}: rename a column "
                "to export"
            )
        seen[name] = owner
    return names, kinds, missing


def encode_table(builder, encoder, columns, missing):
    """The column plan of ``encoder`` on the table's columns: the encoded matrix.

    Parameters
    ----------
    builder : GraphBuilder
        The graph; the matrix comes in its dtype.
    encoder : TabularEncoder
        The fitted plan (its public attributes).
    columns : list of str
        Tensor ``(n, 1)`` of each of the table's columns: float64, or strings
        for a categorical column of strings.
    missing : dict
        Column index to a boolean tensor ``(n, 1)``, true where that column of
        strings is missing (a column without one has no missing value).
    """
    numbers = [columns[j] for j in encoder.numeric_features_]
    scaled, indicators = _numeric_columns(builder, encoder, numbers)
    codes = []
    for j, categories in zip(encoder.categorical_features_, encoder.categories_):
        categories = np.asarray(categories)
        if column_kind(categories) == "string":
            codes.append(_string_codes(builder, columns[j], categories, missing.get(j)))
        else:
            codes.append(_number_codes(builder, columns[j], categories.astype(_F64)))
    n_cat = len(encoder.categorical_features_)
    for i, j in enumerate(getattr(encoder, "code_features_", ())):  # numbers also coded
        categories = np.asarray(encoder.categories_[n_cat + i], dtype=_F64)
        codes.append(_number_codes(builder, columns[j], categories))
    parts = scaled + indicators + codes
    encoded = parts[0] if len(parts) == 1 else builder.node("Concat", parts, axis=1)
    return builder.cast(encoded, builder.dtype)


def _value_info(name, element, columns):
    import onnx

    return onnx.helper.make_tensor_value_info(name, element, ["N", columns])


def table_inputs(builder, encoder):
    """``to_onnx``'s inputs of a table (value infos) and the encoded matrix (graph's dtype)."""
    import onnx

    names, kinds, missing = table_layout(encoder)
    n = encoder.n_features_in_
    if getattr(encoder, "feature_names_in_", None) is None and "string" not in kinds:
        builder.reserve("X")
        columns = builder.split("X", [1] * n, axis=1) if n > 1 else ["X"]
        infos = [_value_info("X", tensor_type(_F64), n)]
        return infos, encode_table(builder, encoder, columns, {})
    for name, owner in _owners(encoder, names, missing):  # the inputs' own names
        try:
            builder.reserve(name)
        except ValueError:
            raise ValueError(
                f"ONNX export names the graph's inputs after the table's columns, and "
                f"{owner} has the name of one of the model's outputs "
                f"('label', 'probabilities', 'variable'), {name!r}: rename it to export"
            ) from None
    element = {"number": tensor_type(_F64), "string": onnx.TensorProto.STRING}
    infos = [_value_info(name, element[kind], 1) for name, kind in zip(names, kinds)]
    infos += [_value_info(name, onnx.TensorProto.BOOL, 1) for name in missing.values()]
    return infos, encode_table(builder, encoder, names, missing)


def given_table(builder, encoder, given, label):
    """The encoded matrix of a table from the inputs skl2onnx gives (a list of GivenInput).

    They are the inputs :func:`table_inputs` declares, by name (numbers of
    any type, cast to float64), or one tensor of numbers holding every
    column in order when all are numbers. ``label`` names the estimator in
    errors.
    """
    import onnx

    STRING, BOOL = onnx.TensorProto.STRING, onnx.TensorProto.BOOL
    names, kinds, missing = table_layout(encoder)
    n = encoder.n_features_in_
    if len(given) == 1 and "string" not in kinds and given[0].element != STRING:
        if given[0].width in (n, None):  # every column, in order
            X = builder.cast(given[0].tensor, _F64)
            columns = builder.split(X, [1] * n, axis=1) if n > 1 else [X]
            return encode_table(builder, encoder, columns, {})
    by_name = {g.name: g for g in given}
    if set(by_name) != set(names) | set(missing.values()):
        if missing:
            also = f", then the booleans {', '.join(map(repr, missing.values()))}"
            also += ", true where a column of strings is missing"
        else:
            also = ", or as one tensor of every column, in order"
        raise ValueError(
            f"{label} takes its table as one input per column, of shape (N, 1): "
            f"{', '.join(map(repr, names))}{also}, as sknet.onnx.to_onnx names them; "
            f"skl2onnx gave it {', '.join(repr(g.name) for g in given)}: declare those "
            "initial types"
        )
    columns, masks = [], {}
    for j, (name, kind) in enumerate(zip(names, kinds)):
        g = by_name[name]
        if g.width not in (1, None) or (g.element == STRING) != (kind == "string"):
            what = "strings" if kind == "string" else "numbers"
            raise ValueError(
                f"{label}'s column {name!r} is an input of shape (N, 1) holding {what}, got "
                f"{g.description}"
            )
        columns.append(g.tensor if kind == "string" else builder.cast(g.tensor, _F64))
        if j in missing:
            g = by_name[missing[j]]
            if g.width not in (1, None) or g.element != BOOL:
                raise ValueError(
                    f"{label}'s input {g.name!r} is a boolean (N, 1) where the column {name!r} "
                    f"is missing, got {g.description}"
                )
            masks[j] = g.tensor
    return encode_table(builder, encoder, columns, masks)

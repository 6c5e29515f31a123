"""A tabular estimator's column plan as ONNX nodes: scaling, imputation, indicators, codes.

The graph takes the table as skl2onnx takes a DataFrame: one input per
column, named after it, of shape ``(n, 1)``: float64 for numeric columns and
categorical columns of numbers (booleans as 0/1), strings for categorical
columns of strings. A table without column names whose columns are all
numbers is one float64 input ``'X'`` ``(n, n_features_in_)``. As
:class:`~sknet.tabular.TabularEncoder` does, and in float64 as it does:

- a missing number (NaN) is put at its column's median, with a 0/1
  indicator where the training rows had missing values;
- ``'standard'`` and ``'robust'`` scalings subtract and divide; the
  ``'quantile'`` map is NumPy's ``interp`` of the reference quantiles,
  forward and backward averaged, then the normal quantile function (Wichura's
  algorithm AS241, exact to float64 rounding: ONNX has no inverse ``erf``);
- a category is coded ``1..K`` in sorted order, ``K + 1`` when unknown and 0
  when missing: NaN for numbers, the empty string for strings (unless it is a
  category), looked up with ai.onnx.ml's LabelEncoder for strings.

The encoded matrix then goes to the network in the graph's dtype.
"""

import numpy as np

from sknet.onnx._builder import tensor_type

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
    scaler = encoder._scaler
    scaled, ranks, zeros = [], [], []
    missing = [builder.node("IsNaN", [x]) for x in columns]
    for i, (x, nan) in enumerate(zip(columns, missing)):
        x = builder.node("Where", [nan, _c(builder, scaler.medians_[i]), x])
        if scaler.scaling == "quantile":
            rank = _quantile_rank(builder, x, np.asarray(scaler.quantiles_[i], _F64))
            if rank is None:
                zeros.append(i)
                rank = builder.node("Mul", [x, _c(builder, 0.0)])
            ranks.append(rank)
            continue
        if scaler.scaling is not None:
            x = builder.node("Sub", [x, _c(builder, scaler.offsets_[i])])
            x = builder.node("Div", [x, _c(builder, scaler.scales_[i])])
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
    indicators = [
        builder.cast(missing[i], _F64) for i in np.asarray(encoder._indicator_positions, int)
    ]
    return scaled, indicators


def _number_codes(builder, x, categories):
    K = len(categories)
    codes = _c(builder, np.full(1, K + 1.0))
    if K:
        equal = builder.node("Equal", [x, _c(builder, categories, "categories")])  # (n, K)
        first = builder.node("ArgMax", [builder.cast(equal, np.int32)], axis=1, keepdims=1)
        code = builder.node("Add", [builder.cast(first, _F64), _c(builder, 1.0)])
        codes = builder.node("Where", [builder.any(equal, [1], keepdims=True), code, codes])
    return builder.node("Where", [builder.node("IsNaN", [x]), _c(builder, 0.0), codes])


def _string_codes(builder, x, categories):
    keys = [str(c) for c in categories]
    values = list(range(1, len(keys) + 1))
    if "" not in keys:  # the empty string stands for a missing value
        keys, values = keys + [""], values + [0]
    codes = builder.node(
        "LabelEncoder",
        [x],
        domain="ai.onnx.ml",
        keys_strings=keys,
        values_int64s=values,
        default_int64=len(categories) + 1,
    )
    return builder.cast(codes, _F64)


def column_kind(categories):
    """``'number'`` or ``'string'``: how a categorical column enters the graph."""
    values = categories.tolist()
    if all(isinstance(v, str) for v in values):
        return "string"
    if all(isinstance(v, (bool, int, float, np.bool_, np.number)) for v in values):
        return "number"
    raise ValueError(
        "ONNX export takes a categorical column of strings or of numbers; one column holds "
        f"categories of several types: {values[:5]!r}"
    )


def _value_info(name, element, columns):
    import onnx

    return onnx.helper.make_tensor_value_info(name, element, ["N", columns])


def table_inputs(builder, encoder):
    """The graph's inputs (value infos) and the encoded matrix, in the graph's dtype."""
    import onnx

    n = encoder.n_features_in_
    kinds = ["number"] * n
    for j, categories in zip(encoder.categorical_features_, encoder.categories_):
        kinds[j] = column_kind(np.asarray(categories))
    names = getattr(encoder, "feature_names_in_", None)
    if names is None and all(kind == "number" for kind in kinds):
        builder.reserve("X")
        infos = [_value_info("X", tensor_type(_F64), n)]
        columns = builder.split("X", [1] * n, axis=1) if n > 1 else ["X"]
    else:
        names = [str(v) for v in names] if names is not None else [f"x{j}" for j in range(n)]
        for name in names:  # the inputs' own names
            try:
                builder.reserve(name)
            except ValueError:
                raise ValueError(
                    f"ONNX export names the graph's inputs after the table's columns, and "
                    f"the column {name!r} has the name of one of the model's outputs "
                    "('label', 'probabilities', 'variable'): rename it to export"
                ) from None
        element = {"number": tensor_type(_F64), "string": onnx.TensorProto.STRING}
        infos = [_value_info(name, element[kind], 1) for name, kind in zip(names, kinds)]
        columns = names
    numbers = [columns[j] for j in encoder.numeric_features_]
    scaled, indicators = _numeric_columns(builder, encoder, numbers)
    codes = []
    for j, categories in zip(encoder.categorical_features_, encoder.categories_):
        categories = np.asarray(categories)
        if kinds[j] == "string":
            codes.append(_string_codes(builder, columns[j], categories))
        else:
            codes.append(_number_codes(builder, columns[j], categories.astype(_F64)))
    parts = scaled + indicators + codes
    encoded = parts[0] if len(parts) == 1 else builder.node("Concat", parts, axis=1)
    return infos, builder.cast(encoded, builder.dtype)

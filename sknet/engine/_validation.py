"""Validation sets and scoring: what the estimator checks and scores between epochs.

``fit(X_val=, y_val=, sample_weight_val=)`` (scikit-learn's names, from
``HistGradientBoostingClassifier``) is checked like the training data;
without it, ``early_stopping=True`` holds out a stratified
``validation_fraction``. :func:`make_evaluator` turns a validation set into
the trainer's ``evaluate()``: the validation loss and the ``scoring`` the
estimator asks for (its own ``score``, ``'loss'``, or any scikit-learn
scorer).
"""

import math
import warnings
from numbers import Real

import numpy as np
from sklearn.metrics import check_scoring
from sklearn.model_selection import train_test_split
from sklearn.utils import check_array

from sknet.backend import get_array_module, is_device_array
from sknet.engine._placement import backend_data
from sknet.engine._trainer import loss_and_outputs


def check_finite(a, dtype, name):
    """Refuse NaN, infinity and values that become infinite in ``dtype`` (the model's).

    ``a`` is checked where it will be used: the model computes in ``dtype``,
    so a float64 value beyond the largest float32 is refused for a float32
    model, with a message naming the array (``name``). ``a`` (a NumPy or CuPy
    array or a sparse matrix) is not copied: its smallest and largest values
    are read in its own dtype, and only when they show a problem are its rows
    cast, a chunk at a time, to say where. Integer arrays pass.
    """
    values = a.data if hasattr(a, "nnz") else a  # a sparse matrix: its stored values
    if values.dtype.kind != "f" or values.size == 0:
        return
    low, high = float(values.min()), float(values.max())
    largest = float(np.finfo(dtype).max)
    if math.isfinite(low) and math.isfinite(high) and -largest <= low and high <= largest:
        return
    where, value = _first_non_finite(values, dtype)
    if where is None:  # only values that round to the largest number of dtype
        return
    at = f"{name}[{', '.join(str(i) for i in where)}]" if not hasattr(a, "nnz") else name
    if math.isnan(value):
        raise ValueError(f"Input {name} contains NaN ({at}).")
    message = (
        f"Input {name} contains infinity or a value too large for dtype({np.dtype(dtype).name!r})"
    )
    if math.isinf(value):
        raise ValueError(f"{message} ({at} is {value}).")
    raise ValueError(
        f"{message}: {at} = {value:.6g} is beyond the largest {np.dtype(dtype).name} "
        f"({largest:.6g}), the dtype the model computes in; scale the data or use "
        "dtype='float64'."
    )


def _first_non_finite(values, dtype):
    """``(index, value)`` of the first entry of ``values`` not finite in ``dtype``."""
    xp = get_array_module(values)
    step = max(1, (1 << 20) // max(1, values[:1].size))  # about a million values a chunk
    for start in range(0, values.shape[0], step):
        chunk = values[start : start + step]
        with np.errstate(over="ignore"):  # the overflow is what is looked for
            bad = xp.argwhere(~xp.isfinite(chunk.astype(dtype)))
        if bad.shape[0]:
            index = tuple(int(i) for i in bad[0])
            return (start + index[0],) + index[1:], float(chunk[index])
    return None, None


def check_sample_weight(sample_weight, n_samples, dtype, name="sample_weight"):
    """Validate ``sample_weight`` into a 1-D float array of ``n_samples`` (host).

    Checked in the model's ``dtype``: finite there, non-negative, and with a
    weight that stays positive there (:func:`check_positive_weights`).
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real):
        sample_weight = np.full(n_samples, sample_weight, dtype=dtype)
    else:
        sample_weight = check_array(
            sample_weight,
            accept_sparse=False,
            ensure_2d=False,
            dtype=[dtype, np.float64, np.float32],
            order="C",
            ensure_all_finite=False,
            input_name=name,
        )
        if sample_weight.ndim != 1:
            raise ValueError(
                f"Sample weights must be 1D array or scalar, got an array of "
                f"shape {sample_weight.shape}"
            )
        if sample_weight.shape != (n_samples,):
            raise ValueError(f"{name}.shape == {sample_weight.shape}, expected {(n_samples,)}!")
    check_finite(sample_weight, dtype, name)
    if np.any(sample_weight < 0):
        raise ValueError(f"Negative values in data passed to {name}")
    check_positive_weights(sample_weight, dtype, name)
    return sample_weight


def check_positive_weights(weights, dtype, name):
    """Refuse weights none of which is positive once cast to ``dtype``: nothing to learn.

    A weight below half the smallest positive number of ``dtype`` rounds to 0 there.
    """
    if np.any(weights > float(np.finfo(dtype).smallest_subnormal) / 2):
        return
    if np.any(weights > 0):
        raise ValueError(
            f"{name} has no weight that stays positive in the model's dtype "
            f"{np.dtype(dtype).name}: the largest, {weights.max():.6g}, rounds to 0 there; "
            "scale the weights up"
        )
    raise ValueError(f"{name} must have a positive sum, got all zeros")


def check_device_X(est, X):
    """scikit-learn's prediction checks for a CuPy ``X``, kept on the device."""
    name = type(est).__name__
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if X.shape[0] == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a "
            f"minimum of 1 is required by {name}."
        )
    if X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {name} is expecting "
            f"{est.n_features_in_} features as input."
        )
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
    check_finite(X, est._np_dtype, "X")
    return X


def validation_set(est, X_val, y_val, sample_weight_val, validation_data):
    """Check ``X_val``/``y_val`` (or the deprecated tuple) like the training data."""
    if validation_data is not None:
        warnings.warn(
            "validation_data=(X_val, y_val) is deprecated: pass X_val=, y_val= "
            "(and sample_weight_val=) to fit instead. In a Pipeline, "
            "Pipeline(..., transform_input=['X_val']) then sends X_val through "
            "the preceding steps, which validation_data never was.",
            FutureWarning,
        )
        if X_val is not None or y_val is not None:
            raise ValueError("Pass either validation_data or X_val/y_val, not both")
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError(
                "validation_data must be a tuple (X_val, y_val) or (X_val, y_val, "
                f"sample_weight_val), got {type(validation_data).__name__}"
            )
        X_val, y_val = validation_data[:2]
        if len(validation_data) == 3:
            sample_weight_val = validation_data[2]
    if X_val is None and y_val is None:
        if sample_weight_val is not None:
            raise ValueError("sample_weight_val was given without X_val and y_val")
        return None
    if X_val is None or y_val is None:
        raise ValueError(
            "X_val and y_val must be given together, got only "
            + ("y_val" if X_val is None else "X_val")
        )
    X_val, y_val = (a.get() if is_device_array(a) else a for a in (X_val, y_val))
    try:
        X_val, Y_val = est._model_data(
            X_val, y_val, incremental=True, reset=False, names=("X_val", "y_val")
        )
    except ValueError as exc:
        if "X_val" in str(exc) or "y_val" in str(exc):
            raise
        # scikit-learn's checks speak of X and y: say which ones
        raise ValueError(f"The validation set (X_val, y_val): {exc}") from exc
    sample_weight_val = check_sample_weight(
        sample_weight_val, X_val.shape[0], est._np_dtype, "sample_weight_val"
    )
    return X_val, Y_val, sample_weight_val


def validation_split(est, Y, rng):
    """Indices of a (stratified, for single-label classification) split."""
    train_idx, val_idx = train_test_split(
        np.arange(Y.shape[0]),
        random_state=rng,
        test_size=est.validation_fraction,
        stratify=est._stratify_labels(Y),
    )
    if val_idx.shape[0] < 2:
        raise ValueError(
            "The validation set is too small. Increase 'validation_fraction' "
            "or the size of your dataset."
        )
    return train_idx, val_idx


def make_evaluator(est, trainer, validation, on_device=True, chunk_rows=None):
    """``evaluate() -> (valid_loss, valid_score)`` for the trainer, or None.

    The validation set moves to the device once, or, with
    ``on_device=False`` (too large for it), chunk by chunk at every epoch;
    ``chunk_rows`` (default: the network's prediction chunks) sizes the chunks.
    """
    if validation is None:
        return None
    X_val, Y_val, sw_val = validation
    if on_device:
        data = backend_data(est, trainer.backend, X_val, Y_val, sw_val)
    else:
        data = (X_val, Y_val, sw_val)
    score = make_scorer(est, X_val, Y_val, sw_val)

    def evaluate():
        valid_loss, P = loss_and_outputs(trainer, *data, chunk_rows=chunk_rows)
        return valid_loss, score(valid_loss, P)

    return evaluate


def make_scorer(est, X_val, Y_val, sw_val):
    """``score(valid_loss, P) -> float`` as ``scoring`` asks."""
    if est.scoring is None:

        def score(valid_loss, P):
            if not np.isfinite(P).all():
                return np.nan
            return float(est._validation_score(Y_val, P, sw_val))

        return score
    if est.scoring == "loss":
        return lambda valid_loss, P: -valid_loss
    scorer = check_scoring(est, scoring=est.scoring)
    y_val = est._decode_targets(Y_val)
    kwargs = {} if sw_val is None else {"sample_weight": sw_val}

    def score(valid_loss, P):
        if not np.isfinite(P).all():
            return np.nan
        with warnings.catch_warnings():
            # X_val is validated: a NumPy array even when fit had names.
            warnings.filterwarnings("ignore", message="X does not have valid feature")
            return _one_number(scorer(est, X_val, y_val, **kwargs), est.scoring)

    return score


def _one_number(value, scoring):
    """A scorer's result as a float, or a TypeError naming the scorer and what it gave."""
    if isinstance(value, (bool, np.bool_)) or not (
        isinstance(value, Real) or (np.ndim(value) == 0 and np.asarray(value).dtype.kind in "iuf")
    ):
        name = getattr(scoring, "__qualname__", None) or repr(scoring)
        raise TypeError(
            f"scoring={name} must return one number (a validation score), got "
            f"{type(value).__name__} {value!r:.60}"
        )
    return float(value)


def warn_non_finite_outputs(network, X, P, what, stop=None, output=None):
    """Warn when outputs ``P`` of validated ``X`` are not finite, naming the layer that made them.

    Cheap when all is well: the smallest and largest output are read once.
    Otherwise the first row with a non-finite output is run again, one layer
    more at a time, to find the first layer (of ``network.layers[:stop]``)
    whose outputs are not finite; ``output`` (a loss's output activation) is
    named when every layer's were.
    """
    if P.size == 0 or (math.isfinite(float(P.min())) and math.isfinite(float(P.max()))):
        return
    xp = get_array_module(P)
    bad = xp.argwhere(~xp.isfinite(P.reshape(P.shape[0], -1)).all(axis=1))
    row, n_bad = int(bad[0, 0]), int(bad.shape[0])
    culprit = _first_non_finite_layer(network, X[row : row + 1], stop)
    if culprit is not None:
        where = f"{type(network.layers[culprit]).__name__} (layers_[{culprit}])"
    else:
        owner = getattr(output, "__self__", None)
        name = getattr(owner, "out_activation", "the output activation")
        where = f"the output activation {name!r} of {type(owner).__name__}"
    dtype = np.dtype(network.dtype)
    advice = "scale X" + (", or use dtype='float64'" if dtype.itemsize < 8 else "")
    warnings.warn(
        f"{what} of {n_bad} of {P.shape[0]} rows are not finite (NaN or infinity): "
        f"{where} made the first non-finite values, for row {row} of X, whose values are "
        f"finite. The model computes in {dtype.name}: values that grow beyond its range "
        f"become infinite; {advice}.",
        RuntimeWarning,
        stacklevel=3,
    )


def _first_non_finite_layer(network, row, stop):
    """Index of the first layer whose output for ``row`` is not finite, or None."""
    backend = network.backend
    n_layers = len(network.layers) if stop is None else stop
    with backend.device_context(), np.errstate(all="ignore"):
        Xb = backend.asarray(row, network.input_dtype)
        for k in range(1, n_layers + 1):
            Z = network.forward(Xb, training=False, stop=k)
            if not bool(backend.xp.isfinite(Z).all()):
                return k - 1
    return None

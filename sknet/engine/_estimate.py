"""The memory estimate of an estimator's fit, without building its network.

:func:`estimate_memory` (public as :func:`sknet.utils.estimate_memory`) makes
a clone of the estimator, builds its network *dry*
(:mod:`~sknet.engine._dry`: the arrays have their shapes and take no memory),
lays it out and makes its optimizer as a fit would, and hands it, with a
description of the data (:class:`~sknet.engine._memory.DataShape`), to
:func:`~sknet.engine._memory.fit_sizes`, the computation the fit's own
planner makes. So a network too large to allocate gets its estimate.

A CUDA device is counted by its rules (:func:`~sknet.backend.memory_rules`:
the data copied there in the fit's dtype, every array in the allocator's
512-byte blocks), never by its backend: a GPU is sized on a machine without
CuPy, and the estimate is the one the fit there computes.
"""

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.utils.validation import _num_samples, check_consistent_length

from sknet.backend import get_backend, memory_rules
from sknet.engine._averaging import configure_averaging
from sknet.engine._dry import DRY_BACKEND, DryRandomState
from sknet.engine._memory import DataShape, fit_sizes, held_bytes
from sknet.engine._optimizers import make_optimizer
from sknet.engine._probe import PROBE_ROWS, probe_rows
from sknet.engine._trainer import Trainer, resolve_batch_size
from sknet.engine._transaction import optimizer_nbytes

#: What estimate_memory calls on an estimator: sknet's estimators have them all.
_ESTIMATOR_METHODS = (
    "get_params",
    "_validate_params",
    "_check_params",
    "_model_data",
    "_initialize",
)


def _check_estimator(estimator):
    """A TypeError unless ``estimator`` is an sknet estimator (an instance)."""
    if isinstance(estimator, type):
        got = f"the class {estimator.__module__}.{estimator.__qualname__}, not an instance"
    elif not all(callable(getattr(estimator, name, None)) for name in _ESTIMATOR_METHODS):
        got = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    else:
        return
    raise TypeError(
        "estimate_memory takes an sknet estimator such as sknet.MLPClassifier, "
        f"sknet.ConvNetRegressor or sknet.NeuralNetClassifier, got {got}"
    )


def _probe_sample(X, y, n_rows, classifier):
    """Rows of ``X``/``y`` to validate: the first ones and, for a classifier, one per class.

    The classes come from all of ``y``, so that the output layer has its width
    however the rows are sorted.
    """
    take = np.arange(min(n_rows, PROBE_ROWS[1]))
    if classifier:
        labels = np.asarray(y)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim == 1:
            _, first = np.unique(labels, return_index=True)
            take = np.concatenate([take, np.setdiff1d(first, take)])
    if sp.issparse(X) and X.format not in ("csr", "csc"):
        X = X.tocsr()  # as validation converts it
    return _rows(X, take), _rows(y, take)


def _rows(a, take):
    if hasattr(a, "iloc"):
        return a.iloc[take]
    if isinstance(a, (list, tuple)):
        return [a[i] for i in take]
    return a[take]


def _default_targets(estimator, n):
    """Targets standing in for ``y``: the fitted outputs, else one output (two classes).

    Every class (or output) is among the first ``n`` rows when ``n`` is
    :func:`_default_rows`: :func:`estimate_memory` makes them for the probe's
    rows only, and describes the rest by their shape.
    """
    n_outputs = getattr(estimator, "n_outputs_", None)
    if n_outputs is not None and "network_" in estimator.__dict__:
        codes = np.arange(n) % max(n_outputs, 2)
        Y = (codes[:, None] == np.arange(n_outputs)).astype(np.float64)
        if n_outputs == 1:
            Y[:, 0] = codes % 2
        return estimator._decode_targets(Y)
    return np.arange(n) % 2 if is_classifier(estimator) else np.zeros(n)


def _default_rows(estimator, n_rows):
    """How many rows of :func:`_default_targets` the probe needs: its first rows, and one
    of each class the targets cycle through (at most ``n_rows``)."""
    classes = max(getattr(estimator, "n_outputs_", None) or 0, 2)
    return min(n_rows, max(PROBE_ROWS[1], classes))


def _check_lengths(X, y, sample_weight, X_val, y_val):
    """scikit-learn's errors for rows that do not match, before any work."""
    check_consistent_length(X, y)
    if sample_weight is not None and not isinstance(sample_weight, Real):
        if np.ndim(sample_weight) != 1:
            raise ValueError(
                "sample_weight must be a 1D array or a scalar, got an array of shape "
                f"{np.shape(sample_weight)}"
            )
        check_consistent_length(X, sample_weight)
    if (X_val is None) != (y_val is None):
        raise ValueError(
            "X_val and y_val must be given together, got only "
            + ("y_val" if X_val is None else "X_val")
        )
    if X_val is not None:
        check_consistent_length(X_val, y_val)


def _weights(estimator, sample_weight, n_rows, X_dtype):
    """A stand-in for the fit's sample weights (None when it has none)."""
    class_weight = getattr(estimator, "class_weight", None)
    if sample_weight is None and class_weight is None:
        return None
    dtype = object  # made by the fit (class weights, a conversion): a copy
    if class_weight is None and isinstance(sample_weight, Real):
        dtype = X_dtype  # np.full(n_samples, sample_weight, X.dtype)
    elif class_weight is None and isinstance(sample_weight, np.ndarray):
        if sample_weight.dtype in (np.float32, np.float64):
            dtype = sample_weight.dtype  # used as it is
    return DataShape((n_rows,), dtype)


def estimate_memory(estimator, X, y=None, *, sample_weight=None, X_val=None, y_val=None):
    """Bytes a fit of ``estimator`` on ``X`` would need on its device, by part.

    Parameters
    ----------
    estimator : sknet estimator
        Fitted or not; it is not modified (a clone's network is built without
        its arrays). A fitted one's refit keeps its model until it completes
        (to put it back if the fit fails): counted in ``'parameters'`` and
        ``'optimizer_state'``. Another library's estimator is a TypeError.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The training data.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
        The targets: they decide the width of the output layer (the number of
        classes, found in all of ``y``). Without them, a fitted estimator's
        outputs are assumed, else one output (two classes).
    sample_weight : array-like of shape (n_samples,) or float, default=None
        Sample weights, if the fit will get them.
    X_val, y_val : array-like, default=None
        A validation set, if the fit will get one.

    Returns
    -------
    estimate : MemoryEstimate
        A mapping of bytes by part (``'data'``, ``'parameters'``,
        ``'gradients'``, ``'optimizer_state'``, ``'activations'`` of the largest
        batch, ``'workspace'``) with their ``total`` and the ``margin`` a fit
        keeps free beyond it on a GPU.

    Raises
    ------
    TypeError
        If ``estimator`` is not an sknet estimator.
    ValueError
        If ``X``, ``y``, ``sample_weight`` (or ``X_val`` and ``y_val``) have
        different numbers of rows, or the data are not valid for the
        estimator (scikit-learn's messages).

    Notes
    -----
    The network is never allocated: it is built *dry*, every array with its
    shape and dtype but no memory, and parameters, gradients and optimizer
    state are counted on it, laid out and made as a fit makes them.
    Activations and workspace are measured on the host, on two small batches
    run by a copy of the network whose parameters are zero buffers as large
    as its largest layer's, and carried to the batch size (for a GPU fit, on
    the NumPy copy of the code CuPy runs). A network that even so would take
    more than 256 MiB is not run: its activations and workspace are bounded
    from the layers' shapes (``estimate.measured`` is False). So a network
    too large to allocate gets its estimate.

    The total bounds what the fit allocates: it counts the copies of the
    network that batches split over CPU threads run (a gradient array each),
    SciPy's L-BFGS state, and on the CPU the fit's own objects (128 KiB, and
    1 KiB an epoch of ``history_``). On the CPU, data the fit uses in place
    (arrays already of its dtype) count nothing; data that validation
    converts (lists, data frames, integers) count as the copy it makes.

    The estimator's ``device`` says which device's rules count
    (:func:`~sknet.backend.memory_rules`): ``'cuda'`` or ``'cuda:N'`` needs
    neither CuPy nor a GPU, so a GPU is sized from a laptop. There the data
    are always copied, in the fit's dtype (float32 data too), every array
    takes whole blocks of CuPy's memory pool (512 bytes), and SciPy's L-BFGS
    state and the fit's own objects stay on the host.

    ``fit`` and ``partial_fit`` make the same computation to decide whether
    the data stay on the device or stream: with ``max_device_memory`` at least
    ``total`` they stay (within ``estimate.tolerance``: 1% of activations and
    workspace, and 4 KiB). On a GPU, the free memory must also hold ``total +
    margin`` (``margin``: a quarter of activations and workspace, what the
    measurement on the host cannot see).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.utils import estimate_memory
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = MLPClassifier(hidden_layer_sizes=(64,), device="cpu")
    >>> estimate = estimate_memory(clf, X, y)
    >>> list(estimate)
    ['data', 'parameters', 'gradients', 'optimizer_state', 'activations', 'workspace']
    >>> estimate["gradients"] == (64 * 64 + 64 + 64 * 10 + 10) * 4  # float32
    True
    >>> estimate.total == sum(estimate.values())
    True
    >>> clf.set_params(max_device_memory=estimate.total).fit(X, y).data_placement_
    'device'
    >>> on_gpu = estimate_memory(clf.set_params(device="cuda"), X, y)  # CuPy or not
    >>> on_gpu.device, on_gpu["gradients"] % 512  # in CuPy's 512-byte blocks
    ('cuda:0', 0)
    """
    _check_estimator(estimator)
    n_rows = _num_samples(X)
    _check_lengths(X, y, sample_weight, X_val, y_val)
    if y is None:  # assumed for the probe's rows; the others only counted, as y's copy
        y = _default_targets(estimator, _default_rows(estimator, n_rows))
    probe, X_rows, Y_rows = _dry_probe(estimator, X, y, n_rows, X_val is not None)
    data = (DataShape.of(X, n_rows, X_rows), DataShape.of(y, n_rows, Y_rows))
    return _estimate_fit(estimator, probe, data, (X_rows, Y_rows), sample_weight, X_val, y_val)


def _estimate_fit(estimator, probe, data, rows, sample_weight, X_val, y_val):
    """The estimate of a fit of ``probe`` (a dry clone of ``estimator``) on ``data``."""
    X_rows, Y_rows = rows
    n_rows = data[0].shape[0]
    backend = _device_of(probe.device)
    trainer = Trainer(probe.network_, probe._loss, alpha=probe.alpha)  # dry: no arrays
    lbfgs = probe.solver == "lbfgs"
    optimizer = None if lbfgs else make_optimizer(probe, trainer)
    keeps_best = probe.early_stopping and not lbfgs  # L-BFGS has no early stopping
    data = (*data, _weights(probe, sample_weight, n_rows, X_rows.dtype))
    validation, split, n_train = _validation_of(probe, data, X_val, y_val, keeps_best)
    batch_size = (
        n_train
        if lbfgs
        else resolve_batch_size(probe.batch_size, n_train, auto=probe._auto_batch_size)
    )
    if optimizer is not None:  # the weights' averages, as the fit keeps them
        span = getattr(probe, "weight_averaging", None)
        configure_averaging(optimizer, span, -(-n_train // batch_size))
    sizes = fit_sizes(
        backend,
        trainer,
        optimizer,
        data,
        validation,
        n_train=n_train,
        keeps_best=keeps_best,
        split=split,
        probe=(X_rows[: probe_rows(n_train)], Y_rows[: probe_rows(n_train)]),
        epochs=probe.max_iter,
        previous=_previous_model(estimator),
    )
    return sizes.estimate(batch_size)


def _device_of(device):
    """What the estimate counts a fit on ``device`` for: the CPU's backend, or a CUDA
    device's :class:`~sknet.backend.MemoryRules` (no CuPy needed, no GPU asked)."""
    rules = memory_rules(device)
    return rules if rules.separate_memory else get_backend("cpu")


def _validation_of(probe, data, X_val, y_val, keeps_best):
    """The fit's validation set (given, or split off), whether it is split, the training rows."""
    n_rows = data[0].shape[0]
    if X_val is not None:
        validation = probe._model_data(X_val, y_val, incremental=True, reset=False)
        return validation + (None,), False, n_rows
    if not keeps_best:
        return None, False, n_rows
    n_val = int(np.ceil(probe.validation_fraction * n_rows))
    return tuple(None if a is None else a.rows(n_val) for a in data), True, n_rows - n_val


def _dry_probe(estimator, X, y, n_rows, validation_given=False):
    """A clone of ``estimator`` built dry (:mod:`~sknet.engine._dry`) from rows that show
    every class: the network's arrays have their shapes and take no memory. Its plan is
    learned from those rows, its size from the fit's training rows."""
    probe = clone(estimator)
    probe._validate_params()
    probe._check_params()
    X_rows, y_rows = _probe_sample(X, y, n_rows, is_classifier(probe))
    X_rows, Y_rows = probe._model_data(X_rows, y_rows, incremental=False, reset=True)
    holds_out = probe.early_stopping and probe.solver != "lbfgs" and not validation_given
    probe._size_network(n_rows - int(np.ceil(probe.validation_fraction * n_rows)) * holds_out)
    probe._initialize(X_rows.shape[1], Y_rows.shape[1], DRY_BACKEND, DryRandomState(0))
    return probe, X_rows, Y_rows


def _previous_model(estimator):
    """Bytes a fit of the fitted ``estimator`` keeps of its model until it completes:
    ``(weights, optimizer state)``, the previous model (a refit) or copies of it (a
    warm start) for the fit transaction to put back if the fit fails."""
    network = estimator.__dict__.get("network_")
    if network is None:
        return 0, 0
    return held_bytes(network.weights()), optimizer_nbytes(estimator.__dict__.get("_optimizer"))

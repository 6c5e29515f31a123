"""The steps of a fit after validation: build or continue the network, run a solver.

:func:`train` is what :meth:`BaseNeuralNetwork._fit
<sknet.estimators._base.BaseNeuralNetwork._fit>` runs inside its fit
transaction: it builds the network on a first fit (or continues it, with the
layers' new ``trainable``/``lr_scale`` and the new loss), makes the trainer
with scikit-learn's convergence rules as built-in callbacks, and runs
mini-batches (:func:`train_stochastic`: the data placed on the device or
streamed) or L-BFGS (:func:`train_lbfgs`). :func:`training_errors` turns what
can go wrong while it trains into the user's errors.
"""

import contextlib

from sknet.callbacks._sklearn_bridge import epoch_tasks
from sknet.engine._averaging import configure_averaging
from sknet.engine._callbacks import Callback, TrainingState, copy_callbacks
from sknet.engine._convergence import ScikitLearnConvergence, ScikitLearnLog
from sknet.engine._lbfgs import run_lbfgs
from sknet.engine._optimizers import make_optimizer
from sknet.engine._placement import (
    backend_data,
    check_full_batch_fits,
    out_of_memory_message,
    place_training_data,
)
from sknet.engine._sharding import single_threaded_fit
from sknet.engine._trainer import Trainer, resolve_batch_size
from sknet.engine._types import Diverged, NoRoomForBatch
from sknet.engine._validation import make_evaluator
from sknet.exceptions import DeviceMemoryError

#: The solvers that train by mini-batches (partial_fit, callbacks per batch).
STOCHASTIC_SOLVERS = ("sgd", "adam", "adamw")


def train(
    est, X, Y, sample_weight, validation, backend, rng, first_pass, incremental, used, split=None
):
    """Build or continue the network, then run the trainer (inside the transaction).

    ``split`` is the early-stopping split when the fit drew it before its plan
    (``(train_rows, val_rows)``); otherwise it is drawn here, after the weights.
    """
    if first_pass:
        est._initialize(X.shape[1], Y.shape[1], backend, rng)
    else:
        est.network_.to_backend(backend).astype(est._np_dtype)
        est.network_.take_training_flags(est._build_layers())  # (un)freezing
        est._loss = est._network_loss()  # new loss parameters take effect
    est.device_ = backend.name
    est.network_.reseed(est.t_)
    est.callbacks_ = copy_callbacks(est.callbacks)
    trainer = Trainer(
        est.network_,
        est._loss,
        alpha=est.alpha,
        clip_norm=getattr(est, "clip_norm", None),
        single_threaded=est._single_threaded_batches,
        callbacks=builtin_callbacks(est, incremental) + est.callbacks_,
        lengths=est._step_lengths(X) if hasattr(est, "_step_lengths") else None,
    )
    if est.solver == "lbfgs":
        train_lbfgs(est, trainer, X, Y, sample_weight, validation)
    else:
        train_stochastic(
            est,
            trainer,
            X,
            Y,
            sample_weight,
            validation,
            rng,
            max_epochs=1 if incremental else est.max_iter,
            used=used,
            split=split,
            # partial_fit steps the weights it returns: an average is over a fit's epochs
            averaging=None if incremental else getattr(est, "weight_averaging", None),
        )
    xp = backend.xp  # min and max carry NaN and inf: no array of the weights' size made
    if not all(
        bool(xp.isfinite(w.min()) & xp.isfinite(w.max())) for w in est.network_.weights() if w.size
    ):
        raise Diverged("The weights became non-finite.")


@contextlib.contextmanager
def training_errors(est, backend, used, X, y, sample_weight):
    """Within the block, a training failure becomes an error that says what to change.

    Device memory running out is a :class:`~sknet.exceptions.DeviceMemoryError`
    saying what the fit needed (:func:`~sknet.engine._placement.out_of_memory_message`;
    a batch the plan found no room for keeps its own message), and weights that
    became non-finite are a ValueError suggesting scaled inputs, a lower
    ``learning_rate_init`` or a larger ``alpha``.

    Parameters
    ----------
    est : BaseNeuralNetwork
        The estimator being fitted.
    backend : Backend
        Where it trains.
    used : dict
        What the fit resolved (``batch_size``, ``placement``), filled in while
        it trains.
    X, y, sample_weight : arrays
        The fit's data (validated ``X`` and weights, the user's ``y``), for
        the memory message.
    """
    try:
        yield
    except NoRoomForBatch:
        raise  # planned: its message says what would fit
    except backend.out_of_memory_errors() as exc:
        message = out_of_memory_message(est, backend, exc, used, X, y, sample_weight)
        raise DeviceMemoryError(message) from None
    except Diverged as exc:
        raise ValueError(
            "Solver produced non-finite parameter weights. The input data may "
            f"contain large values and need to be preprocessed. {exc} Scale "
            "the input features (e.g. with StandardScaler), lower "
            f"learning_rate_init (currently {_rate_text(est)}), or "
            "increase alpha." + _decay_advice(est) + _moment_advice(est)
        ) from None


def _started_rate(est):
    """The rate the fit started at (``learning_rate_init='auto'`` resolved)."""
    optimizer = getattr(est, "_optimizer", None)
    if isinstance(est.learning_rate_init, str) and optimizer is not None:
        return optimizer.learning_rate_init
    return est.learning_rate_init


def _rate_text(est):
    rate, given = _started_rate(est), est.learning_rate_init
    return f"{given!r}: {rate}" if isinstance(given, str) else rate


def _moment_advice(est):
    """What a low ``beta_2`` does to Adam's steps, when the fit diverged with one."""
    if est.solver not in ("adam", "adamw") or not est.beta_2 < 0.9:
        return ""
    return (
        f" With beta_2={est.beta_2!r}, Adam divides each step by a recent gradient's size "
        "alone, and the steps grow where gradients are small: the default 0.999 averages "
        "it over about a thousand steps."
    )


def _decay_advice(est):
    """What AdamW's decoupled weight decay did, when each step scales the weights by <= 0."""
    rate = _started_rate(est)
    decay = getattr(est, "weight_decay", 0.0) * (rate if not isinstance(rate, str) else 0.0)
    if est.solver != "adamw" or not decay >= 1:
        return ""
    return (
        f" With solver='adamw', weight_decay={est.weight_decay!r} times learning_rate_init "
        f"scales the weights by {1 - decay:.6g} each step: keep their product well below 1."
    )


def check_callbacks(callbacks):
    """Callbacks' parameters, before a fit starts: a ValueError naming the callback and parameter.

    A callback that lists ``_parameter_constraints`` (scikit-learn's, as the
    stock ones do) has them checked; the fit's copies of the callbacks are
    made later (:func:`~sknet.engine._callbacks.copy_callbacks`).
    """
    for callback in callbacks or ():
        if isinstance(callback, Callback) and hasattr(callback, "_parameter_constraints"):
            callback._validate_params()


def builtin_callbacks(est, incremental):
    """scikit-learn's reporting and convergence rules, before the user's callbacks.

    Then, when the fit is a task of scikit-learn's callbacks (``set_callbacks``),
    the one that makes each epoch a task (:func:`~sknet.callbacks._sklearn_bridge.epoch_tasks`).
    """
    callbacks = [ScikitLearnLog()] if est.verbose else []
    if est.solver in STOCHASTIC_SOLVERS:
        callbacks.append(ScikitLearnConvergence(incremental=incremental))
    return callbacks + epoch_tasks(est)


def train_stochastic(
    est,
    trainer,
    X,
    Y,
    sample_weight,
    validation,
    rng,
    max_epochs,
    used,
    split=None,
    averaging=None,
):
    train_rows = None
    if est.early_stopping and validation is None:
        train_rows, val_rows = est._validation_split(Y, rng) if split is None else split
        validation = tuple(None if a is None else a[val_rows] for a in (X, Y, sample_weight))
    n_train = X.shape[0] if train_rows is None else train_rows.shape[0]
    batch_size = resolve_batch_size(est.batch_size, n_train, auto=est._auto_batch_size)
    used["batch_size"] = batch_size
    n_batches = -(-n_train // batch_size)
    est._optimizer = make_optimizer(est, trainer, n_batches=n_batches)
    configure_averaging(est._optimizer, averaging, n_batches)
    placement, data = place_training_data(
        est,
        trainer,
        est._optimizer,
        (X, Y, sample_weight),
        validation,
        train_rows=train_rows,
        batch_size=batch_size,
    )
    used["placement"] = placement
    state = TrainingState(
        est,
        est.network_,
        est._optimizer,
        n_train_rows=n_train,
        batch_size=batch_size,
        history=est.history_,
        has_validation=validation is not None,
        max_epochs=max_epochs,
    )
    # one BLAS thread, and a helper, for the whole fit (validation included)
    with single_threaded_fit(trainer.backend, trainer.single_threaded):
        trainer.run_epochs(
            data,
            est._optimizer,
            state,
            batch_size=batch_size,
            max_epochs=max_epochs,
            rng=rng,
            shuffle=est.shuffle,
            train_rows=train_rows,
            sample_weight=sample_weight,
            evaluate=make_evaluator(
                est,
                trainer,
                validation,
                on_device=placement.validation_on_device,
                chunk_rows=placement.validation_chunk_rows,
            ),
        )


def train_lbfgs(est, trainer, X, Y, sample_weight, validation):
    check_full_batch_fits(est, trainer, (X, Y, sample_weight), validation)
    est.data_placement_ = "device"
    data = backend_data(est, trainer.backend, X, Y, sample_weight)
    state = TrainingState(
        est,
        est.network_,
        None,
        n_train_rows=X.shape[0],
        batch_size=X.shape[0],
        history=est.history_,
        has_validation=validation is not None,
        max_epochs=est.max_iter,
    )
    est.loss_, est.n_iter_ = run_lbfgs(
        trainer,
        data,
        state,
        max_iter=est.max_iter,
        max_fun=est.max_fun,
        tol=est.tol,
        evaluate=make_evaluator(est, trainer, validation),
    )

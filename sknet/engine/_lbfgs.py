"""Full-batch L-BFGS: SciPy's minimizer over a trainer's flat parameters.

:func:`run_lbfgs` is ``solver='lbfgs'``: every iteration computes the loss
and gradient of all rows at once (split over threads like any batch) and is an
epoch for the callbacks; :func:`minimize_lbfgs` wraps SciPy with scikit-learn's
messages.
"""

import time
import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning


def run_lbfgs(trainer, data, state, *, max_iter, max_fun, tol, evaluate=None):
    """Full-batch L-BFGS (SciPy); returns ``(loss, n_iter)``.

    ``trainer`` (a :class:`~sknet.engine._trainer.Trainer`) computes the loss
    and gradient of all rows at once over its flat parameters; each iteration
    is an epoch for its callbacks. Ctrl-C keeps the last
    completed iteration (the initial weights if none completed).
    """
    backend, dtype = trainer.backend, trainer.network.dtype
    sw_sum = data.X.shape[0] if data.w is None else float(data.w.sum())
    flat_params, flat_grads = trainer.parameters.flat_params, trainer.parameters.flat_grads

    def unpack(x):
        flat_params[...] = backend.asarray(x, dtype)

    def loss_and_grad(x):
        unpack(x)
        loss = trainer.loss_and_gradients(data.X, data.Y, data.w, sw_sum)
        return float(loss), backend.to_numpy(flat_grads).astype(np.float64)

    x0 = backend.to_numpy(flat_params).astype(np.float64)
    last = {"x": x0, "loss": None, "n_iter": 0, "started": time.perf_counter()}

    def end_iteration(iteration, x, loss):
        unpack(x)
        last.update(x=x.copy(), loss=loss, n_iter=iteration)
        state.epoch = len(state.history) + 1
        stop = trainer.end_epoch(state.epoch, loss, evaluate, last["started"])
        last["started"] = time.perf_counter()
        return stop

    hooks = trainer.begin_training(state)  # every callback that began gets its end
    try:
        with trainer.split_batches(data.X.shape[0]):
            x, loss, n_iter = minimize_lbfgs(
                loss_and_grad,
                x0,
                max_iter=max_iter,
                max_fun=max_fun,
                tol=tol,
                callback=end_iteration,
            )
        unpack(x)
    except KeyboardInterrupt:
        warnings.warn("Training interrupted by user.")
        x, n_iter = last["x"], last["n_iter"]
        loss = last["loss"] if last["loss"] is not None else loss_and_grad(x)[0]
        unpack(x)
    finally:
        hooks.end()
    return loss, n_iter


def minimize_lbfgs(fun, x0, *, max_iter, max_fun, tol, verbose=False, callback=None):
    """Minimize ``fun(x) -> (loss, grad)`` with SciPy's L-BFGS-B.

    With ``verbose``, prints scikit-learn's ``Iteration N, loss = ...`` line
    after every iteration. ``callback(iteration, x, loss)`` runs after every
    iteration too, and stops the optimization by returning True.

    Returns
    -------
    x : ndarray
        The solution (float64).
    loss : float
    n_iter : int
        Iterations run, at most ``max_iter``.

    Warns
    -----
    ConvergenceWarning
        When L-BFGS stopped before converging (``max_iter``/``max_fun`` reached
        or a line-search failure), as scikit-learn's MLP does.
    """
    iteration = 0

    def report(intermediate_result):
        nonlocal iteration
        iteration += 1
        if verbose:
            print("Iteration %d, loss = %.8f" % (iteration, intermediate_result.fun))
        if callback is not None and callback(
            iteration, intermediate_result.x, float(intermediate_result.fun)
        ):
            raise StopIteration

    result = scipy.optimize.minimize(
        fun,
        np.asarray(x0, dtype=np.float64),
        method="L-BFGS-B",
        jac=True,
        callback=report if verbose or callback is not None else None,
        options={"maxfun": max_fun, "maxiter": max_iter, "gtol": tol},
    )
    stopped = result.status == 99  # a callback asked to stop: not a failure
    if result.status != 0 and not stopped:
        message = result.message
        if isinstance(message, bytes):
            message = message.decode("latin1")
        warnings.warn(
            f"lbfgs failed to converge after {result.nit} iteration(s) "
            f"(status={result.status}): {message}\n"
            "Increase the number of iterations to improve the convergence "
            f"(max_iter={max_iter}), or scale the data, e.g. with StandardScaler.",
            ConvergenceWarning,
        )
    return result.x, float(result.fun), min(int(result.nit), max_iter)

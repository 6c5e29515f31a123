"""What the loggers share: a name for each fit, the values of a history row, optional libraries.

A logger's file or directory may hold ``{run}``: each fit replaces it with a
name of its own (:func:`run_name`: the date and time, the host, the process
and a counter), so that the fits of a search, in threads or in processes,
never write to one file, and a fit that continues a model keeps the name of
the fit it continues (:func:`fit_run_name`). The libraries the loggers need
(tensorboard, mlflow, optuna) are imported when a fit starts
(:func:`import_extra`), never when sknet is imported.
"""

import importlib
import itertools
import os
import socket
import time
from numbers import Real

#: fits started in this process (the last part of a run's name)
_FITS = itertools.count(1)


def run_name():
    """A name no other fit has: ``20260101-120000-host-4242-1``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{socket.gethostname()}-{os.getpid()}-{next(_FITS)}"


def fit_run_name(state):
    """The run name of ``state``'s fit: the name of the fit it continues, or a new one.

    Every logger of one fit gets the same name. The estimator keeps it
    (``_run_name``, restored with its fitted state if a fit fails), so that a
    fit that continues a model (``warm_start=True``, ``partial_fit``: a
    history to continue) writes where the fit it continues wrote.
    """
    name = vars(state).get("_run_name")
    if name is None:
        estimator = state.estimator
        previous = getattr(estimator, "_run_name", None) if state.history else None
        name = state._run_name = previous or run_name()
        if estimator is not None:
            estimator._run_name = name
    return name


def fit_path(path, name):
    """``path`` (a str or path-like) with every ``{run}`` replaced by ``name``."""
    return os.fspath(path).replace("{run}", name)


def import_extra(module, extra, who):
    """``module`` imported, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f'{who} needs {module.split(".")[0]}: pip install "sknet-nn[{extra}]" ({exc})'
        ) from exc


def scalars(logs):
    """The numbers of a history row, by key, without ``epoch`` (a value it lacks is left out)."""
    return {
        key: float(value)
        for key, value in logs.items()
        if key != "epoch" and isinstance(value, Real) and not isinstance(value, bool)
    }

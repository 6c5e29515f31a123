"""Callbacks: code that runs at fixed points of training.

Give a list to any estimator's ``callbacks`` parameter. ``fit`` works on
copies (``callbacks_``), so the objects you pass are never modified and clone
with the estimator. Each hook receives a
:class:`~sknet.callbacks.TrainingState` first: the estimator
(``state.estimator``), the network, the optimizer, the epoch, the history and
the weights, through public attributes; attributes it lacks are looked up on
the estimator, so ``state.classes_`` works. ``on_epoch_end`` also receives
the epoch's row of ``history_`` (``epoch``, ``train_loss``, ``valid_loss``,
``valid_score``, ``learning_rate``, ``duration``) and may return ``True`` to
stop training.

Order: the estimator's built-in behaviour (scikit-learn's convergence rule,
``early_stopping``) runs first at every hook, then these callbacks in list
order; so what a callback restores in ``on_train_end`` is what the model
keeps. A callback that watches a value the fit will not produce (a validation
score without a validation set, a learning rate with ``solver='lbfgs'``) is
refused with a ``ValueError`` before the first epoch.

Nothing in a hook forces a device synchronisation except what the hook itself
reads: the epoch's losses are already host numbers, and ``on_batch_end`` gets
only the batch's index and size.

What it holds: stopping and saving (``_stopping``: :class:`EarlyStopping`,
:class:`Checkpoint`, :class:`TerminateOnNaN`), the learning-rate schedules
(``_schedules``: :class:`LRScheduler`), freezing (``_freezing``:
:class:`Unfreeze`), watching a fit (``_progress``: :class:`ProgressBar`,
:class:`PrintLog`), the loggers (``_csv_logger``: :class:`CSVLogger`;
``_tensorboard``: :class:`TensorBoardLogger`; ``_mlflow``:
:class:`MLflowLogger`; what they share, ``_runs``) and Optuna's pruning
(``_optuna``: :class:`OptunaPruning`); :class:`Callback` and
:class:`TrainingState` are the engine's hook interface. The bridge to
scikit-learn's own callbacks (``sklearn.callback``, scikit-learn 1.9+) is
``_sklearn_bridge``: every estimator's ``set_callbacks``, each epoch a task of
the fit's task tree. What it may import: :mod:`sknet.engine`,
:mod:`sknet.layers`, :mod:`sknet.backend` and ``sknet._version`` (tensorboard,
mlflow and optuna are imported when a fit that uses them starts, each an
extra: ``pip install "sknet-nn[tensorboard]"``, ``[mlflow]``, ``[optuna]``).
"""

from sknet.callbacks._csv_logger import CSVLogger
from sknet.callbacks._freezing import Unfreeze
from sknet.callbacks._mlflow import MLflowLogger
from sknet.callbacks._optuna import OptunaPruning
from sknet.callbacks._progress import PrintLog, ProgressBar
from sknet.callbacks._schedules import LRScheduler
from sknet.callbacks._stopping import Checkpoint, EarlyStopping, TerminateOnNaN
from sknet.callbacks._tensorboard import TensorBoardLogger
from sknet.engine._callbacks import Callback, TrainingState

__all__ = [
    "CSVLogger",
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "LRScheduler",
    "MLflowLogger",
    "OptunaPruning",
    "PrintLog",
    "ProgressBar",
    "TensorBoardLogger",
    "TerminateOnNaN",
    "TrainingState",
    "Unfreeze",
]

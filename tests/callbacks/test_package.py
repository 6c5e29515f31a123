"""sknet.callbacks as a package: the names it had as one module, old files, no cost when unused."""

import pickle
import subprocess
import sys

import pytest

import sknet
from sknet import callbacks

#: every name sknet.callbacks offered as a single module, importable as before
NAMES_OF_THE_MODULE = [
    "Callback",
    "Checkpoint",
    "EarlyStopping",
    "LRScheduler",
    "PrintLog",
    "ProgressBar",
    "TerminateOnNaN",
    "TrainingState",
    "Unfreeze",
]


@pytest.mark.parametrize("name", NAMES_OF_THE_MODULE)
def test_every_name_of_the_module_imports_from_the_package(name):
    assert name in callbacks.__all__
    namespace = {}
    exec(f"from sknet.callbacks import {name}", namespace)
    assert namespace[name] is getattr(callbacks, name)


@pytest.mark.parametrize("name", ["EarlyStopping", "LRScheduler", "PrintLog", "Unfreeze"])
def test_a_pickle_naming_the_old_module_still_loads(name):
    # Files written before the split name sknet.callbacks.<Class> (protocol 0 spells
    # the module out, so the new module's name can be put back to the old one).
    cls = getattr(callbacks, name)
    data = pickle.dumps(cls(), protocol=0)
    assert cls.__module__.encode() in data and cls.__module__ != "sknet.callbacks"
    old = data.replace(cls.__module__.encode() + b"\n", b"sknet.callbacks\n")
    assert b"sknet.callbacks\n" in old
    assert type(pickle.loads(old)) is cls


@pytest.mark.parametrize("name", ["EarlyStopping", "LRScheduler", "PrintLog", "ProgressBar"])
def test_skops_trusts_the_old_and_the_new_names(name):
    cls = getattr(callbacks, name)
    assert f"sknet.callbacks.{name}" in sknet.TRUSTED_TYPES
    assert f"{cls.__module__}.{name}" in sknet.TRUSTED_TYPES


def test_the_libraries_are_not_imported_until_a_fit_uses_them(tmp_path):
    # `import sknet`, the callbacks built and a fit with the CSV logger (no library):
    # none of tensorboard, mlflow, optuna (nor tensorboardX, nor torch) is loaded.
    script = f"""
import sys
import numpy as np
import sknet
from sknet import MLPClassifier
from sknet.callbacks import CSVLogger, MLflowLogger, OptunaPruning, TensorBoardLogger
callbacks = [CSVLogger({str(tmp_path / "h.csv")!r}), TensorBoardLogger(), MLflowLogger(),
             OptunaPruning(trial=None)]
X = np.random.RandomState(0).rand(40, 3)
MLPClassifier(hidden_layer_sizes=(4,), tol=1.0, n_iter_no_change=1, device="cpu",
              callbacks=callbacks[:1]).fit(X, np.arange(40) % 2)
heavy = ("tensorboard", "tensorboardX", "mlflow", "optuna", "torch")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

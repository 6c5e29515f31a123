"""sknet.callbacks as a package: the names it had as one module, old files, no cost when unused."""

import pickle

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

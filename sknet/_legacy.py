"""Old module paths that models pickled by earlier versions name.

Pickles (joblib, pickle) and skops files record each object's class by its
module path. Until the package layout moved, the estimators, the network, the
optimizers and the initializer lived in flat private modules
(``sknet._mlp``, ``sknet._network``, ...); :func:`install` makes those names
import the modules that hold the classes now, so such files still load.
"""

import importlib
import sys

#: Old module path -> the module that holds its classes now.
MOVED_MODULES = {
    "sknet._mlp": "sknet.estimators._mlp",
    "sknet._convnet": "sknet.estimators._convnet",
    "sknet._rnn": "sknet.estimators._rnn",
    "sknet._features": "sknet.estimators._features",
    "sknet._base": "sknet.estimators._base",
    "sknet._network": "sknet.engine._network",
    "sknet._optimizers": "sknet.engine._optimizers",
    "sknet._init": "sknet.layers._init",
}


#: Modules split into packages that re-export their names: files saved before
#: the split name the package (``sknet.losses.LogLoss``), which still resolves;
#: only the names skops trusts need the old spelling too.
SPLIT_MODULES = {
    "sknet.losses._base": "sknet.losses",
    "sknet.losses._stock": "sknet.losses",
    "sknet.callbacks._stopping": "sknet.callbacks",
    "sknet.callbacks._schedules": "sknet.callbacks",
    "sknet.callbacks._progress": "sknet.callbacks",
    "sknet.callbacks._freezing": "sknet.callbacks",
}


def install():
    """Register every old path in ``sys.modules`` as an alias of its new module."""
    for old, new in MOVED_MODULES.items():
        sys.modules.setdefault(old, importlib.import_module(new))


def old_names(qualified_names):
    """The old ``module.Class`` names of classes in ``qualified_names`` that moved."""
    moved = {new: old for old, new in MOVED_MODULES.items()} | SPLIT_MODULES
    names = []
    for name in qualified_names:
        module, _, cls = name.rpartition(".")
        if module in moved:
            names.append(f"{moved[module]}.{cls}")
    return names

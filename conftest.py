"""Repository-wide pytest configuration (doctest collection of the package)."""

import importlib.util

# The CuPy backend module imports CuPy at import time; without CuPy there is
# nothing to collect from it (the suite tests it through tests/backend).
collect_ignore = []
if importlib.util.find_spec("cupy") is None:
    collect_ignore.append("sknet/backend/_cupy.py")

#: modules whose doctests need an optional library, and the extra that installs it
DOCTEST_EXTRAS = {
    "sknet/callbacks/_tensorboard.py": ("tensorboard", "tensorboard"),
    "sknet/callbacks/_mlflow.py": ("mlflow", "mlflow"),
    "sknet/callbacks/_optuna.py": ("optuna", "optuna"),
}


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        for path, (module, extra) in DOCTEST_EXTRAS.items():
            if str(item.path).endswith(path) and importlib.util.find_spec(module) is None:
                reason = f'needs {module}: pip install "sknet-nn[{extra}]"'
                item.add_marker(pytest.mark.skip(reason=reason))

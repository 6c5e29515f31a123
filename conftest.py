"""Repository-wide pytest configuration (doctest collection of the package)."""

import importlib.util

# The CuPy backend module imports CuPy at import time; without CuPy there is
# nothing to collect from it (the suite tests it through tests/backend).
collect_ignore = []
if importlib.util.find_spec("cupy") is None:
    collect_ignore.append("sknet/backend/_cupy.py")

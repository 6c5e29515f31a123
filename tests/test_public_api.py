"""sknet's public names: each module's ``__all__``, its namespace, the API reference.

- Every public module declares ``__all__``, and every name in it exists.
- A module's namespace holds its own public names only: anything else it imports
  (``np``, a helper from another module) is bound under a private name, so that
  ``dir(sknet.onnx)`` does not offer ``MLPClassifier`` or ``check_is_fitted``.
- Every name in an ``__all__`` has an entry in the API reference (``docs/api``), and
  the class pages show public bases only (``docs/_ext/sknet_docs.py``).
"""

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
MODULES = [
    "sknet",
    "sknet.layers",
    "sknet.tabular",
    "sknet.text",
    "sknet.losses",
    "sknet.callbacks",
    "sknet.autodiff",
    "sknet.distributed",
    "sknet.datasets",
    "sknet.utils",
    "sknet.plotting",
    "sknet.onnx",
    "sknet.backend",
    "sknet.exceptions",
]

# Modules whose namespace still offers names outside ``__all__``: their imports need a
# private alias (``import numpy as _np``, ``from ... import leaves as _leaves``), as
# sknet.onnx and sknet.losses have. Strict: once fixed, the entry must go.
LEAKS = {}


def public_namespace(module):
    """Names a user sees in ``dir(module)``: not private, not modules."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_names_that_exist(name):
    module = importlib.import_module(name)
    assert isinstance(module.__all__, list) and module.__all__
    assert len(set(module.__all__)) == len(module.__all__), "a name listed twice"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(m, marks=pytest.mark.xfail(reason=LEAKS[m], strict=True)) if m in LEAKS else m
        for m in MODULES
    ],
)
def test_the_namespace_holds_only_the_public_names(name):
    module = importlib.import_module(name)
    extra = sorted(public_namespace(module) - set(module.__all__))
    assert not extra, f"dir({name}) offers names outside __all__: {extra}"


def test_onnx_offers_no_estimators_or_sklearn_helpers():
    onnx = importlib.import_module("sknet.onnx")
    for leaked in ("MLPClassifier", "MLPRegressor", "check_is_fitted"):
        assert leaked not in dir(onnx)


def documented_names():
    """Fully qualified names with an entry in docs/api/*.rst."""
    names = set()
    directive = re.compile(
        r"^\.\. (?:auto)?(?:class|function|data|exception|module)::\s+(\S+)", re.M
    )
    for page in API.glob("*.rst"):
        module = None
        in_autosummary = False
        for line in page.read_text().splitlines():
            found = re.match(r"^\.\. (?:currentmodule|automodule|module)::\s+(\S+)", line)
            if found:
                module = found.group(1)
            if line.startswith(".. autosummary::"):
                in_autosummary = True
                continue
            if in_autosummary:
                if line and not line.startswith(" "):
                    in_autosummary = False
                elif re.match(r"^   [A-Za-z_][\w.]*$", line):
                    names.add(f"{module}.{line.strip()}")
                    continue
            found = directive.match(line)
            if found and module:
                target = found.group(1)
                names.add(target if target.startswith("sknet") else f"{module}.{target}")
    return names


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_is_in_the_api_reference(name):
    module = importlib.import_module(name)
    documented = documented_names()
    missing = [n for n in module.__all__ if f"{name}.{n}" not in documented]
    assert not missing, f"no entry in docs/api for {name}: {missing}"


def test_class_pages_show_public_bases_only():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        sknet_docs = importlib.import_module("sknet_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    names = sknet_docs.public_names()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.isclass(obj):
                continue
            for base in sknet_docs.public_bases(obj, names):
                target = re.search(r"`~?([\w.]+)`", base).group(1)
                assert not any(part.startswith("_") for part in target.split(".")), (
                    f"{module_name}.{name} shows the private base {target}"
                )
                if target.startswith("sknet"):
                    assert target in names.values(), (module_name, name, target)

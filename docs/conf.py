"""Sphinx configuration of sknet's documentation (``make docs``)."""

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SKNET_DEVICE", "cpu")  # the gallery runs on the CPU
os.environ.setdefault("MPLBACKEND", "Agg")

import sknet  # noqa: E402

project = "sknet"
author = "the sknet developers"
copyright = "2026, the sknet developers"
release = version = sknet.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
autosummary_generate = True
templates_path = ["_templates"]  # classes: their own members, not scikit-learn's
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

html_theme = "pydata_sphinx_theme"
html_title = f"sknet {version}"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}

# The gallery runs the examples that take seconds on a CPU; the MNIST ones run
# when SKNET_MNIST_DIR is set, and the others are shown without running (CIFAR-10
# needs its data; the Dask ones start worker processes, which re-import the script).
_quick = [
    "digits_pipeline",
    "convnet_digits",
    "custom_losses",
    "features_and_ensembles",
    "forward_only_layers",
    "plot_learning_curves",
    "residual_convnet",
    "transfer_learning",
    "persistence_skops_onnx",
]
if os.environ.get("SKNET_MNIST_DIR"):
    _quick += ["mnist_mlp", "convnet_mnist", "rnn_sequential_mnist"]
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/(" + "|".join(map(re.escape, _quick)) + r")\.py$",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "plot_gallery": "True",
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
}

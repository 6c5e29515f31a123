"""Dataset loaders: MNIST (IDX files), CIFAR-10 (its Python format) and a folder
of images per class, into the arrays sknet's estimators take.

sknet downloads nothing. MNIST: the four IDX files (``train-images-idx3-ubyte``,
``t10k-labels-idx1-ubyte``, ..., optionally gzipped) from the MNIST page, in a
directory given as ``path`` or ``SKNET_MNIST_DIR``. CIFAR-10: the "CIFAR-10
python version" archive ``cifar-10-python.tar.gz`` from the CIFAR page of the
University of Toronto (Krizhevsky's), as downloaded or extracted, given as
``path`` or ``SKNET_CIFAR10_DIR``. Image folders: one subfolder per class of
PNG or JPEG files, read with Pillow (``pip install "sknet-nn[images]"``).
"""

import gzip
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np

__all__ = [
    "CIFAR10_ENV_VAR",
    "MNIST_ENV_VAR",
    "load_cifar10",
    "load_image_folder",
    "load_mnist",
    "read_idx",
]

MNIST_ENV_VAR = "SKNET_MNIST_DIR"
CIFAR10_ENV_VAR = "SKNET_CIFAR10_DIR"

# IDX type codes -> big-endian NumPy dtypes.
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path):
    """Read one IDX file (raw or gzip-compressed) into a NumPy array.

    Parameters
    ----------
    path : str or path-like
        The file. Gzip compression is detected from the content, not the name.

    Returns
    -------
    array : ndarray
        The data, with the shape and (native-endian) type the header declares.

    Raises
    ------
    ValueError
        If the file is not a well-formed IDX file.

    Examples
    --------
    A 2 x 3 array of unsigned bytes (type code 0x08), written and read back:

    >>> import os
    >>> import tempfile
    >>> import numpy as np
    >>> from sknet.datasets import read_idx
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "tiny-idx2-ubyte")
    >>> header = bytes([0, 0, 0x08, 2]) + np.array([2, 3], ">u4").tobytes()
    >>> with open(path, "wb") as f:
    ...     _ = f.write(header + bytes(range(6)))
    >>> read_idx(path)
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint8)
    >>> tmp.cleanup()
    """
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an IDX file: bad magic number {data[:4]!r}")
    type_code, ndim = data[2], data[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX data type code 0x{type_code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(
            f"{path}: IDX header declares shape {shape} ({expected} bytes), "
            f"but the file has {len(data)} bytes"
        )
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def _data_path(path, subset, env_var, needs):
    """Check ``subset``; ``path``, or the environment variable's value when None."""
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}")
    if path is None:
        path = os.environ.get(env_var)
        if not path:
            raise FileNotFoundError(
                f"{needs}: pass it as `path` or set the {env_var} environment variable."
            )
    return path


def _find(directory, name):
    for candidate in (name, name + ".gz", name.replace("-idx", ".idx")):
        path = directory / candidate
        if path.is_file():
            return path
    raise FileNotFoundError(f"No MNIST file {name!r} (or {name}.gz) in {str(directory)!r}")


def load_mnist(path=None, *, subset="test", flatten=True, scale=True):
    """Load MNIST from the standard IDX files.

    Parameters
    ----------
    path : str or path-like, default=None
        Directory holding the IDX files. Defaults to the ``SKNET_MNIST_DIR``
        environment variable.
    subset : {'train', 'test', 'all'}, default='test'
        Which files to read: the 60,000 training images, the 10,000 test
        images, or both (training first).
    flatten : bool, default=True
        Return images as rows of 784 pixels; else as ``(n, 28, 28)``.
    scale : bool, default=True
        Return float32 pixels in ``[0, 1]``; else the raw uint8 values.

    Returns
    -------
    X : ndarray of shape (n_samples, 784) or (n_samples, 28, 28)
        The images.
    y : ndarray of shape (n_samples,)
        The digit labels, int64.

    Raises
    ------
    FileNotFoundError
        If no directory is given or a file is missing.
    ValueError
        If ``subset`` is unknown, or images and labels do not match.

    Examples
    --------
    >>> from sknet.datasets import load_mnist
    >>> X, y = load_mnist("data/mnist", subset="test")  # doctest: +SKIP
    >>> X.shape, X.dtype, y[:3]  # doctest: +SKIP
    ((10000, 784), dtype('float32'), array([7, 2, 1]))
    """
    path = _data_path(
        path, subset, MNIST_ENV_VAR, "load_mnist needs the directory of the MNIST IDX files"
    )
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"MNIST directory {str(directory)!r} does not exist")
    subsets = ["train", "test"] if subset == "all" else [subset]
    images, labels = [], []
    for name in subsets:
        image_file, label_file = (_find(directory, f) for f in _MNIST_FILES[name])
        X, y = read_idx(image_file), read_idx(label_file)
        if X.ndim != 3 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(
                f"MNIST {name} files do not match: images {X.shape}, labels {y.shape}"
            )
        images.append(X)
        labels.append(y)
    X = images[0] if len(images) == 1 else np.concatenate(images)
    y = (labels[0] if len(labels) == 1 else np.concatenate(labels)).astype(np.int64)
    if flatten:
        X = X.reshape(X.shape[0], -1)
    if scale:
        X = X.astype(np.float32)
        X /= 255.0
    return X, y


# -- CIFAR-10 ----------------------------------------------------------------------------

_CIFAR_BATCHES = {
    "train": [f"data_batch_{i}" for i in range(1, 6)],
    "test": ["test_batch"],
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain data and NumPy arrays only: a CIFAR batch runs no code."""

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),  # bytes in protocol-2 pickles written by Python 3
    }

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")
        if module.endswith("multiarray"):  # numpy.core became numpy._core in NumPy 2
            try:
                from numpy._core import multiarray
            except ImportError:  # NumPy 1
                from numpy.core import multiarray
            return getattr(multiarray, name)
        if module == "_codecs":
            import codecs

            return codecs.encode
        return getattr(np, name)


def _unpickle(data, where):
    try:
        return _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:
        raise ValueError(f"{where} is not a CIFAR-10 batch file: {exc}") from None


def _cifar_reader(path):
    """``read(name) -> bytes`` for the batch files under ``path`` (directory or archive)."""
    path = Path(path)
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise ValueError(f"{str(path)!r} is neither a directory nor a .tar.gz archive")
        archive = tarfile.open(path)  # read in memory: nothing extracted to disk
        members = {Path(m.name).name: m for m in archive.getmembers() if m.isfile()}

        def read(name):
            if name not in members:
                raise FileNotFoundError(f"No CIFAR-10 file {name!r} in {str(path)!r}")
            return archive.extractfile(members[name]).read(), f"{path}:{members[name].name}"

        return read
    if not path.is_dir():
        raise FileNotFoundError(f"CIFAR-10 path {str(path)!r} does not exist")
    for directory in (path, path / "cifar-10-batches-py"):
        if (directory / "batches.meta").is_file() or (directory / "test_batch").is_file():
            break

    def read(name):
        file = directory / name
        if not file.is_file():
            raise FileNotFoundError(f"No CIFAR-10 file {name!r} in {str(directory)!r}")
        return file.read_bytes(), str(file)

    return read


def load_cifar10(path=None, *, subset="test"):
    """Load CIFAR-10 from its Python-format batches (a directory or the .tar.gz).

    Parameters
    ----------
    path : str or path-like, default=None
        ``cifar-10-python.tar.gz`` itself (read in memory, never extracted),
        or the directory it extracts to (``cifar-10-batches-py``, or its
        parent). Defaults to the ``SKNET_CIFAR10_DIR`` environment variable.
    subset : {'train', 'test', 'all'}, default='test'
        The five training batches (50,000 images), the test batch (10,000),
        or both (training first).

    Returns
    -------
    X : ndarray of shape (n_samples, 3, 32, 32), float32
        Pixels in ``[0, 1]``, channels first (what ``ConvNetClassifier`` takes).
    y : ndarray of shape (n_samples,), int64
        Labels in ``0..9``.
    classes : list of str
        The class names (``'airplane'``, ``'automobile'``, ...), ``classes[y]``.

    Raises
    ------
    FileNotFoundError
        If the path or a batch is missing.
    ValueError
        If a file is not a CIFAR-10 batch (the message names it).

    Examples
    --------
    >>> X, y, classes = load_cifar10("data/cifar-10-python.tar.gz")  # doctest: +SKIP
    >>> X.shape, classes[y[0]]  # doctest: +SKIP
    ((10000, 3, 32, 32), 'cat')
    """
    path = _data_path(
        path,
        subset,
        CIFAR10_ENV_VAR,
        "load_cifar10 needs cifar-10-python.tar.gz or the directory it extracts to",
    )
    read = _cifar_reader(path)
    names = (
        _CIFAR_BATCHES["train"] + _CIFAR_BATCHES["test"]
        if subset == "all"
        else (_CIFAR_BATCHES[subset])
    )
    images, labels = [], []
    for name in names:
        data, where = read(name)
        batch = _unpickle(data, where)
        images.append(_cifar_images(batch, where))
        labels.append(_cifar_labels(batch, where, len(images[-1])))
    meta = _unpickle(*read("batches.meta"))
    classes = [
        c.decode() if isinstance(c, bytes) else str(c)
        for c in meta.get(b"label_names", meta.get("label_names", []))
    ]
    if len(classes) != 10:
        raise ValueError(f"batches.meta lists {len(classes)} class names, expected 10")
    X = np.concatenate(images).reshape(-1, 3, 32, 32).astype(np.float32)
    X /= 255.0
    return X, np.concatenate(labels), classes


def _cifar_images(batch, name):
    if not isinstance(batch, dict):
        raise ValueError(f"CIFAR-10 batch {name}: expected a dict, got {type(batch).__name__}")
    data = batch.get(b"data", batch.get("data"))
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or (data.shape[1] != 3 * 32 * 32)
    ):
        shape = getattr(data, "shape", None)
        raise ValueError(
            f"CIFAR-10 batch {name}: expected uint8 data of shape (n, 3072), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {shape}"
        )
    return data


def _cifar_labels(batch, name, n):
    labels = np.asarray(batch.get(b"labels", batch.get("labels", [])), dtype=np.int64)
    if labels.shape != (n,) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise ValueError(
            f"CIFAR-10 batch {name}: expected {n} labels in 0..9, got {labels.shape[0]} "
            f"from {labels.min(initial=0)} to {labels.max(initial=0)}"
        )
    return labels


# -- a folder of images per class -------------------------------------------------------

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


def load_image_folder(path, image_size=None, *, color_mode="rgb"):
    """Load images stored as one subfolder per class (the cats-vs-dogs layout).

    ``path/cat/001.jpg``, ``path/dog/002.png``, ...: each subfolder is a
    class (in sorted order), each PNG or JPEG file in it an image, read with
    Pillow (``pip install "sknet-nn[images]"``). Other files are ignored.

    Parameters
    ----------
    path : str or path-like
        The folder of class subfolders.
    image_size : tuple (height, width) or None, default=None
        Resize every image to this size (bilinear). ``None`` keeps the sizes,
        which must then all be the same.
    color_mode : {'rgb', 'grayscale'}, default='rgb'
        Three channels, or one (luminance).

    Returns
    -------
    X : ndarray of shape (n_samples, channels, height, width), float32
        Pixels in ``[0, 1]``, channels first.
    y : ndarray of shape (n_samples,), int64
        Indices into ``classes``.
    classes : list of str
        The subfolder names, sorted.

    Raises
    ------
    ValueError
        On a file Pillow cannot read, an image of another size (without
        ``image_size``), a class folder with no image, or no class at all;
        the message names the file or folder.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from PIL import Image
    >>> from sknet.datasets import load_image_folder
    >>> tmp = tempfile.TemporaryDirectory()
    >>> for name, gray in [("cat", 0), ("dog", 255)]:
    ...     (Path(tmp.name) / name).mkdir()
    ...     Image.new("RGB", (4, 3), (gray, gray, gray)).save(Path(tmp.name) / name / "1.png")
    >>> X, y, classes = load_image_folder(tmp.name)
    >>> X.shape, X.dtype, classes
    ((2, 3, 3, 4), dtype('float32'), ['cat', 'dog'])
    >>> y.tolist(), float(X[y == 1].max())
    ([0, 1], 1.0)
    >>> load_image_folder(tmp.name, (2, 2), color_mode="grayscale")[0].shape
    (2, 1, 2, 2)
    >>> tmp.cleanup()
    """
    try:
        import PIL.Image  # noqa: F401
    except ImportError:  # pragma: no cover - the images extra installs it
        raise ImportError(
            'load_image_folder needs Pillow: pip install "sknet-nn[images]"'
        ) from None
    if color_mode not in ("rgb", "grayscale"):
        raise ValueError(f"color_mode must be 'rgb' or 'grayscale', got {color_mode!r}")
    if image_size is not None:
        if len(tuple(image_size)) != 2 or not all(
            isinstance(v, int) and v > 0 for v in image_size
        ):
            raise ValueError(
                f"image_size must be (height, width) of positive ints, got {image_size!r}"
            )
        image_size = tuple(image_size)
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {str(root)!r} does not exist")
    classes = sorted(entry.name for entry in root.iterdir() if entry.is_dir())
    if not classes:
        raise ValueError(f"{str(root)!r} has no class subfolders")
    mode = "RGB" if color_mode == "rgb" else "L"
    images, labels, size = [], [], image_size
    for label, name in enumerate(classes):
        files = sorted(
            f
            for f in (root / name).iterdir()
            if f.is_file() and f.suffix.lower() in _IMAGE_SUFFIXES
        )
        if not files:
            raise ValueError(f"class folder {str(root / name)!r} has no PNG or JPEG image")
        for file in files:
            pixels = _read_image(file, mode, image_size)
            if size is None:
                size = pixels.shape[:2]
            elif pixels.shape[:2] != size:
                raise ValueError(
                    f"image {str(file)!r} is {pixels.shape[0]}x{pixels.shape[1]}, the "
                    f"others {size[0]}x{size[1]}: pass image_size=(height, width)"
                )
            images.append(pixels.reshape(size + (-1,)).transpose(2, 0, 1))
            labels.append(label)
    X = np.stack(images).astype(np.float32)
    X /= 255.0
    return X, np.asarray(labels, dtype=np.int64), classes


def _read_image(file, mode, image_size):
    """One image file as uint8 pixels ``(h, w[, c])``, converted and resized."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            image = image.convert(mode)
            if image_size is not None:
                image = image.resize((image_size[1], image_size[0]), Image.Resampling.BILINEAR)
            return np.asarray(image, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"cannot read image {str(file)!r}: {exc}") from None

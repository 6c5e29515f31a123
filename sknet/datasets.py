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

import codecs
import contextlib
import gzip
import io
import math
import numbers
import os
import pickle
import reprlib
import tarfile
import zlib
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
        If the file is not a well-formed IDX file, or is a truncated or
        corrupt gzip file (the message names it).

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
    with open(path, "rb") as file:
        if file.read(2) != b"\x1f\x8b":
            file.seek(0)
            return _read_idx_stream(file, path, os.fstat(file.fileno()).st_size)
        file.seek(0)
        try:
            with gzip.GzipFile(fileobj=file) as stream:
                return _read_idx_stream(stream, path)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ValueError(
                f"{path} is a truncated or corrupt gzip file ({exc}): download it again"
            ) from exc


def _read_idx_stream(stream, path, file_size=None):
    """The IDX array in ``stream``. A raw file's size (``file_size``) is checked before its
    body is read; a gzip stream is read no further than one byte past the declared size."""
    magic = stream.read(4)
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0:
        raise ValueError(f"{path} is not an IDX file: bad magic number {magic!r}")
    type_code, ndim = magic[2], magic[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX data type code 0x{type_code:02x}")
    dims = stream.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(dims, ">u4"))
    dtype = _IDX_DTYPES[type_code]
    header = 4 + 4 * ndim
    expected = header + math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if file_size is not None and file_size != expected:
        raise _idx_size_error(path, shape, expected, f"{file_size} bytes")
    body = _read_at_most(stream, expected - header)
    if len(body) < expected - header:
        raise _idx_size_error(path, shape, expected, f"{header + len(body)} bytes")
    if file_size is None and stream.read(1):
        raise _idx_size_error(path, shape, expected, f"more than {expected} bytes")
    array = np.frombuffer(body, dtype).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def _read_at_most(stream, size, chunk=16 << 20):
    """Up to ``size`` bytes of ``stream``, read in chunks: a header declaring more data than
    the stream holds allocates no more than there is."""
    parts = []
    while size > 0:
        part = stream.read(min(size, chunk))
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _idx_size_error(path, shape, expected, actual):
    return ValueError(
        f"{path}: IDX header declares shape {shape} ({expected} bytes), but the file has {actual}"
    )


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
        If ``subset`` is unknown, a file is malformed (see :func:`read_idx`),
        the images are not uint8, or images and labels do not match; the
        message names the file.

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
        X, y = _read_mnist_pair(directory, name)
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


def _read_mnist_pair(directory, name):
    """The images and labels of one subset, checked against each other."""
    image_file, label_file = (_find(directory, f) for f in _MNIST_FILES[name])
    X, y = read_idx(image_file), read_idx(label_file)
    if X.ndim != 3 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(
            f"MNIST {name} files do not match: images {X.shape} in {str(image_file)!r}, "
            f"labels {y.shape} in {str(label_file)!r}"
        )
    if X.dtype != np.uint8:  # scale=True divides by 255
        raise ValueError(f"MNIST images {str(image_file)!r}: expected uint8 pixels, got {X.dtype}")
    if y.dtype.kind not in "iu":
        raise ValueError(f"MNIST labels {str(label_file)!r}: expected integers, got {y.dtype}")
    return X, y


# -- CIFAR-10 ----------------------------------------------------------------------------

_CIFAR_BATCHES = {
    "train": [f"data_batch_{i}" for i in range(1, 6)],
    "test": ["test_batch"],
    "all": [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"],
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
            return codecs.encode
        return getattr(np, name)


#: Upper bounds on the size of the files, checked before any is read: a batch of the
#: archive is about 30 MiB (46 MiB when pickled again by Python 3), batches.meta 158 bytes.
_CIFAR_MAX_BATCH_BYTES = 64 << 20
_CIFAR_MAX_META_BYTES = 1 << 20
#: The archive has nine members (the folder, the seven files and readme.html).
_CIFAR_MAX_MEMBERS = 64
_CIFAR_META = "batches.meta"


def _unpickle(data, where, what):
    try:
        return _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:
        raise ValueError(f"{where} is not a CIFAR-10 {what} file: {exc}") from None


def _check_cifar_size(name, size, where):
    """Refuse, before reading it, a file larger than a CIFAR-10 file can be."""
    limit = _CIFAR_MAX_META_BYTES if name == _CIFAR_META else _CIFAR_MAX_BATCH_BYTES
    if size > limit:
        kind = _CIFAR_META if name == _CIFAR_META else "file"
        raise ValueError(
            f"{where} is {size} bytes, but a {kind} of the CIFAR-10 python version is at most "
            f"{limit} bytes: is this the CIFAR-10 python version?"
        )


def _cifar_files(path, names):
    """Yield ``(name, bytes, where)`` for each of ``names`` under ``path`` (the
    directory or the archive), once every one is found and its size checked."""
    path = Path(path)
    if path.is_file():
        yield from _archive_files(path, names)
        return
    if not path.is_dir():
        raise FileNotFoundError(f"CIFAR-10 path {str(path)!r} does not exist")
    directory = path
    if not any((path / name).is_file() for name in names):
        directory = path / "cifar-10-batches-py"
        if not directory.is_dir():
            directory = path
    files = {name: directory / name for name in names}
    for name, file in files.items():
        if not file.is_file():
            raise FileNotFoundError(f"No CIFAR-10 file {name!r} in {str(directory)!r}")
        _check_cifar_size(name, file.stat().st_size, str(file))
    for name, file in files.items():
        yield name, file.read_bytes(), str(file)


def _corrupt_archive(path, exc):
    return ValueError(
        f"CIFAR-10 archive {str(path)!r} is truncated or corrupt ({type(exc).__name__}: "
        f"{exc}): download cifar-10-python.tar.gz again"
    )


#: What reading a truncated or corrupt .tar.gz raises.
_ARCHIVE_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, tarfile.TarError)


@contextlib.contextmanager
def _archive_errors(path):
    """A read error of the archive as a ValueError that names it."""
    try:
        yield
    except _ARCHIVE_ERRORS as exc:
        raise _corrupt_archive(path, exc) from exc


def _open_archive(stream, path, gzipped):
    """``tarfile.open`` on ``stream`` (already decompressed when ``gzipped``), its errors
    ValueErrors that name the archive."""
    try:
        return tarfile.open(fileobj=stream, mode="r:" if gzipped else "r:*")
    except tarfile.ReadError as exc:
        if gzipped:  # a damaged download
            raise _corrupt_archive(path, exc) from exc
        raise ValueError(
            f"CIFAR-10 path {str(path)!r} ({path.stat().st_size} bytes) is neither a directory "
            "nor a tar archive: expected cifar-10-python.tar.gz or the folder it extracts to"
        ) from None
    except _ARCHIVE_ERRORS as exc:
        raise _corrupt_archive(path, exc) from exc


def _archive_files(path, names):
    """:func:`_cifar_files` from the archive, read in memory in the archive's order once
    its member headers are checked and, when gzipped, the whole stream's checksum."""
    with open(path, "rb") as file:
        gzipped = file.read(2) == b"\x1f\x8b"
        file.seek(0)
        stream = gzip.GzipFile(fileobj=file) if gzipped else file
        with stream, _open_archive(stream, path, gzipped) as archive:
            with _archive_errors(path):
                members = _archive_members(archive, path, names)
                while gzipped and stream.read(1 << 20):  # to the end: CRC and length checked
                    pass
            for name, member in sorted(members.items(), key=lambda item: item[1].offset):
                with _archive_errors(path):
                    data = archive.extractfile(member).read()
                yield name, data, f"{path}:{member.name}"


def _archive_members(archive, path, names):
    """``{name: member}`` from the member headers, before any data is read: each one
    present and no larger than a CIFAR-10 file, nothing else too large or too many."""
    found, seen = {}, []
    for member in archive:
        seen.append(member.name)
        where = f"{path}:{member.name}"
        if len(seen) > _CIFAR_MAX_MEMBERS:
            raise ValueError(
                f"CIFAR-10 archive {str(path)!r} has more than {_CIFAR_MAX_MEMBERS} members: "
                "it is not cifar-10-python.tar.gz"
            )
        name = member.name.rstrip("/").rsplit("/", 1)[-1]
        _check_cifar_size(name, member.size, where)  # any member: at most a batch's size
        if name not in names or not member.isfile():
            continue
        if name in found and found[name].name != member.name:
            raise ValueError(
                f"CIFAR-10 archive {str(path)!r} has two {name} files: "
                f"{found[name].name!r} and {member.name!r}"
            )
        found[name] = member
    missing = [name for name in names if name not in found]
    if missing:
        raise ValueError(
            f"CIFAR-10 archive {str(path)!r} has no {', '.join(missing)} (its members: "
            f"{reprlib.repr(seen)}): it is not the complete cifar-10-python.tar.gz, "
            "download it again"
        )
    return found


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
        If the path, or a file of the directory, is missing.
    ValueError
        If a file is not a CIFAR-10 batch or meta file (no ``data``, labels
        missing, of another length or outside ``0..9``, no ten
        ``label_names``), or is larger than one can be; if the archive is not
        a tar archive, is truncated or corrupt, or lacks a file. Every
        message names the file. The archive's member headers are checked
        before any data is read.

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
    batches = _CIFAR_BATCHES[subset]
    parsed = {}
    with contextlib.closing(_cifar_files(path, [_CIFAR_META] + batches)) as files:
        for name, data, where in files:
            parsed[name] = _parse_cifar_file(name, data, where)
    X = np.concatenate([parsed[name][0] for name in batches])
    X = X.reshape(-1, 3, 32, 32).astype(np.float32)
    X /= 255.0
    return X, np.concatenate([parsed[name][1] for name in batches]), parsed[_CIFAR_META]


def _parse_cifar_file(name, data, where):
    """The class names of batches.meta, or a batch's ``(images, labels)``."""
    what = "meta" if name == _CIFAR_META else "batch"
    content = _unpickle(data, where, what)
    if not isinstance(content, dict):
        raise ValueError(
            f"CIFAR-10 {what} file {where}: expected a dict, got {type(content).__name__}"
        )
    if name == _CIFAR_META:
        return _cifar_classes(content, where)
    images = _cifar_images(content, where)
    return images, _cifar_labels(content, where, len(images))


def _cifar_entry(content, key, where):
    """``content[key]``, the key bytes (as CIFAR-10 has them) or str."""
    for candidate in (key.encode(), key):
        if candidate in content:
            return content[candidate]
    raise ValueError(
        f"CIFAR-10 file {where} has no {key!r} entry (its keys: {reprlib.repr(list(content))})"
    )


def _cifar_classes(meta, where):
    names = _cifar_entry(meta, "label_names", where)
    if (
        not isinstance(names, (list, tuple))
        or len(names) != 10
        or not all(isinstance(c, (bytes, str)) for c in names)
    ):
        raise ValueError(
            f"CIFAR-10 meta file {where}: 'label_names' must be a list of 10 class names, "
            f"got {reprlib.repr(names)}"
        )
    try:
        return [c.decode() if isinstance(c, bytes) else c for c in names]
    except UnicodeDecodeError as exc:
        raise ValueError(f"CIFAR-10 meta file {where}: a class name is not text: {exc}") from None


def _cifar_images(batch, where):
    data = _cifar_entry(batch, "data", where)
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or (data.shape[1] != 3 * 32 * 32)
    ):
        shape = getattr(data, "shape", None)
        raise ValueError(
            f"CIFAR-10 batch {where}: expected uint8 data of shape (n, 3072), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {shape}"
        )
    return data


def _cifar_labels(batch, where, n):
    entry = _cifar_entry(batch, "labels", where)
    try:
        labels = np.asarray(entry)
    except ValueError:  # a ragged list
        labels = None
    if labels is None or labels.ndim != 1 or (labels.size and labels.dtype.kind not in "iu"):
        raise ValueError(
            f"CIFAR-10 batch {where}: 'labels' must be a list of integers, "
            f"got {reprlib.repr(entry)}"
        )
    if labels.shape[0] != n:
        raise ValueError(f"CIFAR-10 batch {where}: {labels.shape[0]} labels for {n} images")
    labels = labels.astype(np.int64)
    if n and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(
            f"CIFAR-10 batch {where}: labels must be in 0..9, "
            f"got values from {labels.min()} to {labels.max()}"
        )
    return labels


# -- a folder of images per class -------------------------------------------------------

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}
#: Pillow's modes of 16-bit grayscale PNGs ("I" in Pillow versions before 10).
_SIXTEEN_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I"}


def load_image_folder(path, image_size=None, *, color_mode="rgb"):
    """Load images stored as one subfolder per class (the cats-vs-dogs layout).

    ``path/cat/001.jpg``, ``path/dog/002.png``, ...: each subfolder is a
    class (in sorted order), each PNG or JPEG file in it an image, read with
    Pillow (``pip install "sknet-nn[images]"``). Other files, and hidden
    files and folders (names starting with ``.``, such as
    ``.ipynb_checkpoints``), are ignored.

    Parameters
    ----------
    path : str or path-like
        The folder of class subfolders.
    image_size : int or tuple (height, width) or None, default=None
        Resize every image to this size (bilinear); an int ``n`` is the square
        ``(n, n)``. ``None`` keeps the sizes, which must then all be the same.
    color_mode : {'rgb', 'grayscale'}, default='rgb'
        Three channels, or one (luminance).

    Returns
    -------
    X : ndarray of shape (n_samples, channels, height, width), float32
        Pixels in ``[0, 1]``, channels first: 8-bit images are divided by
        255, 16-bit (grayscale PNG) ones by 65535.
    y : ndarray of shape (n_samples,), int64
        Indices into ``classes``.
    classes : list of str
        The subfolder names, sorted.

    Raises
    ------
    TypeError
        If ``image_size`` is not an int or a pair of ints.
    ValueError
        If ``image_size`` is not positive or ``color_mode`` unknown; on a file
        Pillow cannot read (or of floating-point pixels), an image of another
        size (without ``image_size``), a class folder with no image, or no
        class at all; the message names the file or folder.

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
    >>> load_image_folder(tmp.name, 5)[0].shape
    (2, 3, 5, 5)
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
    image_size = _check_image_size(image_size)
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {str(root)!r} does not exist")
    classes = sorted(e.name for e in root.iterdir() if e.is_dir() and not _hidden(e))
    if not classes:
        raise ValueError(f"{str(root)!r} has no class subfolders")
    mode = "RGB" if color_mode == "rgb" else "L"
    images, labels, first = [], [], None
    for label, name in enumerate(classes):
        for file in _image_files(root / name):
            pixels = _read_image(file, mode, image_size)
            if first is None:
                first = (file, pixels.shape[:2])
            elif pixels.shape[:2] != first[1]:
                (h, w), (h0, w0) = pixels.shape[:2], first[1]
                raise ValueError(
                    f"image {str(file)!r} is {h}x{w}, the others {h0}x{w0} (as "
                    f"{str(first[0])!r}): pass image_size=(height, width) to resize them"
                )
            images.append(pixels.transpose(2, 0, 1))
            labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.int64), classes


def _hidden(entry):
    return entry.name.startswith(".")


def _image_files(folder):
    """The class folder's PNG and JPEG files, sorted; an error if there is none."""
    files = sorted(
        f
        for f in folder.iterdir()
        if f.is_file() and not _hidden(f) and f.suffix.lower() in _IMAGE_SUFFIXES
    )
    if not files:
        raise ValueError(f"class folder {str(folder)!r} has no PNG or JPEG image")
    return files


def _check_image_size(image_size):
    """``image_size`` as a ``(height, width)`` tuple of ints (or None), validated."""
    if image_size is None:
        return None
    if _is_int(image_size):
        size = (image_size, image_size)
    elif isinstance(image_size, (tuple, list, np.ndarray)) and all(map(_is_int, image_size)):
        size = tuple(image_size)
    else:
        raise TypeError(
            f"image_size must be an int or a (height, width) pair of ints, got {image_size!r}"
        )
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(
            "image_size must be a positive int or a (height, width) pair of positive ints, "
            f"got {image_size!r}"
        )
    return (int(size[0]), int(size[1]))


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _read_image(file, mode, image_size):
    """One image file as float32 pixels ``(h, w, c)`` in ``[0, 1]``, converted to
    ``mode`` ('RGB' or 'L') and resized; 16-bit images scaled by 65535."""
    from PIL import Image

    try:
        with Image.open(file) as image:
            image.load()
            source_mode = image.mode
            if source_mode in _SIXTEEN_BIT_MODES or source_mode == "F":
                values = np.asarray(image)
            else:
                image = image.convert(mode)
                if image_size is not None:
                    image = image.resize((image_size[1], image_size[0]), Image.Resampling.BILINEAR)
                values = np.asarray(image, dtype=np.uint8)
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, ...
        raise ValueError(f"cannot read image {str(file)!r}: {exc}") from exc
    if values.dtype == np.uint8:
        pixels = values.astype(np.float32)
        pixels /= 255.0
        return pixels.reshape(values.shape[:2] + (-1,))
    return _sixteen_bit_pixels(values, file, source_mode, mode, image_size)


def _sixteen_bit_pixels(values, file, source_mode, mode, image_size):
    """A 16-bit grayscale image's pixels divided by 65535, resized (in floating point)
    and, for 'RGB', its one channel repeated three times."""
    from PIL import Image

    if values.dtype.kind == "f" or (values.size and (values.min() < 0 or values.max() > 65535)):
        low, high = (values.min(), values.max()) if values.size else (0, 0)
        raise ValueError(
            f"cannot read image {str(file)!r}: mode {source_mode!r} with values from {low} "
            f"to {high} is not 8- or 16-bit: no bit depth to scale it to [0, 1] by"
        )
    pixels = values.astype(np.float32)
    pixels /= 65535.0
    if image_size is not None:
        resized = Image.fromarray(pixels).resize(
            (image_size[1], image_size[0]), Image.Resampling.BILINEAR
        )
        pixels = np.clip(np.asarray(resized, dtype=np.float32), 0.0, 1.0)
    channels = 3 if mode == "RGB" else 1
    return np.repeat(pixels[:, :, None], channels, axis=2)

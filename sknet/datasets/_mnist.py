"""MNIST: IDX files (optionally gzipped), read with their headers checked."""

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

from sknet.datasets._paths import MNIST_ENV_VAR, data_path

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
    path = data_path(
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

"""Dataset loaders: MNIST from its IDX files, and the IDX format itself.

sknet downloads nothing: point :func:`load_mnist` at a directory holding the
standard files (``train-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, ...,
optionally gzipped), or set the ``SKNET_MNIST_DIR`` environment variable.
"""

import gzip
import os
from pathlib import Path

import numpy as np

__all__ = ["MNIST_ENV_VAR", "load_mnist", "read_idx"]

MNIST_ENV_VAR = "SKNET_MNIST_DIR"

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


def _find(directory, name):
    for candidate in (name, name + ".gz", name.replace("-idx", ".idx")):
        path = directory / candidate
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"No MNIST file {name!r} (or {name}.gz) in {str(directory)!r}"
    )


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
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}")
    if path is None:
        path = os.environ.get(MNIST_ENV_VAR)
        if not path:
            raise FileNotFoundError(
                "load_mnist needs the directory of the MNIST IDX files: pass it "
                f"as `path` or set the {MNIST_ENV_VAR} environment variable."
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

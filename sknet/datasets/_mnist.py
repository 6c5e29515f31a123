"""MNIST: IDX files (optionally gzipped), read with their headers checked."""

import contextlib
import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np
from sklearn.utils._param_validation import validate_params

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


@validate_params({"path": [str, os.PathLike]}, prefer_skip_nested_validation=True)
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
        corrupt gzip file (the message names it). The size the header
        declares is checked against the file before the data are read (a
        gzip file's by decompressing it once, keeping nothing), so that only
        an array of that size is ever allocated.

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
    with _IdxFile(path) as idx:
        return idx.read_body()


class _IdxFile:
    """An open IDX file (raw or gzip-compressed) whose header is read on entry.

    On entry: ``dtype`` (big-endian, as stored), ``shape`` and ``size`` (the
    bytes the header declares), checked against a raw file's size before
    anything else is read. :meth:`read_body` then reads the data into an
    array of exactly that size; a gzip stream is first decompressed once,
    nothing kept, to check that it holds that many bytes, so a small file
    declaring a large body allocates nothing. Gzip errors are ValueErrors
    that name the file.
    """

    def __init__(self, path):
        self.path = Path(path)

    def __enter__(self):
        self._file = open(self.path, "rb")
        try:
            self._gzipped = self._file.read(2) == b"\x1f\x8b"
            self._file.seek(0)
            self._stream = gzip.GzipFile(fileobj=self._file) if self._gzipped else self._file
            with self._gzip_errors():
                self._read_header()
        except BaseException:
            self._file.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self._stream.close()
        self._file.close()

    @contextlib.contextmanager
    def _gzip_errors(self):
        try:
            yield
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ValueError(
                f"{self.path} is a truncated or corrupt gzip file ({exc}): download it again"
            ) from exc

    def _read_header(self):
        magic = self._stream.read(4)
        if len(magic) < 4 or magic[0] != 0 or magic[1] != 0:
            raise ValueError(f"{self.path} is not an IDX file: bad magic number {magic!r}")
        type_code, ndim = magic[2], magic[3]
        if type_code not in _IDX_DTYPES:
            raise ValueError(f"{self.path}: unknown IDX data type code 0x{type_code:02x}")
        dims = self._stream.read(4 * ndim)
        if len(dims) < 4 * ndim:
            raise ValueError(f"{self.path}: truncated IDX header")
        self.shape = tuple(int(d) for d in np.frombuffer(dims, ">u4"))
        self.dtype = _IDX_DTYPES[type_code]
        self.header = 4 + 4 * ndim
        self.size = self.header + math.prod(self.shape) * self.dtype.itemsize  # no overflow
        if not self._gzipped:
            file_size = os.fstat(self._file.fileno()).st_size
            if file_size != self.size:
                raise self._size_error(f"{file_size} bytes")

    def _size_error(self, actual):
        return ValueError(
            f"{self.path}: IDX header declares shape {self.shape} ({self.size} bytes), but "
            f"the file has {actual}"
        )

    def read_body(self):
        """The data, in an array of the declared shape and (native-endian) type."""
        with self._gzip_errors():
            if self._gzipped:  # decompressed once, nothing kept: the declared size?
                length = self.header + _skip(self._stream, self.size - self.header + 1)
                if length != self.size:
                    more = length > self.size
                    raise self._size_error(
                        f"more than {self.size} bytes" if more else f"{length} bytes"
                    )
                self._stream.seek(self.header)
            array = np.empty(self.shape, self.dtype.newbyteorder("="))
            flat = memoryview(array.reshape(-1).view(np.uint8))
            read = _read_into(self._stream, flat)
            if read < len(flat):  # a raw file shortened since its size was read
                raise self._size_error(f"{self.header + read} bytes")
            if self._gzipped and self._stream.read(1):  # to the end: CRC and length checked
                raise self._size_error(f"more than {self.size} bytes")
        if not self.dtype.isnative:
            array.byteswap(inplace=True)
        return array


def _skip(stream, size, chunk=256 << 10):
    """Read and drop up to ``size`` bytes of ``stream``; how many there were."""
    skipped = 0
    while skipped < size:
        part = stream.read(min(chunk, size - skipped))
        if not part:
            break
        skipped += len(part)
    return skipped


def _read_into(stream, buffer, chunk=256 << 10):
    """Fill ``buffer`` from ``stream`` in chunks (a gzip stream reads each into a copy
    first: small chunks keep that small); how many bytes were read."""
    done = 0
    while done < len(buffer):
        n = stream.readinto(buffer[done : done + chunk])
        if not n:
            break
        done += n
    return done


def _find(directory, name):
    for candidate in (name, name + ".gz", name.replace("-idx", ".idx")):
        path = directory / candidate
        if path.is_file():
            return path
    raise FileNotFoundError(f"No MNIST file {name!r} (or {name}.gz) in {str(directory)!r}")


@validate_params(
    {"path": [str, os.PathLike, None], "flatten": ["boolean"], "scale": ["boolean"]},
    prefer_skip_nested_validation=True,
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
    NotADirectoryError
        If ``path`` is a file, not a folder.
    ValueError
        If ``subset`` is unknown, a file is malformed (see :func:`read_idx`),
        the images are not uint8, a label is not an integer in ``0..9``, or
        images and labels do not match; the message names the file (and
        the first label outside ``0..9``). Both files' headers are compared
        before any data is read.

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
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(
            f"MNIST directory {str(directory)!r} is a file, not a folder: give the folder "
            "that holds the IDX files"
        )
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
    """The images and labels of one subset: both headers compared before any data is read."""
    image_file, label_file = (_find(directory, f) for f in _MNIST_FILES[name])
    with _IdxFile(image_file) as images, _IdxFile(label_file) as labels:
        X_shape, y_shape = images.shape, labels.shape
        if len(X_shape) != 3 or len(y_shape) != 1 or X_shape[0] != y_shape[0]:
            raise ValueError(
                f"MNIST {name} files do not match: images {X_shape} in {str(image_file)!r}, "
                f"labels {y_shape} in {str(label_file)!r}"
            )
        if images.dtype != np.uint8:  # scale=True divides by 255
            raise ValueError(
                f"MNIST images {str(image_file)!r}: expected uint8 pixels, got "
                f"{images.dtype.newbyteorder('=')}"
            )
        if labels.dtype.kind not in "iu":
            raise ValueError(
                f"MNIST labels {str(label_file)!r}: expected integers, got "
                f"{labels.dtype.newbyteorder('=')}"
            )
        return images.read_body(), _checked_labels(labels.read_body(), label_file)


def _checked_labels(y, path):
    """``y`` if every label is a digit, ``0..9``; else a ValueError naming ``path``
    and the first label that is not (above 9, or below 0 in a signed type)."""
    bad = np.flatnonzero((y < 0) | (y > 9))
    if bad.size:
        raise ValueError(
            f"MNIST labels {str(path)!r}: labels must be in 0..9, got {y[bad[0]]} at index "
            f"{bad[0]} of {y.shape[0]}"
        )
    return y

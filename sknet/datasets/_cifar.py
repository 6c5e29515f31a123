"""CIFAR-10: the "python version" archive or its extracted files, checked before reading."""

import contextlib
import gzip
import os
import reprlib
import tarfile
import zlib
from pathlib import Path

import numpy as np
from sklearn.utils._param_validation import validate_params

from sknet.datasets._paths import CIFAR10_ENV_VAR, data_path
from sknet.datasets._pickle import load_batch
from sknet.datasets._tar import BoundedReader

_CIFAR_BATCHES = {
    "train": [f"data_batch_{i}" for i in range(1, 6)],
    "test": ["test_batch"],
    "all": [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"],
}


#: Upper bounds on the size of the files, checked before any is read: a batch of the
#: archive is about 30 MiB (46 MiB when pickled again by Python 3), batches.meta 158 bytes.
_CIFAR_MAX_BATCH_BYTES = 64 << 20
_CIFAR_MAX_META_BYTES = 1 << 20
#: The archive has nine members (the folder, the seven files and readme.html).
_CIFAR_MAX_MEMBERS = 64
#: Bytes an archive may decompress to: cifar-10-python.tar.gz decompresses to 178 MiB.
_CIFAR_MAX_ARCHIVE_BYTES = 512 << 20
_CIFAR_META = "batches.meta"


def _unpickle(data, where, what):
    try:
        return load_batch(data)
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
        return tarfile.open(fileobj=stream, mode="r:")
    except tarfile.ReadError as exc:
        if gzipped:  # a damaged download
            raise _corrupt_archive(path, exc) from exc
        raise ValueError(
            f"CIFAR-10 path {str(path)!r} ({path.stat().st_size} bytes) is neither a directory "
            "nor a tar archive: expected cifar-10-python.tar.gz or the folder it extracts to"
        ) from None
    except _ARCHIVE_ERRORS as exc:
        raise _corrupt_archive(path, exc) from exc


#: Compressions other than gzip, by their magic bytes: refused (CIFAR-10 comes gzipped).
_OTHER_COMPRESSIONS = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


def _archive_files(path, names):
    """:func:`_cifar_files` from the archive, read in memory in the archive's order once
    its member headers are checked and, when gzipped, the whole stream's checksum.

    Every read is bounded (:class:`~sknet.datasets._tar.BoundedReader`): the
    headers' (long names, pax records), each member's by its checked size, and
    the bytes decompressed in all by :data:`_CIFAR_MAX_ARCHIVE_BYTES`.
    """
    with open(path, "rb") as file:
        magic = file.read(6)
        file.seek(0)
        for prefix, kind in _OTHER_COMPRESSIONS.items():
            if magic.startswith(prefix):
                raise ValueError(
                    f"CIFAR-10 archive {str(path)!r} is compressed with {kind}: expected "
                    "cifar-10-python.tar.gz (gzip), an uncompressed tar, or the folder"
                )
        gzipped = magic.startswith(b"\x1f\x8b")
        stream = gzip.GzipFile(fileobj=file) if gzipped else file
        reader = BoundedReader(stream, f"CIFAR-10 archive {str(path)!r}", _CIFAR_MAX_ARCHIVE_BYTES)
        with stream, _open_archive(reader, path, gzipped) as archive:
            with _archive_errors(path):
                members = _archive_members(archive, path, names)
                if gzipped:
                    reader.drain()  # to the end: CRC and length checked
            for name, member in sorted(members.items(), key=lambda item: item[1].offset):
                with _archive_errors(path):
                    data = reader.read_member(member)
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


@validate_params({"path": [str, os.PathLike, None]}, prefer_skip_nested_validation=True)
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
        before any data is read, and every size a file declares (a pickled
        array's shape, a pickled length, a tar header's long name or pax
        record, the bytes decompressed) before anything of that size is
        allocated: a small file that declares gigabytes is refused as such.

    Examples
    --------
    >>> X, y, classes = load_cifar10("data/cifar-10-python.tar.gz")  # doctest: +SKIP
    >>> X.shape, classes[y[0]]  # doctest: +SKIP
    ((10000, 3, 32, 32), 'cat')
    """
    path = data_path(
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
    return data.view(np.ndarray)  # not the unpickler's checked subclass


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

"""Tests for sknet/datasets/_cifar.py: CIFAR-10 archives and files written here."""

import gzip
import io
import os
import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.datasets import load_cifar10

CIFAR_CLASSES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def write_cifar(directory, n=4, seed=0):
    """Batches in CIFAR-10's Python format (dicts with bytes keys, pickled)."""
    rng = np.random.RandomState(seed)
    directory.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.randint(0, 256, (n, 3072)).astype(np.uint8)
        labels = list(rng.randint(0, 10, n))
        batches[name] = (data, labels)
        with open(directory / name, "wb") as f:
            pickle.dump(
                {
                    b"batch_label": name.encode(),
                    b"labels": labels,
                    b"data": data,
                    b"filenames": [b"x.png"] * n,
                },
                f,
                protocol=2,
            )
    with open(directory / "batches.meta", "wb") as f:
        pickle.dump(
            {b"label_names": [c.encode() for c in CIFAR_CLASSES], b"num_cases_per_batch": n},
            f,
            protocol=2,
        )
    return batches


def test_load_cifar10_from_a_directory_and_from_the_archive(tmp_path):
    import tarfile

    batches = write_cifar(tmp_path / "cifar-10-batches-py")
    X, y, classes = load_cifar10(tmp_path, subset="test")
    data, labels = batches["test_batch"]
    assert X.shape == (4, 3, 32, 32) and X.dtype == np.float32 and classes == CIFAR_CLASSES
    # rows are 1024 red, then green, then blue values, row-major per channel
    assert_allclose(X[1, 2, 0, 5], data[1, 2048 + 5] / 255.0)
    assert_array_equal(y, labels)
    assert y.dtype == np.int64
    X_all, y_all, _ = load_cifar10(tmp_path / "cifar-10-batches-py", subset="all")
    assert X_all.shape == (24, 3, 32, 32)
    assert_array_equal(y_all[:4], batches["data_batch_1"][1])
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    before = sorted(p.name for p in tmp_path.iterdir())
    X_tar, y_tar, _ = load_cifar10(archive, subset="train")
    assert X_tar.shape == (20, 3, 32, 32)
    assert_array_equal(X_tar, X_all[:20])
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing extracted


def test_load_cifar10_from_the_environment(tmp_path, monkeypatch):
    write_cifar(tmp_path)
    monkeypatch.setenv("SKNET_CIFAR10_DIR", str(tmp_path))
    assert load_cifar10()[0].shape == (4, 3, 32, 32)
    monkeypatch.delenv("SKNET_CIFAR10_DIR")
    with pytest.raises(FileNotFoundError, match="SKNET_CIFAR10_DIR"):
        load_cifar10()


def test_bad_cifar_files_name_the_file(tmp_path):
    write_cifar(tmp_path)
    with pytest.raises(ValueError, match="subset must be"):
        load_cifar10(tmp_path, subset="validation")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cifar10(tmp_path / "nowhere")
    (tmp_path / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="test_batch is not a CIFAR-10 batch file"):
        load_cifar10(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(ValueError, match=r"test_batch: expected uint8 data of shape \(n, 3072\)"):
        load_cifar10(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 12]}, f)
    with pytest.raises(ValueError, match=r"test_batch: labels must be in 0\.\.9, got .* to 12"):
        load_cifar10(tmp_path)
    (tmp_path / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        load_cifar10(tmp_path, subset="train")


def test_a_cifar_batch_cannot_run_code(tmp_path):
    write_cifar(tmp_path)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": Evil(), b"labels": []}, f)
    with pytest.raises(ValueError, match="posix.system is not allowed|nt.system is not allowed"):
        load_cifar10(tmp_path)


def cifar_batch(n=2, labels="zeros"):
    """A pickled batch of ``n`` black images; no labels entry when ``labels`` is None."""
    content = {b"data": np.zeros((n, 3072), np.uint8), b"labels": labels}
    if labels == "zeros":
        content[b"labels"] = [0] * n
    if labels is None:
        del content[b"labels"]
    return pickle.dumps(content, protocol=2)


CIFAR_META = pickle.dumps({b"label_names": [c.encode() for c in CIFAR_CLASSES]}, protocol=2)


def write_archive(path, members, mode="w:gz"):
    """A tar archive of ``{name: bytes}``, under cifar-10-batches-py/ as the real one."""
    import tarfile

    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "batch, message",
    [
        (cifar_batch(labels=None), "no 'labels' entry"),
        (cifar_batch(n=2, labels=[0, 1, 2]), "3 labels for 2 images"),
        (cifar_batch(labels=[0, -1]), r"labels must be in 0\.\.9, got values from -1 to 0"),
        (cifar_batch(labels=[0.5, 1.7]), "'labels' must be a list of integers"),
        (cifar_batch(labels=[[0], [1, 2]]), "'labels' must be a list of integers"),
        (pickle.dumps({b"labels": [0]}), "no 'data' entry"),
    ],
    ids=["missing", "too-many", "negative", "floats", "ragged", "no-data"],
)
def test_malformed_cifar_labels_name_the_file(tmp_path, batch, message):
    write_cifar(tmp_path)
    (tmp_path / "test_batch").write_bytes(batch)
    with pytest.raises(ValueError, match=f"test_batch.*{message}"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize(
    "meta, message",
    [
        ({b"num_cases_per_batch": 4}, "has no 'label_names' entry"),
        ({b"label_names": b"abcdefghij"}, "'label_names' must be a list of 10 class names"),
        ({b"label_names": [b"cat"] * 9}, "'label_names' must be a list of 10 class names"),
        ({b"label_names": [3] * 10}, "'label_names' must be a list of 10 class names"),
        ({b"label_names": [b"\xff"] * 10}, "a class name is not text"),
        ([b"airplane"] * 10, "expected a dict, got list"),
    ],
    ids=["missing", "bytes", "nine", "ints", "not-utf8", "list"],
)
def test_malformed_cifar_meta_names_the_file(tmp_path, meta, message):
    write_cifar(tmp_path)
    (tmp_path / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    with pytest.raises(ValueError, match=f"batches.meta.*{message}"):
        load_cifar10(tmp_path)


def test_truncated_or_corrupt_cifar_archive(tmp_path):
    archive = write_archive(
        tmp_path / "cifar.tar.gz", {"batches.meta": CIFAR_META, "test_batch": cifar_batch()}
    )
    data = archive.read_bytes()
    assert load_cifar10(archive)[0].shape == (2, 3, 32, 32)
    for cut in (20, len(data) // 2, len(data) - 6):  # gzip header only, half, no trailer
        (tmp_path / "cut.tar.gz").write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"cut\.tar\.gz' is truncated or corrupt.*again"):
            load_cifar10(tmp_path / "cut.tar.gz")
    plain = write_archive(tmp_path / "cifar.tar", {"test_batch": cifar_batch(n=40)}, mode="w")
    (tmp_path / "cut.tar").write_bytes(plain.read_bytes()[:5000])  # inside test_batch
    with pytest.raises(ValueError, match=r"cut\.tar' is truncated or corrupt"):
        load_cifar10(tmp_path / "cut.tar")


def test_a_file_that_is_no_archive(tmp_path):
    (tmp_path / "test_batch").write_bytes(cifar_batch())
    with pytest.raises(ValueError, match=r"test_batch' \(\d+ bytes\) is neither a directory"):
        load_cifar10(tmp_path / "test_batch")
    (tmp_path / "tiny.tar.gz").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match=r"tiny\.tar\.gz' \(3 bytes\) is neither a directory"):
        load_cifar10(tmp_path / "tiny.tar.gz")


def test_an_archive_of_other_files_fails_on_its_member_names(tmp_path):
    import tarfile

    archive = tmp_path / "other.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("notes.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    with pytest.raises(ValueError, match=r"has no batches\.meta, test_batch \(its members: "):
        load_cifar10(archive)
    without_one = write_archive(
        tmp_path / "partial.tar.gz", {"batches.meta": CIFAR_META, "test_batch": cifar_batch()}
    )
    with pytest.raises(ValueError, match=r"has no data_batch_1, data_batch_2, .*again"):
        load_cifar10(without_one, subset="train")


def test_a_member_header_too_large_for_cifar_fails_before_reading(tmp_path):
    import tarfile

    # a few hundred bytes: one header declaring a 300 MiB test_batch, and no data
    info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
    info.size = 300 << 20
    (tmp_path / "liar.tar.gz").write_bytes(gzip.compress(info.tobuf() + bytes(1024)))
    with pytest.raises(ValueError, match=r"test_batch is 314572800 bytes, but a file of the"):
        load_cifar10(tmp_path / "liar.tar.gz")


class Zeros(io.RawIOBase):
    """``size`` zero bytes, streamed: a large member without a large buffer."""

    def __init__(self, size):
        self.left = size

    def readable(self):
        return True

    def readinto(self, buffer):
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def test_a_tiny_archive_of_a_large_member_fails_without_reading_it(tmp_path):
    import tarfile
    import tracemalloc

    size = (64 << 20) + 1024  # more than any CIFAR-10 file; a few hundred KiB compressed
    archive = tmp_path / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros(size)))
    assert archive.stat().st_size < size // 100
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"bomb\.tar\.gz:cifar-10.*test_batch is {size}"):
            load_cifar10(archive)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_an_archive_of_too_many_members(tmp_path):
    members = {f"file_{i}": b"" for i in range(70)}
    archive = write_archive(tmp_path / "many.tar.gz", members)
    with pytest.raises(ValueError, match=r"many\.tar\.gz' has more than 64 members"):
        load_cifar10(archive)


def test_a_directory_file_too_large_for_cifar_fails_before_reading(tmp_path):
    write_cifar(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:
        f.truncate(300 << 20)  # sparse: no disk used
    with pytest.raises(ValueError, match=r"test_batch is 314572800 bytes"):
        load_cifar10(tmp_path)
    with open(tmp_path / "batches.meta", "wb") as f:
        f.truncate(2 << 20)
    with pytest.raises(ValueError, match=r"batches\.meta is 2097152 bytes, but a batches\.meta"):
        load_cifar10(tmp_path)


def test_the_archive_is_closed(tmp_path):
    import gc

    archive = write_archive(
        tmp_path / "cifar.tar.gz", {"batches.meta": CIFAR_META, "test_batch": cifar_batch()}
    )
    (tmp_path / "cut.tar.gz").write_bytes(archive.read_bytes()[:-30])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_cifar10(archive)
        with pytest.raises(ValueError):
            load_cifar10(tmp_path / "cut.tar.gz")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]

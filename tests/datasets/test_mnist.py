"""Tests for sknet/datasets/_mnist.py: IDX files written here, and the real MNIST when present."""

import gzip
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet.datasets import load_mnist, read_idx

# The real MNIST test set, when SKNET_MNIST_DIR points at it.
MNIST_DIR = Path(os.environ.get("SKNET_MNIST_DIR", "") or "mnist-not-configured")
HAVE_MNIST = (MNIST_DIR / "t10k-images-idx3-ubyte.gz").is_file() or (
    MNIST_DIR / "t10k-images-idx3-ubyte"
).is_file()


def write_idx(path, array, type_code=0x08, compress=False):
    header = struct.pack(">BBBB", 0, 0, type_code, array.ndim)
    header += struct.pack(">" + "I" * array.ndim, *array.shape)
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(payload)


def fake_mnist(directory, n=5, compress=True, subset="t10k", seed=0):
    rng = np.random.RandomState(seed)
    images = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
    labels = rng.randint(0, 10, size=n).astype(np.uint8)
    suffix = ".gz" if compress else ""
    write_idx(directory / f"{subset}-images-idx3-ubyte{suffix}", images, compress=compress)
    write_idx(directory / f"{subset}-labels-idx1-ubyte{suffix}", labels, compress=compress)
    return images, labels


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize(
    "dtype, code",
    [
        (np.uint8, 0x08),
        (np.int8, 0x09),
        (np.int16, 0x0B),
        (np.int32, 0x0C),
        (np.float32, 0x0D),
        (np.float64, 0x0E),
    ],
)
def test_read_idx_round_trip(tmp_path, compress, dtype, code):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    write_idx(tmp_path / "a.idx", array, code, compress)
    out = read_idx(tmp_path / "a.idx")
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    assert_array_equal(out, array)


def test_read_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "type").write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x01\x00")
    with pytest.raises(ValueError, match="unknown IDX data type"):
        read_idx(tmp_path / "type")
    write_idx(tmp_path / "short", np.zeros((3, 4), np.uint8))
    data = (tmp_path / "short").read_bytes()
    (tmp_path / "short").write_bytes(data[:-2])
    with pytest.raises(ValueError, match="declares shape"):
        read_idx(tmp_path / "short")


@pytest.mark.parametrize("compress", [False, True])
def test_load_mnist_from_a_directory(tmp_path, compress):
    images, labels = fake_mnist(tmp_path, compress=compress)
    X, y = load_mnist(tmp_path)
    assert X.shape == (5, 784) and X.dtype == np.float32
    assert_array_equal(X, images.reshape(5, -1) / np.float32(255))
    assert_array_equal(y, labels)
    assert y.dtype == np.int64
    raw, _ = load_mnist(tmp_path, flatten=False, scale=False)
    assert raw.shape == (5, 28, 28) and raw.dtype == np.uint8
    assert_array_equal(raw, images)


def test_load_mnist_all_subsets(tmp_path):
    train_images, _ = fake_mnist(tmp_path, n=4, subset="train", seed=1)
    test_images, _ = fake_mnist(tmp_path, n=3, subset="t10k", seed=2)
    X, y = load_mnist(tmp_path, subset="all", scale=False)
    assert X.shape == (7, 784) and y.shape == (7,)
    assert_array_equal(X[:4], train_images.reshape(4, -1))


def test_load_mnist_from_the_environment(tmp_path, monkeypatch):
    fake_mnist(tmp_path)
    monkeypatch.setenv("SKNET_MNIST_DIR", str(tmp_path))
    assert load_mnist()[0].shape == (5, 784)


def test_load_mnist_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("SKNET_MNIST_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="SKNET_MNIST_DIR"):
        load_mnist()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mnist(tmp_path / "nowhere")
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        load_mnist(tmp_path / "t10k-images-idx3-ubyte.gz")  # the file, not its folder
    (tmp_path / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path)
    with pytest.raises(ValueError, match="subset must be"):
        load_mnist(tmp_path, subset="validation")
    images = np.zeros((3, 28, 28), np.uint8)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="do not match"):
        load_mnist(tmp_path)


def test_read_idx_truncated_or_corrupt_gzip_names_the_file(tmp_path):
    write_idx(tmp_path / "a-idx3-ubyte.gz", np.arange(600, dtype=np.uint8), compress=True)
    data = (tmp_path / "a-idx3-ubyte.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.gz is a truncated or corrupt gzip file"):
        read_idx(tmp_path / "cut.gz")
    bad = bytearray(data)
    bad[-6] ^= 0xFF  # the CRC of the decompressed data
    (tmp_path / "crc.gz").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match=r"crc\.gz is a truncated or corrupt gzip file"):
        read_idx(tmp_path / "crc.gz")


def test_read_idx_checks_the_size_of_a_gzip_stream(tmp_path):
    header = struct.pack(">BBBBI", 0, 0, 0x08, 1, 4)
    (tmp_path / "long.gz").write_bytes(gzip.compress(header + bytes(5)))
    with pytest.raises(ValueError, match=r"long\.gz: .* \(12 bytes\), but the file has more"):
        read_idx(tmp_path / "long.gz")
    (tmp_path / "short.gz").write_bytes(gzip.compress(header + bytes(3)))
    with pytest.raises(ValueError, match=r"short\.gz: .* \(12 bytes\), but the file has 11 bytes"):
        read_idx(tmp_path / "short.gz")


def test_read_idx_gzip_declaring_more_than_it_holds(tmp_path):
    # 2**20 * 2**10 * 300 bytes declared (300 GiB), 100 there: no MemoryError
    huge = struct.pack(">BBBBIII", 0, 0, 0x08, 3, 2**20, 2**10, 300)
    (tmp_path / "huge.gz").write_bytes(gzip.compress(huge + bytes(100)))
    with pytest.raises(ValueError, match=r"huge\.gz: .*, but the file has 116 bytes"):
        read_idx(tmp_path / "huge.gz")
    huge = struct.pack(">BBBBIII", 0, 0, 0x08, 3, 2**22, 2**21, 2**21)  # 2**64 bytes
    (tmp_path / "huge.gz").write_bytes(gzip.compress(huge + bytes(100)))
    with pytest.raises(ValueError, match=r"huge\.gz: .*, but the file has 116 bytes"):
        read_idx(tmp_path / "huge.gz")  # OverflowError before


def test_read_idx_shape_that_overflows_int64_names_the_file(tmp_path):
    # 2**22 * 2**21 * 2**21 == 2**64: 0 in int64, so only the header "matched" before
    header = struct.pack(">BBBB", 0, 0, 0x08, 3) + struct.pack(">III", 2**22, 2**21, 2**21)
    (tmp_path / "huge").write_bytes(header)
    with pytest.raises(ValueError, match=r"huge: IDX header declares shape \(4194304, "):
        read_idx(tmp_path / "huge")


def test_load_mnist_refuses_images_or_labels_of_another_type(tmp_path):
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((2, 28, 28), np.int16), 0x0B)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte'?: expected uint8 pixels"):
        load_mnist(tmp_path)  # divided by 255 before, as if it were bytes
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((2, 28, 28), np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([0.5, 1.7], np.float32), 0x0D)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte'?: expected integers"):
        load_mnist(tmp_path)  # truncated to 0 and 1 before


@pytest.mark.skipif(not HAVE_MNIST, reason="MNIST test files not found (set SKNET_MNIST_DIR)")
def test_real_mnist_test_set():
    X, y = load_mnist(MNIST_DIR, subset="test")
    assert X.shape == (10000, 784) and X.dtype == np.float32
    assert 0.0 == X.min() and X.max() == 1.0
    assert_array_equal(y[:10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9])
    assert_array_equal(np.bincount(y), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])


def traced_peak(function):
    tracemalloc.start()
    try:
        result = function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, result


def write_images_header(path, n, body_bytes=None, compress=False):
    """A header for ``n`` 28x28 images and ``body_bytes`` zero bytes (all of them by default)."""
    header = struct.pack(">BBBBIII", 0, 0, 0x08, 3, n, 28, 28)
    body_bytes = n * 784 if body_bytes is None else body_bytes
    if compress:
        path.write_bytes(gzip.compress(header + bytes(body_bytes), compresslevel=1))
        return
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + body_bytes)  # sparse: no disk used


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "gzip"])
def test_load_mnist_compares_both_headers_before_reading_any_data(tmp_path, compress):
    # 47 MB of images, two labels: refused from the headers, the images never read
    suffix = ".gz" if compress else ""
    write_images_header(tmp_path / f"t10k-images-idx3-ubyte{suffix}", 60_000, compress=compress)
    write_idx(
        tmp_path / f"t10k-labels-idx1-ubyte{suffix}", np.zeros(2, np.uint8), compress=compress
    )

    def load():
        with pytest.raises(ValueError, match=r"do not match: images \(60000, 28, 28\) in .*"):
            load_mnist(tmp_path)

    peak, _ = traced_peak(load)
    assert peak < 1 << 20  # reading the images first took 47 MB (94 MB gzipped)
    write_idx(
        tmp_path / f"t10k-labels-idx1-ubyte{suffix}", np.zeros(60_000, np.float32), 0x0D, compress
    )
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte.*expected integers, got float32"):
        traced_peak(lambda: load_mnist(tmp_path))


def test_a_small_gzip_declaring_a_large_body_allocates_nothing(tmp_path):
    # 3 MB of data in a gzip file whose header declares 47 MB
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    write_images_header(path, 60_000, body_bytes=3 << 20, compress=True)

    def read():
        with pytest.raises(
            ValueError, match=r"\(47040016 bytes\), but the file has 3145744 bytes"
        ):
            read_idx(path)

    peak, _ = traced_peak(read)
    assert peak < 2 << 20  # before: the 3 MB read, and joined


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "gzip"])
def test_read_idx_holds_one_copy_of_the_data(tmp_path, compress):
    array = (np.arange(5 * 10**6, dtype=np.int32) * 7919 - 10**9).reshape(1000, -1)
    write_idx(tmp_path / "a.idx", array, 0x0C, compress)  # big-endian int32: swapped in place
    peak, out = traced_peak(lambda: read_idx(tmp_path / "a.idx"))
    assert_array_equal(out, array)
    assert out.dtype == np.int32 and out.dtype.isnative
    assert peak < array.nbytes + (2 << 20)  # before: three copies


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "gzip"])
@pytest.mark.parametrize(
    "labels, code, bad, index",
    [
        (np.array([3, 10, 2], np.uint8), 0x08, 10, 1),
        (np.array([3, 255, 2], np.uint8), 0x08, 255, 1),
        (np.array([3, -1, 2], np.int8), 0x09, -1, 1),
        (np.array([3, 7, -300], np.int16), 0x0B, -300, 2),
        (np.array([12, 1, 0], np.int32), 0x0C, 12, 0),
    ],
    ids=["uint8-10", "uint8-255", "int8-minus-1", "int16-minus-300", "int32-12"],
)
def test_load_mnist_refuses_labels_outside_0_to_9(tmp_path, compress, labels, code, bad, index):
    suffix = ".gz" if compress else ""
    images = np.zeros((3, 28, 28), np.uint8)
    write_idx(tmp_path / f"t10k-images-idx3-ubyte{suffix}", images, compress=compress)
    write_idx(tmp_path / f"t10k-labels-idx1-ubyte{suffix}", labels, code, compress)
    expected = (
        rf"MNIST labels '[^']*t10k-labels-idx1-ubyte{suffix}': labels must be in 0\.\.9, "
        rf"got {bad} at index {index} of 3$"
    )
    with pytest.raises(ValueError, match=expected):
        load_mnist(tmp_path)  # before: returned as they were


def test_load_mnist_takes_labels_0_to_9_of_every_integer_type(tmp_path):
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((10, 28, 28), np.uint8))
    for dtype, code in [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B), (np.int32, 0x0C)]:
        write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.arange(10, dtype=dtype)[::-1], code)
        _, y = load_mnist(tmp_path)
        assert_array_equal(y, np.arange(10)[::-1])

"""Tests for sknet/datasets.py: IDX, CIFAR-10 and image files written here, and the real
MNIST when present."""

import gzip
import io
import os
import pickle
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.datasets import load_cifar10, load_image_folder, load_mnist, read_idx

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


# -- CIFAR-10 --------------------------------------------------------------------------

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


# -- image folders ---------------------------------------------------------------------


def write_images(root, sizes=None, fmt="PNG"):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.RandomState(0)
    paths = {}
    for name, count in (("cat", 2), ("dog", 3)):
        (root / name).mkdir(parents=True)
        for i in range(count):
            h, w = (sizes or {}).get((name, i), (6, 5))
            pixels = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
            path = root / name / f"{i}.{fmt.lower()}"
            Image.fromarray(pixels).save(path, format=fmt)
            paths[(name, i)] = pixels
    (root / "dog" / "notes.txt").write_text("not an image")  # ignored
    return paths


def test_load_image_folder(tmp_path):
    pixels = write_images(tmp_path)
    X, y, classes = load_image_folder(tmp_path)
    assert classes == ["cat", "dog"] and X.shape == (5, 3, 6, 5) and X.dtype == np.float32
    assert_array_equal(y, [0, 0, 1, 1, 1])
    assert_allclose(X[2], pixels[("dog", 0)].transpose(2, 0, 1) / 255.0)
    gray, _, _ = load_image_folder(tmp_path, image_size=(4, 8), color_mode="grayscale")
    assert gray.shape == (5, 1, 4, 8) and 0 <= gray.min() and gray.max() <= 1


def test_image_folder_sizes_and_jpeg(tmp_path):
    write_images(tmp_path, sizes={("dog", 1): (7, 5)}, fmt="JPEG")
    with pytest.raises(ValueError, match=r"dog/1.jpeg' is 7x5, the others 6x5"):
        load_image_folder(tmp_path)
    X, _, _ = load_image_folder(tmp_path, image_size=(6, 5))
    assert X.shape == (5, 3, 6, 5)


def test_bad_image_folders_name_what_is_wrong(tmp_path):
    write_images(tmp_path)
    (tmp_path / "dog" / "broken.png").write_bytes(b"\x89PNG but not really")
    with pytest.raises(ValueError, match="cannot read image .*broken.png"):
        load_image_folder(tmp_path)
    (tmp_path / "dog" / "broken.png").unlink()
    (tmp_path / "bird").mkdir()
    with pytest.raises(ValueError, match="class folder .*bird' has no PNG or JPEG image"):
        load_image_folder(tmp_path)
    with pytest.raises(ValueError, match="has no class subfolders"):
        load_image_folder(tmp_path / "bird")
    with pytest.raises(ValueError, match="image_size must be"):
        load_image_folder(tmp_path, image_size=(0, 4))
    with pytest.raises(ValueError, match="color_mode must be"):
        load_image_folder(tmp_path, color_mode="cmyk")


def test_image_folder_into_a_convnet(tmp_path):
    from sknet import ConvNetClassifier

    write_images(tmp_path)
    X, y, classes = load_image_folder(tmp_path)
    clf = ConvNetClassifier(conv_filters=(2,), dense_units=(4,), max_iter=2, device="cpu")
    with pytest.warns(Warning):  # two epochs do not converge
        clf.fit(X, y)
    assert clf.input_shape_ == (3, 6, 5)
    assert set(np.asarray(classes)[clf.predict(X)]) <= {"cat", "dog"}


@pytest.mark.parametrize("color_mode, channels", [("rgb", 3), ("grayscale", 1)])
def test_16_bit_png_scaled_by_its_bit_depth(tmp_path, color_mode, channels):
    Image = pytest.importorskip("PIL.Image")
    values = np.array([[0, 257, 1000], [32768, 60000, 65535]], dtype=np.uint16)
    (tmp_path / "deep").mkdir()
    Image.fromarray(values).save(tmp_path / "deep" / "0.png")
    with Image.open(tmp_path / "deep" / "0.png") as image:
        assert image.mode in ("I;16", "I")  # really 16-bit
    (tmp_path / "shallow").mkdir()
    Image.fromarray(np.full((2, 3), 255, np.uint8)).save(tmp_path / "shallow" / "0.png")
    X, y, classes = load_image_folder(tmp_path, color_mode=color_mode)
    assert classes == ["deep", "shallow"] and X.shape == (2, channels, 2, 3)
    expected = values.astype(np.float64) / 65535
    for channel in range(channels):
        assert_allclose(X[0, channel], expected, rtol=1e-6)
    assert_allclose(X[1], 1.0)  # 8-bit white: 255 / 255
    resized, _, _ = load_image_folder(tmp_path, image_size=(4, 6), color_mode=color_mode)
    assert resized.shape == (2, channels, 4, 6)
    assert 0.0 <= resized[0].min() and resized[0].max() <= 1.0
    assert 0.3 < resized[0].mean() < 0.6  # not all 1.0 (clipped), nor all 0


def test_images_without_a_bit_depth_are_refused(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    write_images(tmp_path)
    # TIFF content under a .png name: Pillow reads it, floating-point pixels
    Image.fromarray(np.full((6, 5), 0.5, np.float32)).save(tmp_path / "dog" / "f.png", "TIFF")
    with pytest.raises(ValueError, match=r"dog/f\.png'.*mode 'F'.*no bit depth"):
        load_image_folder(tmp_path)
    Image.fromarray(np.full((6, 5), 70000, np.int32)).save(tmp_path / "dog" / "f.png", "TIFF")
    with pytest.raises(ValueError, match=r"dog/f\.png'.*values from 70000 to 70000"):
        load_image_folder(tmp_path)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_every_unreadable_image_names_its_file(tmp_path):
    write_images(tmp_path)
    png = (tmp_path / "dog" / "0.png").read_bytes()
    broken = png.replace(b"IDAT", b"\xf7'=+", 1)  # Pillow raises SyntaxError
    (tmp_path / "dog" / "chunk.png").write_bytes(broken)
    with pytest.raises(ValueError, match=r"cannot read image .*dog/chunk\.png"):
        load_image_folder(tmp_path)
    (tmp_path / "dog" / "chunk.png").unlink()
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)  # DecompressionBombError
    bomb = png[:8] + png_chunk(b"IHDR", header) + png_chunk(b"IEND", b"")
    (tmp_path / "dog" / "bomb.png").write_bytes(bomb)
    with pytest.raises(ValueError, match=r"cannot read image .*dog/bomb\.png"):
        load_image_folder(tmp_path)


def test_the_size_error_names_both_files(tmp_path):
    write_images(tmp_path, sizes={("dog", 2): (4, 5)})
    with pytest.raises(ValueError, match=r"dog/2\.png' is 4x5, the others 6x5 \(as .*cat/0\.png"):
        load_image_folder(tmp_path)


def test_image_size_as_an_int_is_a_square(tmp_path):
    write_images(tmp_path)
    X, _, _ = load_image_folder(tmp_path, 4)
    assert X.shape == (5, 3, 4, 4)
    assert load_image_folder(tmp_path, np.int64(3))[0].shape == (5, 3, 3, 3)
    assert load_image_folder(tmp_path, [2, 3])[0].shape == (5, 3, 2, 3)


@pytest.mark.parametrize(
    "image_size, error",
    [
        (0, ValueError),
        (-3, ValueError),
        ((4,), ValueError),
        ((4, 4, 3), ValueError),
        ((4, -1), ValueError),
        (2.5, TypeError),
        ((4, 4.0), TypeError),
        (True, TypeError),
        ("32", TypeError),
        ({"height": 4}, TypeError),
    ],
)
def test_bad_image_size(tmp_path, image_size, error):
    write_images(tmp_path)
    with pytest.raises(error, match=r"image_size must be .*got"):
        load_image_folder(tmp_path, image_size)


def test_hidden_files_and_folders_are_ignored(tmp_path):
    write_images(tmp_path)
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / "dog" / "._0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    X, y, classes = load_image_folder(tmp_path)
    assert classes == ["cat", "dog"] and X.shape == (5, 3, 6, 5)

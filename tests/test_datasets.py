"""Tests for sknet/datasets.py: IDX, CIFAR-10 and image files written here, and the real
MNIST when present."""

import gzip
import os
import pickle
import struct
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
    with pytest.raises(ValueError, match="expected 2 labels in 0..9"):
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

"""Tests for sknet/datasets/_images.py: folders of images written here."""

import struct
import zlib

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sknet.datasets import load_image_folder


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


def test_a_file_given_as_the_image_folder_is_named_a_file(tmp_path):
    (tmp_path / "images.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    with pytest.raises(NotADirectoryError, match=r"images\.zip' is a file, not a folder"):
        load_image_folder(tmp_path / "images.zip")  # before: "does not exist"
    with pytest.raises(FileNotFoundError, match=r"nowhere' does not exist"):
        load_image_folder(tmp_path / "nowhere")


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

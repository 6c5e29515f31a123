"""A folder of images per class (PNG, JPEG), read with Pillow."""

import numbers
import os
from pathlib import Path

import numpy as np
from sklearn.utils._param_validation import validate_params

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}
#: Pillow's modes of 16-bit grayscale PNGs ("I" in Pillow versions before 10).
_SIXTEEN_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I"}


@validate_params({"path": [str, os.PathLike]}, prefer_skip_nested_validation=True)
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
    FileNotFoundError
        If ``path`` does not exist.
    NotADirectoryError
        If ``path`` is a file, not a folder.
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
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"image folder {str(root)!r} is a file, not a folder")
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

"""Dataset loaders: MNIST (IDX files), CIFAR-10 (its Python format) and a folder
of images per class, into the arrays sknet's estimators take.

sknet downloads nothing. MNIST: the four IDX files (``train-images-idx3-ubyte``,
``t10k-labels-idx1-ubyte``, ..., optionally gzipped) from the MNIST page, in a
directory given as ``path`` or ``SKNET_MNIST_DIR``. CIFAR-10: the "CIFAR-10
python version" archive ``cifar-10-python.tar.gz`` from the CIFAR page of the
University of Toronto (Krizhevsky's), as downloaded or extracted, given as
``path`` or ``SKNET_CIFAR10_DIR``. Image folders: one subfolder per class of
PNG or JPEG files, read with Pillow (``pip install "sknet-nn[images]"``).

What it holds: the MNIST reader (``_mnist``), the CIFAR-10 reader
(``_cifar``) with its bounded pickle and tar readers (``_pickle``, ``_tar``:
every size a file declares is checked before it is allocated) and the
image-folder reader (``_images``). What it may import: nothing else of sknet.
"""

from sknet.datasets._cifar import load_cifar10
from sknet.datasets._images import load_image_folder
from sknet.datasets._mnist import load_mnist, read_idx
from sknet.datasets._paths import CIFAR10_ENV_VAR, MNIST_ENV_VAR

__all__ = [
    "CIFAR10_ENV_VAR",
    "MNIST_ENV_VAR",
    "load_cifar10",
    "load_image_folder",
    "load_mnist",
    "read_idx",
]

"""Backends: where sknet's arrays live (NumPy on the CPU, CuPy on a CUDA GPU).

Use :func:`get_backend` to turn a device string into a :class:`Backend`::

    >>> from sknet.backend import get_backend
    >>> get_backend("cpu").name
    'cpu'

Only this package imports CuPy, and only inside ``try``/``except``: importing
sknet never needs a GPU.

What it holds: the backends, their kernels (NumPy, Numba, CuPy), the
activations and row streaming. What it may import: nothing else of sknet.
"""

import functools
import os
import re

from sknet.backend._activations import ACTIVATIONS, activation_needs_input
from sknet.backend._base import Backend
from sknet.backend._numpy import NumpyBackend as _NumpyBackend
from sknet.backend._streaming import RowStream

__all__ = [
    "ACTIVATIONS",
    "Backend",
    "CUPY_AVAILABLE",
    "DEVICE_ENV_VAR",
    "MemoryRules",
    "RowStream",
    "activation_needs_input",
    "cuda_device_count",
    "get_backend",
    "get_array_module",
    "is_device_array",
    "memory_rules",
]

#: The environment variable that chooses the device of ``device="auto"``.
DEVICE_ENV_VAR = "SKNET_DEVICE"
_CUDA_RE = re.compile(r"^(cuda|gpu)(?::(\d+))?$")


def _import_cupy():
    try:
        import cupy
    except Exception:  # ImportError, or a broken CUDA install raising at import
        return None
    return cupy


@functools.cache
def cuda_device_count():
    """Number of CUDA devices CuPy can use here (0 without CuPy or a GPU)."""
    cupy = _import_cupy()
    if cupy is None:
        return 0
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver, no device
        return 0


def __getattr__(name):
    # CUPY_AVAILABLE is computed on first access: probing CUDA is not free.
    if name == "CUPY_AVAILABLE":
        return cuda_device_count() > 0
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _parse_device(device):
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a string such as 'auto', 'cpu' or 'cuda:0', "
            f"got {device!r} of type {type(device).__name__}"
        )
    name = device.strip().lower()
    if name in ("auto", "cpu"):
        return name, None
    match = _CUDA_RE.match(name)
    if match is None:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return "cuda", int(match.group(2) or 0)


@functools.cache
def _cuda_backend(device_id):
    from sknet.backend._cupy import CupyBackend

    return CupyBackend(device_id)


_NUMPY_BACKEND = _NumpyBackend()


def get_backend(device="auto"):
    """Return the backend for a device string.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, default='auto'
        ``'auto'`` uses the ``SKNET_DEVICE`` environment variable when it is
        set, else the first CUDA GPU when CuPy sees one, else the CPU.

    Returns
    -------
    backend : Backend

    Raises
    ------
    ValueError
        If the string is not a device, or names a CUDA device that is not there.

    Examples
    --------
    >>> from sknet.backend import get_backend
    >>> backend = get_backend("cpu")
    >>> backend
    NumpyBackend('cpu')
    >>> backend.xp.__name__  # the array module of the device
    'numpy'
    >>> backend.to_numpy(backend.asarray([1.0, 2.0]))
    array([1., 2.])
    """
    kind, device_id = _parse_device(device)
    if kind == "auto":
        env = os.environ.get(DEVICE_ENV_VAR, "").strip()
        if env and env.lower() != "auto":
            try:
                return get_backend(env)
            except ValueError as exc:
                raise ValueError(f"{DEVICE_ENV_VAR}={env!r}: {exc}") from None
        return _cuda_backend(0) if cuda_device_count() > 0 else _NUMPY_BACKEND
    if kind == "cpu":
        return _NUMPY_BACKEND
    n_devices = cuda_device_count()
    if n_devices == 0:
        reason = (
            "CuPy is not installed (pip install 'sknet-nn[gpu]')"
            if _import_cupy() is None
            else "CuPy sees no CUDA device"
        )
        raise ValueError(
            f"device={device!r} asks for a CUDA GPU, but {reason}. "
            "Use device='cpu', or device='auto' to fall back to the CPU."
        )
    if device_id >= n_devices:
        raise ValueError(
            f"device={device!r} asks for CUDA device {device_id}, but only "
            f"{n_devices} device(s) are visible (cuda:0 to cuda:{n_devices - 1})."
        )
    return _cuda_backend(device_id)


#: Bytes of the blocks CuPy's memory pool hands out: an array of ``n`` bytes on a CUDA
#: device takes ``n`` rounded up to a multiple of it (CuPy's "Memory Management" guide:
#: 100 float32 values take 512 bytes of the pool).
_CUDA_ALLOCATION_UNIT = 512


class MemoryRules:
    """How a device holds a fit's arrays, as the memory estimate counts them.

    Known from the device string alone (:func:`memory_rules`), so that a GPU
    is sized on a machine without CuPy.

    Parameters
    ----------
    name : str
        The device, as a backend names it (``'cpu'``, ``'cuda:0'``).
    separate_memory : bool
        Whether the device's memory is apart from the host's: the data are
        then always copied there, in the fit's dtype.
    unit : int, default=1
        The allocator's block: an array takes its bytes rounded up to a
        multiple of it (512 on CUDA, CuPy's memory pool).

    Examples
    --------
    >>> from sknet.backend import memory_rules
    >>> rules = memory_rules("cuda:1")  # CuPy need not be installed
    >>> rules.name, rules.separate_memory, rules.allocated(400)
    ('cuda:1', True, 512)
    >>> memory_rules("cpu").allocated(400)
    400
    """

    def __init__(self, name, separate_memory, unit=1):
        self.name, self.separate_memory, self.unit = name, bool(separate_memory), int(unit)

    def allocated(self, nbytes):
        """Bytes an array of ``nbytes`` bytes takes on the device (its allocator's blocks)."""
        return -(-int(nbytes) // self.unit) * self.unit

    def __repr__(self):
        return (
            f"MemoryRules({self.name!r}, separate_memory={self.separate_memory}, unit={self.unit})"
        )


def memory_rules(device="auto"):
    """The :class:`MemoryRules` of a device string or a :class:`Backend`, without CuPy.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda', 'cuda:N'} or Backend, default='auto'
        ``'cuda'`` and ``'cuda:N'`` give CUDA's rules whether or not CuPy or
        a GPU is there (what a fit there would hold); ``'auto'`` the rules of
        the device :func:`get_backend` would choose (``SKNET_DEVICE``, else a
        GPU CuPy sees, else the CPU). A backend of another name keeps its own
        ``separate_memory``, with no rounding.

    Returns
    -------
    rules : MemoryRules

    Raises
    ------
    ValueError
        If the string is not a device.
    """
    if isinstance(device, MemoryRules):
        return device
    if isinstance(device, Backend):
        try:
            kind, device_id = _parse_device(device.name)
        except ValueError:
            return MemoryRules(device.name, device.separate_memory)
    else:
        kind, device_id = _parse_device(device)
    if kind == "auto":
        env = os.environ.get(DEVICE_ENV_VAR, "").strip()
        if env and env.lower() != "auto":
            try:
                return memory_rules(env)
            except ValueError as exc:
                raise ValueError(f"{DEVICE_ENV_VAR}={env!r}: {exc}") from None
        return memory_rules("cuda" if cuda_device_count() > 0 else "cpu")
    if kind == "cpu":
        return MemoryRules("cpu", False)
    return MemoryRules(f"cuda:{device_id}", True, _CUDA_ALLOCATION_UNIT)


def get_array_module(x):
    """Return :mod:`cupy` for a CuPy array, else :mod:`numpy`."""
    if is_device_array(x):
        return _import_cupy()
    import numpy

    return numpy


def is_device_array(x):
    """Whether ``x`` is a CuPy (device) array, dense or sparse."""
    return type(x).__module__.split(".")[0] in ("cupy", "cupyx")


Backend.resolve = staticmethod(get_backend)  # backends unpickle by name through it

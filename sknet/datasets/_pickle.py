"""A CIFAR-10 batch's pickle, read with every size bounded before it is allocated.

A pickle is a program: a few bytes of it can ask for an array of any shape
(``_reconstruct(ndarray, (10**9,), 'O')``), for a bytes object of any declared
length (the unpickler allocates it before reading), or for a memo of any
size (``LONG_BINPUT 2**32 - 1``). :func:`load_batch` therefore first walks
the opcodes without building anything (:func:`scan_pickle`: every declared
length within the bytes that are left, memo indices and the number of
opcodes bounded), then unpickles with NumPy's names replaced by checked
stand-ins: arrays of plain numbers only, their shapes and element counts
checked against a budget of bytes (twice the file's size) before anything
is allocated, and their dtypes' pickled state (NumPy's ``dtype.__setstate__``
takes flags, fields and sizes from the pickle) only what NumPy pickles for a
plain number: a float64 whose state says it holds objects would have its
bytes read as object pointers.
"""

import io
import math
import pickle
import pickletools
import reprlib
from numbers import Integral

import numpy as np

try:
    from numpy._core import multiarray as _multiarray
except ImportError:  # pragma: no cover - NumPy 1
    from numpy.core import multiarray as _multiarray

#: Opcodes a CIFAR-10 batch holds: about three per image (its label, its file
#: name and the name's memo entry), 10,000 images per batch.
MAX_OPCODES = 1 << 18

_OPCODES = {ord(op.code): op for op in pickletools.opcodes}
#: Arguments whose length comes first: its size in bytes and whether it is signed.
_COUNTED = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_ARRAY_KINDS = "biuf"  # booleans, integers, floats: no objects, no flexible sizes
_REPR = reprlib.Repr()
_REPR.maxtuple = 10  # a dtype's state whole (8 or 9 items)

#: NumPy's dtype flags (``numpy/ndarraytypes.h``) that a dtype holding objects has.
_OBJECT_FLAGS = {
    0x01: "NPY_ITEM_HASOBJECT / NPY_ITEM_REFCOUNT",
    0x02: "NPY_LIST_PICKLE",
    0x04: "NPY_ITEM_IS_POINTER",
    0x08: "NPY_NEEDS_INIT",
    0x10: "NPY_NEEDS_PYAPI",
    0x20: "NPY_USE_GETITEM",
    0x40: "NPY_USE_SETITEM",
}


def scan_pickle(data, max_opcodes=MAX_OPCODES):
    """Walk the opcodes of ``data`` to its STOP without building anything.

    Every length an opcode declares must lie within the bytes left, every
    memo index below ``max_opcodes``, and there are at most ``max_opcodes``
    opcodes: what an unpickler allocates is then bounded by the file.
    Returns the number of opcodes; raises :class:`pickle.UnpicklingError`.
    """
    pos, end = 0, len(data)
    for count in range(1, max_opcodes + 1):
        if pos >= end:
            raise pickle.UnpicklingError(f"the pickle ends at byte {end} without a STOP opcode")
        op = _OPCODES.get(data[pos])
        if op is None:
            raise pickle.UnpicklingError(f"byte {pos} ({data[pos]:#04x}) is no pickle opcode")
        start, pos = pos, pos + 1
        if op.name == "STOP":
            return count
        if op.arg is not None:
            pos = _skip_argument(data, pos, op, start, max_opcodes)
    raise pickle.UnpicklingError(
        f"the pickle has more than {max_opcodes} opcodes, more than a CIFAR-10 batch has"
    )


def _skip_argument(data, pos, op, start, max_opcodes):
    """The position after the argument of ``op`` (at ``start``), its bounds checked."""
    end, n = len(data), op.arg.n
    if n == pickletools.UP_TO_NEWLINE:
        for _ in range(2 if op.arg.name == "stringnl_noescape_pair" else 1):
            newline = data.find(b"\n", pos)
            if newline < 0:
                raise pickle.UnpicklingError(f"the {op.name} opcode at byte {start} is truncated")
            line, pos = (start + 1, newline), newline + 1
        if op.name == "PUT":
            _check_memo_index(data[line[0] : line[1]], op, start, max_opcodes)
        return pos
    size, signed = _COUNTED.get(n, (n, False))
    if pos + size > end:
        raise pickle.UnpicklingError(f"the {op.name} opcode at byte {start} is truncated")
    value = int.from_bytes(data[pos : pos + size], "little", signed=signed)
    pos += size
    if n in _COUNTED or op.name == "FRAME":
        if not 0 <= value <= end - pos:
            raise pickle.UnpicklingError(
                f"the {op.name} opcode at byte {start} declares {value} bytes, but "
                f"{end - pos} are left"
            )
        return pos + (value if n in _COUNTED else 0)
    if op.name == "LONG_BINPUT":
        _check_memo_index(value, op, start, max_opcodes)
    return pos


def _check_memo_index(index, op, start, max_opcodes):
    try:
        index = int(index)
    except ValueError:
        raise pickle.UnpicklingError(f"the PUT opcode at byte {start} has no index") from None
    if not 0 <= index < max_opcodes:
        raise pickle.UnpicklingError(
            f"the {op.name} opcode at byte {start} asks for memo entry {index}: more than "
            f"the {max_opcodes} entries a CIFAR-10 batch can have"
        )


class _Budget:
    """Bytes the stand-ins may still allocate (:func:`load_batch` sets twice the file's)."""

    def __init__(self, total, file_size):
        self.left, self.total, self.file_size = total, total, file_size

    def charge(self, nbytes, what):
        if nbytes > self.left:
            raise pickle.UnpicklingError(
                f"{what} would take {nbytes} bytes, more than a pickle of {self.file_size} "
                f"bytes can hold (at most {self.total} bytes of arrays in all)"
            )
        self.left -= nbytes


class _BoundedArray(np.ndarray):
    """An array whose ``__setstate__`` (the pickle's BUILD) checks what it is given."""

    _budget = None  # set on the subclass each load makes

    def __setstate__(self, state):
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("an array's state is not an array's state")
        shape, dtype, fortran, raw = state[-4:]
        dtype = _checked_dtype(dtype)
        state = (*state[:-4], shape, dtype, fortran, raw)  # the dtype, not its stand-in
        nbytes = _count(shape) * dtype.itemsize
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != nbytes:
            raise pickle.UnpicklingError(
                f"an array of shape {shape} and dtype {dtype} needs {nbytes} bytes of data, "
                f"got {type(raw).__name__} of length {len(raw) if hasattr(raw, '__len__') else 0}"
            )
        self._budget.charge(nbytes, f"an array of shape {shape} and dtype {dtype}")
        np.ndarray.__setstate__(self, state)


def _count(shape):
    """The number of elements of ``shape``: a tuple of non-negative ints."""
    if not isinstance(shape, tuple) or not all(
        isinstance(d, Integral) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise pickle.UnpicklingError(f"an array's shape must be a tuple of sizes, got {shape!r}")
    return math.prod(int(d) for d in shape)  # Python ints: no overflow


def _checked_dtype(dtype):
    """``dtype`` if it is one of plain numbers (booleans, integers, floats).

    A :class:`_DtypeStandIn` (what ``numpy.dtype(...)`` unpickles to) gives its
    dtype, a name such as ``'u1'`` the dtype it names.
    """
    if isinstance(dtype, _DtypeStandIn):
        dtype = dtype.dtype
    if isinstance(dtype, (bytes, str)) and len(dtype) <= 8:
        try:
            dtype = np.dtype(dtype.decode("latin-1") if isinstance(dtype, bytes) else dtype)
        except (TypeError, ValueError):
            pass
    if (
        not isinstance(dtype, np.dtype)
        or dtype.kind not in _ARRAY_KINDS
        or dtype.fields
        or dtype.flags  # what NumPy's own dtypes of plain numbers have: 0
    ):
        raise pickle.UnpicklingError(
            f"arrays of {dtype!r} are not allowed in a CIFAR batch (plain numbers only)"
        )
    return dtype


class _DtypeStandIn:
    """What ``numpy.dtype(...)`` unpickles to: a dtype of plain numbers whose pickled
    state (the BUILD that follows) is checked before it is used.

    NumPy's ``dtype.__setstate__`` takes the flags, fields and sizes from the
    pickle, so a float64 may come to say it holds objects
    (``NPY_ITEM_HASOBJECT``): its arrays' bytes are then read as object
    pointers. The state taken is only what NumPy pickles for a plain number,
    ``(3, byteorder, None, None, None, -1, -1, 0)``, whose byte order (bytes
    in a Python 2 pickle) is the one thing it may choose; it is set once, on
    a new dtype (never on one already used). :func:`_checked_dtype` gives the
    dtype.
    """

    __slots__ = ("dtype", "_built")

    def __init__(self, dtype):
        self.dtype, self._built = dtype, False

    def __repr__(self):
        return repr(self.dtype)

    def __setstate__(self, state):
        if self._built:
            raise pickle.UnpicklingError(
                f"the pickled state of dtype {self.dtype} is set twice, got "
                f"{_REPR.repr(state)} again"
            )
        byteorder = _byteorder(state, self.dtype)
        if byteorder is None:
            order = "'|'" if self.dtype.byteorder == "|" else "'<' or '>'"
            raise pickle.UnpicklingError(
                f"the pickled state of dtype {self.dtype} must be what NumPy pickles for "
                f"plain numbers, (3, {order}, None, None, None, -1, -1, 0), "
                f"got {_REPR.repr(state)}{_flags_named(state)}"
            )
        if byteorder != "|":
            self.dtype = self.dtype.newbyteorder(byteorder)
        self._built = True


def _byteorder(state, dtype):
    """The byte order ``state`` sets on ``dtype``, if it is one NumPy pickles, else None."""
    if not isinstance(state, tuple) or len(state) != 8:
        return None
    byteorder = state[1].decode("latin-1") if isinstance(state[1], bytes) else state[1]
    allowed = ("|",) if dtype.byteorder == "|" else ("<", ">")
    if not isinstance(byteorder, str) or byteorder not in allowed:
        return None
    plain = (3, byteorder, None, None, None, -1, -1, 0)
    same = all(type(a) is type(b) and a == b for a, b in zip(state[2:], plain[2:]))
    return byteorder if same and type(state[0]) is int and state[0] == 3 else None


def _flags_named(state):
    """``': flags ... (NPY_ITEM_HASOBJECT ...)'`` when ``state``'s flags hold any of objects."""
    flags = state[-1] if isinstance(state, tuple) and state else None
    if type(flags) is not int or not flags & sum(_OBJECT_FLAGS):
        return ""
    names = ", ".join(name for bit, name in _OBJECT_FLAGS.items() if flags & bit)
    return f": flags {flags:#x} ({names}) are those of a dtype that holds objects (plain: 0)"


class _NDArrayName:
    """What ``numpy.ndarray`` unpickles to: a name for ``_reconstruct``, not callable."""

    def __repr__(self):
        return "numpy.ndarray"


_NDARRAY = _NDArrayName()


class BoundedUnpickler(pickle.Unpickler):
    """Unpickles plain data and NumPy arrays of numbers only, within a budget of bytes.

    A CIFAR batch runs no code: the globals it may name are NumPy's array
    reconstruction, dtypes and scalars, ``_codecs.encode`` and ``bytes()``
    (bytes, and empty bytes, in protocol-2 pickles written by Python 3), each
    replaced by a stand-in that checks its arguments before allocating.
    """

    _NAMES = {
        ("numpy", "ndarray"): "_ndarray",
        ("numpy", "dtype"): "_dtype",
        ("numpy.core.multiarray", "_reconstruct"): "_reconstruct",
        ("numpy._core.multiarray", "_reconstruct"): "_reconstruct",
        ("numpy.core.multiarray", "scalar"): "_scalar",
        ("numpy._core.multiarray", "scalar"): "_scalar",
        ("_codecs", "encode"): "_encode",
        ("__builtin__", "bytes"): "_empty_bytes",
        ("builtins", "bytes"): "_empty_bytes",
    }

    def __init__(self, data, budget):
        super().__init__(io.BytesIO(data), encoding="bytes")
        self._budget = _Budget(budget, len(data))
        self._array_type = type("BoundedArray", (_BoundedArray,), {"_budget": self._budget})
        self._ndarray = _NDARRAY

    def find_class(self, module, name):
        if (module, name) not in self._NAMES:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")
        return getattr(self, self._NAMES[module, name])

    @staticmethod
    def _dtype(obj, align=False, copy=True):
        # A stand-in whose BUILD is checked, over a new dtype object (copy).
        return _DtypeStandIn(np.dtype(_checked_dtype(obj), align=bool(align), copy=True))

    def _reconstruct(self, subtype, shape, dtype):
        if subtype is not _NDARRAY:
            raise pickle.UnpicklingError(f"only numpy.ndarray may be rebuilt, got {subtype!r}")
        dtype = _checked_dtype(dtype)
        what = f"an array of shape {shape} and dtype {dtype}"
        self._budget.charge(_count(shape) * dtype.itemsize, what)
        return _multiarray._reconstruct(self._array_type, shape, dtype)

    def _scalar(self, dtype, obj=None):
        dtype = _checked_dtype(dtype)
        if not isinstance(obj, bytes) or len(obj) != dtype.itemsize:
            raise pickle.UnpicklingError(f"a {dtype} scalar needs {dtype.itemsize} bytes")
        return _multiarray.scalar(dtype, obj)

    @staticmethod
    def _empty_bytes(*args, **kwargs):
        # Protocol 2 pickles b'' as bytes(); bytes(10**9) would allocate what it says.
        if args or kwargs:
            raise pickle.UnpicklingError(
                f"bytes() is allowed with no arguments only (b''), got {reprlib.repr(args)}"
                + (f" and {reprlib.repr(kwargs)}" if kwargs else "")
            )
        return b""

    def _encode(self, obj, encoding="utf-8", errors="strict"):
        if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "latin_1"):
            raise pickle.UnpicklingError(
                f"_codecs.encode is allowed on text as latin1 only, got {encoding!r}"
            )
        self._budget.charge(len(obj), "a bytes object")
        return obj.encode("latin-1")


def load_batch(data):
    """Unpickle ``data`` (a CIFAR-10 file's bytes) within bounds: :func:`scan_pickle`
    first, then :class:`BoundedUnpickler` with a budget of twice the file's size.

    Arrays come back as a checked subclass of ``numpy.ndarray``, and a dtype
    pickled by itself (no CIFAR batch holds one) as its checked stand-in, whose
    ``dtype`` it is. Errors are :class:`pickle.UnpicklingError` (or what the
    unpickler raises on bad data).
    """
    scan_pickle(data)
    return BoundedUnpickler(data, 2 * len(data) + 4096).load()

"""Tests for sknet/datasets/_pickle.py: crafted CIFAR-10 batches that ask for more
memory than they hold are refused before it is allocated."""

import pickle
import struct
import tracemalloc

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sknet.datasets import load_cifar10
from sknet.datasets._pickle import MAX_OPCODES, load_batch, scan_pickle
from tests.datasets.test_cifar import write_cifar

PROTO = b"\x80\x02"
RECONSTRUCT = b"cnumpy.core.multiarray\n_reconstruct\n"
NDARRAY = b"cnumpy\nndarray\n"
ENCODE = b"c_codecs\nencode\n"


def short_bytes(data):
    return b"C" + bytes([len(data)]) + data


def unicode(text):
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def int4(n):
    return b"J" + struct.pack("<i", n)


def reconstruct(shape, dtype):
    """``_reconstruct(ndarray, shape, dtype)``: an empty array of ``shape``."""
    dims = b"(" + b"".join(int4(d) for d in shape) + b"t"
    return RECONSTRUCT + NDARRAY + dims + short_bytes(dtype) + b"\x87R"


def batch_of(array_op):
    """``{b'data': <array_op>, b'labels': []}``."""
    return PROTO + b"}(" + short_bytes(b"data") + array_op + short_bytes(b"labels") + b"]u."


def encoded_many_times(n_chars, times):
    """A memoized text of ``n_chars`` encoded ``times`` times, the results in a list."""
    ops = PROTO + b"]" + unicode("x" * n_chars) + b"q\x000" + unicode("latin1") + b"q\x010("
    ops += (ENCODE + b"h\x00h\x01\x86R") * times
    return ops + b"e."


def hex_doubled(times):
    """``b"ab"`` hex-encoded ``times`` times: twice as long each time."""
    ops = PROTO + ENCODE + b"q\x000" + unicode("hex") + b"q\x010" + b"h\x00" * (times + 1)
    ops += unicode("ab") + unicode("latin1") + b"\x86R"
    return ops + b"h\x01\x86R" * times + b"."


def rebuilt_many_times(times):
    """``times`` arrays of 100,000 bytes, each BUILT from one memoized bytes object."""
    state = b"(K\x01(J\xa0\x86\x01\x00tcnumpy\ndtype\n" + short_bytes(b"u1")
    state += b"\x89\x88\x87R\x89B\xa0\x86\x01\x00" + bytes(100_000) + b"tq\x00"
    ops = PROTO + b"]" + state + b"0("
    ops += (reconstruct((0,), b"b") + b"h\x00b") * times
    return ops + b"e."


#: Pickles of a few bytes that ask for gigabytes, and what the refusal says.
CRAFTED = {
    "object-array": (
        batch_of(reconstruct((200_000_000,), b"O")),
        r"arrays of dtype\('O'\) are not allowed",
    ),
    "huge-uint8-array": (
        batch_of(reconstruct((40_000, 40_000), b"u1")),
        r"an array of shape \(40000, 40000\) and dtype uint8 would take 1600000000 bytes",
    ),
    "void-dtype": (batch_of(reconstruct((10,), b"V99999999")), "are not allowed"),
    "bytes8-length": (
        PROTO + b"\x8e" + struct.pack("<Q", 10**9) + b"abc.",
        r"BINBYTES8 opcode at byte 2 declares 1000000000 bytes, but 4 are left",
    ),
    "bytes4-length": (
        PROTO + b"B" + struct.pack("<I", 10**9) + b"abc.",
        "BINBYTES opcode at byte 2 declares 1000000000 bytes",
    ),
    "memo-index": (
        PROTO + b"]r" + struct.pack("<I", 2**32 - 1) + b".",
        r"LONG_BINPUT opcode at byte 3 asks for memo entry 4294967295",
    ),
    "text-memo-index": (PROTO + b"]p99999999999\n.", "PUT opcode at byte 3 asks for memo"),
    "hex-doubling": (
        hex_doubled(20),
        "_codecs.encode is allowed on text as latin1 only, got 'hex'",
    ),
    "encoded-again-and-again": (
        encoded_many_times(100_000, 40),
        "a bytes object would take 100000 bytes, more than a pickle of",
    ),
    "rebuilt-again-and-again": (
        rebuilt_many_times(40),
        r"an array of shape \(100000,\) and dtype uint8 would take 100000 bytes",
    ),
    "too-many-opcodes": (PROTO + b"N0" * MAX_OPCODES + b".", f"more than {MAX_OPCODES} opcodes"),
    "no-stop": (PROTO + b"N", "ends at byte 3 without a STOP opcode"),
}


def traced_peak(function):
    tracemalloc.start()
    try:
        function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("name", list(CRAFTED))
def test_a_crafted_batch_is_refused_before_it_allocates(tmp_path, name):
    data, message = CRAFTED[name]
    write_cifar(tmp_path)
    (tmp_path / "test_batch").write_bytes(data)

    def load():
        expected = rf"test_batch is not a CIFAR-10 batch file: .*{message}"
        with pytest.raises(ValueError, match=expected):
            load_cifar10(tmp_path)

    # the meta file and the batches of 4 images read here take under 100 KB
    assert traced_peak(load) < max(4 << 20, 3 * len(data))


def test_what_the_crafted_batches_would_do_without_the_bounds():
    """The crafted pickles are real attacks: plain unpickling allocates what they ask for."""
    data, _ = CRAFTED["rebuilt-again-and-again"]
    arrays = pickle.loads(data, encoding="bytes")
    assert len(arrays) == 40 and all(a.nbytes == 100_000 for a in arrays)
    data, _ = CRAFTED["encoded-again-and-again"]
    assert sum(map(len, pickle.loads(data, encoding="bytes"))) == 4_000_000
    data, _ = CRAFTED["hex-doubling"]
    assert len(data) < 200 and len(pickle.loads(data, encoding="bytes")) == 2 << 20
    data, _ = CRAFTED["huge-uint8-array"]
    assert traced_peak(lambda: pickle.loads(data, encoding="bytes")) >= 1_600_000_000


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_what_numpy_and_python_pickle_loads_within_the_bounds(protocol):
    content = {
        b"data": np.arange(3 * 3072, dtype=np.uint8).reshape(3, 3072),
        b"labels": [1, 2, 3],
        b"filenames": [b"a.png", b"b.png", b"c.png"],
        b"mean": np.float64(0.5),
        b"big_endian": np.arange(6, dtype=">i4"),
        b"batch_label": "testing batch 1 of 1",
    }
    data = pickle.dumps(content, protocol=protocol)
    assert scan_pickle(data) > 10
    loaded = load_batch(data)
    assert_array_equal(loaded[b"data"], content[b"data"])
    assert_array_equal(loaded[b"big_endian"], content[b"big_endian"])
    assert loaded[b"labels"] == [1, 2, 3] and loaded[b"mean"] == 0.5
    assert loaded[b"filenames"] == content[b"filenames"]


# -- dtypes: only the state NumPy pickles for plain numbers ---------------------------
class _Dtype:
    """Pickles as ``numpy.dtype(name, False, True)`` whose BUILD sets ``state``."""

    def __init__(self, name, state):
        self.name, self.state = name, state

    def __reduce__(self):
        return np.dtype, (self.name, False, True), self.state


class _Array:
    """Pickles as NumPy does an array of ``dtype`` (a :class:`_Dtype`) over ``raw``."""

    def __init__(self, shape, dtype, raw):
        self.shape, self.dtype, self.raw = shape, dtype, raw

    def __reduce__(self):
        from numpy._core.multiarray import _reconstruct

        return _reconstruct, (np.ndarray, (0,), b"b"), (1, self.shape, self.dtype, False, self.raw)


def plain_state(byteorder="<", flags=0):
    """What ``numpy.dtype('<f8').__reduce__()`` gives as the state, ``flags`` changed."""
    return (3, byteorder, None, None, None, -1, -1, flags)


def float64_batch(state, protocol=2):
    """A CIFAR-like batch whose ``b'data'`` is 4 zeros of float64 with that dtype ``state``."""
    array = _Array((4,), _Dtype("f8", state), bytes(32))
    return pickle.dumps({b"data": array, b"labels": []}, protocol=protocol)


def test_the_state_this_test_pickles_is_the_one_numpy_pickles():
    assert np.dtype("<f8").__reduce__()[2] == plain_state()
    assert np.dtype("u1").__reduce__()[2] == plain_state("|")
    assert np.dtype("O").__reduce__()[2] == plain_state("|", 63)  # the flags of objects
    big_endian = _Array(
        (4,), _Dtype("f8", plain_state(">")), np.arange(4.0).astype(">f8").tobytes()
    )
    loaded = load_batch(pickle.dumps({b"data": big_endian}, protocol=2))[b"data"]
    assert_array_equal(loaded, [0.0, 1.0, 2.0, 3.0])  # as NumPy loads it: swapped to native


@pytest.mark.parametrize(
    "flags, named",
    [
        (1, "NPY_ITEM_HASOBJECT / NPY_ITEM_REFCOUNT"),
        (63, "NPY_ITEM_HASOBJECT / NPY_ITEM_REFCOUNT, NPY_LIST_PICKLE"),
        (0x08, "NPY_NEEDS_INIT"),
    ],
    ids=["NPY_ITEM_HASOBJECT|NPY_ITEM_REFCOUNT", "all-of-an-object-dtype", "NPY_NEEDS_INIT"],
)
def test_a_dtype_whose_state_says_it_holds_objects_is_refused(tmp_path, flags, named):
    """NumPy's own ``dtype.__setstate__`` takes the flags from the pickle: a float64 that
    says it holds objects has its bytes read as object pointers (here zeros: NULL)."""
    data = float64_batch(plain_state("<", flags))
    expected = (
        rf"the pickled state of dtype float64 must be .*, got \(3, '<', None, None, None, -1, "
        rf"-1, {flags}\): flags {flags:#x} \({named}"
    )
    with pytest.raises(pickle.UnpicklingError, match=expected):
        load_batch(data)  # before: loaded, an array of float64 "holding objects"
    write_cifar(tmp_path)
    (tmp_path / "test_batch").write_bytes(data)
    with pytest.raises(ValueError, match=rf"test_batch is not a CIFAR-10 batch file: {expected}"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize(
    "state",
    [
        plain_state("|"),  # no byte order on an 8-byte type
        plain_state("="),  # never pickled: NumPy writes '<' or '>'
        (3, "<", None, None, None, 16, 8, 0),  # a size of its own
        (4, "<", None, None, None, -1, -1, 0, {"key": 1}),  # metadata
        (3, "<", None, ("a",), None, -1, -1, 0),  # field names
        (3, "<", None, None, None, -1, -1, False),  # flags of another type
        {"flags": 0},
    ],
    ids=["no-byteorder", "native", "elsize", "metadata", "names", "bool-flags", "dict"],
)
def test_a_dtype_state_numpy_does_not_pickle_is_refused(state):
    with pytest.raises(pickle.UnpicklingError, match=r"the pickled state of dtype float64 .*"):
        load_batch(float64_batch(state))


def test_a_dtype_state_is_set_once():
    """BUILD again on a memoized dtype (one an array already uses) is refused."""
    state = b"(K\x03" + unicode("<") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"
    dtype = b"cnumpy\ndtype\n" + short_bytes(b"f8") + b"\x89\x88\x87R"
    data = PROTO + dtype + b"q\x00" + state + b"b0h\x00" + state + b"b."
    with pytest.raises(pickle.UnpicklingError, match="dtype float64 is set twice"):
        load_batch(data)


@pytest.mark.parametrize("name", ["?", "i1", "u2", ">i8", "<f2", "f4", ">f8", "g"])
def test_arrays_of_every_plain_dtype_load(name):
    array = (np.arange(6) % 2).astype(name)
    loaded = load_batch(pickle.dumps({b"data": array}, protocol=2))[b"data"]
    assert loaded.dtype.str[1:] == array.dtype.str[1:]  # NumPy loads it in native order
    assert_array_equal(loaded, array)
    # as Python 2 wrote it: the byte order as bytes (a str there, bytes here)
    byteorder = array.dtype.__reduce__()[2][1].encode()
    raw = _Array(array.shape, _Dtype(array.dtype.str, plain_state(byteorder)), array.tobytes())
    loaded = load_batch(pickle.dumps({b"data": raw}, protocol=2))[b"data"]
    assert loaded.dtype.str[1:] == array.dtype.str[1:]
    assert_array_equal(loaded, array)


# -- empty bytes: protocol 2 pickles them as a call of bytes() ---------------------------
def cifar_batch_with_empty_bytes(protocol=2):
    return {
        b"batch_label": b"",
        b"labels": [3, 1],
        b"data": np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072),
        b"filenames": [b"a.png", b""],
    }


def test_a_protocol_2_batch_holding_empty_bytes_loads(tmp_path):
    content = cifar_batch_with_empty_bytes()
    data = pickle.dumps(content, protocol=2)
    assert b"__builtin__\nbytes" in data  # bytes() of no arguments: b''
    loaded = load_batch(data)  # before: "__builtin__.bytes is not allowed in a CIFAR batch"
    assert loaded[b"batch_label"] == b"" and loaded[b"filenames"] == [b"a.png", b""]
    assert_array_equal(loaded[b"data"], content[b"data"])
    fixed = pickle.dumps(content, protocol=2, fix_imports=False)
    assert b"builtins\nbytes" in fixed and load_batch(fixed)[b"batch_label"] == b""
    write_cifar(tmp_path)
    (tmp_path / "test_batch").write_bytes(data)
    X, y, _ = load_cifar10(tmp_path)
    assert X.shape == (2, 3, 32, 32) and y.tolist() == [3, 1]


def test_bytes_is_called_with_no_arguments_only():
    """``bytes(10**9)`` would allocate what it is given: only ``bytes()`` is b''."""
    data = PROTO + b"c__builtin__\nbytes\nJ\x00\xca\x9a\x3b\x85R."
    with pytest.raises(
        pickle.UnpicklingError, match=r"bytes\(\) is allowed .* got \(1000000000,\)"
    ):
        load_batch(data)

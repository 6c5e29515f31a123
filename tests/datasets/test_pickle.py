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

"""Tests for sknet/datasets/_tar.py: small archives whose headers ask for more memory
than they hold are refused without allocating it."""

import gzip
import io
import tarfile
import tracemalloc

import pytest

from sknet.datasets import _cifar, load_cifar10
from tests.datasets.test_cifar import CIFAR_META, cifar_batch, write_archive


def traced_peak(function):
    tracemalloc.start()
    try:
        function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def header(name, kind=tarfile.REGTYPE, size=0):
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.USTAR_FORMAT)


@pytest.mark.parametrize(
    "kind",
    [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE],
    ids=["gnu-long-name", "gnu-long-link", "pax", "pax-global"],
)
@pytest.mark.parametrize("compress", [True, False], ids=["tar.gz", "tar"])
def test_a_header_declaring_a_gigabyte_record_is_refused_before_it_is_read(
    tmp_path, kind, compress
):
    # a hundred bytes: one header declaring a record of a gigabyte (a long name or pax
    # record, which tarfile reads at once), and a few bytes of it
    data = header("././@LongLink", kind, 1 << 30) + b"a" * 4096
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(gzip.compress(data) if compress else data)

    def load():
        with pytest.raises(
            ValueError,
            match=r"archive '.*bomb\.tar\.gz': the tar header ending at byte 512 declares "
            r"a record of 1073741824 bytes \(a long name or a pax header\)",
        ):
            load_cifar10(archive)

    assert traced_peak(load) < 1 << 20  # tarfile alone: 1 GiB


def pax_chain(n):
    """``n`` pax headers one after the other (each applies to the next), then a member."""
    record = b"20 comment=hello12\n"
    block = header("pax", tarfile.XHDTYPE, len(record)) + record + bytes(512 - len(record))
    return block * n + header("cifar-10-batches-py/test_batch") + bytes(1024)


def test_a_chain_of_pax_headers_is_refused_before_it_nests_too_deep(tmp_path):
    archive = tmp_path / "chain.tar.gz"
    archive.write_bytes(gzip.compress(pax_chain(2000)))  # RecursionError in tarfile
    with pytest.raises(ValueError, match=r"chain\.tar\.gz' has more tar headers than an archive"):
        load_cifar10(archive)
    # a chain a real archive could have passes these bounds (and then lacks batches.meta)
    archive.write_bytes(gzip.compress(pax_chain(20)))
    with pytest.raises(ValueError, match="has no batches.meta"):
        load_cifar10(archive)


def test_the_bytes_decompressed_are_bounded(tmp_path, monkeypatch):
    members = {"batches.meta": CIFAR_META, "test_batch": cifar_batch(n=20)}
    archive = write_archive(tmp_path / "cifar.tar.gz", members)
    tail = gzip.compress(bytes(3 << 20), compresslevel=1)  # 3 MiB of zeros after the archive
    (tmp_path / "long.tar.gz").write_bytes(archive.read_bytes() + tail)  # a second gzip member
    monkeypatch.setattr(_cifar, "_CIFAR_MAX_ARCHIVE_BYTES", 1 << 20)
    assert load_cifar10(archive)[0].shape == (20, 3, 32, 32)

    def load():
        with pytest.raises(ValueError, match=r"long\.tar\.gz' decompresses to more than 1048576"):
            load_cifar10(tmp_path / "long.tar.gz")

    assert traced_peak(load) < 4 << 20
    # skipping a member's data counts too
    big = write_archive(tmp_path / "big.tar", {"readme.html": bytes(2 << 20)}, mode="w")
    with pytest.raises(ValueError, match=r"big\.tar' decompresses to more than 1048576 bytes"):
        load_cifar10(big)


def test_a_sparse_member_is_refused(tmp_path):
    info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    data = CIFAR_META
    meta = tarfile.TarInfo("cifar-10-batches-py/batches.meta")
    meta.size = len(data)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(meta, io.BytesIO(data))
        tar.addfile(info)
    (tmp_path / "sparse.tar").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="test_batch is a sparse file, not a regular one"):
        load_cifar10(tmp_path / "sparse.tar")


@pytest.mark.parametrize(
    "magic, kind", [(b"BZh91AY&SY", "bzip2"), (b"\xfd7zXZ\x00\x00", "xz")], ids=["bz2", "xz"]
)
def test_other_compressions_are_named(tmp_path, magic, kind):
    (tmp_path / "cifar.tar.x").write_bytes(magic + bytes(100))
    with pytest.raises(ValueError, match=f"is compressed with {kind}: expected"):
        load_cifar10(tmp_path / "cifar.tar.x")

"""A tar archive (gzipped or not) read with every read bounded.

:mod:`tarfile` reads a GNU long name or a pax record in one read of the size
its header declares: a small ``.tar.gz`` whose first header declares a
gigabyte of long name takes a gigabyte of memory. :class:`BoundedReader`
stands between :mod:`tarfile` and the (decompressed) file: while the member
headers are read, no read may exceed :data:`MAX_HEADER_READ` bytes and all
of them together :data:`MAX_HEADER_BYTES`; a member's data is read at its
declared (checked) size; and nothing is read or skipped beyond a bound of
bytes decompressed in all.
"""

import tarfile

#: The largest read of a member header (a 512-byte block, a long name or a pax record).
MAX_HEADER_READ = 64 << 10
#: The bytes of member headers an archive may have in all.
MAX_HEADER_BYTES = 1 << 20
#: The reads of member headers an archive may take in all: two per member (its
#: header, and one byte before it after skipping the previous member's data),
#: two more per long name or pax record. It bounds how deep tarfile's reading of
#: a chain of pax records nests.
MAX_HEADER_READS = 256
_DRAIN_CHUNK = 1 << 20


class BoundedReader:
    """``stream`` (an archive's decompressed bytes) with its reads bounded.

    ``where`` names the archive in errors; ``max_bytes`` bounds the bytes
    decompressed (the furthest position read or skipped to). What
    :mod:`tarfile` reads through it counts as headers; :meth:`read_member`
    and :meth:`drain` read data.
    """

    def __init__(self, stream, where, max_bytes):
        self._stream, self._where, self._max = stream, where, max_bytes
        self._header_bytes = self._header_reads = 0

    def tell(self):
        return self._stream.tell()

    def seek(self, offset, whence=0):
        target = offset if whence == 0 else None
        if target is not None and target > self._max:
            raise self._too_large(target)
        position = self._stream.seek(offset, whence)
        if position > self._max:
            raise self._too_large(position)
        return position

    def read(self, size=-1):
        """A header read for :mod:`tarfile`: at most :data:`MAX_HEADER_READ` bytes."""
        position = self._stream.tell()
        if size is None or size < 0 or size > MAX_HEADER_READ:
            described = "the rest of the archive" if size is None or size < 0 else f"{size} bytes"
            raise ValueError(
                f"{self._where}: the tar header ending at byte {position} declares a record of "
                f"{described} (a long name or a pax header); headers of more than "
                f"{MAX_HEADER_READ} bytes are refused"
            )
        self._header_bytes += size
        self._header_reads += 1
        if self._header_bytes > MAX_HEADER_BYTES or self._header_reads > MAX_HEADER_READS:
            raise ValueError(
                f"{self._where} has more tar headers than an archive of its kind: more than "
                f"{MAX_HEADER_BYTES} bytes or {MAX_HEADER_READS // 2} records (at byte {position})"
            )
        return self._read(size)

    def read_member(self, member):
        """The data of a regular ``member`` (its size checked by the caller)."""
        if member.issparse():
            raise ValueError(f"{self._where}: {member.name} is a sparse file, not a regular one")
        self.seek(member.offset_data)
        data = self._read(member.size)
        if len(data) < member.size:
            raise tarfile.ReadError(f"unexpected end of data in {member.name}")
        return data

    def drain(self):
        """Read to the end (a gzip stream checks its length and CRC there)."""
        while self._read(_DRAIN_CHUNK):
            pass

    def _read(self, size):
        position = self._stream.tell()
        if position + size > self._max:
            size = self._max - position + 1  # one byte more: tells the end from a cut
            data = self._stream.read(size)
            if len(data) == size:
                raise self._too_large(position + size)
            return data
        return self._stream.read(size)

    def _too_large(self, position):
        return ValueError(
            f"{self._where} decompresses to more than {self._max} bytes (byte {position} "
            "was asked for): it is not the archive expected"
        )

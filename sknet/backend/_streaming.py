"""Chunks of rows of host arrays brought to a backend: how data larger than a device stream."""

import numpy as np


def gather_rows(a, rows, out=None):
    """``a[rows]`` for a host array, into ``out`` (cast to its dtype) when given."""
    if out is None:
        return a[rows]
    if out.dtype == a.dtype:
        return np.take(a, rows, axis=0, out=out)
    out[...] = a[rows]
    return out


class RowStream:
    """Chunks of rows of host arrays, brought to a backend one after another.

    The simple path, synchronous: each chunk is gathered on the host and
    copied into one reused buffer per array (on the CPU, gathered straight
    into it). A chunk's arrays are valid until the next chunk is asked for.
    The CUDA backend overrides it with page-locked buffers and copies that
    overlap the computation (double buffering).

    Parameters
    ----------
    backend : Backend
    arrays : sequence of host arrays or None
        Arrays with the same number of rows (``None`` entries stay ``None``);
        sparse matrices are gathered and moved chunk by chunk, without a buffer.
    dtype : numpy.dtype or sequence
        The dtype the chunks take on the backend; or one per array, ``None``
        keeping the array's own (integer token ids).
    max_rows : int
        The most rows a chunk has.
    """

    def __init__(self, backend, arrays, dtype, max_rows):
        self.backend, self.arrays = backend, list(arrays)
        if isinstance(dtype, (list, tuple)):
            dtypes = [d if d is not None or a is None else a.dtype for a, d in zip(arrays, dtype)]
        else:
            dtypes = [dtype] * len(self.arrays)
        self.dtypes = [None if d is None else np.dtype(d) for d in dtypes]
        self.max_rows = int(max_rows)
        self.buffers = [self._buffer(a, d) for a, d in zip(self.arrays, self.dtypes)]

    def _buffer(self, a, dtype):
        if a is None or self.backend.is_sparse(a) or not isinstance(a, np.ndarray):
            return None
        return self.backend.xp.empty((self.max_rows,) + a.shape[1:], dtype=dtype)

    @property
    def nbytes(self):
        """Bytes of the chunk buffers on the backend."""
        return sum(int(b.nbytes) for b in self.buffers if b is not None)

    def chunks(self, row_chunks):
        """Yield, for each index array in ``row_chunks``, the tuple of those rows here."""
        for rows in row_chunks:
            yield tuple(
                self._fill(a, b, d, rows)
                for a, b, d in zip(self.arrays, self.buffers, self.dtypes)
            )

    def _fill(self, a, buffer, dtype, rows):
        if a is None:
            return None
        if buffer is None:  # sparse rows: gathered on the host, moved as they are
            return self.backend.asarray(a[rows], dtype)
        out = buffer[: len(rows)]
        if self.backend.xp is np:
            return gather_rows(a, rows, out=out)
        out[...] = self.backend.asarray(gather_rows(a, rows))
        return out

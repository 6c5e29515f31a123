"""A training batch's rows, gathered into buffers kept from batch to batch."""


class BatchRows:
    """Gathers the rows of each batch of an epoch; one buffer a row shape.

    Parameters
    ----------
    backend : Backend
        Where the data and the buffers live.
    """

    def __init__(self, backend):
        self.backend = backend
        self._buffers = {}  # by the rows' shape: one a width of batches grouped by length

    def take(self, data, X, order, start, stop):
        """``(X, Y, w)`` of rows ``order[start:stop]`` (``None``: rows as stored) of
        ``data`` (:class:`~sknet.engine._types.BackendData`), ``X`` being ``data.X`` or a
        view of its first steps."""
        if order is None:
            w = None if data.w is None else data.w[start:stop]
            return X[start:stop], data.Y[start:stop], w
        backend, xp, idx = self.backend, self.backend.xp, order[start:stop]
        X = backend.take_rows(X, idx, out=self._buffer(X, stop - start))
        w = None if data.w is None else xp.take(data.w, idx)
        return X, xp.take(data.Y, idx, axis=0), w

    def _buffer(self, X, n_rows):
        if self.backend.is_sparse(X):
            return None
        buf = self._buffers.get(X.shape[1:])
        if buf is None or buf.shape[0] < n_rows or buf.dtype != X.dtype:
            shape = (n_rows,) + X.shape[1:]
            buf = self._buffers[X.shape[1:]] = self.backend.xp.empty(shape, X.dtype)
        return buf[:n_rows]

"""The recurrent cells' kernels (LSTM, GRU), written once with ``xp``.

A mixin of :class:`~sknet.backend.Backend`: each method finishes one time step
in place, forward or backward; the NumPy backend replaces them with fused
Numba kernels where Numba is installed, the CuPy backend with elementwise
kernels.
"""


class RecurrentKernels:
    """LSTM and GRU step kernels over ``self.xp`` (a mixin of Backend)."""

    # -- recurrent cells ------------------------------------------------------
    def lstm_cell_forward(self, g, c_prev, c, tc, h_prev, h, real):
        """Finish one LSTM step in place.

        ``g`` (N, 4H) holds ``tanh`` of the step's gate inputs, columns [input,
        forget, output, cell], the three sigmoid gates' inputs halved: its first
        3H columns become the sigmoid gates ``(tanh + 1) / 2``. Then
        ``c = f c_prev + i g``, ``tc = tanh(c)`` and ``h = o tc``. Rows where the
        boolean ``real`` (N,) is False (padding; ``None``: no mask) keep
        ``c_prev`` and ``h_prev``.
        """
        xp = self.xp
        H = c.shape[1]
        sig = g[:, : 3 * H]
        sig *= 0.5
        sig += 0.5
        xp.multiply(g[:, H : 2 * H], c_prev, out=c)
        c += g[:, :H] * g[:, 3 * H :]
        xp.tanh(c, out=tc)
        xp.multiply(g[:, 2 * H : 3 * H], tc, out=h)
        if real is not None:
            keep = ~real[:, None]
            xp.copyto(c, c_prev, where=keep)
            xp.copyto(h, h_prev, where=keep)

    def lstm_derivative_factors(self, G, TC):
        """The activations' derivatives of every step at once, for :meth:`lstm_cell_backward`.

        ``G`` (T, N, 4H) and ``TC`` (T, N, H) as :meth:`lstm_cell_forward` left
        them. Returns ``None`` where the backend's fused step computes them itself.
        """
        H = TC.shape[-1]
        sig = G[..., : 3 * H]
        return sig * (1 - sig), 1 - G[..., 3 * H :] ** 2, 1 - TC * TC

    def lstm_cell_backward(self, dh, dc, g, tc, c_prev, real, dz, factors):
        """One step of backpropagation through an LSTM cell.

        Writes the gate-input gradients into ``dz`` (N, 4H) (zero on padded
        rows) and returns the gradient of ``c_prev`` (``dc`` on padded rows); it
        may overwrite ``dc``. ``factors`` is this step's slice of
        :meth:`lstm_derivative_factors`.
        """
        xp = self.xp
        H = dh.shape[1]
        dsig, dtanh_g, dtanh_c = factors
        dct = dh * g[:, 2 * H : 3 * H]
        dct *= dtanh_c
        dct += dc
        xp.multiply(dh, tc, out=dz[:, 2 * H : 3 * H])
        xp.multiply(dct, g[:, 3 * H :], out=dz[:, :H])
        xp.multiply(dct, c_prev, out=dz[:, H : 2 * H])
        xp.multiply(dct, g[:, :H], out=dz[:, 3 * H :])
        dz[:, : 3 * H] *= dsig
        dz[:, 3 * H :] *= dtanh_g
        dc_prev = dct
        dc_prev *= g[:, H : 2 * H]
        if real is not None:
            keep = ~real[:, None]
            xp.copyto(dz, 0, where=keep)
            xp.copyto(dc_prev, dc, where=keep)
        return dc_prev

    def gru_cell_forward(self, p, hu, g, h_prev, h, real):
        """One GRU step, in place.

        ``p`` (N, 3H) is the step's input projection ``x W + b`` and ``hu``
        (N, 3H) the recurrent one ``h_prev U + bh``, columns [update, reset,
        new], the update and reset columns of both halved (so that one ``tanh``
        gives the sigmoid: ``sigmoid(x) = (tanh(x / 2) + 1) / 2``). Writes the
        gates ``[z, r, n]`` into ``g`` (N, 3H), with
        ``n = tanh(p_n + r hu_n)``, and ``h = (1 - z) n + z h_prev``; rows where
        the boolean ``real`` (N,) is False (padding; ``None``: no mask) keep
        ``h_prev``.
        """
        xp = self.xp
        H = h.shape[1]
        zr, n = g[:, : 2 * H], g[:, 2 * H :]
        xp.add(p[:, : 2 * H], hu[:, : 2 * H], out=zr)
        xp.tanh(zr, out=zr)
        zr *= 0.5
        zr += 0.5
        xp.multiply(g[:, H : 2 * H], hu[:, 2 * H :], out=n)
        n += p[:, 2 * H :]
        xp.tanh(n, out=n)
        xp.subtract(h_prev, n, out=h)
        h *= g[:, :H]
        h += n
        if real is not None:
            xp.copyto(h, h_prev, where=~real[:, None])

    def gru_cell_backward(self, dh, g, hu, h_prev, real, dp, dhu, dh_prev):
        """One step of backpropagation through a GRU cell.

        From ``dh`` (N, H) and the step's gates ``g`` and recurrent projection
        ``hu`` as :meth:`gru_cell_forward` left them, writes the gradients of
        the input projection into ``dp`` (N, 3H), of the recurrent projection
        into ``dhu`` (N, 3H) (both zero on padded rows) and ``dh z`` into
        ``dh_prev`` (``dh`` on padded rows): the caller adds ``dhu @ U.T``.
        """
        xp = self.xp
        H = dh.shape[1]
        z, r, n = g[:, :H], g[:, H : 2 * H], g[:, 2 * H :]
        dan = dh * (1 - z)
        dan *= 1 - n * n
        dp[:, 2 * H :] = dan
        xp.multiply(dan, r, out=dhu[:, 2 * H :])
        xp.multiply(dh, h_prev - n, out=dp[:, :H])
        dp[:, :H] *= z * (1 - z)
        xp.multiply(dan, hu[:, 2 * H :], out=dp[:, H : 2 * H])
        dp[:, H : 2 * H] *= r * (1 - r)
        dhu[:, : 2 * H] = dp[:, : 2 * H]
        xp.multiply(dh, z, out=dh_prev)
        if real is not None:
            keep = ~real[:, None]
            xp.copyto(dp, 0, where=keep)
            xp.copyto(dhu, 0, where=keep)
            xp.copyto(dh_prev, dh, where=keep)

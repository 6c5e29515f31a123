"""The sequence layers' kernels, written once with ``xp``: layer norm, masked softmax, 1-D patches.

A mixin of :class:`~sknet.backend.Backend` (the CuPy backend runs these as
they are); the NumPy backend replaces the row-wise ones with fused Numba
passes (:mod:`sknet.backend._numpy_sequence`). Sequences are batch first and
channels last, ``(N, T, C)``, as the layers take them.
"""


class SequenceKernels:
    """Layer norm, the attention's masked softmax, and 1-D patches and pooling."""

    # -- dropout's random numbers -----------------------------------------------
    def random_bits(self, generator, shape):
        """Uniform 16-bit integers (``uint16``) of ``shape`` from a :meth:`random_generator`.

        Cheaper than floats for the keep-or-drop decisions of a dropout: a rate
        ``r`` drops the numbers below ``round(r * 65536)``.
        """
        xp = self.xp  # from floats: every array module's generator draws them
        return (generator.random(shape, dtype=xp.float32) * 65536).astype(xp.uint16)

    def dropout_apply(self, X, u, threshold, scale, out):
        """``out = X * scale`` where the draw ``u >= threshold``, 0 elsewhere (dropped).

        ``u`` (:meth:`random_bits`) has ``X``'s number of elements; ``out`` may
        be ``X``. The same call with the same draws is the backward pass.
        """
        xp = self.xp
        xp.multiply(X, u.reshape(X.shape) >= threshold, out=out)
        out *= scale
        return out

    # -- layer normalization over the last axis of rows (n, F) ---------------
    def layer_norm_forward(self, X, gamma, beta, epsilon, out, xhat, inv_std):
        """``out = xhat * gamma + beta`` with ``xhat`` each row of ``X`` (n, F) standardized.

        ``xhat`` (n, F) and ``inv_std`` (n,) (``1 / sqrt(var + epsilon)``, the
        biased variance) are written for the backward pass; ``out`` may be
        ``xhat``. Returns ``out``.
        """
        xp = self.xp
        mean = X.mean(axis=1, keepdims=True)
        xp.subtract(X, mean, out=xhat)
        var = (xhat * xhat).mean(axis=1)
        inv_std[...] = 1.0 / xp.sqrt(var + epsilon)
        xhat *= inv_std[:, None]
        xp.multiply(xhat, gamma, out=out)
        out += beta
        return out

    def layer_norm_backward(self, dY, xhat, inv_std, gamma, dgamma, dbeta, out):
        """The input gradient of :meth:`layer_norm_forward` into ``out`` (n, F).

        ``dgamma`` and ``dbeta`` (F,) get the parameters' gradients unless they
        are ``None``. ``out`` may be ``dY``.
        """
        xp = self.xp
        if dgamma is not None:
            (dY * xhat).sum(axis=0, out=dgamma)
            dY.sum(axis=0, out=dbeta)
        dxhat = dY * gamma
        # dX = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
        first = dxhat.mean(axis=1, keepdims=True)
        second = (dxhat * xhat).mean(axis=1, keepdims=True)
        xp.multiply(xhat, second, out=out)
        xp.subtract(dxhat, out, out=out)
        out -= first
        out *= inv_std[:, None]
        return out

    # -- attention's softmax over keys ----------------------------------------
    def attention_softmax(self, S, key_mask, causal):
        """Softmax of scores ``S`` (N, H, Tq, Tk) over keys, in place; returns ``S``.

        Keys where ``key_mask`` (N, Tk) is False (padding; ``None``: none) and,
        with ``causal``, keys after the query (``k > q``) get weight 0; a
        query left with no key gets weights 0 everywhere (not NaN).
        """
        xp = self.xp
        N, H, Tq, Tk = S.shape
        if key_mask is not None:
            S[...] = xp.where(key_mask[:, None, None, :], S, -xp.inf)
        if causal:
            later = xp.arange(Tk)[None, :] > xp.arange(Tq)[:, None]
            S[...] = xp.where(later, -xp.inf, S)
        top = S.max(axis=3, keepdims=True)
        if key_mask is not None or causal:
            top[...] = xp.where(xp.isfinite(top), top, 0)
        S -= top
        xp.exp(S, out=S)
        total = S.sum(axis=3, keepdims=True)
        total[...] = xp.where(total > 0, total, 1)
        S /= total
        return S

    def attention_softmax_grad(self, dP, P):
        """The gradient of the scores from that of the weights: ``P (dP - sum(dP P))``.

        In place in ``dP`` (N, H, Tq, Tk); returns it.
        """
        inner = (dP * P).sum(axis=3, keepdims=True)
        dP -= inner
        dP *= P
        return dP

    # -- 1-D patches: windows along the steps of (N, T, C) --------------------
    def pad_steps(self, X, left, right, value, out):
        """``X`` (N, T, C) with ``left``/``right`` steps of ``value`` added, into ``out``."""
        T = X.shape[1]
        if left:
            out[:, :left] = value
        if right:
            out[:, left + T :] = value
        out[:, left : left + T] = X
        return out

    def im2col_1d(self, X, stride, dilation, left, out):
        """Windows of sequences ``X`` (N, T, C) as ``out`` (N, OT, kernel, C).

        ``out[n, t, j]`` is step ``t * stride + j * dilation - left`` of
        ``X[n]``, zeros outside the sequence (``left`` padded steps before it,
        as many after as the windows reach); reshaped to (N * OT, kernel * C)
        it is the convolution's left operand.
        """
        N, T, C = X.shape
        OT, kernel = out.shape[1], out.shape[2]
        Tp = max(left + T, (OT - 1) * stride + (kernel - 1) * dilation + 1)
        Xp = self.pad_steps(X, left, Tp - left - T, 0, self.xp.empty((N, Tp, C), X.dtype))
        for j in range(kernel):
            start = j * dilation
            out[:, :, j] = Xp[:, start : start + stride * (OT - 1) + 1 : stride]
        return out

    def col2im_1d(self, dcol, stride, dilation, left, out):
        """The adjoint of :meth:`im2col_1d`: windows (N, OT, kernel, C) summed into the
        sequences ``out`` (N, T, C); what fell on padded steps is dropped."""
        N, OT, kernel, C = dcol.shape
        T = out.shape[1]
        Tp = max(left + T, (OT - 1) * stride + (kernel - 1) * dilation + 1)
        padded = self.xp.zeros((N, Tp, C), dcol.dtype)
        for j in range(kernel):
            start = j * dilation
            padded[:, start : start + stride * (OT - 1) + 1 : stride] += dcol[:, :, j]
        out[...] = padded[:, left : left + T]
        return out

    def max_pool_1d_forward(self, Xp, kernel, stride, Y, argmax):
        """Window maxima over the steps of padded ``Xp`` (N, Tp, C) into ``Y`` (N, OT, C).

        ``argmax`` (int32, like ``Y``) gets the winning step of ``Xp``; the
        first maximum of a window wins ties.
        """
        xp = self.xp
        OT = Y.shape[1]
        better = xp.empty(Y.shape, dtype=bool)
        base = (xp.arange(OT, dtype=xp.int32) * stride)[None, :, None]
        argmax[...] = base
        Y[...] = Xp[:, 0 : stride * (OT - 1) + 1 : stride]
        for j in range(1, kernel):
            view = Xp[:, j : j + stride * (OT - 1) + 1 : stride]
            xp.greater(view, Y, out=better)
            xp.maximum(Y, view, out=Y)
            xp.copyto(argmax, base + j, where=better)
        return Y, argmax

    def max_pool_1d_backward(self, dY, argmax, out):
        """Each window's gradient to its maximum's step: ``out`` (N, Tp, C) zeroed and summed."""
        xp = self.xp
        N, OT, C = dY.shape
        out[...] = 0
        flat = out.reshape(-1)
        Tp = out.shape[1]
        rows = (xp.arange(N, dtype=xp.int64) * Tp)[:, None, None]
        index = ((rows + argmax) * C + xp.arange(C)[None, None, :]).reshape(-1)
        self.scatter_add_rows(flat, index, dY.reshape(-1))
        return out

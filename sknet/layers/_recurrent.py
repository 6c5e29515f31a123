"""Recurrent layers: SimpleRNN, LSTM and GRU, with masks and both directions.

Inputs are batch-first sequences ``(batch, timesteps, features)``. One matrix
product projects the inputs of every step at once (``X @ W + b``); each step
then adds one matrix product of the previous state with all the gates'
recurrent weights together (``h @ U``). Backpropagation through time gathers
the per-step gate gradients so that ``dW``, ``dU`` and ``dX`` are again one
matrix product each.

A mask ``(batch, timesteps)`` marks the real steps of padded sequences: on a
masked step the state is carried over unchanged, so padding, before or after
the sequence, changes neither the outputs at real steps nor the final state;
padded steps enter as zeros, so what they hold (NaN included) reaches no
gradient either.
"""

import numpy as np

from sknet.layers._base import Layer
from sknet.layers._constraints import ACTIVATION, POSITIVE_INT, TRAINING_CONSTRAINTS
from sknet.layers._steps import padded_as_zeros


def _orthogonal(rng, n, n_blocks):
    """``n_blocks`` orthogonal ``(n, n)`` blocks side by side, drawn on the host."""
    blocks = []
    for _ in range(n_blocks):
        q, r = np.linalg.qr(rng.standard_normal((n, n)))
        blocks.append(q * np.sign(np.diag(r)))
    return np.concatenate(blocks, axis=1)


class _Recurrent(Layer):
    """Shared machinery: parameters per direction, masks, time loops."""

    shardable = True  # rows are independent (see Layer.shardable)

    supports_mask = True
    #: number of gates (blocks of ``units`` columns in W, U and b)
    n_gates = 1

    _parameter_constraints: dict = {
        "units": [POSITIVE_INT],
        "return_sequences": ["boolean"],
        "bidirectional": ["boolean"],
        "activation": [ACTIVATION],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        units,
        *,
        return_sequences=False,
        bidirectional=False,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        self.units = units
        self.return_sequences = return_sequences
        self.bidirectional = bidirectional
        self.trainable = trainable
        self.lr_scale = lr_scale
        self.weights = weights

    @property
    def regularized(self):
        return ("W", "U", "Wr", "Ur") if self.bidirectional else ("W", "U")

    def _directions(self):
        return ("", "r") if self.bidirectional else ("",)

    def build(self, input_shape, *, backend, dtype, rng):
        super().build(input_shape, backend=backend, dtype=dtype, rng=rng)
        if len(self.input_shape_) != 2:
            raise ValueError(
                f"{type(self).__name__} expects sequences of shape (timesteps, features), "
                f"got samples of shape {self.input_shape_}"
            )
        T, F = self.input_shape_
        H, G = int(self.units), self.n_gates
        bound = np.sqrt(6.0 / (F + G * H))
        for d in self._directions():
            params = {
                "W" + d: rng.uniform(-bound, bound, (F, G * H)),
                "U" + d: _orthogonal(rng, H, G),
                "b" + d: self._initial_bias(H),
            }
            params.update(self._extra_params(d, H))
            self._add_params(**params)
        width = H * len(self._directions())
        self.output_shape_ = (T, width) if self.return_sequences else (width,)
        return self.output_shape_

    def values_per_sample(self):
        # the gate activations of every step (and direction) dominate
        T, F = self.input_shape_
        H = int(self.units)
        return len(self._directions()) * T * (self.n_gates * H + H + F + 1)

    def _initial_bias(self, H):
        return np.zeros(self.n_gates * H)

    def _extra_params(self, d, H):
        return {}

    # -- forward ---------------------------------------------------------------
    def forward(self, X, *, training, mask=None):
        xp = self.xp
        X, mask = padded_as_zeros(self, X, mask)
        N, T, _ = X.shape
        H = int(self.units)
        outputs, caches = [], []
        for d in self._directions():
            P = (X.reshape(N * T, -1) @ self.params["W" + d]).reshape(N, T, -1)
            P += self.params["b" + d]
            steps = range(T - 1, -1, -1) if d == "r" else range(T)
            h = xp.zeros((N, H), dtype=X.dtype)
            state = self._initial_state(xp, N, H, X.dtype)
            seq = xp.empty((N, T, H), dtype=X.dtype) if self.return_sequences else None
            records = []
            for t in steps:
                m = None if mask is None else mask[:, t, None]
                h, state, record = self._step(xp, P[:, t], h, state, d, m, training)
                if training:
                    records.append((t, record))
                if seq is not None:
                    seq[:, t] = h
            outputs.append(seq if seq is not None else h)
            if training:
                caches.append((d, records))
        Y = outputs[0] if len(outputs) == 1 else xp.concatenate(outputs, axis=-1)
        if training:
            self._cache = {"X": X, "mask": mask, "directions": caches}
        return Y

    # -- backward --------------------------------------------------------------
    def backward(self, dY):
        xp, cache = self.xp, self._cache
        X, mask = cache["X"], cache["mask"]
        N, T, F = X.shape
        H = int(self.units)
        dX = None
        for k, (d, records) in enumerate(cache["directions"]):
            part = dY[..., k * H : (k + 1) * H]
            dP = xp.zeros((N, T, self.n_gates * H), dtype=X.dtype)
            h_prev_all = xp.empty((N, T, H), dtype=X.dtype)
            dh = xp.zeros((N, H), dtype=X.dtype)
            dstate = self._zero_state_grad(xp, N, H, X.dtype)
            if not self.return_sequences:
                dh = dh + part
            for t, record in reversed(records):
                if self.return_sequences:
                    dh = dh + part[:, t]
                m = None if mask is None else mask[:, t, None]
                dz, dh, dstate = self._step_backward(xp, record, dh, dstate, d, m)
                dP[:, t] = dz
                h_prev_all[:, t] = record["h_prev"]
            dP2 = dP.reshape(N * T, -1)
            if self.trainable:
                xp.matmul(X.reshape(N * T, F).T, dP2, out=self.grads["W" + d])
                self.grads["b" + d][...] = dP2.sum(axis=0)
                self._recurrent_grads(xp, h_prev_all.reshape(N * T, H), dP2, d, records)
            if not self.skip_input_grad:
                dXd = (dP2 @ self.params["W" + d].T).reshape(N, T, F)
                dX = dXd if dX is None else dX + dXd
        return dX

    def _add_input_grad(self, dX, dP, d, shape):
        """``dX`` plus direction ``d``'s input gradient from the time-major ``dP`` (T * N, G)."""
        N, T, F = shape
        dXd = (dP @ self.params["W" + d].T).reshape(T, N, F)
        dXd = (dXd if d == "" else dXd[::-1]).transpose(1, 0, 2)
        return dXd if dX is None else dX + dXd

    def _time_major_forward(self, X, training, mask, run_direction):
        """Run ``run_direction(Xd, d, order, buffer)`` for each direction; returns Y.

        ``Xd`` (T, N, F) is ``X`` time-major in the direction's order, ``buffer(name,
        shape)`` a time-major array (reused across training batches), and
        ``run_direction`` returns the states ``Hs`` (T + 1, N, H) (``Hs[0]`` the
        initial state) and what its backward needs, kept as
        ``self._cache["directions"]`` entries ``(d, order, *kept)``.
        """
        xp = self.xp
        N, T, F = X.shape
        Xt = X.transpose(1, 0, 2)
        outputs, caches = [], []
        for d in self._directions():

            def buffer(name, shape, d=d):
                if training:
                    return self._buffer(name + d, shape, batch_first=False)
                return xp.empty(shape, dtype=X.dtype)

            order = list(range(T - 1, -1, -1)) if d == "r" else list(range(T))
            Hs, kept = run_direction(Xt if d == "" else Xt[::-1], d, order, buffer)
            if self.return_sequences:
                seq = Hs[1:] if d == "" else Hs[1:][::-1]
                outputs.append(seq.transpose(1, 0, 2))
            else:
                outputs.append(Hs[T])
            caches.append((d, order, *kept))
        Y = outputs[0] if len(outputs) == 1 else xp.concatenate(outputs, axis=-1)
        if training:
            self._cache = {"mask": mask, "directions": caches, "shape": (N, T, F)}
        return xp.ascontiguousarray(Y)

    def _recurrent_grads(self, xp, h_prev, dZ, d, records):
        xp.matmul(h_prev.T, dZ, out=self.grads["U" + d])

    def _initial_state(self, xp, N, H, dtype):
        return None

    def _zero_state_grad(self, xp, N, H, dtype):
        return None


def _carry(xp, m, new, old):
    """The new state on real steps, the old one on masked steps."""
    return new if m is None else xp.where(m, new, old)


class SimpleRNN(_Recurrent):
    """Fully recurrent layer, ``h_t = f(x_t W + h_{t-1} U + b)``.

    Parameters
    ----------
    units : int
        Size of the state.
    activation : {'tanh', 'relu', ...}, default='tanh'
        Activation of the state (any of :data:`sknet.backend.ACTIVATIONS`).
    return_sequences : bool, default=False
        Output the state at every step ``(batch, timesteps, units)`` instead
        of the last one ``(batch, units)``.
    bidirectional : bool, default=False
        Also run over the reversed sequence; the two outputs are concatenated
        (``2 * units`` features).
    %(trainable)s

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import SimpleRNN
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = SimpleRNN(4, return_sequences=True)
    >>> layer.build((5, 3), backend=backend, dtype=np.float32, rng=rng)  # 5 steps, 3 features
    (5, 4)
    >>> layer.forward(np.ones((2, 5, 3), np.float32), training=False).shape
    (2, 5, 4)
    """

    def __init__(
        self,
        units,
        *,
        activation="tanh",
        return_sequences=False,
        bidirectional=False,
        trainable=True,
        lr_scale=1.0,
        weights=None,
    ):
        super().__init__(
            units,
            return_sequences=return_sequences,
            bidirectional=bidirectional,
            trainable=trainable,
            lr_scale=lr_scale,
            weights=weights,
        )
        self.activation = activation

    def _step(self, xp, p, h, state, d, m, training):
        z = p + h @ self.params["U" + d]
        h_new = self.backend_.activation_forward(self.activation, z, xp.empty_like(z))
        record = {"h_prev": h, "z": z, "h": h_new, "m": m} if training else None
        return _carry(xp, m, h_new, h), None, record

    def _step_backward(self, xp, record, dh, dstate, d, m):
        dz = self.backend_.activation_backward(
            self.activation, dh.copy(), record["h"], record["z"], xp.empty_like(dh)
        )
        if m is not None:
            dz = xp.where(m, dz, 0)
        dh_prev = dz @ self.params["U" + d].T
        if m is not None:
            dh_prev = dh_prev + xp.where(m, 0, dh)
        return dz, dh_prev, None


class LSTM(_Recurrent):
    """Long short-term memory layer (gates ordered input, forget, output, cell).

    ``i, f, o = sigmoid(...)``, ``g = tanh(...)`` of ``x_t W + h_{t-1} U + b``;
    ``c_t = f c_{t-1} + i g``; ``h_t = o tanh(c_t)``. The three sigmoid gates
    are contiguous, so each step applies one sigmoid and one tanh, in place.
    The forget gate's bias starts at 1 and the recurrent weights are orthogonal.

    Parameters
    ----------
    units : int
        Size of the state.
    return_sequences : bool, default=False
        Output the state at every step ``(batch, timesteps, units)`` instead
        of the last one ``(batch, units)``.
    bidirectional : bool, default=False
        Also run over the reversed sequence; the two outputs are concatenated.
    %(trainable)s

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import LSTM
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = LSTM(4, bidirectional=True)
    >>> layer.build((5, 3), backend=backend, dtype=np.float32, rng=rng)
    (8,)
    >>> sorted(layer.params)  # "r": the reversed direction
    ['U', 'Ur', 'W', 'Wr', 'b', 'br']
    >>> layer.params["W"].shape  # the four gates side by side
    (3, 16)
    >>> layer.forward(np.ones((2, 5, 3), np.float32), training=False).shape
    (2, 8)
    """

    n_gates = 4

    def _initial_bias(self, H):
        b = np.zeros(4 * H)
        b[H : 2 * H] = 1.0
        return b

    # The LSTM runs its own time loops over time-major buffers (one array per
    # quantity for all steps), so each step writes in place. Step k reads the
    # row block A[k] = [h_{k} | x_t | 1], so one matrix product with the stacked
    # weights [U; W; b] gives all four gates' inputs, the input projection and
    # bias included; after the loop, one product A^T dG gives dU, dW and db.
    def forward(self, X, *, training, mask=None):
        backend, xp = self.backend_, self.xp
        X, mask = padded_as_zeros(self, X, mask)
        N, T, F = X.shape
        H = int(self.units)
        K = H + F + 1
        # sigmoid(z) = (1 + tanh(z / 2)) / 2: halving the sigmoid gates'
        # columns of the weights lets one tanh over all four gates do the work.
        half = xp.ones(4 * H, dtype=X.dtype)
        half[: 3 * H] = 0.5

        def run_direction(Xd, d, order, buffer):
            A = buffer("A", (T + 1, N, K))
            A[:T, :, H : H + F] = Xd
            A[:, :, K - 1] = 1
            A[0, :, :H] = 0
            Hs = A[:, :, :H]  # the states, in place in A
            Wcat = self._stacked_weights(d) * half
            G = buffer("G", (T, N, 4 * H))
            TC = buffer("TC", (T, N, H))
            Cs = buffer("C", (T + 1, N, H))
            Cs[0] = 0
            for k, t in enumerate(order):
                g = G[k]
                xp.matmul(A[k], Wcat, out=g)
                xp.tanh(g, out=g)
                # padding (mask False): the state is carried over
                real = None if mask is None else mask[:, t]
                backend.lstm_cell_forward(g, Cs[k], Cs[k + 1], TC[k], Hs[k], Hs[k + 1], real)
            return Hs, (G, TC, Cs, A)

        return self._time_major_forward(X, training, mask, run_direction)

    def _stacked_weights(self, d):
        """[U; W; b] of direction ``d``: (H + F + 1, 4H)."""
        p = self.params
        return self.xp.concatenate([p["U" + d], p["W" + d], p["b" + d][None]])

    def backward(self, dY):
        backend, xp, cache = self.backend_, self.xp, self._cache
        mask = cache["mask"]
        N, T, F = cache["shape"]
        H = int(self.units)
        dX = None
        for j, (d, order, G, TC, Cs, A) in enumerate(cache["directions"]):
            part = dY[..., j * H : (j + 1) * H]
            factors = backend.lstm_derivative_factors(G, TC)  # of every step at once
            U = self.params["U" + d]
            dG = self._buffer("dG" + d, G.shape, batch_first=False)
            dh = xp.zeros((N, H), dtype=dY.dtype)
            dc = xp.zeros((N, H), dtype=dY.dtype)
            if not self.return_sequences:
                dh += part
            for k in range(T - 1, -1, -1):
                t = order[k]
                if self.return_sequences:
                    dh += part[:, t]
                real = None if mask is None else mask[:, t]
                step_factors = None if factors is None else tuple(a[k] for a in factors)
                dc = backend.lstm_cell_backward(
                    dh, dc, G[k], TC[k], Cs[k], real, dG[k], step_factors
                )
                dh_prev = dG[k] @ U.T
                if mask is not None:  # padded steps pass the gradient straight through
                    xp.copyto(dh_prev, dh, where=~real[:, None])
                dh = dh_prev
            flat = dG.reshape(T * N, 4 * H)
            if self.trainable:
                # d[U; W; b] = A^T dG over every step at once; rows split by parameter
                stacked = xp.matmul(A[:T].reshape(T * N, H + F + 1).T, flat)
                self.grads["U" + d][...] = stacked[:H]
                self.grads["W" + d][...] = stacked[H : H + F]
                self.grads["b" + d][...] = stacked[H + F]
            if not self.skip_input_grad:
                dX = self._add_input_grad(dX, flat, d, (N, T, F))
        return None if dX is None else xp.ascontiguousarray(dX)


class GRU(_Recurrent):
    """Gated recurrent unit (gates ordered update, reset, new; reset after the product).

    ``z, r = sigmoid(...)`` and ``n = tanh(x_n + r * (h_{t-1} U_n + bh_n))``,
    ``h_t = (1 - z) n + z h_{t-1}``, the formulation of cuDNN and PyTorch:
    the recurrent product has its own bias ``bh``.

    Parameters
    ----------
    units : int
        Size of the state.
    return_sequences : bool, default=False
        Output the state at every step instead of the last one.
    bidirectional : bool, default=False
        Also run over the reversed sequence; the two outputs are concatenated.
    %(trainable)s

    Notes
    -----
    Input shape: ``(batch, timesteps, features)``; takes a ``mask``.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet.backend import get_backend
    >>> from sknet.layers import GRU
    >>> backend, rng = get_backend("cpu"), np.random.RandomState(0)
    >>> layer = GRU(4)
    >>> layer.build((5, 3), backend=backend, dtype=np.float32, rng=rng)
    (4,)
    >>> X = rng.standard_normal((2, 5, 3)).astype(np.float32)
    >>> mask = np.array([[True] * 5, [True] * 3 + [False] * 2])  # the second is padded
    >>> Y = layer.forward(X, training=False, mask=mask)
    >>> Y.shape
    (2, 4)
    >>> X[1, 3:] = 99.0  # the padding changes nothing
    >>> np.allclose(layer.forward(X, training=False, mask=mask), Y)
    True
    """

    n_gates = 3

    def _extra_params(self, d, H):
        return {"bh" + d: np.zeros(3 * H)}

    # Like the LSTM, time loops over time-major buffers written in place: the
    # input projection of every step is one product before the loop, each step
    # one product h_prev U, and after the loop two products give dW and dU.
    def forward(self, X, *, training, mask=None):
        backend, xp, p = self.backend_, self.xp, self.params
        X, mask = padded_as_zeros(self, X, mask)
        N, T, F = X.shape
        H = int(self.units)
        # sigmoid(x) = (tanh(x / 2) + 1) / 2: the update and reset columns halved
        half = xp.ones(3 * H, dtype=X.dtype)
        half[: 2 * H] = 0.5

        def run_direction(Xt, d, order, buffer):
            Xd = buffer("X", (T, N, F))
            Xd[...] = Xt
            P = buffer("P", (T, N, 3 * H))
            xp.matmul(Xd.reshape(T * N, F), p["W" + d] * half, out=P.reshape(T * N, 3 * H))
            P += p["b" + d] * half
            U, bh = p["U" + d] * half, p["bh" + d] * half
            HU = buffer("HU", (T, N, 3 * H))
            G = buffer("G", (T, N, 3 * H))
            Hs = buffer("H", (T + 1, N, H))
            Hs[0] = 0
            for k, t in enumerate(order):
                xp.matmul(Hs[k], U, out=HU[k])
                HU[k] += bh
                real = None if mask is None else mask[:, t]
                backend.gru_cell_forward(P[k], HU[k], G[k], Hs[k], Hs[k + 1], real)
            return Hs, (Xd, HU, G, Hs)

        return self._time_major_forward(X, training, mask, run_direction)

    def backward(self, dY):
        backend, xp, cache = self.backend_, self.xp, self._cache
        mask = cache["mask"]
        N, T, F = cache["shape"]
        H = int(self.units)
        dX = None
        for j, (d, order, Xd, HU, G, Hs) in enumerate(cache["directions"]):
            part = dY[..., j * H : (j + 1) * H]
            U = self.params["U" + d]
            dP = self._buffer("dP" + d, G.shape, batch_first=False)
            dHU = self._buffer("dHU" + d, G.shape, batch_first=False)
            dh = xp.zeros((N, H), dtype=dY.dtype)
            dh_prev = xp.empty((N, H), dtype=dY.dtype)
            if not self.return_sequences:
                dh += part
            for k in range(T - 1, -1, -1):
                t = order[k]
                if self.return_sequences:
                    dh += part[:, t]
                real = None if mask is None else mask[:, t]
                backend.gru_cell_backward(dh, G[k], HU[k], Hs[k], real, dP[k], dHU[k], dh_prev)
                dh_prev += dHU[k] @ U.T
                dh, dh_prev = dh_prev, dh
            flat_p, flat_hu = dP.reshape(T * N, 3 * H), dHU.reshape(T * N, 3 * H)
            if self.trainable:
                xp.matmul(Xd.reshape(T * N, F).T, flat_p, out=self.grads["W" + d])
                flat_p.sum(axis=0, out=self.grads["b" + d])
                xp.matmul(Hs[:T].reshape(T * N, H).T, flat_hu, out=self.grads["U" + d])
                flat_hu.sum(axis=0, out=self.grads["bh" + d])
            if not self.skip_input_grad:
                dX = self._add_input_grad(dX, flat_p, d, (N, T, F))
        return None if dX is None else xp.ascontiguousarray(dX)

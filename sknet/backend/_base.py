"""The array-module-agnostic backend: every kernel written once with ``xp``.

:class:`Backend` holds the reference implementation of every kernel that the
layers, losses and optimizers call. It is written against the NumPy API only
through ``self.xp``, operators and array methods, so it runs unchanged on NumPy
and on CuPy. The concrete backends (``_numpy.py``, ``_cupy.py``) subclass it and
replace a kernel only where a backend-specific version pays (scipy's ``expit``
on the CPU, fused ``ElementwiseKernel`` s on the GPU).
"""

import contextlib

import numpy as np

from sknet.backend._activations import ACTIVATIONS
from sknet.backend._deferred import DeferredWork
from sknet.backend._recurrent_kernels import RecurrentKernels
from sknet.backend._sequence_kernels import SequenceKernels
from sknet.backend._streaming import RowStream
from sknet.backend._tabular_kernels import TabularKernels


def conv_outsize(size, k, stride, pad):
    """Output length of a convolution or pooling window sliding over ``size``."""
    return (size + 2 * pad - k) // stride + 1


class Backend(SequenceKernels, RecurrentKernels, TabularKernels, DeferredWork):
    """Where arrays live and how the few backend-specific kernels run.

    Parameters
    ----------
    name : str
        The device string, ``"cpu"`` or ``"cuda:N"``.
    xp : module
        The array module, :mod:`numpy` or :mod:`cupy`.

    Notes
    -----
    A backend pickles by name: unpickling calls :func:`sknet.backend.get_backend`
    with the same string on the loading machine.
    """

    def __init__(self, name, xp):
        self.name = name
        self.xp = xp

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"

    #: How a name becomes a backend again (``sknet.backend.get_backend``, which
    #: the package registers here: this module does not import its package).
    resolve = None

    def __reduce__(self):
        return (type(self).resolve, (self.name,))

    def __eq__(self, other):
        return isinstance(other, Backend) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    # -- moving data ------------------------------------------------------
    def asarray(self, x, dtype=None):
        """Return ``x`` as an array of this backend, copying only if needed."""
        return self.xp.asarray(x, dtype=dtype)

    def to_numpy(self, x):
        """Return ``x`` as a NumPy array (no copy when it already is one)."""
        return np.asarray(x)

    def is_sparse(self, x):
        """Whether ``x`` is a sparse matrix of this backend."""
        return False

    def synchronize(self):
        """Wait for queued device work to finish (no-op on the CPU)."""

    def device_context(self):
        """Context manager making this backend's device the current one."""
        return contextlib.nullcontext()

    def release_memory(self):
        """Give cached device memory back to the driver (no-op on the CPU)."""

    def out_of_memory_errors(self):
        """Exception types this backend raises when device memory runs out."""
        return ()

    # -- memory: what is free, and data streamed in from the host ------------
    #: Whether the device has memory apart from the host's (a GPU): only then
    #: can data too large for it stay on the host and stream in by chunks.
    separate_memory = False
    #: Chunk buffers a :meth:`row_stream` keeps on the device per array.
    stream_buffers = 1

    def available_memory(self):
        """Bytes free for new arrays on this device, or None when unknown."""
        return None

    def row_stream(self, arrays, dtype, max_rows):
        """A :class:`RowStream` bringing chunks of rows of host ``arrays`` here."""
        return RowStream(self, arrays, dtype, max_rows)

    def nccl(self):
        """NCCL's bindings for collectives between GPUs; None where there are none (the CPU)."""
        return None

    def random_generator(self, seed):
        """A random generator on this backend, seeded from the host."""
        return self.xp.random.default_rng(seed)

    # -- kernels ----------------------------------------------------------
    def matmul(self, A, B, out=None):
        """``A @ B`` into ``out``; ``A`` may be a sparse matrix."""
        if self.is_sparse(A):
            if out is None:
                return self.xp.asarray(A @ B)
            out[...] = A @ B
            return out
        return self.xp.matmul(A, B, out=out)

    def take_rows(self, X, idx, out=None):
        """``X[idx]`` for an index array, into ``out`` when given and dense."""
        if self.is_sparse(X):
            return X[idx]
        return self.xp.take(X, idx, axis=0, out=out)

    def activation_forward(self, name, Z, out):
        """``out = f(Z)`` for activation ``name``; ``out`` may be ``Z``."""
        return ACTIVATIONS[name].forward(self.xp, Z, out)

    def activation_backward(self, name, dY, Y, Z, out):
        """``out = dY * f'(Z)`` given the forward output ``Y`` (and input ``Z``
        when the activation needs it); ``out`` may be ``dY``."""
        return ACTIVATIONS[name].backward(self.xp, dY, Y, Z, out)

    def adam_update(self, param, grad, m, v, lr, beta_1, beta_2, epsilon, tmp):
        """One Adam step in place; ``lr`` already holds the bias correction."""
        xp = self.xp
        # m += (1 - b1) (g - m);  v += (1 - b2) (g^2 - v)
        xp.subtract(grad, m, out=tmp)
        tmp *= 1 - beta_1
        m += tmp
        xp.multiply(grad, grad, out=tmp)
        tmp -= v
        tmp *= 1 - beta_2
        v += tmp
        # param -= lr m / (sqrt(v) + eps)
        xp.sqrt(v, out=tmp)
        tmp += epsilon
        xp.divide(m, tmp, out=tmp)
        tmp *= -lr
        param += tmp

    def sgd_update(self, param, grad, velocity, lr, momentum, nesterov, tmp):
        """One SGD-with-momentum step in place (sklearn's formulation)."""
        # velocity = momentum * velocity - lr * grad
        velocity *= momentum
        xp = self.xp
        xp.multiply(grad, lr, out=tmp)
        velocity -= tmp
        if nesterov:
            # param += momentum * velocity - lr * grad
            tmp *= -1
            tmp += momentum * velocity
            param += tmp
        else:
            param += velocity

    def add_scaled(self, y, x, alpha):
        """``y += alpha * x`` in place."""
        y += alpha * x
        return y

    def clip_by_norm(self, grad, max_norm):
        """Scale ``grad`` in place so its L2 norm is at most ``max_norm`` (no sync)."""
        xp = self.xp
        norm = xp.sqrt(xp.vdot(grad, grad))
        grad *= xp.minimum(1.0, max_norm / (norm + 1e-12)).astype(grad.dtype)

    def scatter_add_rows(self, target, idx, values):
        """``target[idx[k]] += values[k]`` for every k, repeated indices summed."""
        self.xp.add.at(target, idx, values)

    # -- dense layers ---------------------------------------------------------
    def bias_activation(self, Z, bias, activation):
        """``Z = activation(Z + bias)`` in place, for rows ``Z`` (n, F).

        ``bias`` (F,) may be ``None``; ``activation`` must run in place (its
        derivative needs only its output), or be ``'identity'``.
        """
        if bias is not None:
            Z += bias
        if activation != "identity":
            self.activation_forward(activation, Z, Z)
        return Z

    def bias_activation_grad(self, dY, Y, activation, db):
        """The gradient of :meth:`bias_activation`, in place in ``dY``; the bias
        gradient (the column sums) into ``db`` unless it is ``None``."""
        if activation != "identity":
            dY = self.activation_backward(activation, dY, Y, None, dY)
        if db is not None:
            dY.sum(axis=0, out=db)
        return dY

    # -- pooling --------------------------------------------------------------
    def max_pool_forward(self, X, kernel, stride, padding, out_hw, out=None):
        """Window maxima of ``X`` (N, C, H, W) and the routing :meth:`max_pool_backward` needs.

        Windows start every ``stride`` pixels of the image padded by ``padding``
        (padded pixels never win). Returns ``(Y, argmax)``: ``Y`` of shape
        (N, C, OH, OW), ``argmax`` an int32 array of that shape that the backend
        alone reads; ``out`` may give both arrays to write. The first maximum of
        a window (row-major) wins ties.
        """
        # A running maximum over the kh * kw strided views of the image, and the
        # first view that holds it: no patch matrix is built.
        xp = self.xp
        (kh, kw), (sh, sw), (ph, pw), (OH, OW) = kernel, stride, padding, out_hw
        if ph or pw:
            X = xp.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-xp.inf)
        Y = winner = better = None
        for k in range(kh * kw):
            i, j = divmod(k, kw)
            view = X[:, :, i : i + sh * OH : sh, j : j + sw * OW : sw]
            if Y is None:
                if out is None:
                    Y, winner = view.copy(), xp.zeros(view.shape, dtype=xp.int32)
                else:
                    Y, winner = out
                    xp.copyto(Y, view)
                    winner.fill(0)
                better = xp.empty(Y.shape, dtype=bool)
                continue
            xp.greater(view, Y, out=better)
            xp.maximum(Y, view, out=Y)
            xp.copyto(winner, k, where=better)
        return Y, winner

    def max_pool_backward(self, dY, argmax, input_hw, kernel, stride, padding, out=None):
        """Gradient of :meth:`max_pool_forward`: each window's ``dY`` to its maximum
        (into ``out`` (N, C, H, W) when given)."""
        xp = self.xp
        (kh, kw), (sh, sw), (ph, pw), (H, W) = kernel, stride, padding, input_hw
        N, C, OH, OW = dY.shape
        dX = xp.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=dY.dtype)
        overlap = sh < kh or sw < kw
        routed = xp.empty_like(dY)
        for k in range(kh * kw):
            i, j = divmod(k, kw)
            xp.multiply(dY, argmax == k, out=routed)
            window = dX[:, :, i : i + sh * OH : sh, j : j + sw * OW : sw]
            if overlap:
                window += routed
            else:  # each input pixel is in one window at most
                window[...] = routed
        if ph or pw:
            dX = xp.ascontiguousarray(dX[:, :, ph : ph + H, pw : pw + W])
        if out is not None:
            out[...] = dX
            return out
        return dX

    # -- convolution ----------------------------------------------------------
    def conv_output(self, Zm, bias, activation, out):
        """``out`` (N, F, OH, OW) = ``activation(Zm + bias)``, channels first.

        ``Zm`` (F, N * OH * OW) is the convolution's matrix product; ``bias``
        (F,) may be ``None``; ``activation`` must be one that runs in place
        (its derivative needs only its output), or ``'identity'``.
        """
        N, F, OH, OW = out.shape
        out[...] = Zm.reshape(F, N, OH, OW).transpose(1, 0, 2, 3)
        if bias is not None:
            out += bias[:, None, None]
        if activation != "identity":
            self.activation_forward(activation, out, out)
        return out

    def conv_output_grad(self, dY, Y, activation, dZm, db):
        """The gradient of :meth:`conv_output`: ``dZm`` (F, N * OH * OW) and the
        bias gradient ``db`` (F,) (``None``: no bias) from ``dY`` and the output
        ``Y`` (N, F, OH, OW). May overwrite ``dY``."""
        N, F, OH, OW = dY.shape
        if activation != "identity":
            dY = self.activation_backward(activation, dY, Y, None, dY)
        dZm.reshape(F, N, OH, OW)[...] = dY.transpose(1, 0, 2, 3)
        if db is not None:
            dZm.sum(axis=1, out=db)
        return dZm

    def conv_per_image(self, channels):
        """Whether Conv2D computes one product per image (``im2col_images``); here never."""
        return False

    def conv_channels_last(self, channels):
        """Whether Conv2D computes with channels-last patches (``im2col_nhwc``) for
        inputs of ``channels`` channels; here never: the channels-first ones."""
        return False

    def im2col(self, X, kh, kw, sh, sw, ph, pw, pad_value=0.0, out=None):
        """Patches of ``X`` (N, C, H, W) as an array of shape (C, kh, kw, N, OH, OW).

        ``col[c, i, j, n, y, x]`` is pixel ``(y * sh + i - ph, x * sw + j - pw)`` of
        channel ``c`` of image ``n``, or ``pad_value`` outside the image. Reshaped to
        ``(C * kh * kw, N * OH * OW)`` it is the right operand of the convolution's
        matrix product. Written into ``out`` (contiguous) when given.
        """
        xp = self.xp
        N, C, H, W = X.shape
        OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(W, kw, sw, pw)
        # Channels first once, so every patch copy below reads and writes alike.
        X = xp.ascontiguousarray(X.transpose(1, 0, 2, 3))
        if ph or pw:
            X = xp.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
        col = xp.empty((C, kh, kw, N, OH, OW), dtype=X.dtype) if out is None else out
        for i in range(kh):
            for j in range(kw):
                col[:, i, j] = X[:, :, i : i + sh * OH : sh, j : j + sw * OW : sw]
        return col

    def col2im(self, col, H, W, sh, sw, ph, pw, out=None):
        """The adjoint of :meth:`im2col`: sum patches (C, kh, kw, N, OH, OW) into
        images (N, C, H, W), written into ``out`` when given."""
        xp = self.xp
        C, kh, kw, N, OH, OW = col.shape
        X = xp.zeros((C, N, H + 2 * ph, W + 2 * pw), dtype=col.dtype)
        for i in range(kh):
            for j in range(kw):
                X[:, :, i : i + sh * OH : sh, j : j + sw * OW : sw] += col[:, i, j]
        images = X[:, :, ph : ph + H, pw : pw + W].transpose(1, 0, 2, 3)
        if out is None:
            return xp.ascontiguousarray(images)
        out[...] = images
        return out

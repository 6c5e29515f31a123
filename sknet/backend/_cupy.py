"""The CuPy backend: the shared ``xp`` kernels, with fused CUDA kernels where they pay.

Importing this module imports CuPy; :mod:`sknet.backend` does so only inside
``try``/``except`` and only when a CUDA device is asked for, so sknet imports and
runs without CuPy. Fused kernels are compiled lazily on first use (CuPy caches
them on disk).
"""

import cupy as cp
import cupyx
import cupyx.scipy.sparse as cpsp
import numpy as np
import scipy.sparse as sp

from sknet.backend._activations import ELU_ALPHA, LEAKY_RELU_SLOPE
from sknet.backend._base import Backend, conv_outsize
from sknet.backend._streaming import RowStream, gather_rows

# Fused forward (in place allowed: out may alias z) and backward kernels.
# Backward kernels receive the forward output y and the input z.
_FORWARD_SRC = {
    "logistic": "out = 1 / (1 + exp(-z))",
    "tanh": "out = tanh(z)",
    "relu": "out = z > 0 ? z : (T)0",
    "leaky_relu": f"out = z > 0 ? z : (T){LEAKY_RELU_SLOPE} * z",
    "elu": f"out = z > 0 ? z : (T){ELU_ALPHA} * (exp(z) - 1)",
    "gelu": (
        "T t = tanh((T)0.7978845608028654 * (z + (T)0.044715 * z * z * z));"
        "out = (T)0.5 * z * (1 + t)"
    ),
    "silu": "out = z / (1 + exp(-z))",
}
_BACKWARD_SRC = {
    "logistic": "out = dy * y * (1 - y)",
    "tanh": "out = dy * (1 - y * y)",
    "relu": "out = y > 0 ? dy : (T)0",
    "leaky_relu": f"out = y > 0 ? dy : (T){LEAKY_RELU_SLOPE} * dy",
    "elu": f"out = y > 0 ? dy : dy * (y + (T){ELU_ALPHA})",
    "gelu": (
        "T c = 0.7978845608028654; T k = 0.044715;"
        "T t = tanh(c * (z + k * z * z * z));"
        "out = dy * ((T)0.5 * (1 + t)"
        " + (T)0.5 * z * (1 - t * t) * c * (1 + 3 * k * z * z))"
    ),
    "silu": "T s = 1 / (1 + exp(-z)); out = dy * (s + y * (1 - s))",
}

_adam_kernel = cp.ElementwiseKernel(
    "T grad, T lr, T beta_1, T beta_2, T epsilon",
    "T param, T m, T v",
    """
    m += (1 - beta_1) * (grad - m);
    v += (1 - beta_2) * (grad * grad - v);
    param -= lr * m / (sqrt(v) + epsilon);
    """,
    "sknet_adam",
)

_sgd_kernel = cp.ElementwiseKernel(
    "T grad, T lr, T momentum, bool nesterov",
    "T param, T velocity",
    """
    velocity = momentum * velocity - lr * grad;
    param += nesterov ? momentum * velocity - lr * grad : velocity;
    """,
    "sknet_sgd",
)

# im2col: one thread per column entry, in the (C, kh, kw, N, OH, OW) layout.
_im2col_kernel = cp.ElementwiseKernel(
    "raw T img, int32 N, int32 C, int32 H, int32 W, int32 kh, int32 kw, "
    "int32 sh, int32 sw, int32 ph, int32 pw, int32 OH, int32 OW, T pad_value",
    "T col",
    """
    int x = i % OW; int t = i / OW;
    int y = t % OH; t /= OH;
    int n = t % N; t /= N;
    int j = t % kw; t /= kw;
    int k = t % kh; int c = t / kh;
    int in_y = y * sh + k - ph;
    int in_x = x * sw + j - pw;
    col = (in_y >= 0 && in_y < H && in_x >= 0 && in_x < W)
        ? img[((n * C + c) * H + in_y) * W + in_x] : pad_value;
    """,
    "sknet_im2col",
)

# col2im: one thread per image pixel, summing every patch entry that saw it.
_col2im_kernel = cp.ElementwiseKernel(
    "raw T col, int32 N, int32 C, int32 H, int32 W, int32 kh, int32 kw, "
    "int32 sh, int32 sw, int32 ph, int32 pw, int32 OH, int32 OW",
    "T img",
    """
    int x = i % W; int t = i / W;
    int y = t % H; t /= H;
    int c = t % C; int n = t / C;
    T total = 0;
    for (int k = 0; k < kh; ++k) {
        int yy = y + ph - k;
        if (yy < 0 || yy % sh != 0 || yy / sh >= OH) continue;
        for (int j = 0; j < kw; ++j) {
            int xx = x + pw - j;
            if (xx < 0 || xx % sw != 0 || xx / sw >= OW) continue;
            total += col[((((c * kh + k) * kw + j) * N + n) * OH + yy / sh) * OW + xx / sw];
        }
    }
    img = total;
    """,
    "sknet_col2im",
)

# Max pooling: one thread per output, keeping the first maximum of its window
# and that pixel's flat index in the unpadded input (padding never wins).
_max_pool_forward_kernel = cp.ElementwiseKernel(
    "raw T img, int32 H, int32 W, int32 kh, int32 kw, int32 sh, int32 sw, "
    "int32 ph, int32 pw, int32 OH, int32 OW",
    "T out, int32 argmax",
    """
    int x = i % OW; int t = i / OW;
    int y = t % OH; int nc = t / OH;
    bool found = false;
    T best = 0; int best_at = 0;
    for (int k = 0; k < kh; ++k) {
        int in_y = y * sh + k - ph;
        if (in_y < 0 || in_y >= H) continue;
        for (int j = 0; j < kw; ++j) {
            int in_x = x * sw + j - pw;
            if (in_x < 0 || in_x >= W) continue;
            int at = (nc * H + in_y) * W + in_x;
            T v = img[at];
            if (!found || v > best) { best = v; best_at = at; found = true; }
        }
    }
    out = best;
    argmax = best_at;
    """,
    "sknet_max_pool_forward",
)

# Its gradient: each output's dY added to the pixel that won its window
# (atomically, as overlapping windows can share a winner).
_max_pool_backward_kernel = cp.ElementwiseKernel(
    "T dy, int32 argmax",
    "raw T dx",
    "atomicAdd(&dx[argmax], dy)",
    "sknet_max_pool_backward",
)

_forward_kernels = {}
_backward_kernels = {}


def _forward_kernel(name):
    kernel = _forward_kernels.get(name)
    if kernel is None:
        kernel = cp.ElementwiseKernel("T z", "T out", _FORWARD_SRC[name], f"sknet_{name}_forward")
        _forward_kernels[name] = kernel
    return kernel


def _backward_kernel(name):
    kernel = _backward_kernels.get(name)
    if kernel is None:
        kernel = cp.ElementwiseKernel(
            "T dy, T y, T z", "T out", _BACKWARD_SRC[name], f"sknet_{name}_backward"
        )
        _backward_kernels[name] = kernel
    return kernel


class CupyBackend(Backend):
    """Backend running on one CUDA device with CuPy.

    Parameters
    ----------
    device_id : int
        The CUDA device ordinal.
    """

    def __init__(self, device_id=0):
        super().__init__(f"cuda:{device_id}", cp)
        self.device_id = device_id
        self._device = cp.cuda.Device(device_id)

    def device_context(self):
        return self._device

    def asarray(self, x, dtype=None):
        with self._device:
            if sp.issparse(x):
                x = cpsp.csr_matrix(x.tocsr())
            if cpsp.issparse(x):
                x = x.tocsr() if x.format != "csr" else x
                return x.astype(dtype) if dtype is not None and x.dtype != dtype else x
            return cp.asarray(x, dtype=dtype)

    def to_numpy(self, x):
        if isinstance(x, cp.ndarray):
            return cp.asnumpy(x)
        return np.asarray(x)

    def is_sparse(self, x):
        return cpsp.issparse(x)

    def synchronize(self):
        self._device.synchronize()

    def release_memory(self):
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()

    def out_of_memory_errors(self):
        return (cp.cuda.memory.OutOfMemoryError,)

    separate_memory = True
    stream_buffers = 2  # double buffering: one chunk computed while the next is copied

    def available_memory(self):
        """Free device memory plus the pool's cached blocks, within the pool's limit."""
        pool = cp.get_default_memory_pool()
        with self._device:
            free = cp.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
            limit = pool.get_limit()  # 0: none (set_limit, CUPY_GPU_MEMORY_LIMIT)
            if limit:
                free = min(free, limit - pool.used_bytes())
        return max(int(free), 0)

    def row_stream(self, arrays, dtype, max_rows):
        if any(a is not None and not isinstance(a, np.ndarray) for a in arrays):
            return super().row_stream(arrays, dtype, max_rows)  # sparse: the simple path
        with self._device:
            return _PinnedRowStream(self, arrays, dtype, max_rows)

    def nccl(self):
        try:  # an optional part of CuPy
            from cupy.cuda import nccl
        except ImportError:
            return None
        return nccl if getattr(nccl, "available", True) else None

    def random_generator(self, seed):
        with self._device:
            return cp.random.default_rng(seed)

    def activation_forward(self, name, Z, out):
        if name == "identity":
            return super().activation_forward(name, Z, out)
        return _forward_kernel(name)(Z, out)

    def activation_backward(self, name, dY, Y, Z, out):
        if name == "identity":
            return super().activation_backward(name, dY, Y, Z, out)
        # Kernels that only read y get it in place of z too.
        return _backward_kernel(name)(dY, Y, Y if Z is None else Z, out)

    def scatter_add_rows(self, target, idx, values):
        if hasattr(cp.add, "at"):  # CuPy >= 13; cupyx.scatter_add is deprecated there
            cp.add.at(target, idx, values)
        else:
            import cupyx

            cupyx.scatter_add(target, idx, values)

    def im2col(self, X, kh, kw, sh, sw, ph, pw, pad_value=0.0, out=None):
        N, C, H, W = X.shape
        OH, OW = conv_outsize(H, kh, sh, ph), conv_outsize(W, kw, sw, pw)
        col = cp.empty((C, kh, kw, N, OH, OW), dtype=X.dtype) if out is None else out
        _im2col_kernel(
            cp.ascontiguousarray(X),
            N,
            C,
            H,
            W,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            OH,
            OW,
            X.dtype.type(pad_value),
            col,
        )
        return col

    def col2im(self, col, H, W, sh, sw, ph, pw, out=None):
        C, kh, kw, N, OH, OW = col.shape
        # every pixel is written: no need to zero the output
        img = cp.empty((N, C, H, W), dtype=col.dtype) if out is None else out
        _col2im_kernel(cp.ascontiguousarray(col), N, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW, img)
        return img

    def max_pool_forward(self, X, kernel, stride, padding, out_hw, out=None):
        (kh, kw), (sh, sw), (ph, pw), (OH, OW) = kernel, stride, padding, out_hw
        N, C, H, W = X.shape
        if out is None:
            Y = cp.empty((N, C, OH, OW), dtype=X.dtype)
            argmax = cp.empty((N, C, OH, OW), dtype=cp.int32)
        else:
            Y, argmax = out
        _max_pool_forward_kernel(
            cp.ascontiguousarray(X), H, W, kh, kw, sh, sw, ph, pw, OH, OW, Y, argmax
        )
        return Y, argmax

    def max_pool_backward(self, dY, argmax, input_hw, kernel, stride, padding, out=None):
        N, C = dY.shape[:2]
        if out is None:
            dX = cp.zeros((N, C) + tuple(input_hw), dtype=dY.dtype)
        else:
            dX = out
            dX.fill(0)
        _max_pool_backward_kernel(cp.ascontiguousarray(dY), argmax, dX)
        return dX

    def adam_update(self, param, grad, m, v, lr, beta_1, beta_2, epsilon, tmp):
        dt = param.dtype.type
        _adam_kernel(grad, dt(lr), dt(beta_1), dt(beta_2), dt(epsilon), param, m, v)

    def sgd_update(self, param, grad, velocity, lr, momentum, nesterov, tmp):
        dt = param.dtype.type
        _sgd_kernel(grad, dt(lr), dt(momentum), bool(nesterov), param, velocity)


class _PinnedRowStream(RowStream):
    """Double-buffered chunks: rows gathered into page-locked host buffers and
    copied on a second CUDA stream while the compute stream works on the
    previous chunk.

    Two slots, each one page-locked host buffer and one device buffer per
    array. Events order the work without stopping the host per batch: the
    compute stream waits for the copy of the chunk it is given
    (``copied``), a copy into a slot waits for the compute that read that
    slot before (``consumed``), and the host waits only before it overwrites
    a page-locked buffer whose copy (issued a chunk earlier) may still run.
    """

    def __init__(self, backend, arrays, dtype, max_rows):
        super().__init__(backend, arrays, dtype, max_rows)
        shapes = [None if a is None else (self.max_rows,) + a.shape[1:] for a in self.arrays]
        self.device = [
            self.buffers,
            [self._buffer(a, d) for a, d in zip(self.arrays, self.dtypes)],
        ]
        self.host = [
            [
                None if s is None else cupyx.empty_pinned(s, dtype=d)
                for s, d in zip(shapes, self.dtypes)
            ]
            for _ in range(2)
        ]
        self.copy_stream = cp.cuda.Stream(non_blocking=True)
        self.copied = [None, None]
        self.consumed = [None, None]

    @property
    def nbytes(self):
        return 2 * super().nbytes

    def _load(self, slot, rows):
        """Gather ``rows`` into slot's pinned buffers; queue their copy to the device."""
        n = len(rows)
        if self.copied[slot] is not None:
            self.copied[slot].synchronize()  # its pinned buffers are free again
        for a, host in zip(self.arrays, self.host[slot]):
            if a is not None:
                gather_rows(a, rows, out=host[:n])
        if self.consumed[slot] is not None:
            self.copy_stream.wait_event(self.consumed[slot])
        for host, device in zip(self.host[slot], self.device[slot]):
            if host is not None:
                device[:n].set(host[:n], stream=self.copy_stream)
        self.copied[slot] = self.copy_stream.record()
        return tuple(None if d is None else d[:n] for d in self.device[slot])

    def chunks(self, row_chunks):
        compute = cp.cuda.get_current_stream()
        row_chunks = iter(row_chunks)
        rows, slot = next(row_chunks, None), 0
        views = None if rows is None else self._load(slot, rows)
        try:
            while views is not None:
                compute.wait_event(self.copied[slot])
                yield views
                # The caller has queued its work on this chunk: mark it, load the next.
                self.consumed[slot] = compute.record()
                rows, slot = next(row_chunks, None), slot ^ 1
                views = None if rows is None else self._load(slot, rows)
        finally:
            self.copy_stream.synchronize()  # once per pass: no copy outlives it

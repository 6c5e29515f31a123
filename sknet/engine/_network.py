"""Network: the built layer stack of a fitted estimator.

A :class:`Network` owns the layers an estimator built (``layers_``), the
backend they live on and the per-sample input shape the first layer takes. It
runs them: ``forward``/``backward`` over a batch, ``predict`` over any number
of rows in chunks sized from the layers, and moves or casts all its arrays at
once (``to_backend``, ``astype``). It knows nothing about losses, optimizers
or scikit-learn; the trainer (:mod:`sknet.engine._trainer`) and the estimators
(:mod:`sknet.estimators._base`) use it.

What the network needs from a layer is the :class:`~sknet.layers.Layer`
contract: ``build`` returns the per-sample output shape (the network records
it as ``output_shape_``), ``forward``/``backward``, ``params``/``grads``/
``state`` dicts, and, with defaults in ``Layer``, ``values_per_sample`` (for
prediction chunks), ``release``, ``to_backend`` and ``reseed``.

Its layers are the roots of the layer tree (:mod:`sknet.layers._tree`), and
what concerns every layer goes through that one traversal: the weights (what
early stopping saves and the fit transaction restores) are the arrays of the
tree's parameter holders, and moving, casting and unpickling reach every
layer of the tree, whatever a user's container does with its own.
"""

import numpy as np

from sknet.backend import get_array_module, get_backend, is_device_array
from sknet.engine._plan import TrainingPlan
from sknet.layers._base import build_layer
from sknet.layers._contract import check_backward_output, check_forward_output
from sknet.layers._tree import check_masks, check_tree, copy_flags, walk
from sknet.layers._tree import leaves as tree_leaves

# Rows per chunk when predicting: large enough for efficient matrix products,
# small enough that the largest intermediate array of a chunk stays about
# _PREDICT_CHUNK_BYTES (a few MB: cache-sized work for convolutions).
_PREDICT_CHUNK = 8192
_PREDICT_CHUNK_BYTES = 4 << 20


class Network:
    """A built stack of layers on one backend.

    Parameters
    ----------
    layers : list of Layer
        Built layers, first to last.
    input_shape : tuple of int
        Shape of one sample as the first layer takes it; flat rows are
        reshaped to it.
    backend : Backend
        Where the layers' arrays live.
    padding_value : float or None, default=None
        Sequence steps whose features all equal this value are masked for
        layers that support masks (``supports_mask``).

    Attributes
    ----------
    layers : list of Layer
    input_shape : tuple of int
    output_shape : tuple of int
    backend : Backend
    dtype : numpy.dtype
    """

    def __init__(self, layers, input_shape, backend, *, padding_value=None):
        self.layers = list(layers)
        self.input_shape = tuple(input_shape)
        self.output_shape = self.layers[-1].output_shape_
        self.backend = backend
        self.padding_value = padding_value

    @classmethod
    def build(cls, layers, input_shape, *, backend, dtype, rng, head=None, padding_value=None):
        """Build ``layers`` (copies are the caller's business) into a network.

        ``head(shape)`` returns layers appended after ``layers`` given their
        output shape (the estimators' output layer).
        """
        layers, shape = check_tree(layers), tuple(input_shape)
        for layer in layers:
            shape = _build_layer(layer, shape, backend, dtype, rng)
        for layer in head(shape) if head is not None else ():
            shape = _build_layer(layer, shape, backend, dtype, rng)
            layers.append(layer)
        if padding_value is not None:
            check_masks(layers)  # every layer taking a mask gets it
        return cls(layers, input_shape, backend, padding_value=padding_value)

    @property
    def dtype(self):
        return self.layers[0].dtype_

    @property
    def input_dtype(self):
        """The dtype a batch of ``X`` takes here: the network's, or ``None`` for token ids.

        ``None`` keeps the integers a first layer that takes token ids
        (``takes_token_ids``, :class:`~sknet.layers.Embedding`) is given:
        exact, where a float32 holds whole numbers up to 2**24 only.
        """
        return None if getattr(self.layers[0], "takes_token_ids", False) else self.dtype

    # -- running ------------------------------------------------------------
    def forward(self, X, *, training, stop=None):
        """Outputs for a batch ``X`` (rows, or samples of ``input_shape``).

        ``stop`` runs only ``layers[:stop]`` (hidden activations).
        """
        if self.backend.is_sparse(X):
            if not (self.layers[0].accepts_sparse and len(self.input_shape) == 1):
                X = X.toarray()
        if not self.backend.is_sparse(X) and X.shape[1:] != self.input_shape:
            X = X.reshape((X.shape[0],) + self.input_shape)
        mask = self.input_mask(X)
        for layer in self.layers[:stop]:
            Y = layer.forward_with_mask(X, training=training, mask=mask)
            check_forward_output(layer, X, Y)  # a tuple comparison: what the next layer takes
            X = Y
        return X

    def backward(self, dY):
        """Back-propagate ``dY`` (the gradient of the outputs); layers write ``grads``.

        Nothing runs below the lowest trainable layer (the training plan's
        ``backward_from``): frozen layers there need no gradient.
        """
        try:
            for layer in reversed(self.layers[self.__dict__.get("backward_from", 0) :]):
                dX = layer.backward(dY)
                check_backward_output(layer, dY, dX)
                dY = dX
        finally:  # the weight gradients layers deferred (Backend.defer) are in place
            self.backend.finish_deferred()

    def leaves(self):
        """``(key, layer)`` for every layer that holds its own parameters.

        The parameter holders of the layer tree (:func:`sknet.layers._tree.leaves`):
        containers are opened (a user's container with arrays of its own is
        one too). ``key`` is the layer's index, or a tuple of indices for a
        layer inside a container.
        """
        return [
            (path[0] if len(path) == 1 else path, leaf) for path, leaf in tree_leaves(self.layers)
        ]

    def take_training_flags(self, layers):
        """Copy ``trainable``/``lr_scale`` from unbuilt ``layers`` onto the built ones.

        A warm fit after ``set_params(layers__0__trainable=True)`` continues
        the same network with the new flags (they do not define the network),
        checked first as a fresh fit checks them.
        """
        for built, source in zip(self.layers, check_tree(layers)):
            copy_flags(source, built)

    def prepare_training(self):
        """Decide, once, what every layer does while training (:class:`TrainingPlan`)."""
        return TrainingPlan(self).apply()

    def input_mask(self, X):
        """Which steps of a batch of sequences are real; ``None`` without padding.

        Token ids ``(n, T)``: the ids that are not ``padding_value``. Sequences
        ``(n, T, features)``: the steps whose features are not all
        ``padding_value``; sequences of sequences ``(n, T, S, features)`` give
        ``(n, T, S)`` (``TimeDistributed`` hands each step its own).
        """
        if self.padding_value is None:
            return None
        if X.ndim == 2:  # token ids
            return X != self.padding_value
        return ~(X == self.padding_value).all(axis=-1)

    def predict_chunk_rows(self):
        """Rows per prediction chunk (see ``_PREDICT_CHUNK_BYTES``)."""
        per_row = max(layer.values_per_sample() for layer in self.layers)
        per_row *= np.dtype(self.dtype).itemsize
        return int(min(_PREDICT_CHUNK, max(64, _PREDICT_CHUNK_BYTES // per_row)))

    def predict(self, X, output=None, stop=None):
        """Outputs for validated rows ``X``, in chunks, with ``output`` applied.

        ``stop`` gives the activations of ``layers[stop - 1]`` instead.

        NumPy (or sparse) ``X`` gives NumPy outputs; CuPy ``X`` gives CuPy
        outputs, without leaving the device when the network is on the GPU.
        Outputs have the network's dtype whatever the input's.
        """
        backend = self.backend
        on_device = is_device_array(X)
        keep = backend.xp if on_device and backend.name.startswith("cuda") else None
        chunks = []
        with backend.device_context():
            step = self.predict_chunk_rows()
            for start in range(0, X.shape[0], step):
                Xb = backend.asarray(X[start : start + step], self.input_dtype)
                Z = self.forward(Xb, training=False, stop=stop)
                if not backend.is_sparse(Xb) and backend.xp.may_share_memory(Z, Xb):
                    Z = Z.copy()  # a view of the caller's data (identity layers)
                if output is not None:
                    Z = checked_output(output, Z)
                chunks.append(Z if keep is not None else backend.to_numpy(Z))
            xp = keep if keep is not None else np
            P = chunks[0] if len(chunks) == 1 else xp.concatenate(chunks)
        if on_device and keep is None:  # a CPU network given CuPy data
            P = get_array_module(X).asarray(P)
        return P

    # -- arrays -------------------------------------------------------------
    def params(self):
        """The parameters of every holder of the layer tree, in tree order (live arrays)."""
        return [value for _, layer in self.leaves() for value in layer.params.values()]

    def weights(self):
        """Parameters and non-trained state (running statistics): the model.

        Every array of the layer tree's holders (:meth:`leaves`), parameters
        first: what early stopping saves and the fit transaction restores,
        the layers inside any container included.
        """
        return self.params() + [
            value for _, layer in self.leaves() for value in getattr(layer, "state", {}).values()
        ]

    def save_weights(self):
        """Copies of :meth:`weights`, on the backend, for :meth:`load_weights`."""
        return [w.copy() for w in self.weights()]

    def load_weights(self, saved):
        """Write arrays saved by :meth:`save_weights` back, in place.

        Each call counts in :attr:`loads` (never pickled): how the weights'
        average tells weights a callback put back from its own.
        """
        for weight, value in zip(self.weights(), saved):
            weight[...] = self.backend.asarray(value)
        self.__dict__["_loads"] = self.loads + 1

    @property
    def loads(self):
        """How many times :meth:`load_weights` wrote this network's weights."""
        return self.__dict__.get("_loads", 0)

    def to_backend(self, backend):
        """Move every layer of the tree to ``backend`` (no-op when already there)."""
        if backend is not self.backend or any(
            layer.backend_ is not backend for _, layer in walk(self.layers)
        ):
            for layer in self.layers:
                layer.to_backend(backend)
            for _, layer in walk(self.layers):  # a container that did not move its own
                if layer.backend_ is not backend:
                    layer.to_backend(backend)
            self.backend = backend
        return self

    def astype(self, dtype):
        """Cast every parameter, gradient and state array of the tree to ``dtype``."""
        dtype = np.dtype(dtype)
        if any(layer.dtype_ != dtype for _, layer in walk(self.layers)):
            for layer in self.layers:
                layer.astype(dtype)
            for _, layer in walk(self.layers):  # a container that did not cast its own
                if layer.dtype_ != dtype:
                    layer.astype(dtype)
        return self

    def reseed(self, offset):
        """Give random layers (dropout) a fresh stream for the training to come."""
        for layer in self.layers:
            layer.reseed(offset)

    def release(self):
        """Drop training caches, buffers and gradients; keep the weights."""
        for layer in self.layers:
            layer.release()
        self.__dict__.pop("backward_from", None)

    # -- pickling: layers pickle as NumPy; the backend by name ----------------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["backend"] = self.backend.name
        state.pop("_loads", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.backend = get_backend("cpu")  # the estimator moves it where it belongs
        for _, layer in walk(self.layers):
            layer.backend_ = self.backend


def _build_layer(layer, shape, backend, dtype, rng):
    return build_layer(layer, shape, backend=backend, dtype=dtype, rng=rng)


def checked_output(output, Z):
    """``output(Z)`` (a loss's output activation), refused unless it keeps Z's shape and dtype.

    A loss whose ``reduces_members`` is true (:class:`~sknet.losses.EnsembleLoss`)
    averages the member axis of ``Z`` away: its predictions drop that axis.
    """
    P = output(Z)
    owner = getattr(output, "__self__", output)
    shape = Z.shape[:1] + Z.shape[2:] if getattr(owner, "reduces_members", False) else Z.shape
    if getattr(P, "shape", None) != shape or getattr(P, "dtype", None) != Z.dtype:
        raise ValueError(
            f"{type(owner).__name__}.output returned {getattr(P, 'shape', type(P).__name__)} "
            f"{getattr(P, 'dtype', '')} for outputs of shape {Z.shape} {Z.dtype}; it must keep "
            "the shape and dtype of the outputs"
        )
    return P

"""The flat parameter layout: every trained parameter and its gradient in two arrays.

Layers keep their ``params``/``grads`` dicts, whose entries become views of
the flat arrays; the optimizer then updates every parameter with a few
whole-array operations (one fused kernel on a GPU) per step. Parameters are
grouped in one segment per ``lr_scale`` (usually one), regularized ones first
in each, so the L2 term is one slice a segment. Frozen layers stay out: no
gradient, no optimizer state, no penalty.
"""


class ParameterLayout:
    """Two flat arrays holding a network's trained parameters and their gradients.

    Parameters
    ----------
    network : Network
        Its leaves' ``params``/``grads`` entries become views of the flat
        arrays (frozen leaves get zero scratch gradients of their own).
    plan : TrainingPlan
        Which leaves train (:mod:`sknet.engine._plan`).

    Attributes
    ----------
    flat_params, flat_grads : backend array
        Every trained parameter (gradient) of the network, one after another.
    param_segments, grad_segments : list of backend array
        Views of the flat arrays, one per ``lr_scale``.
    lr_scales : list of float
        The ``lr_scale`` of each segment.
    entries : list of tuple
        Per segment, ``(leaf_key, param_name, size)`` of each parameter in
        order: how optimizers follow parameters across a re-layout.
    regularized_ranges : list of (int, int)
        The slices of the flat arrays that get the L2 penalty.
    """

    def __init__(self, network, plan):
        backend, dtype = network.backend, network.dtype
        xp = backend.xp
        self.backend = backend
        groups = {}
        trained = {id(leaf) for _, leaf in plan.trained}
        for i, layer in plan.leaves:
            layer.grads.clear()  # in place: TimeDistributed shares it with its layer
            if id(layer) not in trained:
                for key, param in layer.params.items():
                    if param.base is not None:  # detach from an earlier fit's flat array
                        layer.params[key] = param = param.copy()
                    layer.grads[key] = xp.zeros_like(param)  # scratch for custom layers
                continue
            for key in layer.params:
                groups.setdefault(float(layer.lr_scale), []).append((i, layer, key))
        for entries in groups.values():
            entries.sort(key=lambda entry: entry[2] not in entry[1].regularized)
        order = [layer.params[key] for entries in groups.values() for _, layer, key in entries]
        total = sum(int(param.size) for param in order)
        # A warm start lays out the same parameters again: they are already one flat
        # array in this order, which is kept (a new one would copy the model).
        self.flat_params = _flat_of(order, total, dtype)
        if self.flat_params is None:
            self.flat_params = xp.empty(total, dtype=dtype)
        self.flat_grads = xp.zeros(total, dtype=dtype)
        self.param_segments, self.grad_segments, self.lr_scales = [], [], []
        self.entries, self.regularized_ranges, self._grad_views = [], [], []
        offset = 0
        for scale, entries in groups.items():
            start = regularized_stop = offset
            segment = []
            for i, layer, key in entries:
                param = layer.params[key]
                stop = offset + int(param.size)
                if not _is_view(param, self.flat_params, offset):
                    self.flat_params[offset:stop] = param.reshape(-1)
                layer.params[key] = self.flat_params[offset:stop].reshape(param.shape)
                layer.grads[key] = self.flat_grads[offset:stop].reshape(param.shape)
                self._grad_views.append((layer, key, layer.grads[key]))
                if key in layer.regularized:
                    regularized_stop = stop
                segment.append((i, key, int(param.size)))
                offset = stop
            self.param_segments.append(self.flat_params[start:offset])
            self.grad_segments.append(self.flat_grads[start:offset])
            self.lr_scales.append(scale)
            self.entries.append(tuple(segment))
            if regularized_stop > start:
                self.regularized_ranges.append((start, regularized_stop))

    def add_penalty(self, loss, alpha, sw_sum):
        """Add the L2 term to the regularized gradients (in place) and to ``loss``."""
        for start, stop in self.regularized_ranges:
            W, gW = self.flat_params[start:stop], self.flat_grads[start:stop]
            self.backend.add_scaled(gW, W, alpha / sw_sum)
            loss = loss + (0.5 * alpha / sw_sum) * self.backend.xp.vdot(W, W)
        return loss

    def check_grad_views(self):
        """Fail clearly if a (custom) layer replaced a gradient array."""
        for layer, key, view in self._grad_views:
            if layer.grads[key] is not view:
                raise TypeError(
                    f"{type(layer).__name__}.backward replaced grads[{key!r}] with a "
                    "new array; write gradients in place instead, e.g. "
                    f"self.grads[{key!r}][...] = value"
                )


def _address(a):
    """Where ``a``'s data start (NumPy or CuPy)."""
    pointer = getattr(a.data, "ptr", None)  # CuPy
    return a.__array_interface__["data"][0] if pointer is None else pointer


def _is_view(param, flat, offset):
    """Whether ``param`` is the C-contiguous view of ``flat`` at ``offset`` already."""
    return (
        param.base is flat
        and param.flags.c_contiguous
        and _address(param) == _address(flat) + offset * flat.itemsize
    )


def _flat_of(params, total, dtype):
    """The flat array ``params`` are consecutive views of, in this order, or None."""
    flat = params[0].base if params else None
    if getattr(flat, "shape", None) != (total,) or flat.dtype != dtype:  # bytes, once unpickled
        return None
    offset = 0
    for param in params:
        if not _is_view(param, flat, offset):
            return None
        offset += int(param.size)
    return flat

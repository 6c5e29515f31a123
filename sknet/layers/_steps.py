"""What the sequence layers share: the shape of a sequence, the padding mask, work arrays.

The padding mask's contract: a layer given a mask computes as if the padded
steps held zeros (:func:`padded_as_zeros`), forward and backward, so what
they hold (NaN and infinity included) reaches no output and no gradient.
Selects (``where``) do it, never products with the mask: ``0 * NaN`` is NaN.
"""


def check_sequence_shape(layer, input_shape):
    """``(timesteps, features)``, or a ValueError naming the layer."""
    if len(input_shape) != 2:
        raise ValueError(
            f"{type(layer).__name__} expects sequences of shape (timesteps, features), "
            f"got samples of shape {tuple(input_shape)}"
        )
    return input_shape


def as_mask(layer, mask):
    """``mask`` as a boolean array of ``layer``'s backend (``None`` stays ``None``).

    Any array-like of booleans is taken (a list, a NumPy array for a layer on
    a GPU); anything else is a TypeError naming ``mask`` and ``layer``.
    """
    if mask is None:
        return None
    if type(mask) is not layer.xp.ndarray or mask.dtype != bool:
        try:
            mask = layer.backend_.asarray(mask)
        except (TypeError, ValueError) as exc:
            raise _not_booleans(layer, mask) from exc
        if mask.dtype != bool:
            raise _not_booleans(layer, mask)
    return mask


def _not_booleans(layer, mask):
    kind = f"dtype {mask.dtype}" if hasattr(mask, "dtype") else type(mask).__name__
    return TypeError(
        f"{type(layer).__name__}: mask must be an array of booleans (True for the real "
        f"steps, False for padding), got {kind}"
    )


def checked_mask(layer, X, mask):
    """``mask`` (N, T) of the real steps of sequences ``X`` (N, T, ...), or a ValueError.

    The estimators derive one mask from the network's input (``padding_value``)
    and give it to every top-level layer that takes one: it fits only layers
    whose input keeps the input's steps. An array-like is converted
    (:func:`as_mask`).
    """
    mask = as_mask(layer, mask)
    if mask is not None and tuple(mask.shape) != tuple(X.shape[:2]):
        raise ValueError(
            f"{type(layer).__name__}: the padding mask has shape {tuple(mask.shape)}, but its "
            f"input sequences have shape {tuple(X.shape)}; padding_value masks only layers "
            "whose input has the network input's steps (put those that change the number of "
            "steps, pooling or strided convolutions, after them)"
        )
    return mask


def padded_as_zeros(layer, X, mask):
    """``(X, mask)``: the mask checked (:func:`checked_mask`), ``X`` with padded steps zero.

    What every layer taking a mask does first: a new array (``where``, not a
    product: ``0 * NaN`` is NaN) in which what padded steps held is gone, so
    it reaches no output, and, the layer's backward zeroing the gradient of
    the padded steps (:func:`zero_padded_steps`), no gradient either. ``X``
    is returned as it is without a mask.
    """
    mask = checked_mask(layer, X, mask)
    if mask is None:
        return X, None
    real = mask.reshape(mask.shape + (1,) * (X.ndim - 2))
    return layer.xp.where(real, X, X.dtype.type(0)), mask


def zero_padded_steps(dX, mask):
    """The input gradient ``dX`` with its padded steps zeroed, in place (``mask`` None: as is).

    The gradient of :func:`padded_as_zeros`: what a padded step holds changes
    nothing, so its gradient is zero.
    """
    if mask is not None and dX is not None:
        dX[~mask] = 0
    return dX


def work_arrays(layer, training):
    """``layer._buffer`` while training (arrays reused across batches), fresh arrays otherwise.

    Called as ``arrays(key, shape, dtype=None, batch_first=True)``; prediction
    keeps nothing, so it needs no buffer.
    """
    if training:
        return layer._buffer
    xp, default = layer.xp, layer.dtype_

    def fresh(key, shape, *, batch_first=True, dtype=None):
        return xp.empty(shape, dtype=default if dtype is None else dtype)

    return fresh

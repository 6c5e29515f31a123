"""What the sequence layers share: the shape of a sequence, the padding mask, work arrays."""


def check_sequence_shape(layer, input_shape):
    """``(timesteps, features)``, or a ValueError naming the layer."""
    if len(input_shape) != 2:
        raise ValueError(
            f"{type(layer).__name__} expects sequences of shape (timesteps, features), "
            f"got samples of shape {tuple(input_shape)}"
        )
    return input_shape


def checked_mask(layer, X, mask):
    """``mask`` (N, T) of the real steps of sequences ``X`` (N, T, ...), or a ValueError.

    The estimators derive one mask from the network's input (``padding_value``)
    and give it to every top-level layer that takes one: it fits only layers
    whose input keeps the input's steps.
    """
    if mask is not None and tuple(mask.shape) != tuple(X.shape[:2]):
        raise ValueError(
            f"{type(layer).__name__}: the padding mask has shape {tuple(mask.shape)}, but its "
            f"input sequences have shape {tuple(X.shape)}; padding_value masks only layers "
            "whose input has the network input's steps (put those that change the number of "
            "steps, pooling or strided convolutions, after them)"
        )
    return mask


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

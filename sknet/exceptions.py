"""The exceptions and warnings sknet raises of its own, to catch by name.

What it holds: :class:`DeviceMemoryError` and :class:`SknetVersionWarning`.
What it may import: nothing of sknet (every other module may import it).
"""

__all__ = ["DeviceMemoryError", "SknetVersionWarning"]


class DeviceMemoryError(MemoryError):
    """A fit does not fit in the device memory it may use; the message says what would.

    Raised before training when not even the model and one batch fit in
    ``max_device_memory`` (or in what is free on the GPU), and when a fit ran
    out of device memory. A :class:`MemoryError`, so ``except MemoryError``
    catches it too.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.exceptions import DeviceMemoryError
    >>> X, y = load_digits(return_X_y=True)
    >>> try:
    ...     MLPClassifier(max_device_memory="1KB", device="cpu").fit(X, y)
    ... except DeviceMemoryError as exc:
    ...     print("does not fit:", str(exc)[:22])
    does not fit: Not even one batch fit
    """


class SknetVersionWarning(UserWarning):
    """A model pickled by one sknet version was loaded by another."""

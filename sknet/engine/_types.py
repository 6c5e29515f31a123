"""Small types the engine's modules share: the data a trainer runs on and its signals.

They live apart so that any module of the engine (and :mod:`sknet.distributed`)
may import them without importing the trainer.
"""

from collections import namedtuple

from sknet.exceptions import DeviceMemoryError

#: Training data already on the backend: X, 2-D float targets Y, weights w or None.
BackendData = namedtuple("BackendData", "X Y w")
#: Training data kept on the host (X, Y, w) and brought to the backend by ``stream``
#: (a :class:`~sknet.backend.RowStream`) in chunks of ``chunk_rows`` rows.
StreamedData = namedtuple("StreamedData", "X Y w chunk_rows stream")


class Diverged(Exception):
    """Training produced a non-finite loss or weights (the estimator says what to do)."""


class StopTraining(Exception):  # noqa: N818 (a signal, like StopIteration)
    """Raised by an epoch runner to end training now, keeping the model as it is.

    The epoch in progress is not recorded; callbacks get ``on_train_end`` and
    the fit completes. The runner keeps its own record of why.
    """


class NoRoomForBatch(DeviceMemoryError):
    """Not even one batch fits in the device memory the fit may use (the message says why).

    Raised while planning, before training: the estimator lets it through as it is.
    """

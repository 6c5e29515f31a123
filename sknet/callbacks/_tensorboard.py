"""TensorBoardLogger: each epoch's history as TensorBoard scalars, and weight histograms.

The events are written with TensorBoard's own writer
(``tensorboard.summary.writer.event_file_writer``, the one under
``torch.utils.tensorboard``) and its protocol buffers: the package that reads
the files writes them, and it is the one a user installs to look at them.
tensorboardX would be a smaller install, but it imports PyTorch whenever
PyTorch is installed (seconds at the first fit of every process), and
``torch.utils.tensorboard`` needs PyTorch itself.
"""

import os
import time

import numpy as np

from sknet.callbacks._runs import fit_path, fit_run_name, import_extra, scalars
from sknet.engine._callbacks import Callback
from sknet.layers._constraints import Count
from sknet.layers._tree import leaves, where

#: bins of a weight histogram
HISTOGRAM_BINS = 30


class TensorBoardLogger(Callback):
    """Write each epoch's losses, scores and learning rate as TensorBoard scalars.

    One scalar per number of the epoch's ``history_`` row, under its key
    (``train_loss``, ``valid_loss``, ``valid_score``, ``learning_rate``,
    ``duration`` and the keys callbacks add), at step ``epoch``; optionally a
    histogram of each layer's parameters. The events are flushed as each epoch
    ends, so TensorBoard shows a fit while it runs: ``tensorboard --logdir
    runs``. Needs ``pip install "sknet-nn[tensorboard]"``.

    Parameters
    ----------
    path : str or path-like, default='runs/{run}'
        The directory of this fit's event files, created if missing. ``{run}``
        in it is replaced by a name unique to each fit (date, time, host,
        process, a counter): point TensorBoard at the directory above and
        every fit, those of a search included, is a run of its own; a fit
        that continues a model (``warm_start=True``, ``partial_fit``) adds
        to the run of the fit it continues. Without ``{run}`` successive fits
        add their events to one run.
    histogram_freq : int, default=0
        Every this many epochs, a histogram of each parameter array of the
        network too, tagged by its place in ``layers_`` (``layers_[0]/W``);
        0 writes none. Each histogram reads the weights back from the device.

    Attributes
    ----------
    path_ : str
        The directory the last fit wrote to.

    See Also
    --------
    CSVLogger : The same values in a CSV file, with no library needed.
    MLflowLogger : The same values, the parameters and the model in MLflow.

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> from sklearn.datasets import load_digits
    >>> from sknet import MLPClassifier
    >>> from sknet.callbacks import TensorBoardLogger
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> board = TensorBoardLogger(os.path.join(tmp.name, "runs", "{run}"), histogram_freq=1)
    >>> clf = MLPClassifier(hidden_layer_sizes=(16,), tol=1.0, n_iter_no_change=1,
    ...                     random_state=0, device="cpu", callbacks=[board]).fit(X, y)
    >>> [name[:20] for name in os.listdir(clf.callbacks_[0].path_)]
    ['events.out.tfevents.']
    >>> tmp.cleanup()
    """

    _parameter_constraints: dict = {
        "path": [str, os.PathLike],
        "histogram_freq": [Count(0)],
    }

    def __init__(self, path="runs/{run}", histogram_freq=0):
        self.path = path
        self.histogram_freq = histogram_freq

    def on_train_begin(self, state):
        import_extra("tensorboard", "tensorboard", "TensorBoardLogger")
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._protos = event_pb2, summary_pb2
        self._writer = None
        self.path_ = fit_path(self.path, fit_run_name(state))
        try:
            os.makedirs(self.path_, exist_ok=True)
            self._writer = EventFileWriter(self.path_)
        except OSError as exc:  # a file there, no permission: say which
            raise ValueError(
                f"TensorBoardLogger: path={self.path_!r} cannot be a directory of event "
                f"files: {exc.strerror or exc}; give a directory this process may write"
            ) from exc
        if state.history:  # a continued fit: TensorBoard drops the steps from here on that
            # a continued fit which failed wrote (undone, this fit writes them again)
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            step = len(state.history) + 1
            self._writer.add_event(
                event_pb2.Event(wall_time=time.time(), step=step, session_log=start)
            )

    def on_epoch_end(self, state, epoch, logs):
        event_pb2, summary_pb2 = self._protos
        values = [
            summary_pb2.Summary.Value(tag=key, simple_value=value)
            for key, value in scalars(logs).items()
        ]
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            values += [
                summary_pb2.Summary.Value(tag=tag, histo=_histogram(summary_pb2, array))
                for tag, array in _parameters(state.network)
            ]
        summary = summary_pb2.Summary(value=values)
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=epoch, summary=summary))
        self._writer.flush()
        return False

    def on_train_end(self, state):
        if getattr(self, "_writer", None) is not None:
            self._writer.close()
        self._writer = self._protos = None


def _parameters(network):
    """``(tag, host array)`` for every parameter of the network, ``layers_[i]/name``."""
    for path, layer in leaves(network.layers):
        for name, array in layer.params.items():
            yield f"{where(path)}/{name}", network.backend.to_numpy(array)


def _histogram(summary_pb2, array):
    """A TensorBoard histogram of the finite values of ``array``."""
    values = np.asarray(array, dtype=np.float64).ravel()
    values = values[np.isfinite(values)]
    if values.size == 0:
        return summary_pb2.HistogramProto()
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS)
    return summary_pb2.HistogramProto(
        min=float(values.min()),
        max=float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float(values @ values),
        bucket_limit=edges[1:].tolist(),
        bucket=counts.astype(np.float64).tolist(),
    )

"""Layers: the building blocks of sknet's networks.

Every layer follows the contract of :class:`Layer`: configured in ``__init__``,
given parameters in ``build``, run with ``forward``/``backward`` (or ``forward``
alone, differentiated by :mod:`sknet.autodiff`). Check a layer you write with
:func:`sknet.utils.check_layer_gradients`.

What it holds: the Layer contract, the stock layers, the containers, the
initializers, :func:`from_estimator` and :class:`Lambda`. What it may import:
:mod:`sknet.autodiff` and :mod:`sknet.backend`.
"""

from sknet.layers._activation import Activation
from sknet.layers._base import Layer
from sknet.layers._containers import Concatenate, Residual, Sequential
from sknet.layers._conv import Conv2D
from sknet.layers._dense import Dense
from sknet.layers._dropout import Dropout
from sknet.layers._lambda import Lambda
from sknet.layers._normalization import BatchNorm
from sknet.layers._pooling import AvgPool2D, GlobalAvgPool2D, MaxPool2D
from sknet.layers._recurrent import GRU, LSTM, SimpleRNN
from sknet.layers._reshape import Flatten
from sknet.layers._sequence import Embedding, GlobalAvgPool1D, TimeDistributed
from sknet.layers._transfer import from_estimator

__all__ = [
    "Activation",
    "AvgPool2D",
    "BatchNorm",
    "Concatenate",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GRU",
    "GlobalAvgPool1D",
    "GlobalAvgPool2D",
    "LSTM",
    "Lambda",
    "Layer",
    "MaxPool2D",
    "Residual",
    "Sequential",
    "SimpleRNN",
    "TimeDistributed",
    "from_estimator",
]

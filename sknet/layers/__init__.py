"""Layers: the building blocks of sknet's networks.

Every layer follows the contract of :class:`Layer`: configured in ``__init__``,
given parameters in ``build``, run with ``forward``/``backward`` (or ``forward``
alone, differentiated by :mod:`sknet.autodiff`). Check a layer you write with
:func:`sknet.utils.check_layer_gradients`.

What it holds: the Layer contract, the stock layers, the containers, the
initializers, the embeddings of tabular features (numeric and categorical,
with :func:`quantile_bins` for the bins), the parameter-efficient ensemble,
:func:`from_estimator` and :class:`Lambda`. What it may import:
:mod:`sknet.autodiff` and :mod:`sknet.backend`.
"""

from sknet.layers._activation import Activation
from sknet.layers._attention import MultiHeadAttention
from sknet.layers._base import Layer
from sknet.layers._categorical import CategoricalEmbedding, SelectColumns, embedding_size
from sknet.layers._containers import Concatenate, Residual, Sequential
from sknet.layers._conv import Conv2D
from sknet.layers._conv1d import Conv1D
from sknet.layers._dense import Dense
from sknet.layers._dropout import Dropout
from sknet.layers._ensemble import EnsembleDense, EnsembleHead, EnsembleInput
from sknet.layers._lambda import Lambda
from sknet.layers._layer_norm import LayerNorm
from sknet.layers._normalization import BatchNorm
from sknet.layers._numeric import PeriodicEmbedding, PiecewiseLinearEncoding, quantile_bins
from sknet.layers._pooling import AvgPool2D, GlobalAvgPool2D, MaxPool2D
from sknet.layers._pooling1d import AvgPool1D, GlobalMaxPool1D, MaxPool1D
from sknet.layers._positions import PositionEmbedding, SinusoidalPositionEmbedding
from sknet.layers._recurrent import GRU, LSTM, SimpleRNN
from sknet.layers._reshape import Flatten
from sknet.layers._sequence import Embedding, GlobalAvgPool1D, TimeDistributed
from sknet.layers._transfer import from_estimator
from sknet.layers._transformer import TransformerEncoderBlock

__all__ = [
    "Activation",
    "AvgPool1D",
    "AvgPool2D",
    "BatchNorm",
    "CategoricalEmbedding",
    "Concatenate",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "EnsembleDense",
    "EnsembleHead",
    "EnsembleInput",
    "Flatten",
    "GRU",
    "GlobalAvgPool1D",
    "GlobalAvgPool2D",
    "GlobalMaxPool1D",
    "LSTM",
    "Lambda",
    "Layer",
    "LayerNorm",
    "MaxPool1D",
    "MaxPool2D",
    "MultiHeadAttention",
    "PeriodicEmbedding",
    "PiecewiseLinearEncoding",
    "PositionEmbedding",
    "Residual",
    "SelectColumns",
    "Sequential",
    "SimpleRNN",
    "SinusoidalPositionEmbedding",
    "TimeDistributed",
    "TransformerEncoderBlock",
    "embedding_size",
    "from_estimator",
    "quantile_bins",
]

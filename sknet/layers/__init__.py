"""Layers: the building blocks of sknet's networks.

Every layer follows the contract of :class:`Layer`: configured in ``__init__``,
given parameters in ``build``, run with ``forward``/``backward``.
"""

from sknet.layers._activation import Activation
from sknet.layers._base import Layer
from sknet.layers._dense import Dense
from sknet.layers._dropout import Dropout

__all__ = ["Activation", "Dense", "Dropout", "Layer"]

"""sknet: scikit-learn neural-network estimators on NumPy and CuPy."""

from sknet import _legacy, callbacks, layers, losses
from sknet import exceptions as exceptions  # sknet.exceptions after `import sknet`
from sknet._version import __version__
from sknet.engine._network import Network as _Network
from sknet.engine._optimizers import SGD as _SGD
from sknet.engine._optimizers import Adam as _Adam
from sknet.engine._optimizers import AdamW as _AdamW
from sknet.estimators import (
    ConvNetClassifier,
    ConvNetRegressor,
    FeatureExtractor,
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    RNNClassifier,
    RNNRegressor,
    TabularClassifier,
    TabularRegressor,
)
from sknet.layers._init import SklearnGlorotUniform
from sknet.tabular import TabularEncoder as _TabularEncoder
from sknet.tabular._numeric import NumericScaler as _NumericScaler
from sknet.text import TextVectorizer as _TextVectorizer

#: Left out of :data:`TRUSTED_TYPES`: the base class, and what holds a path or a tracking
#: server that the next ``fit`` writes to (a file could name any path of the machine that
#: loads it, or a server to send the model to).
_UNTRUSTED_CALLBACKS = (
    callbacks.Callback,
    callbacks.Checkpoint,
    callbacks.CSVLogger,
    callbacks.TensorBoardLogger,
    callbacks.MLflowLogger,
)


def _trusted_types():
    classes = [
        ConvNetClassifier,
        ConvNetRegressor,
        FeatureExtractor,
        MLPClassifier,
        MLPRegressor,
        NeuralNetClassifier,
        NeuralNetRegressor,
        RNNClassifier,
        RNNRegressor,
        TabularClassifier,
        TabularRegressor,
        _TabularEncoder,
        _NumericScaler,
        _TextVectorizer,
        _Network,
        SklearnGlorotUniform,
        _SGD,
        _Adam,
        _AdamW,
    ]
    classes += [
        cls
        for cls in vars(losses).values()
        if isinstance(cls, type) and issubclass(cls, losses.Loss) and cls is not losses.Loss
    ]
    classes += [
        cls
        for cls in map(lambda name: getattr(layers, name), layers.__all__)
        if isinstance(cls, type) and cls is not layers.Layer
    ]
    classes += [
        cls
        for cls in map(lambda name: getattr(callbacks, name), callbacks.__all__)
        if issubclass(cls, callbacks.Callback) and cls not in _UNTRUSTED_CALLBACKS
    ]
    names = [f"{cls.__module__}.{cls.__qualname__}" for cls in classes]
    return sorted(names + _legacy.old_names(names))  # files saved by earlier versions


#: Every type an sknet model can hold, for ``skops.io.load(file, trusted=TRUSTED_TYPES)``,
#: except :class:`~sknet.callbacks.Checkpoint` and the loggers (``CSVLogger``,
#: ``TensorBoardLogger``, ``MLflowLogger``): they hold where their next ``fit`` writes.
#: Models with custom layers or callbacks also need those types' names (and skops asks
#: for the functions a model holds, such as a ``Lambda``'s, by name too).
TRUSTED_TYPES = _trusted_types()
_legacy.install()

__all__ = [
    "ConvNetClassifier",
    "ConvNetRegressor",
    "FeatureExtractor",
    "MLPClassifier",
    "MLPRegressor",
    "NeuralNetClassifier",
    "NeuralNetRegressor",
    "RNNClassifier",
    "RNNRegressor",
    "SklearnGlorotUniform",
    "TRUSTED_TYPES",
    "TabularClassifier",
    "TabularRegressor",
    "__version__",
]

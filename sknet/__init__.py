"""sknet: scikit-learn neural-network estimators on NumPy and CuPy."""

__version__ = "0.1.0"

from sknet import callbacks, layers, losses  # noqa: E402
from sknet._convnet import ConvNetClassifier  # noqa: E402
from sknet._features import FeatureExtractor  # noqa: E402
from sknet._init import SklearnGlorotUniform  # noqa: E402
from sknet._mlp import MLPClassifier, MLPRegressor  # noqa: E402
from sknet._network import Network  # noqa: E402
from sknet._optimizers import SGD, Adam  # noqa: E402
from sknet._rnn import RNNClassifier, RNNRegressor  # noqa: E402


def _trusted_types():
    classes = [
        ConvNetClassifier,
        FeatureExtractor,
        MLPClassifier,
        MLPRegressor,
        RNNClassifier,
        RNNRegressor,
        Network,
        SklearnGlorotUniform,
        SGD,
        Adam,
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
        if issubclass(cls, callbacks.Callback) and cls is not callbacks.Callback
    ]
    return sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes)


#: Every type an sknet model can hold, for ``skops.io.load(file, trusted=TRUSTED_TYPES)``.
#: Models with custom layers or callbacks also need those types' names.
TRUSTED_TYPES = _trusted_types()

__all__ = [
    "ConvNetClassifier",
    "FeatureExtractor",
    "MLPClassifier",
    "MLPRegressor",
    "RNNClassifier",
    "RNNRegressor",
    "TRUSTED_TYPES",
    "__version__",
]

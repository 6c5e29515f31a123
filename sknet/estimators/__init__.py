"""The scikit-learn faces: sknet's estimators.

What it holds: :class:`~sknet.estimators._base.BaseNeuralNetwork` (parameters,
input and target validation, the fit transaction, prediction, persistence),
the classifier and regressor faces, the estimators for any layer stack
(:class:`NeuralNetClassifier`, :class:`NeuralNetRegressor`), their presets
(MLP, ConvNet, RNN: parameters turned into a layer list), the tabular
estimators (:class:`TabularClassifier`, :class:`TabularRegressor`: a
DataFrame in as it is, its column plan learned by :mod:`sknet.tabular`) and
:class:`FeatureExtractor`.

What it may import: :mod:`sknet.engine` (training), :mod:`sknet.callbacks`
(the bridge to scikit-learn's callbacks), :mod:`sknet.layers`,
:mod:`sknet.losses`, :mod:`sknet.backend`, :mod:`sknet.tabular`; never
:mod:`sknet.distributed` or the user-facing modules around a fit.
"""

from sknet.estimators._convnet import ConvNetClassifier, ConvNetRegressor
from sknet.estimators._features import FeatureExtractor
from sknet.estimators._mlp import MLPClassifier, MLPRegressor
from sknet.estimators._neural_net import NeuralNetClassifier, NeuralNetRegressor
from sknet.estimators._rnn import RNNClassifier, RNNRegressor
from sknet.estimators._tabular_estimators import TabularClassifier, TabularRegressor

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
    "TabularClassifier",
    "TabularRegressor",
]

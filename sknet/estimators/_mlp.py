"""MLPClassifier and MLPRegressor: scikit-learn's MLP, a preset of the network estimator.

The preset turns ``hidden_layer_sizes``, ``activation`` and ``dropout`` into
``Dense`` layers initialized as scikit-learn initializes them, and takes flat
rows only, as scikit-learn does; everything else is
:class:`~sknet.estimators._neural_net.NeuralNetClassifier` (or the regressor).
"""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS
from sknet.estimators._base import BaseNeuralNetwork
from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.estimators._docs import (
    CLASS_WEIGHT_DOC,
    CLASSIFIER_LOSS_DOC,
    CLIP_NORM_DOC,
    FITTED_ATTRIBUTES_DOC,
    REGRESSOR_LOSS_DOC,
    TRAINING_PARAMETERS_DOC,
    fill_doc,
)
from sknet.estimators._neural_net import NeuralNetClassifier, NeuralNetRegressor, _NeuralNet
from sknet.estimators._regressor import NetworkRegressorMixin
from sknet.layers import Dense, Dropout
from sknet.layers._init import SklearnGlorotUniform

_MLP_PARAMETERS_DOC = """
    hidden_layer_sizes : array-like of shape (n_layers - 2,), default=(100,)
        The ith element is the number of neurons in the ith hidden layer.

    activation : {'identity', 'logistic', 'tanh', 'relu', 'leaky_relu', \
'elu', 'gelu', 'silu'}, default='relu'
        Activation of the hidden layers: scikit-learn's four, plus
        ``'leaky_relu'`` (slope 0.01), ``'elu'``, ``'gelu'`` (tanh
        approximation) and ``'silu'``.

    dropout : float, default=0.0
        Dropout rate after every hidden layer while training (sknet only; not
        with ``solver='lbfgs'``).
"""

_MLP_ATTRIBUTES_DOC = """
    coefs_ : list of ndarray
        ``coefs_[i]`` is the weight matrix of layer ``i``: a NumPy copy of the
        network's weights, on every device (changing it changes nothing).

    intercepts_ : list of ndarray
        ``intercepts_[i]`` is the bias vector of layer ``i + 1`` (a copy).

    n_layers_ : int
        Number of layers, input and output included.
"""


def _check_hidden_layer_sizes(hidden_layer_sizes):
    sizes = hidden_layer_sizes
    if not hasattr(sizes, "__iter__"):
        sizes = [sizes]
    sizes = list(sizes)
    if not all(isinstance(s, Integral) and not isinstance(s, bool) for s in sizes):
        raise ValueError(f"hidden_layer_sizes must contain positive integers, got {sizes}.")
    if np.any(np.array(sizes) <= 0):
        raise ValueError(f"hidden_layer_sizes must be > 0, got {sizes}.")
    return sizes


class _MLPPreset:
    """What MLPClassifier and MLPRegressor add: a stack of Dense layers on flat rows.

    List it first in the bases, before the network estimator it presets.
    """

    _preset_constraints: dict = {
        "hidden_layer_sizes": [
            "array-like",
            Interval(Integral, 1, None, closed="left"),
        ],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
    }

    _network_parameters = ("hidden_layer_sizes", "activation", "dropout")

    # scikit-learn's MLP takes flat rows (2-D X) and has no input_shape_.
    def _validate_Xy(self, X, y, reset, **kwargs):
        return BaseNeuralNetwork._validate_Xy(self, X, y, reset, **kwargs)

    def _validate_X_predict(self, X):
        return BaseNeuralNetwork._validate_X_predict(self, X)

    def _network_input_shape(self, n_features):
        return (n_features,)

    def _check_params(self):
        _check_hidden_layer_sizes(self.hidden_layer_sizes)
        if self.dropout > 0 and self.solver == "lbfgs":
            raise ValueError(
                "dropout is not supported with solver='lbfgs', whose line search "
                "needs a deterministic loss; use solver='adam' or 'sgd', or "
                "dropout=0."
            )

    def _build_layers(self):
        init = SklearnGlorotUniform(self.activation)
        layers = []
        for units in _check_hidden_layer_sizes(self.hidden_layer_sizes):
            layers.append(Dense(int(units), activation=self.activation, init=init))
            if self.dropout > 0:
                layers.append(Dropout(self.dropout))
        layers.append(Dense(self.n_outputs_, init=init))
        return layers

    def _output_layers(self, shape):
        return []  # the output layer is the last of _build_layers, as in scikit-learn

    def _dense_layers(self):
        return [layer for layer in self.layers_ if isinstance(layer, Dense)]

    @property
    def coefs_(self):
        """Weight matrices, NumPy copies (see the class docstring)."""
        to_numpy = self.network_.backend.to_numpy if "network_" in self.__dict__ else None
        if to_numpy is None:
            raise AttributeError(f"This {type(self).__name__} has no coefs_ until fitted")
        return [to_numpy(layer.params["W"]).copy() for layer in self._dense_layers()]

    @property
    def intercepts_(self):
        """Bias vectors, NumPy copies."""
        if "network_" not in self.__dict__:
            raise AttributeError(f"This {type(self).__name__} has no intercepts_ until fitted")
        to_numpy = self.network_.backend.to_numpy
        return [to_numpy(layer.params["b"]).copy() for layer in self._dense_layers()]

    @property
    def n_layers_(self):
        """Number of layers, input and output included."""
        if "network_" not in self.__dict__:
            raise AttributeError(f"This {type(self).__name__} has no n_layers_ until fitted")
        return len(self._dense_layers()) + 1


class MLPClassifier(_MLPPreset, NeuralNetClassifier):
    """Multi-layer perceptron classifier, on NumPy or a CUDA GPU.

    A drop-in for :class:`sklearn.neural_network.MLPClassifier` (same
    parameters, defaults and fitted attributes) that trains in float32 on
    sknet's layer stack, on the CPU or, with CuPy, on a GPU. It optimizes the
    log-loss with softmax outputs (multiclass) or logistic outputs (binary,
    multilabel).

    Parameters
    ----------
    %(parameters)s
    Attributes
    ----------
    classes_ : ndarray or list of ndarray of shape (n_classes,)
        Class labels for each output.

    %(attributes)s
    See Also
    --------
    MLPRegressor : Multi-layer perceptron regressor.
    NeuralNetClassifier : The estimator this is a preset of, for any layers.
    sklearn.neural_network.MLPClassifier : scikit-learn's float64 original.

    Notes
    -----
    With ``dtype='float64'`` and the default initializer, the weights start,
    and with ``solver='adam'`` or ``'sgd'`` are updated, exactly as in
    scikit-learn for the same ``random_state``. The pickled model holds only
    NumPy arrays: a model trained on a GPU loads and predicts on a machine
    without one.

    Examples
    --------
    >>> from sknet import MLPClassifier
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.model_selection import train_test_split
    >>> X, y = make_classification(n_samples=200, random_state=1)
    >>> X_train, X_test, y_train, y_test = train_test_split(
    ...     X, y, stratify=y, random_state=1)
    >>> clf = MLPClassifier(random_state=1, max_iter=300, tol=1e-3, device="cpu")
    >>> clf = clf.fit(X_train, y_train)
    >>> clf.predict_proba(X_test[:1]).round(2)
    array([[0.95, 0.05]], dtype=float32)
    >>> clf.score(X_test, y_test)
    0.88
    """

    _parameter_constraints: dict = {
        **_NeuralNet._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
        **_MLPPreset._preset_constraints,
    }

    def __init__(
        self,
        hidden_layer_sizes=(100,),
        activation="relu",
        *,
        solver="adam",
        alpha=0.0001,
        batch_size="auto",
        learning_rate="constant",
        learning_rate_init=0.001,
        power_t=0.5,
        max_iter=200,
        shuffle=True,
        random_state=None,
        tol=1e-4,
        verbose=False,
        warm_start=False,
        momentum=0.9,
        nesterovs_momentum=True,
        early_stopping=False,
        validation_fraction=0.1,
        scoring=None,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        weight_decay=0.01,
        clip_norm=None,
        n_iter_no_change=10,
        max_fun=15000,
        dropout=0.0,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
        class_weight=None,
        loss="log_loss",
        label_smoothing=0.0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.solver = solver
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.power_t = power_t
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.tol = tol
        self.verbose = verbose
        self.warm_start = warm_start
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scoring = scoring
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.dropout = dropout
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss
        self.label_smoothing = label_smoothing


class MLPRegressor(_MLPPreset, NeuralNetRegressor):
    """Multi-layer perceptron regressor, on NumPy or a CUDA GPU.

    A drop-in for :class:`sklearn.neural_network.MLPRegressor` (same
    parameters, defaults and fitted attributes) that trains in float32 on
    sknet's layer stack, on the CPU or, with CuPy, on a GPU.

    Parameters
    ----------
    %(loss)s
    %(parameters)s
    Attributes
    ----------
    %(attributes)s
    See Also
    --------
    MLPClassifier : Multi-layer perceptron classifier.
    NeuralNetRegressor : The estimator this is a preset of, for any layers.
    sklearn.neural_network.MLPRegressor : scikit-learn's float64 original.

    Notes
    -----
    With several outputs the squared error is averaged over outputs, as
    scikit-learn reports it, and its exact gradient is used (scikit-learn
    steps along the gradient of the sum instead); with one output the two are
    the same. ``validation_scores_`` are R² scores, as in scikit-learn.

    Examples
    --------
    >>> from sknet import MLPRegressor
    >>> from sklearn.datasets import make_regression
    >>> X, y = make_regression(n_samples=200, n_features=5, noise=1.0,
    ...                        random_state=0)
    >>> reg = MLPRegressor(hidden_layer_sizes=(32,), learning_rate_init=0.01,
    ...                    max_iter=500, early_stopping=True, random_state=0,
    ...                    device="cpu")
    >>> reg.fit(X, y).score(X, y) > 0.95
    True
    """

    _parameter_constraints: dict = {
        **_NeuralNet._parameter_constraints,
        **NetworkRegressorMixin._parameter_constraints,
        **_MLPPreset._preset_constraints,
    }

    def __init__(
        self,
        loss="squared_error",
        hidden_layer_sizes=(100,),
        activation="relu",
        *,
        solver="adam",
        alpha=0.0001,
        batch_size="auto",
        learning_rate="constant",
        learning_rate_init=0.001,
        power_t=0.5,
        max_iter=200,
        shuffle=True,
        random_state=None,
        tol=1e-4,
        verbose=False,
        warm_start=False,
        momentum=0.9,
        nesterovs_momentum=True,
        early_stopping=False,
        validation_fraction=0.1,
        scoring=None,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        weight_decay=0.01,
        clip_norm=None,
        n_iter_no_change=10,
        max_fun=15000,
        dropout=0.0,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
    ):
        self.loss = loss
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.solver = solver
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.power_t = power_t
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.tol = tol
        self.verbose = verbose
        self.warm_start = warm_start
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scoring = scoring
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.dropout = dropout
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks


fill_doc(
    MLPClassifier,
    parameters=(
        _MLP_PARAMETERS_DOC
        + TRAINING_PARAMETERS_DOC
        + CLIP_NORM_DOC
        + CLASS_WEIGHT_DOC
        + CLASSIFIER_LOSS_DOC
    ),
    attributes=_MLP_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
)
fill_doc(
    MLPRegressor,
    loss=REGRESSOR_LOSS_DOC,
    parameters=_MLP_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + CLIP_NORM_DOC,
    attributes=_MLP_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
)

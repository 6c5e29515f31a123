"""ConvNetClassifier: a convolutional network as easy to use as MLPClassifier."""

import math
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS, is_device_array
from sknet.estimators._base import (
    CLASS_WEIGHT_DOC,
    CLASSIFIER_LOSS_DOC,
    FITTED_ATTRIBUTES_DOC,
    TRAINING_PARAMETERS_DOC,
    BaseNeuralNetwork,
    fill_doc,
)
from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.estimators._layer_list import LayerListMixin, positive_ints
from sknet.layers import (
    Activation,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPool2D,
)

_CONVNET_PARAMETERS_DOC = """
    conv_filters : sequence of int, default=(32, 64)
        Filters of each convolution block. Each block is a ``'same'``-padded
        convolution of ``kernel_size``, then (with ``batch_norm``) batch
        normalization, the activation, and a max pooling of ``pool_size`` while
        the image is at least that large.

    kernel_size : int, default=3
        Height and width of the convolution filters (odd).

    pool_size : int, default=2
        Max-pooling window after each convolution block; 1 means no pooling.

    dense_units : sequence of int, default=(128,)
        Units of the fully connected hidden layers after the convolutions.

    activation : str, default='relu'
        Activation of the hidden layers (see :class:`MLPClassifier`).

    dropout : float, default=0.0
        Dropout rate after each dense hidden layer while training.

    batch_norm : bool, default=False
        Batch normalization after every convolution and dense hidden layer.

    layers : list of Layer, default=None
        The network itself, overriding the simple parameters above, e.g.
        ``[Conv2D(32, 3), MaxPool2D(2), Flatten(), Dense(128), Dropout(0.5)]``.
        A ``Flatten`` (if the last layer outputs images) and the output
        ``Dense`` layer are appended. The objects are never modified: ``fit``
        builds copies in ``layers_``. Grid-search their parameters as
        ``layers__<index>__<parameter>``.

    input_shape : tuple of int, default=None
        ``(channels, height, width)`` or ``(height, width)`` of one image when
        ``X`` is flat. ``None`` infers it: from 3-D ``(n, h, w)`` or 4-D
        ``(n, c, h, w)`` ``X``; for flat ``X``, a square single-channel image
        when the number of features is a square (64 -> 1x8x8, 784 -> 1x28x28),
        else a one-row image ``(1, 1, n_features)``.
"""


def _normalize_shape(shape, name="input_shape"):
    values = positive_ints(shape, name)
    if len(values) == 2:
        values = [1] + values
    if len(values) != 3:
        raise ValueError(
            f"{name} must be (channels, height, width) or (height, width), got {shape!r}"
        )
    return tuple(values)


class ConvNetClassifier(LayerListMixin, NetworkClassifierMixin, BaseNeuralNetwork):
    """Convolutional neural-network classifier for images, on NumPy or a GPU.

    As easy as :class:`MLPClassifier`: a few grid-searchable parameters
    describe the network (``conv_filters``, ``kernel_size``, ``pool_size``,
    ``dense_units``, ``dropout``, ``batch_norm``), or ``layers`` gives it layer
    by layer, custom layers included. It shares the training loop, optimizers,
    early stopping, persistence and input checks of the MLP estimators.

    Images come as ``(n, h, w)``, ``(n, c, h, w)``, or flat rows
    ``(n, c * h * w)`` (so that it works after a scaler in a ``Pipeline``);
    computation is NCHW.

    Parameters
    ----------
    %(parameters)s
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    input_shape_ : tuple of int
        ``(channels, height, width)`` of the images seen during fit.

    %(attributes)s
    See Also
    --------
    MLPClassifier : Fully connected network on flat features.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import ConvNetClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = ConvNetClassifier(conv_filters=(8,), dense_units=(32,),
    ...                         early_stopping=True, random_state=0, device="cpu")
    >>> clf.fit(X[:500] / 16, y[:500]).input_shape_
    (1, 8, 8)
    >>> clf.predict(X[500:503] / 16).shape
    (3,)
    """

    _parameter_constraints: dict = {
        **BaseNeuralNetwork._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
        "conv_filters": ["array-like"],
        "kernel_size": [Interval(Integral, 1, None, closed="left")],
        "pool_size": [Interval(Integral, 1, None, closed="left")],
        "dense_units": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "batch_norm": ["boolean"],
        "layers": [list, tuple, None],
        "input_shape": [tuple, list, None],
    }

    def __init__(
        self,
        *,
        conv_filters=(32, 64),
        kernel_size=3,
        pool_size=2,
        dense_units=(128,),
        activation="relu",
        dropout=0.0,
        batch_norm=False,
        layers=None,
        input_shape=None,
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
        n_iter_no_change=10,
        max_fun=15000,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
        class_weight=None,
        loss="log_loss",
    ):
        self.conv_filters = conv_filters
        self.kernel_size = kernel_size
        self.pool_size = pool_size
        self.dense_units = dense_units
        self.activation = activation
        self.dropout = dropout
        self.batch_norm = batch_norm
        self.layers = layers
        self.input_shape = input_shape
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
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss

    _network_parameters = (
        "conv_filters",
        "kernel_size",
        "pool_size",
        "dense_units",
        "activation",
        "dropout",
        "batch_norm",
        "layers",
        "input_shape",
    )

    # -- images in ---------------------------------------------------------------
    def _check_params(self):
        positive_ints(self.conv_filters, "conv_filters")
        positive_ints(self.dense_units, "dense_units")
        if self.input_shape is not None:
            _normalize_shape(self.input_shape)
        self._check_layer_list()

    @staticmethod
    def _split_images(X):
        """Flat rows of ``X`` and the shape of one image (``None`` if already flat)."""
        if sp.issparse(X) or hasattr(X, "iloc"):  # sparse or a DataFrame: flat
            return X, None
        array = X if is_device_array(X) else np.asarray(X)
        if array.ndim in (3, 4):
            return array.reshape(array.shape[0], -1), tuple(array.shape[1:])
        if array.ndim > 4:
            raise ValueError(
                "ConvNetClassifier expects X of shape (n, h, w), (n, c, h, w) or "
                f"flat (n, c * h * w); got an array of shape {array.shape}"
            )
        return X, None

    def _resolve_input_shape(self, n_features, image_shape):
        if image_shape is not None:
            shape = _normalize_shape(image_shape, "X's images")
            if self.input_shape is not None and _normalize_shape(self.input_shape) != shape:
                raise ValueError(
                    f"input_shape={self.input_shape!r} does not match the images "
                    f"in X, of shape {image_shape}"
                )
            return shape
        if self.input_shape is not None:
            shape = _normalize_shape(self.input_shape)
            if math.prod(shape) != n_features:
                raise ValueError(
                    f"input_shape={self.input_shape!r} holds {math.prod(shape)} values "
                    f"per sample, but X has {n_features} features"
                )
            return shape
        side = math.isqrt(n_features)
        return (1, side, side) if side * side == n_features else (1, 1, n_features)

    def _check_image_shape(self, image_shape):
        if image_shape is not None and _normalize_shape(image_shape) != self.input_shape_:
            raise ValueError(
                f"X has images of shape {image_shape}, but this ConvNetClassifier was "
                f"fitted on images of shape {self.input_shape_}"
            )

    def _validate_Xy(self, X, y, reset, **kwargs):
        X, image_shape = self._split_images(X)
        X, y = super()._validate_Xy(X, y, reset, **kwargs)
        if reset:
            self.input_shape_ = self._resolve_input_shape(X.shape[1], image_shape)
        else:
            self._check_image_shape(image_shape)
        return X, y

    def _validate_X_predict(self, X):
        X, image_shape = self._split_images(X)
        if hasattr(self, "input_shape_"):
            self._check_image_shape(image_shape)
        return super()._validate_X_predict(X)

    def _network_input_shape(self, n_features):
        return self.input_shape_

    # -- the network ---------------------------------------------------------------
    def _build_layers(self):
        if self.layers is not None:
            return list(self.layers)
        act, layers = self.activation, []
        _, height, width = self.input_shape_
        for filters in positive_ints(self.conv_filters, "conv_filters"):
            if self.batch_norm:
                layers += [
                    Conv2D(filters, self.kernel_size, padding="same", use_bias=False),
                    BatchNorm(),
                    Activation(act),
                ]
            else:
                layers.append(Conv2D(filters, self.kernel_size, padding="same", activation=act))
            if self.pool_size > 1 and min(height, width) >= self.pool_size:
                layers.append(MaxPool2D(self.pool_size))
                height, width = height // self.pool_size, width // self.pool_size
        layers.append(Flatten())
        for units in positive_ints(self.dense_units, "dense_units"):
            if self.batch_norm:
                layers += [
                    Dense(units, use_bias=False, init="he_uniform"),
                    BatchNorm(),
                    Activation(act),
                ]
            else:
                layers.append(Dense(units, activation=act, init="he_uniform"))
            if self.dropout > 0:
                layers.append(Dropout(self.dropout))
        return layers

    def _output_layers(self, shape):
        head = [] if len(shape) == 1 else [Flatten()]
        return head + [Dense(self.n_outputs_)]


fill_doc(
    ConvNetClassifier,
    parameters=(
        _CONVNET_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + CLASS_WEIGHT_DOC + CLASSIFIER_LOSS_DOC
    ),
    attributes=FITTED_ATTRIBUTES_DOC,
)

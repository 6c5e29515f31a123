"""ConvNetClassifier and ConvNetRegressor: convolutional networks as easy as an MLP.

A preset of the network estimator: ``conv_filters``, ``kernel_size``,
``pool_size``, ``dense_units``, ``activation``, ``dropout`` and
``batch_norm`` become convolution blocks and dense layers, and a flat row
becomes an image (a square one when it can). ``layers`` replaces the preset's
network, as in :class:`~sknet.estimators._neural_net.NeuralNetClassifier`.
"""

import math
from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS
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
from sknet.estimators._layer_list import positive_ints
from sknet.estimators._neural_net import NeuralNetClassifier, NeuralNetRegressor, _NeuralNet
from sknet.estimators._regressor import NetworkRegressorMixin
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
        Height and width of the convolution filters. Odd: an even one is a
        ValueError (a ``'same'`` padding would need more pixels on one side
        than on the other; give ``layers`` for even windows).

    pool_size : int, default=2
        Max-pooling window after each convolution block; 1 means no pooling.
        It must fit in the images (a larger one is a ValueError naming both);
        later blocks pool while their image is at least that large, and the
        one-row images of flat rows that are no square are not pooled.

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


class _ConvNetPreset:
    """What ConvNetClassifier and ConvNetRegressor add: convolution blocks, images in.

    List it first in the bases, before the network estimator it presets.
    Images come as ``(n, h, w)``, ``(n, c, h, w)``, or flat rows
    ``(n, c * h * w)`` (so that it works after a scaler in a ``Pipeline``);
    computation is NCHW.
    """

    _preset_constraints: dict = {
        "conv_filters": ["array-like"],
        "kernel_size": [Interval(Integral, 1, None, closed="left")],
        "pool_size": [Interval(Integral, 1, None, closed="left")],
        "dense_units": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "batch_norm": ["boolean"],
    }

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
    _max_X_ndim = 4
    _sample_noun = "images"

    def _check_params(self):
        positive_ints(self.conv_filters, "conv_filters")
        positive_ints(self.dense_units, "dense_units")
        super()._check_params()

    # -- images in ---------------------------------------------------------------
    def _sample_shape(self, shape, name):
        return _normalize_shape(shape, name)

    def _too_many_dims(self, shape):
        return (
            f"{type(self).__name__} expects X of shape (n, h, w), (n, c, h, w) or "
            f"flat (n, c * h * w); got an array of shape {shape}"
        )

    def _default_input_shape(self, n_features):
        side = math.isqrt(n_features)
        return (1, side, side) if side * side == n_features else (1, 1, n_features)

    # -- the network ---------------------------------------------------------------
    def _check_window_sizes(self, height, width):
        """Refuse what the preset cannot build: an even kernel, a pool larger than the images."""
        k, pool = self.kernel_size, self.pool_size
        if k % 2 == 0:
            raise ValueError(
                f"kernel_size must be odd: the preset's convolutions are 'same'-padded (the "
                f"images keep their size), which takes as many padded pixels on each side, "
                f"so an even window cannot be; got {k}. Use kernel_size={k - 1} or {k + 1}, "
                f"or give the network as layers, e.g. [Conv2D(filters, {k}, "
                f"padding={k // 2}), ...] (images grow by one pixel) or padding={k // 2 - 1} "
                "(they shrink by one)"
            )
        if pool > 1 and 1 < min(height, width) < pool:
            raise ValueError(
                f"pool_size={pool} does not fit in the images of size {(height, width)}: no "
                f"convolution block could pool them; give a pool_size of at most "
                f"{min(height, width)}, or 1 for no pooling"
            )

    def _preset_layers(self):
        act, layers = self.activation, []
        _, height, width = self.input_shape_
        self._check_window_sizes(height, width)
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


class ConvNetClassifier(_ConvNetPreset, NeuralNetClassifier):
    """Convolutional neural-network classifier for images, on NumPy or a GPU.

    As easy as :class:`MLPClassifier`: a few grid-searchable parameters
    describe the network (``conv_filters``, ``kernel_size``, ``pool_size``,
    ``dense_units``, ``dropout``, ``batch_norm``), or ``layers`` gives it layer
    by layer, custom layers included. A preset of
    :class:`NeuralNetClassifier`: the same training loop, optimizers, early
    stopping, persistence and input checks.

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
    ConvNetRegressor : The same network for regression.
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
        **_NeuralNet._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
        **_ConvNetPreset._preset_constraints,
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
        weight_decay=0.01,
        clip_norm=None,
        n_iter_no_change=10,
        max_fun=15000,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
        class_weight=None,
        loss="log_loss",
        label_smoothing=0.0,
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
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss
        self.label_smoothing = label_smoothing


class ConvNetRegressor(_ConvNetPreset, NeuralNetRegressor):
    """Convolutional neural-network regressor for images, on NumPy or a GPU.

    The network of :class:`ConvNetClassifier` with an identity output (or the
    output of ``loss``), one value per target: counting objects, estimating
    an angle, denoising a pixel.

    Parameters
    ----------
    %(loss)s
    %(parameters)s
    Attributes
    ----------
    input_shape_ : tuple of int
        ``(channels, height, width)`` of the images seen during fit.

    %(attributes)s
    See Also
    --------
    ConvNetClassifier : The same network for classification.
    NeuralNetRegressor : The estimator this is a preset of, for any layers.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import ConvNetRegressor
    >>> X, y = load_digits(return_X_y=True)
    >>> reg = ConvNetRegressor(conv_filters=(8,), dense_units=(32,), early_stopping=True,
    ...                        learning_rate_init=0.01, tol=1e-3, random_state=0,
    ...                        device="cpu")
    >>> reg.fit(X[:1000] / 16, y[:1000]).input_shape_
    (1, 8, 8)
    >>> reg.score(X[1000:] / 16, y[1000:]) > 0.75
    True
    """

    _parameter_constraints: dict = {
        **_NeuralNet._parameter_constraints,
        **NetworkRegressorMixin._parameter_constraints,
        **_ConvNetPreset._preset_constraints,
    }

    def __init__(
        self,
        loss="squared_error",
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
        weight_decay=0.01,
        clip_norm=None,
        n_iter_no_change=10,
        max_fun=15000,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
    ):
        self.loss = loss
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
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks


fill_doc(
    ConvNetClassifier,
    parameters=(
        _CONVNET_PARAMETERS_DOC
        + TRAINING_PARAMETERS_DOC
        + CLIP_NORM_DOC
        + CLASS_WEIGHT_DOC
        + CLASSIFIER_LOSS_DOC
    ),
    attributes=FITTED_ATTRIBUTES_DOC,
)
fill_doc(
    ConvNetRegressor,
    loss=REGRESSOR_LOSS_DOC,
    parameters=_CONVNET_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + CLIP_NORM_DOC,
    attributes=FITTED_ATTRIBUTES_DOC,
)

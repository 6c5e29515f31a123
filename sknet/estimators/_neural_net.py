"""NeuralNetClassifier and NeuralNetRegressor: any layer stack, samples of any shape.

The one network estimator of sknet. ``layers`` is the network; ``X`` holds
samples of any shape: rows, images ``(n, c, h, w)``, sequences ``(n, t, f)``,
token ids, or flat rows reshaped by ``input_shape``. A ``Flatten`` (when the
last layer's samples are not flat) and the output ``Dense`` layer are
appended. The MLP, ConvNet and RNN estimators are presets of it: each turns
its own parameters into a layer list and a rule for the shape of a sample,
and is otherwise this estimator.
"""

import math
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval

from sknet.backend import is_device_array
from sknet.estimators._base import BaseNeuralNetwork
from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.estimators._docs import (
    CLASS_WEIGHT_DOC,
    CLASSIFIER_LOSS_DOC,
    FITTED_ATTRIBUTES_DOC,
    GROUP_BY_LENGTH_DOC,
    REGRESSOR_LOSS_DOC,
    TRAINING_PARAMETERS_DOC,
    fill_doc,
)
from sknet.estimators._layer_list import LayerListMixin, positive_ints
from sknet.estimators._regressor import NetworkRegressorMixin
from sknet.estimators._sequence_input import SequenceInputMixin, StepGroups
from sknet.layers import Dense, Embedding, EnsembleHead, Flatten
from sknet.layers._ensemble import ensemble_size

NETWORK_PARAMETERS_DOC = (
    """
    layers : list of Layer, default=None
        The network, first layer to last: any :mod:`sknet.layers` (containers
        and your own included), e.g. ``[Conv2D(32, 3), MaxPool2D(2),
        Flatten(), Dense(128, activation='relu')]``. A ``Flatten`` (when the
        last layer outputs samples that are not flat) and the output ``Dense``
        layer are appended. ``None``: one hidden layer of 100 ReLU units (after
        a ``Flatten`` for samples that are not flat). The objects are never
        modified: ``fit`` builds copies in ``layers_``. Grid-search their
        parameters as ``layers__<index>__<parameter>``.

    input_shape : tuple of int, default=None
        The shape of one sample as the first layer takes it, when ``X`` comes
        as flat rows (after a scaler in a ``Pipeline``, say): each row is
        reshaped to it. ``None``: the shape of ``X``'s samples (``X.shape[1:]``
        for ``X`` of more than 2 dimensions), or flat rows.

    padding_value : float, default=None
        Sequence steps whose features all equal this value (token id, for
        token input) are padding: recurrent layers carry their state over them
        and ``GlobalAvgPool1D`` skips them. ``None``: no padding. A finite
        number: NaN equals nothing, and ``X`` holding NaN is refused. With it,
        sequences come in any length: a list of sequences of different
        lengths (padded after each with this value), or, at ``predict``,
        arrays padded to another number of steps than in ``fit`` (brought to
        the fitted one; longer sequences run at a wider width where the
        network's weights allow it): see :doc:`/user_guide/text`.

"""
    + GROUP_BY_LENGTH_DOC
    + """
    clip_norm : float or None, default=None
        Rescale each batch's gradient to at most this L2 norm (on the device,
        no synchronisation); ``None`` disables clipping.
"""
)

_INPUT_SHAPE_ATTRIBUTE_DOC = """
    input_shape_ : tuple of int
        The shape of one sample as the first layer takes it.
"""


class _NeuralNet(SequenceInputMixin, LayerListMixin, BaseNeuralNetwork):
    """Any layer stack on samples of any shape; presets narrow it.

    A preset overrides the hooks of the "samples" and "network" sections:
    the shape of a sample (:meth:`_sample_shape`, :meth:`_default_input_shape`,
    ``_max_X_ndim``, ``_sample_noun``) and the layers its own parameters make
    (:meth:`_preset_layers`, used when ``layers`` is None).
    """

    _parameter_constraints: dict = {
        **BaseNeuralNetwork._parameter_constraints,
        "layers": [list, tuple, None],
        "input_shape": [tuple, list, None],
        # finite: NaN never equals a step's features (and X with NaN is refused)
        "padding_value": [Interval(Real, None, None, closed="neither"), None],
        "group_by_length": ["boolean"],
        "clip_norm": [Interval(Real, 0, None, closed="neither"), None],
    }
    _network_parameters = ("layers", "input_shape", "padding_value")

    #: The most dimensions ``X`` may have (None: any).
    _max_X_ndim = None
    #: What the samples are called in error messages.
    _sample_noun = "samples"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # scikit-learn's checks want one constraint per parameter, no more: a
        # class keeps those of the parameters its __init__ takes.
        if "__init__" in cls.__dict__:
            names = set(cls._get_param_names())
            cls._parameter_constraints = {
                name: rule for name, rule in cls._parameter_constraints.items() if name in names
            }

    def _check_params(self):
        if getattr(self, "input_shape", None) is not None:
            self._sample_shape(self.input_shape, "input_shape")
        if getattr(self, "group_by_length", False) and self._padding_value() is None:
            raise ValueError(
                "group_by_length=True groups sequences by their length up to the padding: "
                "set padding_value (the value padded steps hold, 0 for token ids)"
            )
        self._check_layer_list()

    # -- samples -------------------------------------------------------------------
    def _sample_shape(self, shape, name):
        """``shape`` as the shape of one sample (presets normalize and check it)."""
        return tuple(positive_ints(shape, name, allow_empty=False))

    def _default_input_shape(self, n_features):
        """The shape of one sample when flat ``X`` comes without ``input_shape``."""
        return (n_features,)

    def _too_many_dims(self, shape):
        return (
            f"{type(self).__name__} expects X of at most {self._max_X_ndim} dimensions, "
            f"got an array of shape {shape}"
        )

    def _split_samples(self, X):
        """Flat rows of ``X`` and the shape of one sample (``None`` when ``X`` is flat)."""
        if sp.issparse(X) or hasattr(X, "iloc"):  # sparse or a DataFrame: flat rows
            return X, None
        array = X if is_device_array(X) else np.asarray(X)
        if self._max_X_ndim is not None and array.ndim > self._max_X_ndim:
            raise ValueError(self._too_many_dims(array.shape))
        if array.ndim > 2:
            return array.reshape(array.shape[0], -1), tuple(array.shape[1:])
        return X, None

    def _resolve_input_shape(self, n_features, sample_shape):
        input_shape = getattr(self, "input_shape", None)
        given = None if input_shape is None else self._sample_shape(input_shape, "input_shape")
        if sample_shape is not None:
            shape = self._sample_shape(sample_shape, f"X's {self._sample_noun}")
            if given is not None and given != shape:
                raise ValueError(
                    f"input_shape={input_shape!r} does not match the "
                    f"{self._sample_noun} in X, of shape {sample_shape}"
                )
            return shape
        if given is not None:
            if math.prod(given) != n_features:
                raise ValueError(
                    f"input_shape={input_shape!r} holds {math.prod(given)} values "
                    f"per sample, but X has {n_features} features"
                )
            return given
        return self._default_input_shape(n_features)

    def _check_sample_shape(self, sample_shape):
        if sample_shape is None:
            return
        if self._sample_shape(sample_shape, f"X's {self._sample_noun}") != self.input_shape_:
            raise ValueError(
                f"X has {self._sample_noun} of shape {sample_shape}, but this "
                f"{type(self).__name__} was fitted on {self._sample_noun} of shape "
                f"{self.input_shape_}"
            )

    def _validate_Xy(self, X, y, reset, names=("X", "y"), **kwargs):
        # Ragged sequences padded; other widths brought to the fitted one (_sequence_input).
        X = self._padded(X, names[0], reset)
        if not reset:
            X = self._as_fitted_steps(X, names[0], longer=False)
        X, sample_shape = self._split_samples(X)
        X, y = super()._validate_Xy(X, y, reset, names=names, **kwargs)
        if reset:
            self.input_shape_ = self._resolve_input_shape(X.shape[1], sample_shape)
        else:
            self._check_sample_shape(sample_shape)
        return self._check_token_ids(X, names[0]), y

    def _validate_X_predict(self, X):
        """``X`` validated; :class:`StepGroups` when sequences are longer than fitted."""
        if hasattr(self, "input_shape_"):  # (unfitted: the base raises NotFittedError)
            X = self._as_fitted_steps(self._padded(X, "X", reset=False), "X", longer=True)
        if isinstance(X, StepGroups):
            fitted = self.input_shape_[0]
            X.groups = [
                (
                    rows,
                    self._validate_fitted(part) if n == fitted else self._validate_wider(part),
                    n,
                )
                for rows, part, n in X.groups
            ]
            return X
        return self._validate_fitted(X)

    def _validate_fitted(self, X):
        X, sample_shape = self._split_samples(X)
        if hasattr(self, "input_shape_"):
            self._check_sample_shape(sample_shape)
        X = super()._validate_X_predict(X)
        return self._check_token_ids(X, "X")

    def _takes_token_ids(self):
        layers = getattr(self, "layers", None)
        return bool(layers) and isinstance(layers[0], Embedding)

    def _X_dtype(self):
        # Token ids stay integers (exact: a float32 holds whole numbers up to 2**24 only).
        return "numeric" if self._takes_token_ids() else super()._X_dtype()

    def _check_token_ids(self, X, name):
        """Token ids checked once here (on the device for CuPy X), never per batch.

        Returns them as integers (the network's input path keeps them so).
        """
        if not self._takes_token_ids():
            return X
        embedding = self.layers[0]
        embedding._validate_params()  # input_dim is compared with the ids: valid first
        return embedding.check_ids(X, f"token ids ({name})")

    def _network_input_shape(self, n_features):
        return self.input_shape_

    def _padding_value(self):
        return getattr(self, "padding_value", None)

    # -- the network ---------------------------------------------------------------
    def _build_layers(self):
        layers = getattr(self, "layers", None)
        return list(layers) if layers is not None else self._preset_layers()

    def _preset_layers(self):
        """The layers when ``layers`` is None: one hidden layer of 100 ReLU units."""
        flatten = [Flatten()] if len(self.input_shape_) > 1 else []
        return flatten + [Dense(100, activation="relu", init="he_uniform")]

    def _output_layers(self, shape):
        k = ensemble_size(self._build_layers())
        if k is not None and len(shape) == 2 and shape[0] == k:  # the members to the end
            return [EnsembleHead(self.n_outputs_)]  # each member's own outputs
        head = [] if len(shape) == 1 else [Flatten()]
        return head + [Dense(self.n_outputs_)]


class NeuralNetClassifier(NetworkClassifierMixin, _NeuralNet):
    """Neural-network classifier for any layer stack and any input, on NumPy or a GPU.

    ``layers`` is the network: dense, convolutional, recurrent, containers
    (:class:`~sknet.layers.Residual`, :class:`~sknet.layers.Concatenate`)
    or your own :class:`~sknet.layers.Layer`; the output layer is appended.
    ``X`` holds samples of any shape: rows ``(n, f)``, images
    ``(n, c, h, w)``, sequences ``(n, t, f)``, token ids ``(n, t)`` (with an
    :class:`~sknet.layers.Embedding` first), or flat rows with
    ``input_shape``. Everything else is the contract of
    :class:`MLPClassifier`: labels of any type, ``predict_proba``,
    ``partial_fit``, sample and class weights, early stopping, callbacks,
    persistence, the device.

    :class:`MLPClassifier`, :class:`ConvNetClassifier` and
    :class:`RNNClassifier` are presets of this estimator: each turns a few
    parameters into a layer list.

    Parameters
    ----------
    %(parameters)s
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    %(attributes)s
    See Also
    --------
    NeuralNetRegressor : The same estimator for regression.
    MLPClassifier : A preset: scikit-learn's MLP.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import NeuralNetClassifier
    >>> from sknet.layers import Conv2D, Dense, Flatten, MaxPool2D
    >>> X, y = load_digits(return_X_y=True)
    >>> images = X.reshape(-1, 1, 8, 8) / 16
    >>> clf = NeuralNetClassifier(
    ...     [Conv2D(8, 3, padding="same", activation="relu"), MaxPool2D(2),
    ...      Flatten(), Dense(32, activation="relu")],
    ...     early_stopping=True, random_state=0, device="cpu")
    >>> clf.fit(images[:1000], y[:1000]).input_shape_
    (1, 8, 8)
    >>> clf.score(images[1000:], y[1000:]) > 0.9
    True
    """

    def __init__(
        self,
        layers=None,
        *,
        input_shape=None,
        padding_value=None,
        group_by_length=False,
        clip_norm=None,
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
        self.layers = layers
        self.input_shape = input_shape
        self.padding_value = padding_value
        self.group_by_length = group_by_length
        self.clip_norm = clip_norm
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
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss
        self.label_smoothing = label_smoothing

    _parameter_constraints: dict = {
        **_NeuralNet._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
    }


class NeuralNetRegressor(NetworkRegressorMixin, _NeuralNet):
    """Neural-network regressor for any layer stack and any input, on NumPy or a GPU.

    The estimator of :class:`NeuralNetClassifier` with an identity output
    (or the output of ``loss``), one value per target.

    Parameters
    ----------
    %(loss)s
    %(parameters)s
    Attributes
    ----------
    %(attributes)s
    See Also
    --------
    NeuralNetClassifier : The same estimator for classification.
    MLPRegressor : A preset: scikit-learn's MLP.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet import NeuralNetRegressor
    >>> from sknet.layers import Dense, GlobalAvgPool1D, TimeDistributed
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(400, 10, 3))   # 400 sequences of 10 steps
    >>> y = X.mean(axis=(1, 2))
    >>> reg = NeuralNetRegressor([TimeDistributed(Dense(8)), GlobalAvgPool1D()],
    ...                          learning_rate_init=0.01, early_stopping=True,
    ...                          random_state=0, device="cpu").fit(X, y)
    >>> reg.score(X, y) > 0.95
    True
    """

    def __init__(
        self,
        layers=None,
        *,
        loss="squared_error",
        input_shape=None,
        padding_value=None,
        group_by_length=False,
        clip_norm=None,
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
        n_iter_no_change=10,
        max_fun=15000,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
    ):
        self.layers = layers
        self.loss = loss
        self.input_shape = input_shape
        self.padding_value = padding_value
        self.group_by_length = group_by_length
        self.clip_norm = clip_norm
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
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks

    _parameter_constraints: dict = {
        **_NeuralNet._parameter_constraints,
        **NetworkRegressorMixin._parameter_constraints,
    }


fill_doc(
    NeuralNetClassifier,
    parameters=(
        NETWORK_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + CLASS_WEIGHT_DOC + CLASSIFIER_LOSS_DOC
    ),
    attributes=_INPUT_SHAPE_ATTRIBUTE_DOC + FITTED_ATTRIBUTES_DOC,
)
fill_doc(
    NeuralNetRegressor,
    loss=REGRESSOR_LOSS_DOC,
    parameters=NETWORK_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC,
    attributes=_INPUT_SHAPE_ATTRIBUTE_DOC + FITTED_ATTRIBUTES_DOC,
)

"""RNNClassifier and RNNRegressor: recurrent networks over sequences."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS, is_device_array
from sknet.estimators._base import (
    CLASS_WEIGHT_DOC,
    CLASSIFIER_LOSS_DOC,
    FITTED_ATTRIBUTES_DOC,
    REGRESSOR_LOSS_DOC,
    TRAINING_PARAMETERS_DOC,
    BaseNeuralNetwork,
    fill_doc,
)
from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.estimators._layer_list import LayerListMixin, positive_ints
from sknet.estimators._regressor import NetworkRegressorMixin
from sknet.layers import GRU, LSTM, Dense, Dropout, Embedding, Flatten, SimpleRNN

CELLS = {"lstm": LSTM, "gru": GRU, "rnn": SimpleRNN}

_RNN_PARAMETERS_DOC = """
    cell : {'lstm', 'gru', 'rnn'}, default='lstm'
        The recurrent layer: :class:`~sknet.layers.LSTM`,
        :class:`~sknet.layers.GRU` or :class:`~sknet.layers.SimpleRNN`.

    units : sequence of int, default=(64,)
        State size of each stacked recurrent layer; all but the last return
        their whole sequence to the next.

    bidirectional : bool, default=False
        Run every recurrent layer over the sequence in both directions.

    dense_units : sequence of int, default=()
        Fully connected hidden layers after the recurrent ones.

    activation : str, default='relu'
        Activation of the dense hidden layers.

    dropout : float, default=0.0
        Dropout rate after each recurrent and dense hidden layer while training.

    layers : list of Layer, default=None
        The network itself, overriding the simple parameters above (e.g.
        ``[Embedding(1000, 32), LSTM(64, return_sequences=True),
        GlobalAvgPool1D()]``); a ``Flatten`` (if needed) and the output ``Dense``
        are appended. Never modified; grid-search entries as
        ``layers__<index>__<parameter>``.

    input_shape : tuple of int, default=None
        ``(timesteps, features)`` of one sequence when ``X`` is flat, or
        ``(timesteps,)`` for token ids (with an ``Embedding`` first). ``None``:
        3-D ``X`` gives it; flat ``X`` is one feature per step.

    padding_value : float, default=None
        Steps whose features all equal this value (token id, for token
        input) are padding: recurrent layers carry their state over them and
        ``GlobalAvgPool1D`` skips them, so padded and unpadded sequences give
        the same result. ``None``: no padding.

    clip_norm : float or None, default=5.0
        Rescale each batch's gradient to at most this L2 norm (on the device,
        no synchronisation); ``None`` disables clipping.
"""

_RNN_ATTRIBUTES_DOC = """
    input_shape_ : tuple of int
        Shape of one sequence as the network sees it.
"""


class _BaseRNN(LayerListMixin, BaseNeuralNetwork):
    """What RNNClassifier and RNNRegressor share: sequences in, a recurrent stack."""

    _accept_sparse = False

    _parameter_constraints: dict = {
        **BaseNeuralNetwork._parameter_constraints,
        "cell": [StrOptions(set(CELLS))],
        "units": ["array-like", Interval(Integral, 1, None, closed="left")],
        "bidirectional": ["boolean"],
        "dense_units": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "layers": [list, tuple, None],
        "input_shape": [tuple, list, None],
        "padding_value": [Real, None],
        "clip_norm": [Interval(Real, 0, None, closed="neither"), None],
    }

    _network_parameters = (
        "cell",
        "units",
        "bidirectional",
        "dense_units",
        "activation",
        "dropout",
        "layers",
        "input_shape",
        "padding_value",
    )

    def _check_params(self):
        if self.layers is None:
            positive_ints(self.units, "units", allow_empty=False)
        positive_ints(self.dense_units, "dense_units")
        if self.input_shape is not None:
            positive_ints(self.input_shape, "input_shape", allow_empty=False)
            if len(self.input_shape) not in (1, 2):
                raise ValueError(
                    "input_shape must be (timesteps, features) or (timesteps,), got "
                    f"{self.input_shape!r}"
                )
        self._check_layer_list()

    # -- sequences in ------------------------------------------------------------
    @staticmethod
    def _split_sequences(X):
        """Flat rows of ``X`` and the shape of one sequence (``None`` if flat)."""
        if hasattr(X, "iloc"):
            return X, None
        array = X if is_device_array(X) else np.asarray(X)
        if array.ndim == 3:
            return array.reshape(array.shape[0], -1), tuple(array.shape[1:])
        if array.ndim > 3:
            raise ValueError(
                f"{type(X).__name__} of shape {array.shape}: expected sequences "
                "(n, timesteps, features) or flat rows (n, timesteps * features)"
            )
        return X, None

    def _resolve_input_shape(self, n_features, sequence_shape):
        given = None if self.input_shape is None else tuple(int(v) for v in self.input_shape)
        if sequence_shape is not None:
            if given is not None and given != sequence_shape:
                raise ValueError(
                    f"input_shape={self.input_shape!r} does not match the sequences in "
                    f"X, of shape {sequence_shape}"
                )
            return sequence_shape
        if given is not None:
            if math.prod(given) != n_features:
                raise ValueError(
                    f"input_shape={self.input_shape!r} holds {math.prod(given)} values "
                    f"per sample, but X has {n_features} features"
                )
            return given
        if self._takes_token_ids():
            return (n_features,)
        return (n_features, 1)

    def _takes_token_ids(self):
        return bool(self.layers) and isinstance(self.layers[0], Embedding)

    def _check_sequence_shape(self, sequence_shape):
        if sequence_shape is not None and sequence_shape != self.input_shape_:
            raise ValueError(
                f"X has sequences of shape {sequence_shape}, but this "
                f"{type(self).__name__} was fitted on {self.input_shape_}"
            )

    def _validate_Xy(self, X, y, reset, **kwargs):
        X, sequence_shape = self._split_sequences(X)
        X, y = super()._validate_Xy(X, y, reset, **kwargs)
        if reset:
            self.input_shape_ = self._resolve_input_shape(X.shape[1], sequence_shape)
        else:
            self._check_sequence_shape(sequence_shape)
        self._check_token_ids(X)
        return X, y

    def _validate_X_predict(self, X):
        X, sequence_shape = self._split_sequences(X)
        if hasattr(self, "input_shape_"):
            self._check_sequence_shape(sequence_shape)
        X = super()._validate_X_predict(X)
        self._check_token_ids(X)
        return X

    def _check_token_ids(self, X):
        """Token ids are checked once here (on the device for CuPy X), never per batch."""
        if self._takes_token_ids():
            self.layers[0].check_ids(X)

    def _network_input_shape(self, n_features):
        return self.input_shape_

    def _padding_value(self):
        return self.padding_value

    # -- the network ----------------------------------------------------------------
    def _build_layers(self):
        if self.layers is not None:
            return list(self.layers)
        Cell, layers = CELLS[self.cell], []
        units = positive_ints(self.units, "units", allow_empty=False)
        for i, size in enumerate(units):
            layers.append(
                Cell(size, return_sequences=i < len(units) - 1, bidirectional=self.bidirectional)
            )
            if self.dropout > 0:
                layers.append(Dropout(self.dropout))
        for size in positive_ints(self.dense_units, "dense_units"):
            layers.append(Dense(size, activation=self.activation, init="he_uniform"))
            if self.dropout > 0:
                layers.append(Dropout(self.dropout))
        return layers

    def _output_layers(self, shape):
        head = [] if len(shape) == 1 else [Flatten()]
        return head + [Dense(self.n_outputs_)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


class RNNClassifier(NetworkClassifierMixin, _BaseRNN):
    """Recurrent neural-network classifier for sequences, on NumPy or a GPU.

    Sequences come as ``(n, timesteps, features)``, or flat rows with
    ``input_shape``; token ids as ``(n, timesteps)`` with an
    :class:`~sknet.layers.Embedding` first in ``layers``. Everything else is
    the contract of :class:`MLPClassifier`: ``partial_fit``, sample and class
    weights, early stopping, callbacks, persistence and input checks.

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
    RNNRegressor : The same network for regression.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet import RNNClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(200, 10, 2))
    >>> y = (X[:, :3, 0].sum(axis=1) > 0).astype(int)  # depends on early steps
    >>> clf = RNNClassifier(units=(16,), early_stopping=True, random_state=0,
    ...                     device="cpu").fit(X, y)
    >>> clf.input_shape_
    (10, 2)
    """

    _parameter_constraints: dict = {
        **_BaseRNN._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
    }

    def __init__(
        self,
        *,
        cell="lstm",
        units=(64,),
        bidirectional=False,
        dense_units=(),
        activation="relu",
        dropout=0.0,
        layers=None,
        input_shape=None,
        padding_value=None,
        clip_norm=5.0,
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
        self.cell = cell
        self.units = units
        self.bidirectional = bidirectional
        self.dense_units = dense_units
        self.activation = activation
        self.dropout = dropout
        self.layers = layers
        self.input_shape = input_shape
        self.padding_value = padding_value
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
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss


class RNNRegressor(NetworkRegressorMixin, _BaseRNN):
    """Recurrent neural-network regressor for sequences, on NumPy or a GPU.

    The network of :class:`RNNClassifier` with an identity (squared error) or
    exponential (Poisson) output, one value per target.

    Parameters
    ----------
    %(loss)s
    %(parameters)s
    Attributes
    ----------
    %(attributes)s
    See Also
    --------
    RNNClassifier : The same network for classification.

    Examples
    --------
    >>> import numpy as np
    >>> from sknet import RNNRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(300, 8, 1))
    >>> y = X[:, :, 0].cumsum(axis=1)[:, -1]  # the sum of the sequence
    >>> reg = RNNRegressor(units=(16,), learning_rate_init=0.01, early_stopping=True,
    ...                    random_state=0, device="cpu").fit(X, y)
    >>> reg.score(X, y) > 0.9
    True
    """

    _parameter_constraints: dict = {
        **_BaseRNN._parameter_constraints,
        **NetworkRegressorMixin._parameter_constraints,
    }

    def __init__(
        self,
        loss="squared_error",
        *,
        cell="lstm",
        units=(64,),
        bidirectional=False,
        dense_units=(),
        activation="relu",
        dropout=0.0,
        layers=None,
        input_shape=None,
        padding_value=None,
        clip_norm=5.0,
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
    ):
        self.loss = loss
        self.cell = cell
        self.units = units
        self.bidirectional = bidirectional
        self.dense_units = dense_units
        self.activation = activation
        self.dropout = dropout
        self.layers = layers
        self.input_shape = input_shape
        self.padding_value = padding_value
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
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks


fill_doc(
    RNNClassifier,
    parameters=(
        _RNN_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + CLASS_WEIGHT_DOC + CLASSIFIER_LOSS_DOC
    ),
    attributes=_RNN_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
)
fill_doc(
    RNNRegressor,
    loss=REGRESSOR_LOSS_DOC,
    parameters=_RNN_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC,
    attributes=_RNN_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
)

"""RNNClassifier and RNNRegressor: recurrent networks over sequences, a preset.

A preset of the network estimator: ``cell``, ``units``, ``bidirectional``,
``dense_units``, ``activation`` and ``dropout`` become a recurrent stack, and
a flat row becomes a sequence of one feature per step (or of token ids after
an ``Embedding``). ``layers`` replaces the preset's network.
"""

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from sknet.backend import ACTIVATIONS
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
from sknet.estimators._layer_list import positive_ints
from sknet.estimators._neural_net import NeuralNetClassifier, NeuralNetRegressor, _NeuralNet
from sknet.estimators._regressor import NetworkRegressorMixin
from sknet.layers import GRU, LSTM, Dense, Dropout, SimpleRNN

CELLS = {"lstm": LSTM, "gru": GRU, "rnn": SimpleRNN}

_RNN_PARAMETERS_DOC = (
    """
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
        the same result. ``None``: no padding. With it, ``X`` may be a list of
        sequences of different lengths (padded after each with this value),
        and ``predict`` takes sequences padded to any number of steps (or
        longer than in ``fit``: the recurrent layers run at that width): see
        :doc:`/user_guide/text`.

"""
    + GROUP_BY_LENGTH_DOC
    + """
    clip_norm : float or None, default=5.0
        Rescale each batch's gradient to at most this L2 norm (on the device,
        no synchronisation); ``None`` disables clipping.
"""
)

_RNN_ATTRIBUTES_DOC = """
    input_shape_ : tuple of int
        Shape of one sequence as the network sees it.
"""


class _RNNPreset:
    """What RNNClassifier and RNNRegressor add: a recurrent stack, sequences in.

    List it first in the bases, before the network estimator it presets.
    """

    _accept_sparse = False

    _preset_constraints: dict = {
        "cell": [StrOptions(set(CELLS))],
        "units": ["array-like", Interval(Integral, 1, None, closed="left")],
        "bidirectional": ["boolean"],
        "dense_units": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
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
    _max_X_ndim = 3
    _sample_noun = "sequences"

    def _check_params(self):
        if self.layers is None:
            positive_ints(self.units, "units", allow_empty=False)
        positive_ints(self.dense_units, "dense_units")
        super()._check_params()

    # -- sequences in ------------------------------------------------------------
    def _sample_shape(self, shape, name):
        values = tuple(positive_ints(shape, name, allow_empty=False))
        if len(values) not in (1, 2):
            raise ValueError(
                f"{name} must be (timesteps, features) or (timesteps,), got {shape!r}"
            )
        return values

    def _too_many_dims(self, shape):
        return (
            f"X of shape {shape}: expected sequences (n, timesteps, features) or flat "
            "rows (n, timesteps * features)"
        )

    def _default_input_shape(self, n_features):
        return (n_features,) if self._takes_token_ids() else (n_features, 1)

    # -- the network ----------------------------------------------------------------
    def _preset_layers(self):
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


class RNNClassifier(_RNNPreset, NeuralNetClassifier):
    """Recurrent neural-network classifier for sequences, on NumPy or a GPU.

    Sequences come as ``(n, timesteps, features)``, or flat rows with
    ``input_shape``; token ids as ``(n, timesteps)`` with an
    :class:`~sknet.layers.Embedding` first in ``layers`` (from raw text:
    :class:`~sknet.text.TextVectorizer`); with ``padding_value``, as a list of
    sequences of different lengths too, and of any length at ``predict``. Everything else is
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
    NeuralNetClassifier : The estimator this is a preset of, for any layers.

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
        **_NeuralNet._parameter_constraints,
        **NetworkClassifierMixin._parameter_constraints,
        **_RNNPreset._preset_constraints,
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
        group_by_length=False,
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
        self.cell = cell
        self.units = units
        self.bidirectional = bidirectional
        self.dense_units = dense_units
        self.activation = activation
        self.dropout = dropout
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


class RNNRegressor(_RNNPreset, NeuralNetRegressor):
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
    NeuralNetRegressor : The estimator this is a preset of, for any layers.

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
        **_NeuralNet._parameter_constraints,
        **NetworkRegressorMixin._parameter_constraints,
        **_RNNPreset._preset_constraints,
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
        group_by_length=False,
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
        weight_decay=0.01,
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

"""The tabular estimators' classes: parameters, defaults and docstrings.

What they do is in :mod:`sknet.estimators._tabular` (the column plan, the
standardized target) and :mod:`sknet.estimators._tabular_network` (the
layers); the defaults were chosen on the tables of
``benchmarks/tune_tabular.py``, none of which ``benchmarks/bench_tabular.py``
measures, except five tried first on the benchmark's tables (no dropout,
the ``'auto'`` rate and members, then the weights' average with a constant
rate and a patience of two epochs, which replaced the anneal: the tables
guide says how).
"""

from sknet.estimators._classifier import NetworkClassifierMixin
from sknet.estimators._docs import (
    CLASS_WEIGHT_DOC,
    CLASSIFIER_LOSS_DOC,
    FITTED_ATTRIBUTES_DOC,
    REGRESSOR_LOSS_DOC,
    TRAINING_PARAMETERS_DOC,
    fill_doc,
)
from sknet.estimators._neural_net import _NeuralNet
from sknet.estimators._regressor import NetworkRegressorMixin
from sknet.estimators._tabular import TabularMixin, TargetScaling, tabular_constraints
from sknet.tabular._encoder import PLAN_CODES_DOC, PLAN_COLUMNS_DOC, PLAN_FREQUENCY_DOC

TABULAR_PARAMETERS_DOC = """
    %(plan_columns)s
    numeric_embedding : {'piecewise_linear', 'periodic'} or None, \
default=${numeric_embedding}
        How each numeric column enters the network: a piecewise-linear
        encoding over ``n_bins`` quantile bins of the training values, each
        column's then through a linear layer of its own and a ReLU
        (:class:`~sknet.layers.PiecewiseLinearEncoding`, the Q-LR embedding of
        Gorishniy et al. 2022), a periodic embedding with trained frequencies
        (:class:`~sknet.layers.PeriodicEmbedding`, PLR), or the scaled value
        itself (``None``).

    n_bins : int, default=${n_bins}
        The most quantile bins per numeric column (``'piecewise_linear'``), at
        most 65536.

    d_embedding : int, default=${d_embedding}
        The size of each numeric column's embedding.

    categorical_dims : int, list of int or None, default=${categorical_dims}
        The size of each categorical column's embedding (one for all, or one
        per column, where the columns of ``numeric_codes`` then get their
        default); ``None``: :func:`~sknet.layers.embedding_size` of its
        number of categories.

    %(plan_frequency)s
    %(plan_codes)s
    hidden_layer_sizes : array-like of int, default=${hidden_layer_sizes}
        The units of each hidden layer of the MLP backbone (ReLU, then
        ``dropout``).

    activation : str, default=${activation}
        The hidden layers' activation (any of :data:`sknet.backend.ACTIVATIONS`).

    dropout : float, default=${dropout}
        Dropout rate after every hidden layer while training.

    n_members : int or 'auto', default=${n_members}
        Members of the parameter-efficient ensemble (TabM): they share every
        weight matrix and differ by rank-1 adapters and biases
        (:class:`~sknet.layers.EnsembleDense`), train at once on the mean of
        their losses, and predict the mean of their predictions. ``1``: a
        plain MLP. ``'auto'``: 4, and 3 on a large table (an epoch of at least
        100 batches: 20,000 training rows at the default batch size), where
        three members scored as well as four on the benchmark's two such
        tables in two thirds to three quarters of the time (the tables guide
        says how it was measured); ``n_members_`` is the number used.

    weight_averaging : float or None, default=${weight_averaging}
        Average the weights over about this many epochs as they train (an
        exponential moving average, updated after every step: each step
        keeps ``1 - 1 / (weight_averaging * batches per epoch)`` of it).
        The averaged weights are the ones validated, the ones early stopping
        keeps, the ones callbacks see at the end of an epoch and the ones
        the fit returns; training goes on from the stepped weights. ``None``:
        the last step's weights, as an MLP. ``partial_fit`` does not average.
        Half an epoch, with a constant rate and a patience of two epochs,
        scored better than annealing the rate after the plateau on the
        tuning tables, in fewer epochs (the tables guide says how it was
        measured).
"""

TABULAR_ATTRIBUTES_DOC = """
    encoder_ : TabularEncoder
        The column plan learned from the training rows: ``encoder_.categories_``,
        ``encoder_.is_categorical_``, ``encoder_.bins_``...

    n_members_ : int
        The members of the network (``n_members``, or what ``'auto'`` chose
        for the training rows).
"""

TARGET_DOC = """
    standardize_target : bool, default=${standardize_target}
        Train on ``(y - mean) / std`` of the training targets; ``predict``
        maps back. Needs a loss with an identity output (not ``'poisson'``);
        a Huber ``delta`` is then in units of the standard deviation.
"""

TARGET_ATTRIBUTES_DOC = """
    target_mean_, target_scale_ : ndarray of shape (n_outputs,)
        The training targets' mean and standard deviation (0 and 1 with
        ``standardize_target=False``).
"""


class TabularClassifier(TabularMixin, NetworkClassifierMixin, _NeuralNet):
    """Classifier for tables: a DataFrame in as it is, numeric and categorical embeddings.

    Takes numbers, categories (``category``, ``object``, string and ``bool``
    columns) and missing values as they come, in a pandas DataFrame or an
    array. ``fit`` learns from its training rows only how each column enters
    the network (``encoder_``: quantile-scaled numbers and their quantile
    bins, missing-value indicators, category codes with a code for missing
    and one for unknown), then trains piecewise-linear embeddings of the
    numbers and embeddings of the categories under an MLP of ``n_members``
    members sharing their weights (TabM's parameter-efficient ensemble),
    stopping early on a held-out part of the training rows and keeping its
    best epoch. Categories unseen in training and missing values at predict
    time are coded as such. Everything else is the contract of
    :class:`NeuralNetClassifier`: labels of any type, ``predict_proba``,
    ``partial_fit``, sample and class weights, callbacks, persistence, the
    device, data larger than it.

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
    TabularRegressor : The same estimator for regression.
    sknet.tabular.TabularEncoder : The column plan, usable alone.
    sklearn.ensemble.HistGradientBoostingClassifier : Boosting with native categories.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sknet import TabularClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame({"size": rng.normal(size=400),
    ...                   "color": rng.choice(["red", "blue", None], 400)})
    >>> y = np.where((X["size"] > 0) ^ (X["color"] == "red"), "yes", "no")
    >>> clf = TabularClassifier(random_state=0, device="cpu").fit(X, y)
    >>> clf.encoder_.categories_
    [array(['blue', 'red'], dtype=object)]
    >>> new = pd.DataFrame({"size": [2.0, -2.0, -2.0], "color": ["blue", "blue", "red"]})
    >>> clf.predict(new)
    array(['yes', 'no', 'yes'], dtype='<U3')
    >>> clf.predict_proba(pd.DataFrame({"size": [0.5], "color": ["green"]})).shape  # unseen
    (1, 2)
    """

    _parameter_constraints: dict = tabular_constraints(NetworkClassifierMixin)

    def __init__(
        self,
        *,
        categorical_features="from_dtype",
        numeric_scaling="quantile",
        numeric_embedding="piecewise_linear",
        n_bins=48,
        d_embedding=16,
        categorical_dims=None,
        min_frequency=None,
        numeric_codes=True,
        hidden_layer_sizes=(128, 128),
        activation="relu",
        dropout=0.0,
        n_members="auto",
        solver="adamw",
        alpha=0.0,
        batch_size="auto",
        learning_rate="constant",
        learning_rate_init="auto",
        power_t=0.5,
        max_iter=200,
        shuffle=True,
        random_state=None,
        tol=1e-4,
        verbose=False,
        warm_start=False,
        momentum=0.9,
        nesterovs_momentum=True,
        early_stopping=True,
        validation_fraction=0.1,
        scoring="loss",
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        weight_decay=0.0003,
        n_iter_no_change=2,
        weight_averaging=0.5,
        max_fun=15000,
        clip_norm=None,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
        class_weight=None,
        loss="log_loss",
        label_smoothing=0.0,
    ):
        self.categorical_features = categorical_features
        self.numeric_scaling = numeric_scaling
        self.numeric_embedding = numeric_embedding
        self.n_bins = n_bins
        self.d_embedding = d_embedding
        self.categorical_dims = categorical_dims
        self.min_frequency = min_frequency
        self.numeric_codes = numeric_codes
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.dropout = dropout
        self.n_members = n_members
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
        self.weight_averaging = weight_averaging
        self.max_fun = max_fun
        self.clip_norm = clip_norm
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks
        self.class_weight = class_weight
        self.loss = loss
        self.label_smoothing = label_smoothing


class TabularRegressor(TabularMixin, TargetScaling, NetworkRegressorMixin, _NeuralNet):
    """Regressor for tables: a DataFrame in as it is, numeric and categorical embeddings.

    The estimator of :class:`TabularClassifier` for real targets, trained on
    the standardized targets (``standardize_target``) and predicting on
    their scale.

    Parameters
    ----------
    %(loss)s
    %(parameters)s
    Attributes
    ----------
    %(attributes)s
    See Also
    --------
    TabularClassifier : The same estimator for classification.
    sknet.tabular.TabularEncoder : The column plan, usable alone.
    sklearn.ensemble.HistGradientBoostingRegressor : Boosting with native categories.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sknet import TabularRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame({"area": rng.uniform(20, 200, 500),
    ...                   "city": rng.choice(["paris", "lyon"], 500)})
    >>> y = X["area"] * np.where(X["city"] == "paris", 10.0, 4.0)
    >>> reg = TabularRegressor(random_state=0, device="cpu").fit(X, y)
    >>> round(reg.score(X, y), 2) > 0.95
    True
    >>> reg.target_mean_.round(1)  # it learns (y - mean) / std of its training rows
    array([752.])
    """

    _parameter_constraints: dict = {
        **tabular_constraints(NetworkRegressorMixin),
        "standardize_target": ["boolean"],
    }

    def __init__(
        self,
        *,
        loss="squared_error",
        standardize_target=True,
        categorical_features="from_dtype",
        numeric_scaling="quantile",
        numeric_embedding="piecewise_linear",
        n_bins=48,
        d_embedding=16,
        categorical_dims=None,
        min_frequency=None,
        numeric_codes=True,
        hidden_layer_sizes=(128, 128),
        activation="relu",
        dropout=0.0,
        n_members="auto",
        solver="adamw",
        alpha=0.0,
        batch_size="auto",
        learning_rate="constant",
        learning_rate_init="auto",
        power_t=0.5,
        max_iter=200,
        shuffle=True,
        random_state=None,
        tol=1e-4,
        verbose=False,
        warm_start=False,
        momentum=0.9,
        nesterovs_momentum=True,
        early_stopping=True,
        validation_fraction=0.1,
        scoring="loss",
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        weight_decay=0.0003,
        n_iter_no_change=2,
        weight_averaging=0.5,
        max_fun=15000,
        clip_norm=None,
        device="auto",
        max_device_memory=None,
        dtype="float32",
        callbacks=None,
    ):
        self.loss = loss
        self.standardize_target = standardize_target
        self.categorical_features = categorical_features
        self.numeric_scaling = numeric_scaling
        self.numeric_embedding = numeric_embedding
        self.n_bins = n_bins
        self.d_embedding = d_embedding
        self.categorical_dims = categorical_dims
        self.min_frequency = min_frequency
        self.numeric_codes = numeric_codes
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.dropout = dropout
        self.n_members = n_members
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
        self.weight_averaging = weight_averaging
        self.max_fun = max_fun
        self.clip_norm = clip_norm
        self.device = device
        self.max_device_memory = max_device_memory
        self.dtype = dtype
        self.callbacks = callbacks


_LEARNING_RATE_INIT_DOC = """
    learning_rate_init : float or 'auto', default=${learning_rate_init}
        Initial learning rate; ``'auto'``: 0.008 when an epoch has fewer than
        100 batches, else 0.004 (on the tables of ``benchmarks/bench_tabular.py``,
        the small ones, a few batches an epoch, train as well in fewer epochs
        at the higher rate, and the large ones lose at it; see the tables guide).
"""

_CLIP_DOC = """
    clip_norm : float or None, default=${clip_norm}
        Rescale each batch's gradient to at most this L2 norm; ``None``: no
        clipping.
"""

fill_doc(
    TabularClassifier,
    parameters=(
        TABULAR_PARAMETERS_DOC
        + TRAINING_PARAMETERS_DOC
        + _CLIP_DOC
        + CLASS_WEIGHT_DOC
        + CLASSIFIER_LOSS_DOC
    ),
    attributes=TABULAR_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
    plan_columns=PLAN_COLUMNS_DOC,
    plan_frequency=PLAN_FREQUENCY_DOC,
    plan_codes=PLAN_CODES_DOC,
    learning_rate_init=_LEARNING_RATE_INIT_DOC,
)
fill_doc(
    TabularRegressor,
    loss=REGRESSOR_LOSS_DOC + TARGET_DOC,
    parameters=TABULAR_PARAMETERS_DOC + TRAINING_PARAMETERS_DOC + _CLIP_DOC,
    attributes=TABULAR_ATTRIBUTES_DOC + TARGET_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
    plan_columns=PLAN_COLUMNS_DOC,
    plan_frequency=PLAN_FREQUENCY_DOC,
    plan_codes=PLAN_CODES_DOC,
    learning_rate_init=_LEARNING_RATE_INIT_DOC,
)

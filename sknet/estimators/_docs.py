"""The parameter and attribute lists every sknet estimator's docstring shares.

:func:`fill_doc` puts them into a class docstring at its ``%(name)s`` markers,
so each list is written once, and writes each default from the class's own
signature (``${name}`` in the lists), so each default is written once too.
"""

import inspect
import string

TRAINING_PARAMETERS_DOC = """
    solver : {'lbfgs', 'sgd', 'adam', 'adamw'}, default=${solver}
        ``'adam'``, ``'adamw'`` and ``'sgd'`` train by mini-batches on the
        backend; ``'lbfgs'`` (full batch, SciPy) often suits small datasets.
        ``'adamw'`` is Adam with decoupled weight decay (Loshchilov & Hutter),
        as ``torch.optim.AdamW``: see ``weight_decay``.

    alpha : float, default=${alpha}
        Strength of the L2 penalty, divided by the (weighted) batch size.

    batch_size : int or 'auto', default=${batch_size}
        Mini-batch size for the stochastic solvers; ``'auto'`` is
        ``min(200, n_samples)``.

    learning_rate : {'constant', 'invscaling', 'adaptive', 'anneal'}, default=${learning_rate}
        Learning-rate schedule. scikit-learn's three are for ``solver='sgd'``
        only. ``'anneal'`` (sknet's, every stochastic solver): the rate stays
        ``learning_rate_init`` until the score stops improving for
        ``n_iter_no_change`` epochs; then, from the best epoch's weights
        (with ``early_stopping``), two more half epochs (half the epoch's
        batches each, the first of its shuffled order) at 1/4 and 1/16 of
        the rate, and training stops.

    %(learning_rate_init)s

    power_t : float, default=${power_t}
        Exponent of ``'invscaling'``.

    max_iter : int, default=${max_iter}
        Maximum number of epochs (stochastic solvers) or iterations (lbfgs).

    shuffle : bool, default=${shuffle}
        Whether to shuffle samples in each epoch (stochastic solvers).

    random_state : int, RandomState instance or None, default=${random_state}
        Seeds the weight initialization, the shuffling, the dropout masks and
        the early-stopping split. Pass an int for reproducible results.

    tol : float, default=${tol}
        Tolerance: training stops when the loss (or validation score) does not
        improve by ``tol`` for ``n_iter_no_change`` epochs.

    verbose : bool or int, default=${verbose}
        True (or any positive int) prints scikit-learn's own lines:
        ``Iteration 1, loss = 0.69314718`` after every epoch, the validation
        score with ``early_stopping=True``, and the convergence messages. For
        a per-epoch table add :class:`~sknet.callbacks.PrintLog` to
        ``callbacks``; for a progress bar, :class:`~sknet.callbacks.ProgressBar`.

    warm_start : bool, default=${warm_start}
        Reuse the weights, and the optimizer's state, of the previous fit.

    momentum : float, default=${momentum}
        Momentum of ``solver='sgd'``.

    nesterovs_momentum : bool, default=${nesterovs_momentum}
        Whether ``'sgd'`` uses Nesterov's momentum.

    early_stopping : bool, default=${early_stopping}
        Hold out ``validation_fraction`` of the data (stratified for
        classification), or use ``X_val``/``y_val`` given to ``fit``, and stop
        when the validation score (see ``scoring``) stops improving; the
        weights of the best epoch are restored. A loss that becomes non-finite
        then ends training with those weights and a ``ConvergenceWarning``.

    validation_fraction : float, default=${validation_fraction}
        Size of the early-stopping validation set.

    scoring : str, callable or None, default=${scoring}
        The validation score (``valid_score``, ``validation_scores_``, and
        what early stopping watches): ``None`` is the estimator's ``score``
        (accuracy, or R² for regressors); ``'loss'`` the negative validation
        loss; any scikit-learn scorer name (``'balanced_accuracy'``,
        ``'neg_log_loss'``, ...) or callable ``scorer(estimator, X, y)``.

    beta_1, beta_2 : float, default=${beta_1}, ${beta_2}
        Decay rates of Adam's moment estimates.

    epsilon : float, default=${epsilon}
        Adam's numerical-stability constant.

    weight_decay : float, default=${weight_decay}
        AdamW's decoupled weight decay, ``solver='adamw'`` only (PyTorch's
        default): each step multiplies the weights by ``1 - learning_rate *
        weight_decay`` before Adam's update. It applies to the parameters
        ``alpha`` penalizes (weights, not biases); consider ``alpha=0`` with it.

    n_iter_no_change : int, default=${n_iter_no_change}
        Epochs without ``tol`` improvement before stopping.

    max_fun : int, default=${max_fun}
        Maximum number of loss evaluations, ``solver='lbfgs'`` only.

    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, default=${device}
        Where to train: ``'auto'`` is the ``SKNET_DEVICE`` environment variable
        if set, else the GPU when CuPy sees one, else the CPU.

    max_device_memory : int, str or None, default=${max_device_memory}
        The most device memory the fit may plan with, in bytes or as a string
        such as ``'8GB'`` or ``'512MiB'``; ``None``: what is free on a GPU (no
        limit on the CPU). When the training data, with the model, its
        optimizer state and a batch's activations, would not fit, ``fit`` and
        ``partial_fit`` keep the data in host memory and stream them to the
        device in chunks of many batches (``data_placement_``); the model is
        the same. A limit of ``estimate_memory(...).total`` keeps the data on
        the device (see :func:`sknet.utils.estimate_memory`). On the CPU it
        bounds what the fit allocates: data already in the fit's dtype are
        used in place and count nothing; others are converted chunk by chunk
        within the limit.

    dtype : {'float32', 'float64'}, default=${dtype}
        Floating type of the weights and of the computation.

    callbacks : list of Callback, default=${callbacks}
        Objects from :mod:`sknet.callbacks` (or your own) called during
        training, after the estimator's own rules; ``fit`` works on copies,
        stored in ``callbacks_``.
"""

LEARNING_RATE_INIT_DOC = """
    learning_rate_init : float, default=${learning_rate_init}
        Initial learning rate (``'sgd'``, ``'adam'`` and ``'adamw'``); a
        schedule such as :class:`~sknet.callbacks.LRScheduler` changes it.
"""

#: The sections a class's docstring gets unless it gives its own.
_SHARED_SECTIONS = {"learning_rate_init": LEARNING_RATE_INIT_DOC}

FITTED_ATTRIBUTES_DOC = """
    loss_ : float
        The loss at the end of training (with the L2 penalty).

    best_loss_ : float or None
        The minimum loss reached; ``None`` with ``early_stopping=True``.

    loss_curve_ : list of float
        The loss after each epoch (stochastic solvers only).

    validation_scores_ : list of float or None
        The validation score after each epoch with ``early_stopping=True``.

    best_validation_score_ : float or None
        The best validation score with ``early_stopping=True``.

    t_ : int
        Number of training samples seen by the solver.

    n_features_in_ : int
        Number of features seen during fit.

    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when ``X`` had string column names.

    n_iter_ : int
        Number of epochs (or lbfgs iterations) run by the last call to fit.

    n_outputs_ : int
        Number of outputs.

    out_activation_ : str
        Name of the output activation.

    network_ : Network
        The built network: its layers, the input shape they take, the backend
        they live on (sknet only).

    layers_ : list of Layer
        The built layers, ``network_.layers`` (sknet only).

    device_ : str
        The device the model was trained on, e.g. ``'cpu'`` or ``'cuda:0'``.

    data_placement_ : {'device', 'streamed'}
        Where the last fit kept the training data: moved to the device once,
        or kept in host memory and streamed to the device in chunks (when they
        did not fit; see ``max_device_memory``).

    history_ : list of dict
        One row per epoch (per iteration with lbfgs), across warm starts:
        ``epoch``, ``train_loss``, ``valid_loss`` and ``valid_score`` (with a
        validation set; the loss without the L2 term), ``learning_rate``,
        ``duration`` in seconds. ``valid_score`` is the ``scoring``.

    callbacks_ : list of Callback
        The copies of ``callbacks`` used by the last fit.
"""


def fill_doc(cls, **sections):
    """Put the shared parameter and attribute lists into ``cls``'s docstring.

    Each shared parameter line states its default as ``${name}``; it is
    written from ``cls.__init__``'s own default, so a preset whose defaults
    differ (a tabular estimator's batch size, early stopping...) says its own.
    """
    if not cls.__doc__:  # None under python -OO
        return
    doc = cls.__doc__
    sections = {**sections, **{k: v for k, v in _SHARED_SECTIONS.items() if k not in sections}}
    for name, text in sections.items():
        doc = doc.replace(f"    %({name})s", text.strip("\n") + "\n")
    defaults = {
        name: _default_text(p.default)
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    cls.__doc__ = string.Template(doc).safe_substitute(defaults)


def _default_text(value):
    """A default as the docs write it: ``'adam'``, ``0.0001``, ``1e-8``, ``(128, 128)``."""
    return repr(value).replace("e-0", "e-")


GROUP_BY_LENGTH_DOC = """\
    group_by_length : bool, default=False
        With ``padding_value``: each epoch's shuffled batches are grouped by
        sequence length (each pool of 50 batches sorted, longest first, the
        batches then shuffled) and each runs cut to the fewest steps that hold
        its longest sequence (the fitted width halved, as often as it holds,
        down to 8), on copies of the network sharing its weights; refused by
        ``DataParallel``. The padding is masked, so a batch's loss
        and gradient are the ones at the full width; what changes is which
        sequences share a batch. Saves the time the padding takes when the
        lengths differ widely (see :doc:`/user_guide/text`); needs a network
        whose weights do not depend on the number of steps. Data streamed from
        the host trains at the fitted width.
"""

CLASSIFIER_LOSS_DOC = """
    loss : {'log_loss', 'focal'} or Loss, default=${loss}
        The loss to minimize: the log-loss (scikit-learn's), ``'focal'``
        (:class:`~sknet.losses.FocalLoss`, ``gamma=2``, for rare classes), or
        any :class:`~sknet.losses.Loss` object, such as ``FocalLoss(gamma=1)``
        or your own subclass; grid-search its parameters as ``loss__gamma``.

    label_smoothing : float in [0, 1), default=${label_smoothing}
        With ``loss='log_loss'``, train on targets ``(1 - label_smoothing)``
        times the one-hot labels plus ``label_smoothing / n_classes`` (two
        classes for each logistic output), as PyTorch's ``cross_entropy``;
        0 is the plain log-loss. For a loss object, set it there
        (:class:`~sknet.losses.LogLoss` takes ``label_smoothing``).
"""

REGRESSOR_LOSS_DOC = """
    loss : {'squared_error', 'absolute_error', 'huber', 'quantile', \
'poisson'} or Loss, default=${loss}
        The loss to minimize (see :mod:`sknet.losses`): half the squared
        error, the absolute error (a median), Huber's loss
        (:class:`~sknet.losses.Huber`, ``delta=1``: robust to outliers), the
        pinball loss (:class:`~sknet.losses.Quantile`, ``quantile=0.5``; give
        ``Quantile(0.9)`` for the 90th percentile), half the Poisson deviance
        with a log link (exponential output; needs ``y >= 0``), or any
        :class:`~sknet.losses.Loss` object; grid-search its parameters as
        ``loss__delta``.
"""

CLIP_NORM_DOC = """
    clip_norm : float or None, default=${clip_norm}
        Rescale each batch's gradient to at most this L2 norm, over all the
        trained parameters at once (on the device, no synchronisation);
        ``None`` disables clipping.
"""

CLASS_WEIGHT_DOC = """
    class_weight : dict, 'balanced' or None, default=${class_weight}
        Weights of the classes, ``{label: weight}``, multiplied into
        ``sample_weight`` as in scikit-learn's linear models. ``'balanced'``
        uses ``n_samples / (n_classes * np.bincount(y))`` (not with
        ``partial_fit``, whose batches do not show the class frequencies).
        With early stopping, consider ``scoring='balanced_accuracy'``.
"""

"""Transfer learning: the layers of a fitted network, weights included."""

from numbers import Integral

from sklearn.base import clone
from sklearn.utils._param_validation import validate_params
from sklearn.utils.validation import check_is_fitted

from sknet.layers._tree import leaves


@validate_params({"trainable": ["boolean"]}, prefer_skip_nested_validation=True)
def from_estimator(estimator, upto=None, trainable=False):
    """Copies of a fitted network's layers that start from its weights.

    Use them at the bottom of a new network to reuse what ``estimator``
    learned::

        source = ConvNetClassifier().fit(X_big, y_big)
        target = ConvNetClassifier(layers=[*from_estimator(source),
                                           Dense(64, activation="relu")])
        target.fit(X_small, y_small)   # trains the new layers only

    How the weights travel: scikit-learn's ``clone`` (which ``GridSearchCV``,
    ``cross_validate`` and pipelines call) rebuilds an estimator from its
    constructor parameters and drops every fitted attribute, so weights kept
    in a fitted attribute would be lost. Each returned layer therefore holds
    its weights in its own constructor parameter ``weights`` (a dict of
    NumPy arrays by parameter name, running statistics included), which
    ``clone`` copies, ``set_params`` can replace and pickling keeps; building
    the layer loads them instead of drawing random ones, and a shape that
    does not fit (another image size or number of channels) is a
    ``ValueError`` naming the layer and both shapes. ``trainable`` and
    ``lr_scale`` are ordinary parameters of the copies, so a grid search can
    try ``layers__0__trainable`` or ``layers__0__lr_scale``, and a warm start
    can unfreeze a layer.

    Parameters
    ----------
    estimator : fitted sknet estimator
        Any of sknet's estimators (MLP, ConvNet, RNN), fitted.
    upto : int, default=None
        Keep ``estimator.layers_[:upto]``; ``None`` keeps every layer before
        the output layer. Negative values count from the end, as in slicing.
    trainable : bool, default=False
        The ``trainable`` of the copies that have parameters: ``False``
        freezes them (train only what you add); ``True`` fine-tunes them
        (combine with a small ``lr_scale``).

    Returns
    -------
    layers : list of Layer
        Unbuilt layers, of the same types and parameters as the fitted ones.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sknet import ConvNetClassifier
    >>> from sknet.layers import Dense, from_estimator
    >>> X, y = load_digits(return_X_y=True)
    >>> source = ConvNetClassifier(conv_filters=(4,), dense_units=(16,), tol=1.0,
    ...                            n_iter_no_change=1, random_state=0,
    ...                            device="cpu").fit(X / 16, y)
    >>> layers = from_estimator(source)
    >>> [type(layer).__name__ for layer in layers]
    ['Conv2D', 'MaxPool2D', 'Flatten', 'Dense']
    >>> layers[0].trainable, sorted(layers[0].weights)
    (False, ['W', 'b'])
    """
    _check_network_estimator(estimator)
    check_is_fitted(estimator)
    fitted = list(estimator.layers_)
    if upto is None:
        upto = len(fitted) - 1
    elif not isinstance(upto, Integral) or isinstance(upto, bool):
        raise ValueError(f"upto must be an int or None, got {upto!r}")
    kept = fitted[:upto]
    if not kept:
        raise ValueError(
            f"upto={upto!r} keeps no layer of the {len(fitted)} in "
            f"{type(estimator).__name__}.layers_"
        )
    backend = estimator.network_.backend
    return [_copy_with_weights(layer, backend, trainable) for layer in kept]


def _check_network_estimator(estimator):
    """A TypeError naming what ``estimator`` is unless it is one of sknet's network estimators.

    sknet's estimators are recognized by what they do (building a layer list
    and the network's input shape), since layers may not import them.
    """
    if all(callable(getattr(estimator, name, None)) for name in ("_build_layers", "_initialize")):
        return
    kind = type(estimator)
    hint = " (a DataParallel: pass its to_local())" if hasattr(estimator, "to_local") else ""
    raise TypeError(
        "from_estimator takes a fitted sknet estimator (MLPClassifier, ConvNetRegressor, "
        f"NeuralNetClassifier, ...){hint}, got {kind.__module__}.{kind.__qualname__}"
        f"{'' if isinstance(estimator, type) else f' {estimator!r:.60}'}"
    )


def _copy_with_weights(layer, backend, trainable):
    inner = layer.sublayers()  # the layer tree: a container keeps its kind, with copied blocks
    copy = clone(layer)
    if inner:
        copy = layer._copy_with([_copy_with_weights(block, backend, trainable) for block in inner])
        if not any(node is layer for _, node in leaves([layer])):
            return copy  # its arrays are its blocks' (a stock container)
    params = copy.get_params(deep=False)
    arrays = {**layer.params, **layer.state}
    if arrays and "weights" not in params:
        raise ValueError(
            f"{type(layer).__name__} has parameters but no `weights` constructor "
            "parameter, so its weights cannot travel with it; add weights=None to its "
            "__init__ (the network loads them when it builds the layer)"
        )
    if arrays:
        copy.set_params(weights={k: backend.to_numpy(v).copy() for k, v in arrays.items()})
    if arrays and "trainable" in params:
        copy.set_params(trainable=trainable)
    return copy

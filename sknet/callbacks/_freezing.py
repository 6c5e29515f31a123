"""Frozen layers during a fit: Unfreeze trains a new head first, then everything."""

import math
from numbers import Integral as _Integral
from numbers import Real as _Real

from sknet.engine._callbacks import Callback
from sknet.layers._constraints import Count as _Count
from sknet.layers._constraints import Number as _Number
from sknet.layers._tree import leaves as _leaves
from sknet.layers._tree import set_flags as _set_flags


class Unfreeze(Callback):
    """Unfreeze frozen layers at a given epoch: train the new head first, then all.

    The usual schedule for fine-tuning a reused network (see
    :func:`sknet.layers.from_estimator`): the pretrained layers stay frozen
    while the new layers learn, then train too, typically with a small
    ``lr_scale``. Unfrozen parameters start with fresh optimizer state; the
    others keep theirs. A container (``Sequential``, ``Residual``, what
    :func:`~sknet.layers.from_estimator` returns for one) unfreezes with
    every layer inside it. The estimator's ``layers`` parameter is not
    changed: the next fit starts frozen again.

    Parameters
    ----------
    epoch : int, default=5
        The layers train from this epoch on, counted from 1 in each call to
        ``fit`` (with ``epoch=3``, epochs 1 and 2 train the other layers
        only), whatever earlier fits of a warm start ran.
    layers : list of int or None, default=None
        Indices into ``layers_`` of the layers to unfreeze (with everything
        inside them); ``None``: every layer with frozen parameters.
    lr_scale : float or None, default=None
        If given, the ``lr_scale`` (a positive number) of the unfrozen layers.

    Attributes
    ----------
    unfrozen_ : list of int
        The indices into ``layers_`` of the layers this callback unfroze in
        the last fit.

    Examples
    --------
    Train a new head on a frozen hidden layer for one epoch, then everything:

    >>> from sklearn.datasets import load_digits
    >>> from sknet import ConvNetClassifier
    >>> from sknet.callbacks import Unfreeze
    >>> from sknet.layers import Dense, Flatten
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = X[:200] / 16, y[:200]
    >>> layers = [Flatten(), Dense(16, activation="relu", trainable=False)]
    >>> clf = ConvNetClassifier(layers=layers, tol=1.0, n_iter_no_change=1, random_state=0,
    ...                         device="cpu", callbacks=[Unfreeze(epoch=2)]).fit(X, y)
    >>> clf.callbacks_[0].unfrozen_
    [1]
    >>> clf.layers_[1].trainable, clf.layers[1].trainable
    (True, False)
    """

    _parameter_constraints: dict = {
        "epoch": [_Count(1)],
        "layers": [list, tuple, None],
        "lr_scale": [_Number(0, None), None],
    }

    def __init__(self, epoch=5, layers=None, lr_scale=None):
        self.epoch = epoch
        self.layers = layers
        self.lr_scale = lr_scale

    def on_train_begin(self, state):
        if not isinstance(self.epoch, _Integral) or isinstance(self.epoch, bool) or self.epoch < 1:
            raise ValueError(f"Unfreeze: epoch must be a positive int, got {self.epoch!r}")
        if self.lr_scale is not None and (
            not isinstance(self.lr_scale, _Real)
            or isinstance(self.lr_scale, bool)
            or not math.isfinite(self.lr_scale)
            or self.lr_scale <= 0
        ):
            raise ValueError(
                f"Unfreeze: lr_scale must be a positive number or None, got {self.lr_scale!r}"
            )
        state.require_optimizer("Unfreeze")
        n = len(state.network.layers)
        if self.layers is not None and not all(
            isinstance(i, _Integral) and not isinstance(i, bool) and -n <= i < n
            for i in self.layers
        ):
            raise ValueError(f"Unfreeze: layers={self.layers!r} is out of range for {n} layers")
        self._first = len(state.history) + 1
        self.unfrozen_ = []

    def on_epoch_begin(self, state, epoch):
        if epoch - self._first + 1 != self.epoch:
            return
        layers = state.network.layers
        indices = range(len(layers)) if self.layers is None else self.layers
        for i in indices:
            frozen = [
                leaf for _, leaf in _leaves([layers[i]]) if leaf.params and not leaf.trainable
            ]
            if not frozen:
                continue
            _set_flags(layers[i], trainable=True, lr_scale=self.lr_scale)
            self.unfrozen_.append(i % len(layers))
        if self.unfrozen_:
            state.update_trainable()

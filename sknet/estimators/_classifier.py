"""What every sknet classifier shares: labels in, labels out, probabilities.

:class:`NetworkClassifierMixin` turns a :class:`~sknet.estimators._base.BaseNeuralNetwork`
into a classifier with scikit-learn's MLP rules: a ``LabelBinarizer`` encodes
``y`` (softmax outputs for multiclass, logistic for binary and multilabel),
``predict`` returns labels of the type given, ``partial_fit`` takes
``classes=`` on its first call.
"""

import math
from numbers import Real

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import (
    check_classification_targets,
    type_of_target,
    unique_labels,
)

from sknet.backend import get_array_module, is_device_array
from sknet.engine._validation import check_finite
from sknet.losses import CLASSIFIER_LOSSES, LogLoss, Loss, estimator_loss


def _check_partial_fit_first_call(clf, classes):
    """Set ``clf.classes_`` on the first call to partial_fit (sklearn's rule)."""
    if getattr(clf, "classes_", None) is None and classes is None:
        raise ValueError("classes must be passed on the first call to partial_fit.")
    if classes is not None:
        if getattr(clf, "classes_", None) is not None:
            if not np.array_equal(clf.classes_, unique_labels(classes)):
                raise ValueError(
                    f"`classes={classes!r}` is not the same as on last call to "
                    f"partial_fit, was: {clf.classes_!r}"
                )
        else:
            return True
    return False


def _check_class_weight_values(class_weight):
    """Every weight of a ``class_weight`` dict a finite number >= 0 (as sample_weight's)."""
    for label, weight in class_weight.items():
        if (
            isinstance(weight, (bool, np.bool_))
            or not isinstance(weight, Real)
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise ValueError(
                "class_weight must map classes to finite numbers >= 0, got "
                f"{weight!r} for class {label!r}"
            )


class NetworkClassifierMixin(ClassifierMixin):
    """Classification on top of BaseNeuralNetwork; list it first in the bases."""

    _parameter_constraints: dict = {
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "loss": [StrOptions(set(CLASSIFIER_LOSSES)), Loss],
        "label_smoothing": [Interval(Real, 0, 1, closed="left")],
    }

    def _class_sample_weight(self, Y, incremental):
        """``class_weight`` as per-sample weights, multiplied into sample_weight."""
        if self.class_weight is None:
            return None
        if incremental and self.class_weight == "balanced":
            raise ValueError(
                "class_weight='balanced' is not supported by partial_fit: the class "
                "frequencies of one batch are not those of the data. Compute them once "
                "with sklearn.utils.class_weight.compute_class_weight and pass a dict."
            )
        if isinstance(self.class_weight, dict):
            _check_class_weight_values(self.class_weight)
        if self._label_binarizer.y_type_ == "multilabel-indicator":
            y = Y.astype(np.int64)
        else:
            y = self.classes_[Y[:, 0].astype(np.int64) if Y.shape[1] == 1 else Y.argmax(axis=1)]
        weights = compute_sample_weight(self.class_weight, y)
        check_finite(weights, self._np_dtype, "class_weight")
        if not np.any(weights > float(np.finfo(self._np_dtype).smallest_subnormal) / 2):
            raise ValueError(
                f"class_weight={self.class_weight!r} gives every sample zero weight in the "
                f"model's dtype {self._np_dtype.name}: there is nothing to learn"
            )
        return weights

    def _make_loss(self):
        # A classifier's loss outputs probabilities: refused otherwise, before training.
        return estimator_loss(self._smoothed_loss(), self._label_binarizer.y_type_, self)

    def _smoothed_loss(self):
        """``loss``, with ``label_smoothing`` when it is the log-loss by name."""
        smoothing = getattr(self, "label_smoothing", 0.0)
        if not smoothing:
            return self.loss
        if isinstance(self.loss, str) and self.loss == "log_loss":
            return LogLoss(label_smoothing=smoothing)
        raise ValueError(
            f"label_smoothing={smoothing!r} applies to loss='log_loss', but loss is "
            f"{self.loss!r}: give the loss object its own smoothing (such as "
            "LogLoss(label_smoothing=...)), or set label_smoothing=0."
        )

    def _validate_input(self, X, y, incremental, reset, names=("X", "y")):
        X, y = self._validate_Xy(X, y, reset, names=names)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        # The rules of sklearn's MLP: (re)define classes_ on a fresh fit, else
        # check that y's classes are compatible with the ones already seen.
        if not hasattr(self, "classes_") or (not self.warm_start and not incremental):
            self._label_binarizer = LabelBinarizer()
            self._label_binarizer.fit(y)
            self.classes_ = self._label_binarizer.classes_
        else:
            classes = unique_labels(y)
            if self.warm_start and not incremental:
                if set(classes) != set(self.classes_):
                    raise ValueError(
                        "warm_start can only be used where `y` has the same "
                        "classes as in the previous call to fit. Previously "
                        f"got {self.classes_}, `y` has {classes}"
                    )
            elif len(np.setdiff1d(classes, self.classes_, assume_unique=True)):
                raise ValueError(
                    "`y` has classes not in `self.classes_`. "
                    f"`self.classes_` has {self.classes_}. 'y' has {classes}."
                )
        if self._label_binarizer.y_type_ != "multilabel-indicator" and len(self.classes_) < 2:
            only = self.classes_[0]
            only = only.item() if isinstance(only, np.generic) else only
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in "
                f"the data, but the data contains only one class: {only!r}"
            )
        Y = self._label_binarizer.transform(y).astype(bool)
        self._make_loss().check_target(Y)  # the loss fits the targets (and the estimator)
        return X, Y

    def _stratify_labels(self, Y):
        if self._label_binarizer.y_type_ == "multilabel-indicator":
            return None
        return Y[:, 0] if Y.shape[1] == 1 else Y.argmax(axis=1)

    def _labels_from_outputs(self, P):
        if is_device_array(P):
            return self._device_labels(P)
        if self.n_outputs_ == 1:
            P = P.ravel()
        return self._label_binarizer.inverse_transform(P)

    def _device_labels(self, P):
        """Labels for CuPy outputs: on the device when the classes are numbers."""
        xp = get_array_module(P)
        if self._label_binarizer.y_type_ == "multilabel-indicator":
            return (P > 0.5).astype(np.int64)
        if np.asarray(self.classes_).dtype.kind not in "biuf":  # strings stay on the host
            return self._labels_from_outputs(P.get())
        winner = (P[:, 0] > 0.5).astype(np.int64) if self.n_outputs_ == 1 else P.argmax(axis=1)
        return xp.asarray(self.classes_)[winner]

    def _validation_score(self, Y_true, P, sample_weight):
        y_true = self._decode_targets(Y_true)
        return accuracy_score(y_true, self._labels_from_outputs(P), sample_weight=sample_weight)

    def _decode_targets(self, Y):
        return self._labels_from_outputs(Y.astype(np.float64))

    @available_if(lambda est: est._check_solver())
    def partial_fit(
        self,
        X,
        y,
        sample_weight=None,
        classes=None,
        *,
        X_val=None,
        y_val=None,
        sample_weight_val=None,
        validation_data=None,
    ):
        """Update the model with a single epoch over the given data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.
        y : array-like of shape (n_samples,) or (n_samples, n_classes)
            The target labels (or label indicator matrix for multilabel).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.
        classes : array-like of shape (n_classes,), default=None
            All classes across calls to partial_fit, ``np.unique(y_all)``.
            Required on the first call, may be omitted afterwards; not needed
            for a label indicator matrix (multilabel), whose columns are the
            classes.
        X_val, y_val, sample_weight_val : array-like, default=None
            A validation set scored after the epoch, recorded in ``history_``.
        validation_data : tuple, default=None
            Deprecated: ``(X_val, y_val[, sample_weight_val])``.

        Returns
        -------
        self : object
            The updated estimator.
        """
        self._validate_params()
        multilabel = type_of_target(y).startswith("multilabel")
        if multilabel and classes is None and getattr(self, "classes_", None) is None:
            # A label indicator matrix names its classes by its columns.
            classes = np.arange(np.shape(y)[1])
        first_call = _check_partial_fit_first_call(self, classes)
        try:
            if first_call:
                binarizer = LabelBinarizer()
                binarizer.fit(y if multilabel else classes)
                self._label_binarizer = binarizer
                self.classes_ = binarizer.classes_
            return self._fit(
                X, y, sample_weight, True, (X_val, y_val, sample_weight_val, validation_data)
            )
        except BaseException:
            if first_call:  # a failed first call leaves no classes behind
                for name in ("classes_", "_label_binarizer"):
                    self.__dict__.pop(name, None)
            raise

    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_classes)
            The predicted classes (a label indicator matrix for multilabel).
        """
        X = self._validate_X_predict(X)
        return self._labels_from_outputs(self._predict_outputs(X))

    def predict_proba(self, X):
        """Probability estimates.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.

        Returns
        -------
        y_prob : ndarray of shape (n_samples, n_classes)
            Probability of each class, in the order of ``classes_``.
        """
        X = self._validate_X_predict(X)
        P = self._predict_outputs(X)
        xp = get_array_module(P)
        if self.n_outputs_ == 1:
            p = P[:, 0]
            P = xp.stack([1 - p, p], axis=1)
        # Probabilities that underflow stay at the smallest normal number, so
        # log(predict_proba) is finite, like predict_log_proba.
        return xp.maximum(P, np.finfo(P.dtype).tiny, out=P)

    def predict_log_proba(self, X):
        """Log of probability estimates, ``log(predict_proba(X))``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.

        Returns
        -------
        log_y_prob : ndarray of shape (n_samples, n_classes)
            Finite: probabilities never underflow to 0 (they stop at the
            smallest normal number of the model's dtype, ``log`` of which is
            about -87 in float32).
        """
        y_prob = self.predict_proba(X)
        return np.log(y_prob, out=y_prob)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags

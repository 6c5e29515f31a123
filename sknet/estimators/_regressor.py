"""What every sknet regressor shares: float targets, R² scores, outputs as given."""

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils import column_or_1d
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if

from sknet.engine._validation import check_finite
from sknet.losses import REGRESSOR_LOSSES, Loss, estimator_loss


class NetworkRegressorMixin(RegressorMixin):
    """Regression on top of BaseNeuralNetwork; list it first in the bases."""

    _parameter_constraints: dict = {
        "loss": [StrOptions(set(REGRESSOR_LOSSES)), Loss],
    }

    def _make_loss(self):
        # A classification loss is refused, before training.
        return estimator_loss(self.loss, "continuous", self)

    def _validate_input(self, X, y, incremental, reset, names=("X", "y")):
        X, y = self._validate_Xy(X, y, reset, names=names, y_numeric=True)
        check_finite(y, self._np_dtype, names[1])  # the targets, in the model's dtype
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        Y = y.reshape(-1, 1) if y.ndim == 1 else y
        self._make_loss().check_target(Y)
        return X, Y

    def _validation_score(self, Y_true, P, sample_weight):
        return r2_score(Y_true, P, sample_weight=sample_weight)

    def _decode_targets(self, Y):
        return Y.ravel() if Y.shape[1] == 1 else Y

    @available_if(lambda est: est._check_solver())
    def partial_fit(
        self,
        X,
        y,
        sample_weight=None,
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
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.
        X_val, y_val, sample_weight_val : array-like, default=None
            A validation set scored after the epoch, recorded in ``history_``.
        validation_data : tuple, default=None
            Deprecated: ``(X_val, y_val[, sample_weight_val])``.

        Returns
        -------
        self : object
            The updated estimator.
        """
        return self._fit(
            X, y, sample_weight, True, (X_val, y_val, sample_weight_val, validation_data)
        )

    def predict(self, X):
        """Predict using the multi-layer perceptron.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input data.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            The predicted values.
        """
        X = self._validate_X_predict(X)
        P = self._predict_outputs(X)
        return P.ravel() if P.shape[1] == 1 else P

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Multi-output regression works in any dtype, but scikit-learn's tag
        # also promises float64 predictions, which only a float64 model makes.
        tags.target_tags.multi_output = self._np_dtype == np.float64
        return tags

"""FeatureExtractor: a fitted network's hidden activations as a transformer."""

import math
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, TransformerMixin, clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

from sknet.engine._validation import warn_non_finite_outputs
from sknet.estimators._sequence_input import outputs_by_width


class FeatureExtractor(MetaEstimatorMixin, TransformerMixin, BaseEstimator):
    """The activations of a layer of a network, as features for any model.

    ``fit`` fits a clone of ``estimator`` (any sknet estimator) on ``X, y``,
    or, given a fitted one inside scikit-learn's
    :class:`~sklearn.frozen.FrozenEstimator`, uses it as it is. ``transform``
    returns the outputs of one of its layers, flattened to one row per
    sample: a network becomes a feature step of a ``Pipeline`` or a
    ``ColumnTransformer``.

    Parameters
    ----------
    estimator : sknet estimator or FrozenEstimator
        The network. Not modified: ``fit`` works on a clone.
    layer : int, default=-1
        Which layer's outputs: an index into the layers before the output
        layer (``estimator_.layers_[:-1]``), so ``-1`` is the last hidden
        layer and ``0`` the first.

    Attributes
    ----------
    estimator_ : sknet estimator
        The fitted network.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when ``X`` had string column names.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sknet import FeatureExtractor, MLPClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> net = MLPClassifier(hidden_layer_sizes=(32,), tol=1e-2, n_iter_no_change=2,
    ...                     random_state=0, device="cpu")
    >>> pipe = make_pipeline(FeatureExtractor(net), LogisticRegression(max_iter=500))
    >>> pipe.fit(X / 16, y)[0].transform(X[:2] / 16).shape
    (2, 32)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "layer": [Integral],
    }

    def __init__(self, estimator, layer=-1):
        self.estimator = estimator
        self.layer = layer

    def fit(self, X, y=None, **fit_params):
        """Fit the network (unless frozen) and choose the layer.

        Parameters
        ----------
        X : array-like
            The input, as the network takes it.
        y : array-like, default=None
            The targets of the network.
        **fit_params : dict
            Passed to the network's ``fit`` (e.g. ``sample_weight``).

        Returns
        -------
        self : object
        """
        self._validate_params()
        if isinstance(self.estimator, FrozenEstimator):
            fitted = self.estimator.estimator
            check_is_fitted(fitted)
        else:
            fitted = clone(self.estimator).fit(X, y, **fit_params)
        if not hasattr(fitted, "network_"):
            raise TypeError(
                f"FeatureExtractor needs an sknet estimator, got {type(fitted).__name__}"
            )
        hidden = len(fitted.layers_) - 1
        if not -hidden <= self.layer < hidden:
            raise ValueError(
                f"layer={self.layer} is out of range: this {type(fitted).__name__} has "
                f"{hidden} layer(s) before its output layer"
            )
        self.estimator_ = fitted
        self._stop = self.layer % hidden + 1
        self.n_features_in_ = fitted.n_features_in_
        if hasattr(fitted, "feature_names_in_"):
            self.feature_names_in_ = fitted.feature_names_in_
        self._n_features_out = math.prod(fitted.layers_[self._stop - 1].output_shape_)
        return self

    def transform(self, X):
        """The chosen layer's outputs, one flat row per sample.

        Parameters
        ----------
        X : array-like
            The input, as the network takes it.

        Returns
        -------
        features : ndarray of shape (n_samples, n_features_out)
            In the network's dtype (NumPy for NumPy input, CuPy for CuPy
            input on a GPU model).
        """
        check_is_fitted(self)
        X = self.estimator_._validate_X_predict(X)

        def features(network, rows):  # (sequences longer than fitted: a wider network)
            Z = network.predict(rows, stop=self._stop)
            warn_non_finite_outputs(network, rows, Z, "The features", stop=self._stop)
            return Z

        Z = outputs_by_width(self.estimator_, X, features)
        return Z.reshape(Z.shape[0], -1)

    def get_feature_names_out(self, input_features=None):
        """``featureextractor0``, ``featureextractor1``, ... (one per output value)."""
        check_is_fitted(self)
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self._n_features_out)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        network = getattr(self.estimator, "estimator", self.estimator)  # FrozenEstimator
        # Features come in the network's dtype (float32 by default), whatever X's.
        tags.transformer_tags.preserves_dtype = [np.dtype(network.dtype).name]
        return tags

"""What an estimator accepts: ``X``, ``y`` and the sample weights, checked on the host.

A mixin of :class:`~sknet.estimators._base.BaseNeuralNetwork`. The data are
validated with scikit-learn's rules and messages (``validate_data``), in the
dtypes the model accepts (:meth:`~InputValidationMixin._X_dtype`), and
checked finite in the dtype the model computes in: a float64 value beyond
float32's range is refused by name before a float32 fit. The sample weights
of a fit are checked and multiplied by the weights ``class_weight`` gives
each row (classifiers). Subclasses adapt the dtypes (token ids are integers),
the sparse formats (``_accept_sparse``) and the checks of ``X``. What a fit
learns of its training rows before the network (a table's column plan, a
target's scale: the tabular estimators) is learned after the early-stopping
split and applied to every set of rows (:meth:`InputValidationMixin._learn_plan`).
"""

import numpy as np
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from sknet.backend import is_device_array
from sknet.engine._validation import (
    check_device_X,
    check_finite,
    check_positive_weights,
    check_sample_weight,
)


class InputValidationMixin:
    """Validation of ``X``, ``y`` and the sample weights (a mixin of BaseNeuralNetwork)."""

    #: the sparse formats X may come in (``False``: dense only)
    _accept_sparse = ["csr", "csc"]

    def _X_dtype(self):
        """The dtypes ``X`` is validated into (token ids override: integers)."""
        return [self._np_dtype.type, np.float64, np.float32]

    def _validate_X_predict(self, X):
        """``X`` of a prediction, checked against the fitted features (no reset).

        Parameters
        ----------
        X : {array-like, sparse matrix, device array} of shape (n_samples, n_features)
            The input; a device array (CuPy) is checked where it is.

        Returns
        -------
        X : array or sparse matrix
            ``X`` in one of :meth:`_X_dtype`, its values finite in the model's dtype.
        """
        check_is_fitted(self)
        if is_device_array(X):
            return check_device_X(self, X)
        X = validate_data(
            self,
            X,
            accept_sparse=self._accept_sparse,
            dtype=self._X_dtype(),
            ensure_all_finite=False,  # checked in the model's dtype, below
            reset=False,
        )
        check_finite(X, self._np_dtype, "X")
        return X

    def _validate_Xy(self, X, y, reset, names=("X", "y"), **kwargs):
        """``X`` and ``y`` of a fit (or a validation set), as scikit-learn checks them.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The input.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The targets, not yet encoded.
        reset : bool
            Whether ``X`` sets ``n_features_in_`` (a first fit) or is checked
            against it.
        names : tuple of str, default=('X', 'y')
            The arrays' names in error messages (``X_val``, ``y_val``).
        **kwargs : dict
            Passed to scikit-learn's ``validate_data`` (``y_numeric=True``).

        Returns
        -------
        X, y : arrays
            The validated arrays; ``X``'s values finite in the model's dtype.
        """
        if names[1] != "y":  # scikit-learn's check of y would call it y
            check_array(
                y,
                accept_sparse="csr",
                ensure_2d=False,
                dtype=None,
                input_name=names[1],
                estimator=self,
            )
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=self._accept_sparse,
            multi_output=True,
            dtype=self._X_dtype(),
            ensure_all_finite=False,  # checked in the model's dtype, below
            reset=reset,
            **kwargs,
        )
        check_finite(X, self._np_dtype, names[0])
        return X, y

    # -- the plan: what a fit learns of its training rows before the network ---------
    def _split_before_plan(self, Y, rng, validation_args, incremental):
        """``(train_rows, val_rows)`` when the early-stopping rows must leave before the plan.

        ``None`` (the base): the estimator learns no plan, and the early-stopping
        split is drawn after the weights, in scikit-learn's MLP's order.
        """
        return None

    def _learn_plan(self, X, Y, sample_weight, rows):
        """Learn, from the training rows ``rows`` of validated ``X``/``Y``, what the
        network's inputs and targets are made of (the base learns nothing).

        ``sample_weight`` is the user's (checked, without class weights) or None.
        """

    def _size_network(self, n_train):
        """Learn what the network's size follows from the fit's ``n_train`` training rows.

        Called by the plan with the rows it learns from, and by the memory
        estimate, whose probe learns the plan from a sample of the rows
        (the base: nothing; a tabular estimator's ``n_members='auto'``).
        """

    def _apply_plan(self, X, Y):
        """``X`` and ``Y`` as the network takes them, by the learned plan (the base: as is)."""
        return X, Y

    def _model_data(self, X, y, incremental, reset, names=("X", "y")):
        """``X``, ``y`` validated, the plan learned from all rows (``reset``) and applied.

        For what needs the network's inputs outside a fit's own order: a validation
        set (``reset=False``) and the memory estimate.
        """
        X, Y = self._validate_input(X, y, incremental, reset, names=names)
        if reset:
            self._learn_plan(X, Y, None, slice(None))
        return self._apply_plan(X, Y)

    def _fit_sample_weight(self, sample_weight, n_samples, Y, incremental):
        """The weights a fit trains with: ``sample_weight`` times the class weights.

        Parameters
        ----------
        sample_weight : array-like of shape (n_samples,), float or None
            The weights the user gave.
        n_samples : int
            The number of rows of ``X``.
        Y : ndarray of shape (n_samples, n_outputs)
            The encoded targets (the class of each row).
        incremental : bool
            Whether the fit is a ``partial_fit``.

        Returns
        -------
        sample_weight : ndarray of shape (n_samples,) or None
            In the model's dtype; ``None`` when every row weighs the same.
        """
        sample_weight = check_sample_weight(sample_weight, n_samples, self._np_dtype)
        class_weight = self._class_sample_weight(Y, incremental)
        if class_weight is None:
            return sample_weight
        if sample_weight is None:
            return class_weight
        sample_weight = sample_weight * class_weight
        check_finite(sample_weight, self._np_dtype, "sample_weight * class_weight")
        check_positive_weights(sample_weight, self._np_dtype, "sample_weight * class_weight")
        return sample_weight

    def _class_sample_weight(self, Y, incremental):
        """Per-sample weights from ``class_weight`` (classifiers override)."""
        return None

"""scikit-learn's own estimator checks, on every sknet estimator.

Every check runs on each estimator with its default parameters (float32), and
again with ``dtype="float64"``. Three checks compare results at ``rtol=1e-7``
whatever the dtype, below float32's resolution (``eps = 1.2e-7``), and run in
float64 only:

- the two sample-weight-equivalence checks (a weighted fit against a fit on
  repeated rows), which pass in float64 with the default solver;
- the sample-order-invariance check: float32 matrix products (OpenBLAS) round
  a row differently by one ulp depending on its position in the batch.

``tests/estimators/test_mlp.py`` and ``tests/estimators/test_convnet.py`` check the same properties
in float32 at a float32 tolerance. For RNNClassifier the sample-weight check
also uses ``solver="sgd"``, as scikit-learn's own suite configures its MLPs for
this check: over 200 epochs, Adam amplifies the last-bit differences between a
weighted and a repeated batch chaotically (measured: 1e-14 after 50 epochs,
2e-2 after 100, in float64). The tabular estimators check the sample-weight
equivalence without their held-out split and dropout, which draw from the rows
themselves (a repeated row is not a weighted one there). Nothing is marked as
expected to fail.
"""

import pytest
from sklearn.base import clone
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from sknet import (
    ConvNetClassifier,
    ConvNetRegressor,
    FeatureExtractor,
    MLPClassifier,
    MLPRegressor,
    NeuralNetClassifier,
    NeuralNetRegressor,
    RNNClassifier,
    RNNRegressor,
    TabularClassifier,
    TabularRegressor,
)
from sknet.layers import EnsembleDense, EnsembleInput
from sknet.tabular import TabularEncoder
from sknet.text import TextVectorizer

# Defaults (float32), and float64, whose regressor also declares multi-output
# support (scikit-learn's tag promises float64 multi-output predictions).
ESTIMATORS = [
    MLPClassifier(),
    MLPRegressor(),
    MLPClassifier(dtype="float64"),
    MLPRegressor(dtype="float64"),
    NeuralNetClassifier(),
    NeuralNetClassifier(dtype="float64"),
    NeuralNetRegressor(),
    NeuralNetRegressor(dtype="float64"),
    ConvNetClassifier(),
    ConvNetClassifier(dtype="float64"),
    ConvNetRegressor(),
    ConvNetRegressor(dtype="float64"),
    RNNClassifier(),
    RNNClassifier(dtype="float64"),
    RNNRegressor(),
    RNNRegressor(dtype="float64"),
    # the recipe's options, and the parameter-efficient ensemble (a member axis to the end)
    NeuralNetClassifier(solver="adamw", label_smoothing=0.1, clip_norm=1.0),
    NeuralNetClassifier([EnsembleInput(3), EnsembleDense(16, activation="relu")]),
    NeuralNetRegressor([EnsembleInput(3), EnsembleDense(16, activation="relu")], solver="adamw"),
    # (a fixed random_state: the checks seed top-level random_state parameters only)
    FeatureExtractor(MLPClassifier(hidden_layer_sizes=(8,), max_iter=20, random_state=0)),
    FeatureExtractor(MLPRegressor(hidden_layer_sizes=(8,), max_iter=20, random_state=0)),
    TabularEncoder(),
    TabularEncoder(dtype="float64", numeric_scaling="robust", n_bins=4),
    TabularClassifier(),
    TabularClassifier(dtype="float64"),
    TabularRegressor(),
    TabularRegressor(dtype="float64"),
]

# A weighted fit equals a fit on repeated rows only where nothing else depends on the
# rows themselves: the tabular estimators' held-out split and dropout masks do (a
# repeated row can land in both halves of the split, and draws its own masks).
_NO_SPLIT_NOR_DROPOUT = {"early_stopping": False, "dropout": 0.0}
PER_CHECK_PARAMS = {
    (RNNClassifier, "check_sample_weight_equivalence_on_dense_data"): {"solver": "sgd"},
    (TabularClassifier, "check_sample_weight_equivalence_on_dense_data"): _NO_SPLIT_NOR_DROPOUT,
    (TabularRegressor, "check_sample_weight_equivalence_on_dense_data"): _NO_SPLIT_NOR_DROPOUT,
}

FLOAT64_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weight_equivalence_on_sparse_data",
    "check_methods_sample_order_invariance",
}


# The checks train on tiny data for few epochs: not converging is expected there.
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    name = getattr(check, "func", check).__name__
    if name in FLOAT64_CHECKS:
        if isinstance(estimator, FeatureExtractor):
            estimator = clone(estimator).set_params(estimator__dtype="float64")
        else:
            estimator = clone(estimator).set_params(dtype="float64")
    params = PER_CHECK_PARAMS.get((type(estimator), name))
    if params:
        estimator = clone(estimator).set_params(**params)
    check(estimator)


# Text in: scikit-learn gives its checks 2-D arrays of numbers, and skips (with a warning)
# every check of an estimator whose input is text, as for its own CountVectorizer. These
# are its checks that need no data; tests/text/test_vectorizer.py checks the others'
# properties (fit returns self, clone, pickle, unfitted errors, parameters checked in fit)
# on texts.
TEXT_ESTIMATORS = [
    TextVectorizer(),
    TextVectorizer(max_tokens=10, min_frequency=2, output_sequence_length=5, output="ragged"),
]
CHECKS_WITHOUT_DATA = [
    estimator_checks.check_estimator_cloneable,
    estimator_checks.check_estimator_tags_renamed,
    estimator_checks.check_valid_tag_types,
    estimator_checks.check_estimator_repr,
    estimator_checks.check_no_attributes_set_in_init,
    estimator_checks.check_do_not_raise_errors_in_init_or_set_params,
    estimator_checks.check_mixin_order,
    estimator_checks.check_get_params_invariance,
    estimator_checks.check_set_params,
    estimator_checks.check_parameters_default_constructible,
]


@pytest.mark.parametrize("check", CHECKS_WITHOUT_DATA, ids=lambda check: check.__name__)
@pytest.mark.parametrize("estimator", TEXT_ESTIMATORS, ids=repr)
def test_text_estimators_pass_the_checks_that_need_no_data(estimator, check):
    check(type(estimator).__name__, clone(estimator))

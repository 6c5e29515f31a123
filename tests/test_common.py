"""scikit-learn's own estimator checks, on every sknet estimator.

Every check runs on each estimator with its default parameters (float32), and
again with ``dtype="float64"``. The two sample-weight-equivalence checks run
in float64 only:
they compare a weighted fit with a fit on repeated rows at ``rtol=1e-7``,
below float32's resolution (``eps = 1.2e-7``), so in float32 they measure
rounding, not weighting. In float64 both pass with the default solver, and
``tests/test_estimators.py`` checks the float32 equivalence at a float32
tolerance. Nothing is marked as expected to fail.
"""

import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from sknet import MLPClassifier, MLPRegressor

# Defaults (float32), and float64, whose regressor also declares multi-output
# support (scikit-learn's tag promises float64 multi-output predictions).
ESTIMATORS = [
    MLPClassifier(),
    MLPRegressor(),
    MLPClassifier(dtype="float64"),
    MLPRegressor(dtype="float64"),
]

FLOAT64_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weight_equivalence_on_sparse_data",
}


# The checks train on tiny data for few epochs: not converging is expected there.
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    if getattr(check, "func", check).__name__ in FLOAT64_CHECKS:
        estimator = clone(estimator).set_params(dtype="float64")
    check(estimator)

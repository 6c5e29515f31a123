"""Tests for sknet/engine/_lbfgs.py: SciPy's L-BFGS with scikit-learn's messages."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sknet.engine._lbfgs import minimize_lbfgs


def test_lbfgs_minimizes_a_quadratic():
    target = np.array([1.0, -2.0, 3.0])

    def fun(x):
        d = x - target
        return float(d @ d), 2 * d

    x, loss, n_iter = minimize_lbfgs(fun, np.zeros(3), max_iter=100, max_fun=1000, tol=1e-10)
    assert_allclose(x, target, atol=1e-6)
    assert loss < 1e-10 and 1 <= n_iter <= 100


def test_lbfgs_warns_when_it_runs_out_of_iterations():
    def fun(x):  # Rosenbrock: needs many iterations
        a, b = x
        f = (1 - a) ** 2 + 100 * (b - a * a) ** 2
        g = np.array([-2 * (1 - a) - 400 * a * (b - a * a), 200 * (b - a * a)])
        return f, g

    with pytest.warns(ConvergenceWarning, match="(?s)lbfgs failed to converge.*max_iter=2"):
        _, _, n_iter = minimize_lbfgs(
            fun, np.array([-1.5, 2.0]), max_iter=2, max_fun=1000, tol=1e-12
        )
    assert n_iter == 2

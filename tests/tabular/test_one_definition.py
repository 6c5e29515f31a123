"""What the tabular estimators share with the column plan is defined once: the bin
rule, the plan's parameter constraints and docs, and each documented default."""

import ast
import inspect
import re

import numpy as np
import pytest

from sknet import TabularClassifier, TabularRegressor
from sknet.layers import quantile_bins
from sknet.tabular import TabularEncoder
from sknet.tabular._numeric import bin_edges

PLAN_PARAMETERS = ("categorical_features", "numeric_scaling", "min_frequency")


def test_quantile_bins_is_the_plans_bin_rule():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((300, 4))
    X[rng.rand(300) < 0.2, 1] = np.nan
    X[:, 2] = np.round(X[:, 2])  # few distinct values: fewer bins
    X[:, 3] = 7.0  # constant
    for n_bins in (1, 5, 48):
        for ours, plans in zip(quantile_bins(X, n_bins), bin_edges(X, n_bins)):
            np.testing.assert_array_equal(ours, plans)


@pytest.mark.parametrize("estimator", [TabularClassifier, TabularRegressor])
def test_the_plans_parameters_are_the_encoders_constraints_and_docs(estimator):
    for name in PLAN_PARAMETERS:
        assert (
            estimator._parameter_constraints[name] is (TabularEncoder._parameter_constraints[name])
        )
        ours, theirs = (_parameter_doc(cls.__doc__, name) for cls in (estimator, TabularEncoder))
        assert ours == theirs and ours


def _parameter_doc(doc, name):
    """A parameter's entry in a numpydoc docstring: its line and its indented text."""
    entry = rf"^    {name} : .*?"
    end = r"(?=^    \w+ : |^    \w[^\n]*\n    -{3})"  # the next entry or section
    match = re.search(entry + end, doc, re.M | re.S)
    return match.group(0).strip() if match else None


@pytest.mark.parametrize("cls", [TabularClassifier, TabularRegressor, TabularEncoder])
def test_every_documented_default_is_the_signatures(cls):
    defaults = {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    documented = {}
    for names, text in re.findall(r"^    (\w+(?:, \w+)*) : .*?default=(.+?)$", cls.__doc__, re.M):
        values = ast.literal_eval(text)  # "beta_1, beta_2 : ..., default=0.9, 0.999"
        names = names.split(", ")
        documented.update(zip(names, values) if len(names) > 1 else [(names[0], values)])
    assert set(documented) == set(defaults)  # every parameter documented, no other
    for name, value in documented.items():
        assert value == defaults[name], name

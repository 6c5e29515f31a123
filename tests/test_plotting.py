"""Tests for sknet/plotting.py."""

import subprocess
import sys

import pytest
from sklearn.model_selection import train_test_split

from sknet import MLPClassifier
from sknet.plotting import plot_learning_curves

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_importing_the_module_does_not_import_matplotlib():
    code = "import sys, sknet.plotting; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_learning_curves_with_and_without_validation(digits, tmp_path):
    matplotlib = pytest.importorskip("matplotlib", reason="needs matplotlib (the plot extra)")
    matplotlib.use("Agg")
    X, y = digits
    X_train, X_val, y_train, y_val = train_test_split(X, y, random_state=0)
    clf = MLPClassifier(max_iter=4, device="cpu").fit(X_train, y_train, X_val=X_val, y_val=y_val)
    ax = plot_learning_curves(clf)
    assert [line.get_label() for line in ax.get_lines()] == ["train loss", "validation loss"]
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3, 4]
    assert list(ax.get_lines()[1].get_ydata()) == [r["valid_loss"] for r in clf.history_]
    assert [line.get_label() for line in ax.score_ax.get_lines()] == ["validation score"]
    ax.figure.savefig(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000

    plain = MLPClassifier(max_iter=2, device="cpu").fit(X_train, y_train)
    import matplotlib.pyplot as plt

    _, given = plt.subplots()
    ax = plot_learning_curves(plain, ax=given)
    assert ax is given and ax.score_ax is None and len(ax.get_lines()) == 1
    plt.close("all")


def test_unfitted_estimator_is_a_clear_error():
    with pytest.raises(ValueError, match="no training history: fit it first"):
        plot_learning_curves(MLPClassifier())

"""
=====================================================
Learning curves, early stopping and a saved figure
=====================================================

Train :class:`~sknet.MLPClassifier` on digits with a validation set of our
own, stop early on the validation loss with
:class:`~sknet.callbacks.EarlyStopping` (the best weights come back), print
the per-epoch table (:class:`~sknet.callbacks.PrintLog`), and save the learning curves drawn by
:func:`sknet.plotting.plot_learning_curves` to a PNG file.

    python examples/plot_learning_curves.py [output.png]
"""

import sys

import matplotlib

matplotlib.use("Agg")  # no screen needed

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sknet import MLPClassifier  # noqa: E402
from sknet.callbacks import EarlyStopping, PrintLog  # noqa: E402
from sknet.plotting import plot_learning_curves  # noqa: E402

output = sys.argv[1] if len(sys.argv) > 1 else "learning_curves.png"
X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(
    X / 16.0, y, test_size=0.25, stratify=y, random_state=0
)
clf = MLPClassifier(
    hidden_layer_sizes=(128,),
    learning_rate_init=0.01,
    max_iter=200,
    random_state=0,
    callbacks=[EarlyStopping(monitor="valid_loss", patience=5), PrintLog()],
)
clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)
stopper = clf.callbacks_[0]
print(
    f"Stopped at epoch {stopper.stopped_epoch_}; restored epoch {stopper.best_epoch_} "
    f"(validation loss {stopper.best_value_:.4f}, accuracy {clf.score(X_val, y_val):.4f})"
)

ax = plot_learning_curves(clf)
ax.figure.tight_layout()
ax.figure.savefig(output, dpi=100)
print(f"Learning curves saved to {output}")

"""
=====================================================
Learning curves, early stopping and a saved figure
=====================================================

Train :class:`~sknet.MLPClassifier` on digits with a validation set of our
own, stop early on the validation loss with
:class:`~sknet.callbacks.EarlyStopping` (the best weights come back), print
the per-epoch table (:class:`~sknet.callbacks.PrintLog`), and draw the learning
curves with :func:`sknet.plotting.plot_learning_curves` (saved to a PNG file when
you give one)::

    python examples/plot_learning_curves.py [output.png]
"""

import sys

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from sknet import MLPClassifier
from sknet.callbacks import EarlyStopping, PrintLog
from sknet.plotting import plot_learning_curves

output = sys.argv[1] if len(sys.argv) > 1 else None
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

# %%
# The callback kept the weights of the epoch with the lowest validation loss
stopper = clf.callbacks_[0]
print(
    f"Stopped at epoch {stopper.stopped_epoch_}; restored epoch {stopper.best_epoch_} "
    f"(validation loss {stopper.best_value_:.4f}, accuracy {clf.score(X_val, y_val):.4f})"
)

# %%
# The curves: training and validation loss, and validation accuracy
ax = plot_learning_curves(clf)
ax.figure.tight_layout()
if output:
    ax.figure.savefig(output, dpi=100)
    print(f"Learning curves saved to {output}")

"""
==================================================
Sequential MNIST: an LSTM reads digits row by row
==================================================

Each 28x28 MNIST image becomes a sequence of 28 steps of 28 pixels, and
:class:`~sknet.RNNClassifier` with one LSTM layer of 128 units classifies it
from the last state. Give the directory of the IDX files on the command line,
or in ``SKNET_MNIST_DIR``::

    python examples/rnn_sequential_mnist.py path/to/mnist [epochs]

With only the 10,000-image test file, it trains on a stratified 8,000 and
tests on the other 2,000 (about 96% after 15 epochs, a second or so per epoch
on a laptop CPU).

.. note::

   The documentation build runs this example only when it has the MNIST files
   (``SKNET_MNIST_DIR``). Otherwise this page shows the code, and here is what
   ``python examples/rnn_sequential_mnist.py MNIST_DIR`` printed (the table; the
   progress lines on stderr left out), on a 2-core machine that other jobs were
   using at the same time, so its times say little
   (:doc:`/user_guide/performance` has controlled measurements)::

       epoch  train_loss  valid_loss  valid_score         lr  seconds
           1     1.32431     0.64104      0.80600      0.001   30.346
           2     0.49556     0.41675      0.87250      0.001   35.256
           3     0.31979     0.29028      0.91000      0.001   63.758
           4     0.24535     0.22840      0.93450      0.001   58.799
           5     0.19269     0.24349      0.92800      0.001   37.912
           6     0.16840     0.20156      0.93950      0.001   38.675
           7     0.13750     0.16890      0.94800      0.001   33.432
           8     0.11960     0.17856      0.94750      0.001   49.551
           9     0.10648     0.19243      0.94000      0.001   35.032
          10     0.09286     0.16317      0.94800      0.001   31.912
          11     0.07556     0.14978      0.95050      0.001   21.655
          12     0.05868     0.16906      0.94750      0.001   37.149
          13     0.05981     0.15180      0.95450      0.001   38.159
          14     0.05006     0.12990      0.95950      0.001   18.396
          15     0.05999     0.16233      0.95550      0.001   24.802
       LSTM(128) over 28 rows of 28 pixels, trained on 'cpu': 37.04 s per epoch
       Test accuracy: 0.9555

   and the learning curves it drew:

   .. image:: /_static/gallery/rnn_sequential_mnist.png
      :alt: training and validation loss and validation accuracy over 15 epochs
"""

# sphinx_gallery_thumbnail_path = "_static/gallery/rnn_sequential_mnist.png"

import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import RNNClassifier
from sknet.callbacks import PrintLog, ProgressBar
from sknet.datasets import load_mnist
from sknet.plotting import plot_learning_curves

directory = sys.argv[1] if len(sys.argv) > 1 else None
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
try:
    X, y = load_mnist(directory, subset="test", flatten=False)  # (n, 28, 28): rows are steps
except FileNotFoundError as exc:
    raise SystemExit(f"{exc}\nusage: python examples/rnn_sequential_mnist.py MNIST_DIR") from None
X_train, X_test, y_train, y_test = train_test_split(
    X, y, train_size=8000, test_size=2000, stratify=y, random_state=0
)

clf = RNNClassifier(
    cell="lstm",
    units=(128,),
    batch_size=128,
    max_iter=epochs,
    clip_norm=5.0,
    random_state=0,
    callbacks=[PrintLog(), ProgressBar()],
)
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed number of epochs
    clf.fit(X_train, y_train, X_val=X_test, y_val=y_test)
seconds = time.perf_counter() - start
print(
    f"LSTM(128) over {clf.input_shape_[0]} rows of {clf.input_shape_[1]} pixels, "
    f"trained on {clf.device_!r}: {seconds / clf.n_iter_:.2f} s per epoch"
)
print(f"Test accuracy: {clf.score(X_test, y_test):.4f}")

# %%
# Training and validation loss, and validation accuracy, epoch by epoch
ax = plot_learning_curves(clf)
ax.figure.tight_layout()

"""
=============================================
Saving a model safely (skops) and to ONNX
=============================================

A pickle runs code when it loads; skops does not, and asks which types to
trust. sknet publishes the list of its own types, ``sknet.TRUSTED_TYPES``.
The same MLP also exports to ONNX and predicts the same in onnxruntime, as
does a recurrent network reading each digit's image row by row.
Needs ``pip install "sknet-nn[skops,onnx]"``.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
import skops.io as sio
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import sknet
from sknet import MLPClassifier, RNNClassifier
from sknet.onnx import to_onnx

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X / 16.0, y, test_size=0.25, stratify=y, random_state=0
)
# class_weight rebalances the loss; here it doubles the weight of the digit 8
clf = MLPClassifier(
    hidden_layer_sizes=(64,), early_stopping=True, random_state=0, class_weight={8: 2.0}
).fit(X_train, y_train)
print(f"Test accuracy: {clf.score(X_test, y_test):.4f}")

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "digits.skops"
    sio.dump(clf, path)
    untrusted = sio.get_untrusted_types(file=path)
    print(
        f"skops asks to trust {len(untrusted)} types, all sknet's own: "
        f"{all(name in sknet.TRUSTED_TYPES for name in untrusted)}"
    )
    loaded = sio.load(path, trusted=sknet.TRUSTED_TYPES)
print(
    f"Reloaded with skops: identical predictions "
    f"{np.array_equal(loaded.predict(X_test), clf.predict(X_test))}"
)

session = onnxruntime.InferenceSession(
    to_onnx(clf).SerializeToString(), providers=["CPUExecutionProvider"]
)
labels, proba = session.run(None, {"X": X_test.astype(np.float32)})
print(
    f"ONNX Runtime: same labels {np.array_equal(labels, clf.predict(X_test))}, "
    f"largest probability difference {np.abs(proba - clf.predict_proba(X_test)).max():.1e}"
)

# %%
# A recurrent network exports too: each image as a sequence of 8 rows of 8 pixels,
# read in both directions by a GRU (ONNX's GRU operator).
rnn = RNNClassifier(
    cell="gru",
    units=(32,),
    bidirectional=True,
    learning_rate_init=0.01,
    early_stopping=True,
    random_state=0,
).fit(X_train.reshape(-1, 8, 8), y_train)
rows = X_test.reshape(-1, 8, 8).astype(np.float32)
session = onnxruntime.InferenceSession(
    to_onnx(rnn).SerializeToString(), providers=["CPUExecutionProvider"]
)
rnn_labels, rnn_proba = session.run(None, {"X": rows})
print(
    f"GRU: test accuracy {rnn.score(rows, y_test):.4f}; ONNX Runtime: same labels "
    f"{np.array_equal(rnn_labels, rnn.predict(rows))}, largest probability difference "
    f"{np.abs(rnn_proba - rnn.predict_proba(rows)).max():.1e}"
)

# %%
# Every test probability, from ONNX Runtime against sknet
fig, ax = plt.subplots(figsize=(4, 4))
ax.scatter(clf.predict_proba(X_test).ravel(), proba.ravel(), s=4)
ax.plot([0, 1], [0, 1], color="grey", linewidth=0.5)
ax.set(xlabel="sknet's predict_proba", ylabel="ONNX Runtime's probabilities")
fig.tight_layout()

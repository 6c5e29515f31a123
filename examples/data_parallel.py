"""
=================================================
One model on many workers: data-parallel training
=================================================

:class:`~sknet.distributed.DataParallel` trains one sknet network on data
spread over the workers of a Dask cluster. Each worker keeps one shard of the
rows and trains a replica on it; each batch of one process is cut over the
workers by where its rows are. With ``sync_every=1`` the replicas add up their
gradients after every batch and all take the same step: the model one process
trains. With ``sync_every=k`` or ``'epoch'`` each replica steps on its part of
each batch, and every ``k`` batches (or once per epoch) the replicas' weights
and optimizer moments are averaged. The workers combine them among
themselves, not through the client. The epochs' bookkeeping (loss curve,
history, validation, callbacks) happens once, on the driver, and the result is
an ordinary :class:`~sknet.MLPClassifier`.

Here the cluster is a :class:`~dask.distributed.LocalCluster` of two worker
processes on this machine; on a real cluster, connect the client to its
scheduler instead (``Client("tcp://scheduler:8786")``). Needs
``pip install "sknet-nn[distributed]"``.

.. note::

   The documentation build does not run this example: it starts a Dask
   cluster of worker processes, which the build does not install or start.
   Here is what ``python examples/data_parallel.py`` printed on a 2-core
   machine that other jobs were using at the same time (so its seconds say
   little; the Dask guide has the measured table)::

       Dask cluster with 2 workers
       one process:             test accuracy 0.9422
       2 workers, sync_every=1      : test accuracy 0.9422, 210 syncs of 19 KiB
       2 workers, sync_every='epoch': test accuracy 0.9356, 36 syncs of 19 KiB
       from a Dask array:       test accuracy 0.9356
       shards of [675, 672] rows; the fitted model is an MLPClassifier

   and the figure it drew:

   .. image:: /_static/gallery/data_parallel.png
      :alt: test accuracy and fit time of one process and of two workers
"""

# sphinx_gallery_thumbnail_path = "_static/gallery/data_parallel.png"

import pickle
import time
import warnings

import dask.array as da
import matplotlib.pyplot as plt
from dask.distributed import Client, LocalCluster
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from sknet import MLPClassifier
from sknet.distributed import DataParallel

if __name__ == "__main__":  # worker processes re-import this file
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.25, stratify=y, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # start-up messages of the cluster
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = Client(cluster)
    print(f"Dask cluster with {len(client.nthreads())} workers")

    net = MLPClassifier(hidden_layer_sizes=(64,), max_iter=30, random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 30 epochs on purpose
        start = time.perf_counter()
        local = net.fit(X_train, y_train)
        results = {"one process": (local.score(X_test, y_test), time.perf_counter() - start)}
        print(f"one process:             test accuracy {results['one process'][0]:.4f}")
        for sync_every in (1, "epoch"):
            start = time.perf_counter()
            model = DataParallel(net, sync_every=sync_every).fit(X_train, y_train)
            results[f"2 workers\nsync_every={sync_every!r}"] = (
                model.score(X_test, y_test),
                time.perf_counter() - start,
            )
            syncs = model.sync_history_
            kib = syncs[0]["bytes_between_workers"] / 1024
            print(
                f"2 workers, sync_every={sync_every!r:7}: test accuracy "
                f"{model.score(X_test, y_test):.4f}, {len(syncs)} syncs of {kib:.0f} KiB"
            )

        # A Dask array stays on the workers: each block group becomes a shard there.
        X_blocks = da.from_array(X_train, chunks=(675, 64))
        model = DataParallel(net).fit(X_blocks, y_train)
        print(f"from a Dask array:       test accuracy {model.score(X_test, y_test):.4f}")

    fig, (acc, secs) = plt.subplots(1, 2, figsize=(8, 3.2))
    names = list(results)
    acc.bar(names, [a for a, _ in results.values()], color=["0.6", "C0", "C1"])
    acc.set_ylim(0.9, 1.0)
    acc.set_title("test accuracy")
    secs.bar(names, [s for _, s in results.values()], color=["0.6", "C0", "C1"])
    secs.set_title("fit time (s), 30 epochs")
    for ax in (acc, secs):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    plt.show()

    fitted = pickle.loads(pickle.dumps(model.to_local()))  # no Dask needed to use it
    print(f"shards of {model.shard_rows_} rows; the fitted model is an {type(fitted).__name__}")
    client.close()
    cluster.close()

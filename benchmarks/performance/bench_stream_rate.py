"""A PCG iteration and the features-only pass on synthetic rows, under one scheduler.

    python benchmarks/performance/bench_stream_rate.py --rows 131072 --d 50000 --scheduler threads

The rows are those of ``bench_pcg_cluster.py`` (8 Gaussian columns, the label
``sin(x0) + x1 x2 > 0``), kept in memory.  The iteration is the difference of two
fits stopped after 2 and 6 iterations, over 4 (the statistics pass and the
preconditioner cancel); the features-only pass is the median of 3
(:func:`rfstream.bench.measures.features_only_pass`).  ``--scheduler``: ``threads``
(dask's), ``cluster`` (a LocalCluster of two single-threaded workers with
distributed's settings) or ``embedded`` (rfstream's embedded cluster,
``rfstream.cluster.connect("cluster")``: one worker per core, its settings).  docs/wide.md, "Streaming passes in smaller sub-blocks".
"""
import argparse
import contextlib
import time
import warnings

import dask
import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=131072)
    p.add_argument("--d", type=int, default=50000)
    p.add_argument("--scheduler", choices=["threads", "cluster", "embedded"], default="threads")
    args = p.parse_args()

    import distributed

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import features_only_pass
    from rfstream.bench.scripts import pcg_rows
    from rfstream.cluster import connect

    stack, client, cluster = contextlib.ExitStack(), None, None
    if args.scheduler == "threads":
        dask.config.set(scheduler="threads")
    elif args.scheduler == "embedded":
        client = stack.enter_context(connect("cluster"))
    else:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="8GiB",
                                           host="127.0.0.1", dashboard_address=None)
        client = distributed.Client(cluster)
    X, y = dask.persist(*pcg_rows(args.rows, seed=0))
    Z = RandomFourierFeatures(args.d, gamma=0.1, random_state=0).fit(X).transform(X)
    times = []
    for k in (2, 6):
        ridge = StreamingRidgeClassifier(alpha=1.0, solver="pcg", pcg_rank=256, tol=1e-12, max_iter=k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # stopped at max_iter on purpose
            t0 = time.perf_counter()
            ridge.fit(Z, y)
            times.append(time.perf_counter() - t0)
    per = (times[1] - times[0]) / 4
    floor = float(np.median([features_only_pass(Z) for _ in range(3)]))
    print(f"{args.scheduler}: rows={args.rows} D={args.d}: iteration {per:.3f} s, features-only pass "
          f"{floor:.3f} s, iteration / features-only {per / floor:.2f}", flush=True)
    if cluster is not None:
        client.close()
        cluster.close()
    stack.close()


if __name__ == "__main__":
    main()

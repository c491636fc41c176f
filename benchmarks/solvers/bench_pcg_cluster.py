"""PCG at D = 50,000 on a million rows, on a local cluster of worker processes.

Run from the repository root:

    python benchmarks/solvers/bench_pcg_cluster.py --rows 1000000 --d 50000 --workers 2

The rows are synthetic (8 Gaussian columns and a nonlinear sign label, made inside the
tasks from a seed: nothing is read from disk and nothing with n in its shape reaches the
client).  Gaussian RFF (``gamma``) + ``StreamingRidgeClassifier(solver="pcg")`` on a
``LocalCluster`` of ``--workers`` processes with one thread and ``--worker-memory`` each;
prints one JSON line: passes, seconds, each worker's peak resident memory against its
limit (read inside the worker), whether a worker was restarted, the client's peak, and
the error rate on ``--test-rows`` further rows.  The Gram this replaces would be
D^2 x 8 bytes = 20 GB per partial at D = 50,000.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from dask.utils import parse_bytes

from rfstream.bench.scripts import pcg_rows as synthetic


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--test-rows", type=int, default=100_000)
    p.add_argument("--d", type=int, default=50_000)
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--pcg-rank", type=int, default=1024)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-memory", default="8GiB")
    p.add_argument("--pass-times", action="store_true",
                   help="print each pass's seconds to stderr (the statistics pass, the iterations, the "
                        "float64 check; the fit's other seconds are the client's: the preconditioner)")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import peak_rss
    from rfstream.cluster import set_progress

    if args.pass_times:
        set_progress("auto")  # one line per pass when stderr is not a terminal

    limit = parse_bytes(args.worker_memory)
    X, y = synthetic(args.rows, seed=0)
    X_test, y_test = synthetic(args.test_rows, seed=1)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit,
                      host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        workers_before = set(client.scheduler_info()["workers"])
        t0 = time.perf_counter()
        fmap = RandomFourierFeatures(args.d, gamma=args.gamma, random_state=0).fit(X)
        ridge = StreamingRidgeClassifier(alpha=args.alpha, solver="pcg", pcg_rank=args.pcg_rank,
                                         tol=args.tol, max_iter=args.max_iter)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ridge.fit(fmap.transform(X), y)
        fit_s = time.perf_counter() - t0
        predicted = ridge.predict(fmap.transform(X_test)).compute()
        error = float(np.mean(predicted != y_test.compute()))
        peaks = client.run(peak_rss)
        restarted = workers_before != set(client.scheduler_info()["workers"])
    print(json.dumps({
        "rows": args.rows, "D": args.d, "alpha": args.alpha, "pcg_rank": args.pcg_rank, "tol": args.tol,
        "passes": int(ridge.n_iter_), "fit_seconds": round(fit_s, 1), "test_error": error,
        "warnings": sorted({str(w.message).splitlines()[0] for w in caught}),
        "workers": args.workers, "worker_memory_limit_gib": round(limit / 2**30, 2),
        "worker_peak_gib": [round(v / 2**30, 2) for v in sorted(peaks.values())],
        "worker_peak_over_limit": round(max(peaks.values()) / limit, 3), "workers_restarted": restarted,
        "client_peak_gib": round(peak_rss() / 2**30, 2),
    }), flush=True)


if __name__ == "__main__":
    main()

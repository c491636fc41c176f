"""A list of alphas searched by PCG: every (fold, alpha) system in the same passes, against one fit per alpha.

Run from the repository root:

    python benchmarks/solvers/bench_pcg_alphas.py --rows 200000 --d 8192 --alphas 0.01 0.1 1 10

The rows are bench_pcg_cluster.py's synthetic ones (8 Gaussian columns, a nonlinear sign
label, made inside the tasks: :func:`rfstream.bench.scripts.pcg_rows`).  On one ``LocalCluster`` of ``--workers`` one-thread
processes, in one run: ``StreamingRidgeClassifier(solver="pcg")`` fitted once per alpha
(no cross-validation: what a user would otherwise run by hand), then once with the alpha
list and ``cv`` folds (:mod:`rfstream.solvers.ridge.cg_search`: the (cv + 1) x A systems share
every pass).  Prints one JSON line: per fit its passes, seconds and seconds per pass, the
search's choice and cross-validated errors, and each model's error on ``--test-rows``
further rows.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from dask.utils import parse_bytes

from rfstream.bench.scripts import pcg_rows as synthetic


def timed_fit(fmap, ridge, X, y, X_test, y_test):
    """Fit ``ridge`` on the features of ``X``; its passes, seconds and test error."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ridge.fit(fmap.transform(X), y)
    seconds = time.perf_counter() - t0
    error = float(np.mean(ridge.predict(fmap.transform(X_test)).compute() != y_test))
    return {"passes": int(ridge.n_iter_), "seconds": round(seconds, 1),
            "seconds_per_pass": round(seconds / ridge.n_iter_, 2), "test_error": round(error, 5),
            "warnings": sorted({str(w.message).splitlines()[0] for w in caught})}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--test-rows", type=int, default=50_000)
    p.add_argument("--d", type=int, default=8192)
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0])
    p.add_argument("--cv", type=int, default=5)
    p.add_argument("--pcg-rank", type=int, default=1024)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-memory", default="8GiB")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier

    X, y = synthetic(args.rows, seed=0)
    X_test, y_test = synthetic(args.test_rows, seed=1)
    common = dict(solver="pcg", pcg_rank=args.pcg_rank, tol=args.tol, max_iter=args.max_iter, cv=args.cv)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=parse_bytes(args.worker_memory),
                      host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
        y_test = y_test.compute()
        fmap = RandomFourierFeatures(args.d, gamma=args.gamma, random_state=0).fit(X)
        each = {str(a): timed_fit(fmap, StreamingRidgeClassifier(alpha=a, **common), X, y, X_test, y_test)
                for a in args.alphas}
        search = StreamingRidgeClassifier(alpha=list(args.alphas), **common)
        together = timed_fit(fmap, search, X, y, X_test, y_test)
    together.update(alpha_chosen=search.alpha_, cv_error=[round(float(v), 5) for v in search.cv_results_["mean_score"]])
    separate = sum(v["seconds"] for v in each.values())
    print(json.dumps({
        "rows": args.rows, "D": args.d, "pcg_rank": args.pcg_rank, "tol": args.tol, "cv": args.cv,
        "workers": args.workers, "one_fit_per_alpha": each, "search": together,
        "search_over_one_fit_per_alpha": round(together["seconds"] / separate, 3),
        "systems_in_the_search": (args.cv + 1) * len(args.alphas),
    }), flush=True)


if __name__ == "__main__":
    main()

"""Client memory of a fit on a dask DataFrame: 5 million rows, the client's peak RSS stays small.

    python benchmarks/io/bench_dataframe_memory.py --rows 5000000 --json runs/dataframe_memory.json

1. Builds a dask DataFrame lazily with ``dd.from_map``: each partition (100,000 rows of
   10 float64 columns and a 0/1 label) is drawn by a worker from its own seed, so no row
   ever exists on the client (5 million rows are 400 MB of float64).
2. Starts a LocalCluster of 2 single-threaded worker processes (the scheduler runs in
   the client process, as LocalCluster places it, and is counted with it).
3. Fits ``make_model("classification", features="rff", solver="ridge")`` with
   ``n_components=100`` on ``X = frame[columns]``, ``y = frame["label"]``: the
   Standardizer converts the DataFrame (partition lengths only), then the moments
   pass, ``gamma="auto"``'s 1000 sampled rows and the ridge Gram pass run on the workers.
4. Predicts lazily and reduces the training error on the workers.

A thread samples the client process's resident memory (psutil) every 5 ms while
the fit and the evaluation run; the report gives that peak, the RSS before the
fit (the interpreter, numpy, pandas, dask, distributed, scikit-learn and the
scheduler) and the kernel's high-water mark (VmHWM, which also covers the imports).
The exit status is 1 when the sampled peak reaches 300 MiB.
"""
import argparse
import json
import sys
import time

import numpy as np
import pandas as pd
import psutil

from rfstream.bench.measures import PeakRSS

COLUMNS = [f"x{i}" for i in range(10)]


def make_partition(i, rows, seed):
    """Partition ``i``: ``rows`` rows drawn from ``(seed, i)``, label = a nonlinear function's sign."""
    rng = np.random.default_rng([seed, i])
    x = rng.standard_normal((rows, len(COLUMNS)))
    label = (x[:, 0] * x[:, 1] + 0.5 * x[:, 2] ** 2 - 0.5 > 0).astype(np.int64)
    frame = pd.DataFrame(x, columns=COLUMNS)
    frame["label"] = label
    return frame


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--rows-per-partition", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--n-components", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the report here")
    args = p.parse_args(argv)

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from rfstream.bench.measures import peak_rss
    from rfstream.metrics import error_rate
    from rfstream.pipeline import make_model

    sizes = [args.rows_per_partition] * (args.rows // args.rows_per_partition)
    if args.rows % args.rows_per_partition:
        sizes.append(args.rows % args.rows_per_partition)
    frame = dd.from_map(make_partition, range(len(sizes)), sizes, seed=args.seed,
                        meta=make_partition(0, 0, args.seed))
    X, y = frame[COLUMNS], frame["label"]

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, Client(cluster):
        before = psutil.Process().memory_info().rss
        model = make_model("classification", features="rff", solver="ridge",
                           feature_params={"n_components": args.n_components, "gamma": "auto",
                                           "random_state": args.seed},
                           solver_params={"alpha": 1.0})
        with PeakRSS() as watch:
            t0 = time.perf_counter()
            model.fit(X, y)
            fit_s = time.perf_counter() - t0
            pred = model.predict(X)  # lazy: one block per partition
            error = error_rate(y.to_dask_array(lengths=pred.chunks[0]), pred)
            total_s = time.perf_counter() - t0

    mib = 2**20
    result = {
        "rows": int(sum(sizes)), "columns": len(COLUMNS), "partitions": len(sizes),
        "data_mib_float64": round(sum(sizes) * len(COLUMNS) * 8 / mib, 1),
        "workers": args.workers, "n_components": args.n_components,
        "feature_names_in": list(model.feature_names_in_),
        "training_error": round(error, 4),
        "fit_seconds": round(fit_s, 1), "fit_and_evaluate_seconds": round(total_s, 1),
        "client_rss_before_fit_mib": round(before / mib, 1),
        "client_peak_rss_during_fit_mib": round(watch.peak / mib, 1),
        "client_vmhwm_mib": round(peak_rss() / mib, 1),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=1)
    return 0 if watch.peak < 300 * mib else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Out-of-core proof: train on a dataset several times larger than the workers' memory.

    python benchmarks/performance/out_of_core.py --rows 7000000 --worker-memory 512MiB --json docs/out_of_core.json

1. Writes a synthetic KDD99-shaped Zarr dataset (rfstream.datasets.synthetic) chunk by chunk, unless
   it is already there.
2. Starts a LocalCluster of single-threaded worker processes with a hard memory limit each
   (dask spills at 60%, pauses at 80% and restarts a worker at 95% of it).
3. Fits standardizer + Gaussian RFF + ridge (three passes), on the cluster, and evaluates it.
4. Reads every worker's peak resident memory (VmHWM, from inside the worker), checks that
   no worker was restarted, and reads the client's own peak (nothing with n in its shape
   reaches it).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import dask
from dask.utils import format_bytes, parse_bytes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=7_000_000)
    p.add_argument("--rows-per-chunk", type=int, default=32768)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-memory", default="512MiB")
    p.add_argument("--n-components", type=int, default=256)
    p.add_argument("--features", default="rff")
    p.add_argument("--n-grids", type=int, default=None, help="binning: random grids P")
    p.add_argument("--n-bins", type=int, default=None, help="binning: hashed bins per grid")
    p.add_argument("--workdir", default="runs/out_of_core")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster

    from rfstream import io
    from rfstream.bench.measures import peak_rss
    from rfstream.datasets.synthetic import write_kdd_like
    from rfstream.pipeline import evaluate_dataset, fit_dataset

    data = Path(args.workdir) / f"kdd_like_{args.rows}.zarr"
    if not data.exists():
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            write_kdd_like(data, args.rows, rows_per_chunk=args.rows_per_chunk)
        print(f"wrote {data} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    X, _ = io.open_dataset(data)
    data_bytes = X.nbytes + X.shape[0] * 4
    limit = parse_bytes(args.worker_memory)
    client_before = peak_rss()

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit,
                      host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        workers_before = set(client.scheduler_info()["workers"])
        t0 = time.perf_counter()
        grids = {k: v for k, v in (("n_grids", args.n_grids), ("n_bins", args.n_bins)) if v is not None}
        model, meta = fit_dataset(data, features=args.features, n_components=args.n_components, alpha=1.0,
                                  **grids)
        fit_s = time.perf_counter() - t0
        error = evaluate_dataset(model, meta, data)["value"]
        peaks = client.run(peak_rss)
        restarted = workers_before != set(client.scheduler_info()["workers"])

    result = {
        "rows": int(X.shape[0]), "columns": int(X.shape[1]), "chunks": int(X.numblocks[0]),
        "data_bytes_in_memory": int(data_bytes),
        "data_bytes_on_disk": sum(f.stat().st_size for f in data.rglob("*") if f.is_file()),
        "workers": args.workers, "worker_memory_limit": limit,
        "data_over_total_worker_memory": data_bytes / (limit * args.workers),
        "features": args.features, "n_components": args.n_components, **grids,
        "fit_seconds": round(fit_s, 1), "training_error": error,
        "worker_peak_rss": sorted(peaks.values()),
        "worker_peak_over_limit": max(peaks.values()) / limit,
        "workers_restarted": restarted,
        "client_peak_rss_before_fit": client_before, "client_peak_rss_after": peak_rss(),
    }
    print(json.dumps(result, indent=2))
    print(f"data {format_bytes(data_bytes)} = {result['data_over_total_worker_memory']:.1f} x the workers' "
          f"total limit; worker peaks {[format_bytes(v) for v in result['worker_peak_rss']]} "
          f"(limit {format_bytes(limit)}); restarted: {restarted}", file=sys.stderr)
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)
    ok = result["worker_peak_over_limit"] < 1.0 and not restarted and result["data_over_total_worker_memory"] >= 3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

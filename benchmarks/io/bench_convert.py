"""Conversion of one big CSV file in byte ranges, and of many files, against one stream.

    python benchmarks/io/bench_convert.py --rows 500000 --files 16 --json runs/convert.json
    python benchmarks/io/bench_convert.py --kdd-copies 4 --no-double --configs client,ranges-threads,ranges-cluster

1. Writes a KDD99-shaped CSV (``rfstream.datasets.synthetic.kdd_like_rows`` turned back
   into KDD's raw columns: 38 numbers, protocol/service/flag as text, a text label) as
   ``--files`` files of consecutive rows, and their concatenation as one file; the same
   for twice the rows (``--no-double`` skips it).  With ``--kdd-copies N`` the data are
   instead N copies of KDD99's real 10% file (../shared/datasets/kddcup99), each with
   its rows shuffled by the copy's seed, one file per copy.  Files already there are reused.
2. Converts, each run in a fresh process so that its memory is its own:

   * ``client``: :func:`rfstream.io.convert` of the one concatenated file as one stream
     through the client process (``block_size=None``; no Dask);
   * ``ranges-threads``: the one file in byte ranges of ``--block-size`` bytes (64 MiB
     by default) as Dask tasks on dask's threads (one per core);
   * ``ranges-cluster``: the same on the embedded LocalCluster
     (:func:`rfstream.cluster.connect`: a single-threaded worker process per core);
   * ``cluster-1`` / ``cluster-2``: :func:`rfstream.io.convert` of the directory of
     files under a ``distributed.Client`` of a LocalCluster with 1 or 2 single-threaded
     worker processes (the scheduler runs in the client process and is counted with it;
     the cluster is started, and its workers import rfstream, before the clock).

3. Reports the source's throughput (MB of uncompressed CSV per second of the convert
   call, both passes) and peak resident memory sampled every 5 ms by a thread: the
   client process's, and the workers' (their largest).  The datasets are checked equal
   (row sums of X and y) across the runs of one size.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from rfstream.bench.measures import PeakRSS

CONFIGS = ("client", "ranges-threads", "ranges-cluster", "cluster-1", "cluster-2")


# ----------------------------------------------------------------- data
def raw_kdd_rows(start, stop, seed=0):
    """Rows ``start:stop`` of the synthetic KDD-like data in KDD's raw CSV columns."""
    from rfstream.datasets.synthetic import (
        CATEGORIES,
        N_NUMERIC,
        N_RATES,
        kdd_like_rows,
    )

    X, y = kdd_like_rows(start, stop, seed)
    counts = N_NUMERIC - N_RATES
    frame = {f"c{j}": np.round(X[:, j]).astype(np.int64) for j in range(counts)}
    frame.update({f"c{j}": np.round(X[:, j], 2) for j in range(counts, N_NUMERIC)})
    offset = N_NUMERIC
    for name, size in CATEGORIES.items():
        codes = X[:, offset:offset + size].argmax(axis=1)
        frame[name] = np.array([f"{name[:4]}{k}" for k in range(size)])[codes]
        offset += size
    frame["label"] = np.where(y == 1, "attack.", "normal.")
    return pd.DataFrame(frame)


def write_kdd_copies(folder: Path, copies: int) -> tuple[Path, Path]:
    """``folder/parts/copy-NN.csv``: KDD99's 10% file with its rows shuffled by seed NN, and
    ``folder/whole.csv``, their concatenation."""
    import gzip

    from rfstream.datasets import source_paths

    parts, whole = folder / "parts", folder / "whole.csv"
    if whole.exists() and parts.is_dir() and len(list(parts.glob("copy-*.csv"))) == copies:
        return parts, whole
    parts.mkdir(parents=True, exist_ok=True)
    with gzip.open(source_paths("kddcup99")[0], "rb") as f:  # the 10% file
        lines = f.read().splitlines(keepends=True)
    with open(whole, "wb") as out:
        for k in range(copies):
            order = np.random.default_rng(k).permutation(len(lines))
            data = b"".join(lines[i] for i in order)
            (parts / f"copy-{k:02d}.csv").write_bytes(data)
            out.write(data)
    return parts, whole


def write_source(folder: Path, rows: int, files: int) -> tuple[Path, Path]:
    """``folder/parts/part-NN.csv`` and ``folder/whole.csv`` (their concatenation)."""
    parts, whole = folder / "parts", folder / "whole.csv"
    if whole.exists() and parts.is_dir() and len(list(parts.glob("part-*.csv"))) == files:
        return parts, whole
    parts.mkdir(parents=True, exist_ok=True)
    cuts = np.linspace(0, rows, files + 1).astype(int)
    with open(whole, "wb") as out:
        for k, (a, b) in enumerate(pairwise(cuts)):
            path = parts / f"part-{k:02d}.csv"
            with open(path, "w") as f:
                for s in range(a, b, 65536):
                    raw_kdd_rows(s, min(s + 65536, b)).to_csv(f, header=False, index=False)
            out.write(path.read_bytes())
    return parts, whole


# ----------------------------------------------------------------- one run


def one_run(config, parts, whole, dst, block_size):
    """Convert as ``config`` says; returns the measures (run in a fresh process)."""
    import contextlib
    import importlib

    import dask
    import distributed

    from rfstream.cluster import connect
    from rfstream.embedded import EMBEDDED_CONFIG
    from rfstream.io import convert, open_dataset

    client, source, options, cluster = contextlib.nullcontext(), parts, {}, None
    if config.startswith("ranges") or config == "client":
        source, options = whole, {"block_size": None if config == "client" else int(block_size)}
    if config == "ranges-threads":
        client = connect("threads")
    elif config == "ranges-cluster":
        client = connect("cluster")
    elif config != "client":
        with dask.config.set(EMBEDDED_CONFIG):
            cluster = distributed.LocalCluster(n_workers=int(config.split("-")[1]), threads_per_worker=1,
                                               processes=True, dashboard_address=None, host="127.0.0.1")
        client = distributed.Client(cluster)
    with client as c:
        workers = list(c.run(os.getpid).values()) if c is not None else []
        if c is not None:  # the workers import the readers before the clock, as the client has
            c.run(importlib.import_module, "rfstream.io.convert")
        before = psutil.Process().memory_info().rss
        with PeakRSS([os.getpid(), *workers]) as rss:
            t0 = time.perf_counter()
            summary = convert(source, dst, overwrite=True, **options)
            seconds = time.perf_counter() - t0
        if cluster is not None:
            c.close()
            cluster.close()
    with dask.config.set(scheduler="threads"):
        X, y = open_dataset(dst)
        sums = [float(X.sum(dtype="float64").compute()), int(y.sum().compute())]
    return {"config": config, "seconds": seconds, "shape": summary["shape"], "check": sums,
            "client_rss_before": before, "client_rss_peak": rss.peaks[0],
            "worker_rss_peak": max(rss.peaks[1:], default=None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--workdir", default="/tmp/rfstream-bench-convert")
    ap.add_argument("--no-double", action="store_true", help="skip the run on twice the rows")
    ap.add_argument("--kdd-copies", type=int, default=0,
                    help="N copies of KDD99's 10%% file, each shuffled by its seed (instead of --rows)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"among {', '.join(CONFIGS)}")
    ap.add_argument("--block-size", type=int, default=64 * 2**20, help="bytes per byte-range task")
    ap.add_argument("--json", default=None, help="write the measures here")
    ap.add_argument("--one", nargs=5, metavar=("CONFIG", "PARTS", "WHOLE", "DST", "BLOCK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_run(*args.one)))
        return 0
    results = []
    sizes = [args.kdd_copies or args.rows]
    sizes += [] if args.no_double else [2 * sizes[0]]
    for size in sizes:
        if args.kdd_copies:
            folder = Path(args.workdir) / f"kdd{size}"
            parts, whole = write_kdd_copies(folder, size)
        else:
            folder = Path(args.workdir) / f"rows{size}"
            parts, whole = write_source(folder, size, args.files)
        mb = whole.stat().st_size / 1e6
        checks = set()
        for config in args.configs.split(","):
            out = subprocess.run([sys.executable, __file__, "--one", config, str(parts), str(whole),
                                  str(folder / f"{config}.zarr"), str(args.block_size)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows = r["shape"][0]
            r.update(rows=rows, source_mb=mb, mb_per_s=mb / r["seconds"])
            checks.add(json.dumps(r["check"]))
            results.append(r)
            print(f"{rows:>9,} rows {config:>9}: {r['seconds']:6.1f} s {r['mb_per_s']:5.1f} MB/s  client peak "
                  f"{r['client_rss_peak'] / 2**20:5.0f} MiB (before {r['client_rss_before'] / 2**20:4.0f})  "
                  f"worker peak {(r['worker_rss_peak'] or 0) / 2**20:5.0f} MiB", flush=True)
        if len(checks) != 1:
            print(f"the datasets differ between runs: {checks}", file=sys.stderr)
            return 1
    print("\n| rows | source MB | run | seconds | MB/s | client peak RSS MiB (before) | worker peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        worker = "-" if r["worker_rss_peak"] is None else f"{r['worker_rss_peak'] / 2**20:.0f}"
        print(f"| {r['rows']:,} | {r['source_mb']:.0f} | {r['config']} | {r['seconds']:.1f} | {r['mb_per_s']:.1f} "
              f"| {r['client_rss_peak'] / 2**20:.0f} ({r['client_rss_before'] / 2**20:.0f}) | {worker} |")
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, results, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Conversion of one big CSV file in byte ranges, and of many files, against one stream.

    python benchmarks/io/bench_convert.py --rows 500000 --files 16 --json runs/convert.json
    python benchmarks/io/bench_convert.py --kdd-copies 4 --no-double --configs client,ranges-threads,ranges-cluster
    python benchmarks/io/bench_convert.py --kdd-copies 2 --no-double --configs ranges-cluster,parse,arrow \
        --workers 1,2 --repeats 3

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

   With ``--workers 1,2`` the configurations ``ranges-cluster``, ``ranges-threads``, ``parse``
   and ``arrow`` run once per count N, as ``ranges-cluster@N`` (a LocalCluster of N
   single-threaded worker processes, started before the clock), ``ranges-threads@N``
   (dask's threads, ``num_workers=N``), and the floors of the same byte ranges (as many as
   :func:`rfstream.io.csv_ranges.range_count` gives N workers) parsed, and nothing else, in a
   ``ProcessPoolExecutor`` of N processes (started before the clock): ``parse@N`` by
   ``pandas.read_csv``, ``arrow@N`` by ``pyarrow.csv.read_csv`` (one thread each).
   ``--repeats K`` runs every configuration K times, interleaved, and reports each run.
   ``ranges-sync``: the byte ranges' tasks run one at a time in the calling process (dask's
   "synchronous" scheduler), whose CPU seconds per pass are the tasks' own: MB per CPU-second
   of each pass, the per-core cost, which other processes' load changes little.

3. Reports the source's throughput (MB of uncompressed CSV per second of the convert
   call, both passes) and peak resident memory sampled every 5 ms by a thread: the
   client process's, and the workers' (their largest).  The datasets are checked equal
   (row sums of X and y) across the runs of one size.  By phase: ``pass 1`` (the summary
   tasks and their merge, every reading of it), ``pass 2`` (encode and write tasks, seams),
   ``client`` (the rest of the call: sniffing, cutting, deciding, staging); on a cluster,
   the workers' busy share of each pass (the tasks' compute seconds over workers x the
   pass's seconds).  Per-core scaling: (MB/s at N workers / N) / (MB/s at 1 worker).
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

CONFIGS = ("client", "ranges-threads", "ranges-cluster", "cluster-1", "cluster-2", "ranges-sync")
PER_WORKERS = ("ranges-cluster", "ranges-threads", "parse", "arrow")
"""The configurations run once per count of ``--workers``."""


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


class Phases:
    """Seconds of pass 1 (every reading) and pass 2 of a conversion by tasks, timed around
    :func:`rfstream.io.convert_tasks.scan_units` and the plan's ``write``."""

    def __init__(self):
        import dataclasses

        import rfstream.io.convert_tasks as tasks

        self.seconds = {"pass1": 0.0, "pass2": 0.0}
        self.windows = {"pass1": [], "pass2": []}
        self.cpu = {"pass1": 0.0, "pass2": 0.0}  # the workers' CPU seconds (user + system)
        self.client_cpu = {"pass1": 0.0, "pass2": 0.0}
        self.workers = []  # their processes
        scan_units, units_plan = tasks.scan_units, tasks.units_plan

        def cpu(processes):
            return sum(sum(p.cpu_times()[:2]) for p in processes)

        def timed(phase, f, *a, **k):
            t, c, own = time.time(), cpu(self.workers), cpu([psutil.Process()])
            try:
                return f(*a, **k)
            finally:
                self.seconds[phase] += time.time() - t
                self.windows[phase].append((t, time.time()))
                self.cpu[phase] += cpu(self.workers) - c
                self.client_cpu[phase] += cpu([psutil.Process()]) - own

        def plan_of(*a, **k):
            plan = units_plan(*a, **k)
            return dataclasses.replace(plan, write=lambda w: timed("pass2", plan.write, w))

        tasks.scan_units = lambda *a, **k: timed("pass1", scan_units, *a, **k)
        tasks.units_plan = plan_of


def busy(stream: list, windows: dict, n_workers: int) -> dict:
    """The workers' busy share of each phase: compute seconds of the tasks in its windows
    over ``n_workers`` x the phase's seconds."""
    out = {}
    for phase, spans in windows.items():
        wall = sum(b - a for a, b in spans)
        work = sum(s["stop"] - s["start"] for t in stream for s in t["startstops"] if s["action"] == "compute"
                   and any(a <= s["start"] <= b for a, b in spans))
        out[phase] = work / (n_workers * wall) if wall else None
    return out


def config_workers(config: str) -> int | None:
    """N of ``name@N`` (None: the configuration's own count)."""
    return int(config.split("@")[1]) if "@" in config else None


def _parse_range(path, start, length, engine):
    """Read and parse one byte range, nothing else (a floor's task): its rows."""
    import io

    from fsspec.utils import read_block

    with open(path, "rb") as f:
        data = read_block(f, start, length, delimiter=b"\n")
    if engine == "arrow":
        import pyarrow.csv as pacsv

        return pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(
            autogenerate_column_names=True, use_threads=False)).num_rows
    return len(pd.read_csv(io.BytesIO(data), header=None, low_memory=True))


def floor_run(engine, whole, block_size, n):
    """The floor: ``whole``'s byte ranges (as many as convert cuts for ``n`` workers) parsed,
    and nothing else, by ``engine`` in a pool of ``n`` processes started before the clock."""
    from concurrent.futures import ProcessPoolExecutor

    size = os.path.getsize(whole)
    try:
        from rfstream.io.csv_ranges import range_count
    except ImportError:  # before it: ranges of at most a block, whatever the workers
        k = -(-size // int(block_size))
    else:
        k = range_count(size, int(block_size), n)
    cuts = [j * size // k for j in range(k + 1)]
    with ProcessPoolExecutor(n) as pool:
        list(pool.map(time.sleep, [0.2] * n))  # the processes started, pandas imported
        list(pool.map(_parse_range, [whole] * n, [0] * n, [1] * n, [engine] * n))
        t0 = time.perf_counter()
        rows = sum(pool.map(_parse_range, [whole] * k, cuts[:-1], [b - a for a, b in pairwise(cuts)], [engine] * k))
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "shape": [rows, None], "check": None, "ranges": k, "phases": {},
            "client_rss_before": 0, "client_rss_peak": 0, "worker_rss_peak": None}


def one_run(config, parts, whole, dst, block_size):
    """Convert as ``config`` says; returns the measures (run in a fresh process)."""
    import contextlib
    import importlib

    import dask
    import distributed

    from rfstream.cluster import connect
    from rfstream.embedded import EMBEDDED_CONFIG
    from rfstream.io import convert, open_dataset

    name, n = config.split("@")[0], config_workers(config)
    if name in ("parse", "arrow"):
        return {"config": config, **floor_run(name, whole, block_size, n or os.cpu_count())}
    client, source, options, cluster = contextlib.nullcontext(), parts, {}, None
    if name.startswith("ranges") or name == "client":
        source, options = whole, {"block_size": None if name == "client" else int(block_size)}
    if name == "ranges-sync":
        client = connect("synchronous")
    elif name == "ranges-threads":
        client = connect("threads")
        if n is not None:
            dask.config.set(num_workers=n)
    elif name == "ranges-cluster" and n is None:
        client = connect("cluster")
    elif name != "client":
        with dask.config.set(EMBEDDED_CONFIG):
            cluster = distributed.LocalCluster(n_workers=n or int(name.split("-")[1]), threads_per_worker=1,
                                               processes=True, dashboard_address=None, host="127.0.0.1")
        client = distributed.Client(cluster)
    phases = Phases()
    with client as c:
        workers = list(c.run(os.getpid).values()) if c is not None else []
        if c is not None:  # the workers import the readers before the clock, as the client has
            c.run(importlib.import_module, "rfstream.io.convert")
        phases.workers = [psutil.Process(p) for p in workers]
        stream = distributed.get_task_stream(client=c) if c is not None else contextlib.nullcontext()
        before = psutil.Process().memory_info().rss
        with PeakRSS([os.getpid(), *workers]) as rss, stream as tasks:
            t0 = time.perf_counter()
            summary = convert(source, dst, overwrite=True, **options)
            seconds = time.perf_counter() - t0
        shares = busy(tasks.data, phases.windows, len(workers)) if c is not None else {}
        if cluster is not None:
            c.close()
            cluster.close()
    with dask.config.set(scheduler="threads"):
        X, y = open_dataset(dst)
        sums = [float(X.sum(dtype="float64").compute()), int(y.sum().compute())]
    return {"config": config, "seconds": seconds, "shape": summary["shape"], "check": sums,
            "phases": {**phases.seconds, "client": seconds - sum(phases.seconds.values())}, "busy": shares,
            "worker_cpu": phases.cpu, "client_cpu": phases.client_cpu,
            "client_rss_before": before, "client_rss_peak": rss.peaks[0],
            "worker_rss_peak": max(rss.peaks[1:], default=None)}


def phase_text(r: dict) -> str:
    ph, share = r.get("phases") or {}, r.get("busy") or {}
    if not ph:
        return f"({r.get('ranges', '?')} ranges)"
    mb, cpu = r["source_mb"], cpu_of(r)
    return " ".join(f"{k} {ph[k]:.2f} s" + (f" ({share[k]:.0%} busy" if share.get(k) is not None else "")
                    + (f"{', ' if share.get(k) is not None else ' ('}tasks' CPU {cpu[k]:.1f} s = "
                       f"{mb / cpu[k]:.1f} MB/cpu-s, client's {r['client_cpu'][k]:.1f} s)" if cpu.get(k)
                       else ")" if share.get(k) is not None else "")
                    for k in ("pass1", "pass2", "client"))


def cpu_of(r: dict) -> dict:
    """CPU seconds of the tasks per pass: the workers', or the process's own where the tasks ran in it."""
    if r["config"].startswith("ranges-sync"):
        return r.get("client_cpu") or {}
    return r.get("worker_cpu") or {}


def per_cpu(r: dict) -> str:
    cpu = cpu_of(r)
    if not cpu.get("pass1") or not cpu.get("pass2"):
        return "-"
    return f"{r['source_mb'] / cpu['pass1']:.1f} / {r['source_mb'] / cpu['pass2']:.1f}"


def scaling(results: list) -> None:
    """Per-core scaling of each configuration run at several worker counts: (MB/s at N / N) over
    MB/s at the smallest N, from each count's best run (the least disturbed on a shared machine)."""
    best = {}
    for r in results:
        n = config_workers(r["config"])
        if n is not None:
            key = (r["rows"], r["config"].split("@")[0])
            best.setdefault(key, {})
            best[key][n] = max(best[key].get(n, 0), r["mb_per_s"])
    for (rows, name), rates in best.items():
        low = min(rates)
        for n in sorted(rates):
            if n != low:
                print(f"{rows:,} rows {name}: per-core scaling {n} vs {low} workers: "
                      f"{(rates[n] / n) / (rates[low] / low):.2f} ({rates[low]:.1f} -> {rates[n]:.1f} MB/s)")


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
    ap.add_argument("--workers", default=None,
                    help=f"worker counts, e.g. 1,2: {', '.join(PER_WORKERS)} run once per count")
    ap.add_argument("--repeats", type=int, default=1, help="runs of every configuration, interleaved")
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
        configs = [f"{c}@{n}" if args.workers and c in PER_WORKERS else c for c in args.configs.split(",")
                   for n in (args.workers.split(",") if args.workers and c in PER_WORKERS else [None])]
        for repeat in range(args.repeats):
            for config in configs:
                out = subprocess.run([sys.executable, __file__, "--one", config, str(parts), str(whole),
                                      str(folder / f"{config.replace('@', '-')}.zarr"), str(args.block_size)],
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                rows = r["shape"][0]
                r.update(rows=rows, source_mb=mb, mb_per_s=mb / r["seconds"], repeat=repeat,
                         load=os.getloadavg()[0])
                if r["check"] is not None:
                    checks.add(json.dumps(r["check"]))
                results.append(r)
                print(f"{rows:>9,} rows {config:>18}: {r['seconds']:6.1f} s {r['mb_per_s']:5.1f} MB/s "
                      f"{phase_text(r)} client peak {r['client_rss_peak'] / 2**20:5.0f} MiB "
                      f"(before {r['client_rss_before'] / 2**20:4.0f}) worker peak "
                      f"{(r['worker_rss_peak'] or 0) / 2**20:5.0f} MiB, load {r['load']:.1f}", flush=True)
        if len(checks) > 1:
            print(f"the datasets differ between runs: {checks}", file=sys.stderr)
            return 1
    print("\n| rows | source MB | run | seconds | MB/s | pass 1 s (busy) | pass 2 s (busy) | client s "
          "| MB per task CPU-s, pass 1 / 2 | client peak RSS MiB (before) | worker peak RSS MiB | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        worker = "-" if r["worker_rss_peak"] is None else f"{r['worker_rss_peak'] / 2**20:.0f}"
        ph, share = r.get("phases") or {}, r.get("busy") or {}
        cells = [f"{ph[k]:.2f}" + (f" ({share[k]:.0%})" if share.get(k) is not None else "") if k in ph else "-"
                 for k in ("pass1", "pass2", "client")]
        print(f"| {r['rows']:,} | {r['source_mb']:.0f} | {r['config']} | {r['seconds']:.2f} | {r['mb_per_s']:.1f} "
              f"| {' | '.join(cells)} | {per_cpu(r)} | {r['client_rss_peak'] / 2**20:.0f} ({r['client_rss_before'] / 2**20:.0f}) "
              f"| {worker} | {r['load']:.1f} |")
    scaling(results)
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, results, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

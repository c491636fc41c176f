"""KDD99 at the size of its full training set, end to end as a user runs it (issue 32).

The full KDD99 training set (4,898,431 rows) is not in ../shared/datasets; its 10% file
(494,021 rows) is.  This builds a CSV file of the full set's size from ten copies of the
10% file, each copy's rows shuffled by its own seed (copy k: numpy's
``default_rng(k).permutation``), so the figures below are for **ten shuffled copies of the
10% file**, not for the real full set (whose extra rows are other connections).  Then it
times, on the embedded LocalCluster (``--scheduler cluster``), each with the client's and
the workers' peak resident memory (psutil, every 0.2 s, the command's process and its
child processes):

1. ``rfstream convert big.csv big.zarr --positive normal`` (MB/s of CSV);
2. ``rfstream fit big.zarr --n-components 2000 --alpha 0.01,0.1,1,10`` (RFF, ridge, the
   alphas by 5-fold CV, the defaults otherwise) against the floor set by the machine's
   float32 GEMM rate, measured right before and after the fit, for the Gram's
   ``2 n D^2`` flops;
3. ``rfstream evaluate`` on ``corrected`` (converted ``--like`` the training set);

and the same convert, fit and evaluate of the 10% file itself (494,021 rows), whose
client memory and test error the full-size run is compared with.

    python benchmarks/performance/bench_kdd_full.py --datasets ../shared/datasets --workdir /tmp/kdd_full \\
        --json docs/benchmarks/kdd_full.json

``--copies 2`` makes a smaller file for a quick look.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rfstream.bench.measures import TreePeakRSS, gemm_gflops, load
from rfstream.datasets import source_paths


def build_csv(source, copies, out):
    """``copies`` copies of the gzip'd CSV ``source``, copy k's lines permuted by seed k."""
    if out.exists():
        return out
    with gzip.open(source, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines if line.strip()]
    tmp = out.with_suffix(".partial")
    with open(tmp, "wb") as f:
        for k in range(copies):
            order = np.random.default_rng(k).permutation(len(lines))
            f.writelines(lines[i] for i in order)
    tmp.rename(out)
    return out


def run_measured(argv):
    """Run ``rfstream argv`` as its own process; ``(seconds, stdout, client peak, workers' peak,
    pass seconds)``: the peaks in bytes, the workers' the largest of any one child process;
    the seconds of each pass from its progress line (its stderr, passed on)."""
    proc = subprocess.Popen([sys.executable, "-m", "rfstream", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with TreePeakRSS(proc.pid, interval=0.2) as peaks:
        t0 = time.perf_counter()
        out, err = proc.communicate()
        seconds = time.perf_counter() - t0
    sys.stderr.write(err)
    passes = [float(m.group(1)) for m in re.finditer(r"pass \d+ done in ([0-9.]+) s", err)]
    if proc.returncode != 0:
        raise RuntimeError(f"rfstream {' '.join(map(str, argv))} exited with {proc.returncode}")
    return seconds, out, peaks.own, max(peaks.children.values(), default=0), passes


def worker_limit():
    """The memory limit of each embedded worker: the machine's memory over its cores."""
    import psutil

    return psutil.virtual_memory().total // (os.cpu_count() or 1)


def one_size(name, csv, test_csv, work, D, alphas):
    """Convert, fit and evaluate one training file; the measured figures."""
    data, test, model = work / f"{name}.zarr", work / f"{name}_test.zarr", work / f"{name}_model"
    row = {"name": name, "csv_bytes": csv.stat().st_size}
    seconds, out, client, workers, _ = run_measured(["convert", csv, data, "--positive", "normal", "--overwrite",
                                                   "--scheduler", "cluster"])
    info = json.loads(out)
    row.update(rows=info["shape"][0], convert_seconds=round(seconds, 1),
               convert_mb_per_s=round(row["csv_bytes"] / 1e6 / seconds, 1),
               convert_client_peak_gb=round(client / 1e9, 2), convert_worker_peak_gb=round(workers / 1e9, 2))
    run_measured(["convert", test_csv, test, "--like", data, "--overwrite", "--quiet"])
    before = gemm_gflops(D)
    seconds, out, client, workers, passes = run_measured(
        ["fit", data, "--n-components", D, "--alpha", alphas, "--out", model, "--overwrite", "--no-checkpoint",
         "--scheduler", "cluster"])
    after = gemm_gflops(D)
    summary = json.loads(out)
    gemm = (before["median"] + after["median"]) / 2
    floor = 2.0 * row["rows"] * D * D / (gemm * 1e9)
    row.update(fit_seconds=round(seconds, 1), fit_inside_seconds=summary["fit_seconds"], passes=summary.get("passes"),
               fit_pass_seconds=passes,
               gemm_gflops=round(gemm, 1), gram_floor_seconds=round(floor, 1),
               fit_over_floor=round(seconds / floor, 2), alpha=summary["alpha"],
               fit_client_peak_gb=round(client / 1e9, 2), fit_worker_peak_gb=round(workers / 1e9, 2))
    seconds, out, client, workers, _ = run_measured(["evaluate", model, test, "--format", "json",
                                                   "--scheduler", "cluster"])
    result = json.loads(out)
    row.update(evaluate_seconds=round(seconds, 1), test_error=round(result["error_rate"], 5),
               evaluate_client_peak_gb=round(client / 1e9, 2), evaluate_worker_peak_gb=round(workers / 1e9, 2))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=os.environ.get("RFSTREAM_DATASETS", "../shared/datasets"))
    parser.add_argument("--workdir", default="/tmp/rfstream-kdd-full", help="the CSV files and datasets go here")
    parser.add_argument("--copies", type=int, default=10, help="copies of the 10%% file (10: the full set's size)")
    parser.add_argument("--n-components", type=int, default=2000)
    parser.add_argument("--alpha", default="0.01,0.1,1,10")
    parser.add_argument("--json", default=None, help="write the results here too")
    args = parser.parse_args()
    train, test = source_paths("kddcup99", args.datasets)  # the 10% file and corrected
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    ten = build_csv(train, 1, work / "kdd_10_percent.csv")
    full = build_csv(train, args.copies, work / f"kdd_x{args.copies}.csv")
    result = {"load_at_start": load(), "worker_limit_gb": round(worker_limit() / 1e9, 2), "runs": []}
    for name, csv in (("ten_percent", ten), (f"x{args.copies}", full)):
        result["runs"].append(one_size(name, csv, test, work, args.n_components, args.alpha))
        print(json.dumps(result["runs"][-1]), flush=True)
    result["load_at_end"] = load()
    small, big = result["runs"]
    result["client_growth_gb"] = round(big["fit_client_peak_gb"] - small["fit_client_peak_gb"], 2)
    result["test_error_difference_points"] = round(100 * (big["test_error"] - small["test_error"]), 2)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)


if __name__ == "__main__":
    main()

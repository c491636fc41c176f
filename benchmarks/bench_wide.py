"""Wide feature spaces: where ridge's Gram memory ends, and what leave-one-out buys.

Run from the repository root (needs ../shared/datasets):

    python benchmarks/bench_wide.py wall --dataset letter --d 1024 2048 4096 8192
    python benchmarks/bench_wide.py wall --dataset letter --d 16384 --cv loo
    python benchmarks/bench_wide.py wall --dataset letter --d 8192 50000 --cv pcg
    python benchmarks/bench_wide.py model --d 2048 4096 8192 16384 20000 32768

``model`` prints the Gram pass's memory from :func:`rfstream.solvers.grid_pass.gram_memory`
(what rfstream refuses by, before any pass) for K-fold and leave-one-out, on this
machine's threads and on 2 worker processes splitting its memory.  ``wall`` fits
Gaussian RFF + ridge on the dataset's training split (alphas 1e-4 ... 10, cv 5 or loo)
in a fresh process per configuration under dask's threads (the whole fit in one
process, so its peak resident memory is everything: the tasks' partials, the tree
reduction, the client's eigendecompositions), and prints wall time, peak memory, the
chosen alpha and the test error.  A configuration rfstream refuses is reported as such.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ALPHAS = [1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0]


def one_fit(dataset, D, cv, workdir, solver="gram", pcg_alpha=1e-3, pcg_rank=2048):
    """Fit in this process; print one JSON line (seconds, peak bytes, alpha, test error).

    ``cv`` "5" or "loo": the Gram pass and a cross-validated alpha from :data:`ALPHAS`;
    "pcg": ``solver="pcg"`` at ``pcg_alpha`` (the alpha the cross-validation chose at
    large D) with a preconditioner of rank ``pcg_rank``."""
    import dask
    import numpy as np

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import peak_rss
    from rfstream.datasets import registry
    from rfstream.metrics import error_rate
    from rfstream.preprocess import Standardizer

    X, X_test, y, y_test = registry.train_test(dataset, workdir)
    dask.config.set(scheduler="threads")
    t0 = time.perf_counter()
    row = {"dataset": dataset, "D": D, "cv": cv, "solver": solver, "rows": int(X.shape[0])}
    try:
        scaler = Standardizer().fit(X)
        Xs, Xt = scaler.transform(X), scaler.transform(X_test)
        rff = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(Xs)
        if cv == "pcg":  # one alpha, no CV: the iterations solve one system
            ridge = StreamingRidgeClassifier(alpha=pcg_alpha, solver="pcg", pcg_rank=pcg_rank, max_iter=500)
        else:
            ridge = StreamingRidgeClassifier(alpha=ALPHAS, cv=cv if cv == "loo" else int(cv), solver=solver)
        ridge.fit(rff.transform(Xs), y)
        row.update(alpha=ridge.alpha_, passes=ridge.n_iter_,
                   test_error=float(error_rate(np.asarray(y_test), ridge.predict(rff.transform(Xt)).compute())))
        if cv != "pcg":
            row.update(cv_error=ridge.best_score_, cv_used=ridge.cv_results_.get("cv", cv))
    except ValueError as error:
        row["refused"] = str(error).splitlines()[0]
    row.update(seconds=round(time.perf_counter() - t0, 1), peak_gib=round(peak_rss() / 2**30, 2))
    print(json.dumps(row), flush=True)


def wall(args):
    rows = []
    for D in args.d:
        for cv in args.cv:
            argv = [sys.executable, os.path.abspath(__file__), "_fit", args.dataset, str(D), cv, args.workdir,
                    str(args.pcg_alpha), str(args.pcg_rank)]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                row = {"dataset": args.dataset, "D": D, "cv": cv, "failed": proc.stderr.strip().splitlines()[-1:]}
            else:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| D | cv | seconds | peak GiB | passes | alpha | CV error | test error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "refused" in r or "failed" in r:
            print(f"| {r['D']} | {r['cv']} | | | | refused: {r.get('refused', r.get('failed'))} | | |")
        else:
            used = r["cv"] if r.get("cv_used", r["cv"]) == r["cv"] else f"{r['cv']} -> {r['cv_used']}"
            cv_error = f"{r['cv_error']:.4f}" if "cv_error" in r else ""
            print(f"| {r['D']} | {used} | {r['seconds']} | {r['peak_gib']} | {r['passes']} | {r['alpha']:g} | "
                  f"{cv_error} | {r['test_error']:.4f} |")


def model(args):
    import psutil

    from rfstream.solvers.grid_pass import client_memory, gram_memory

    total = psutil.virtual_memory().total
    print(f"machine: {total / 2**30:.1f} GiB, {os.cpu_count()} cores; threads: limit 80% of it; "
          "2 workers: 40% each, 1 thread each")
    print("\n| D | one partial, 5 folds | one partial, loo | threads: 5 folds | threads: loo | "
          "2 workers: 5 folds | 2 workers: loo | client: 5 folds | client: loo |")
    print("|---|---|---|---|---|---|---|---|---|")
    from rfstream.solvers import grid_pass

    for D in args.d:
        cells = []
        for limit, threads in ((int(0.8 * total), os.cpu_count()), (int(0.4 * total), 1)):
            grid_pass.worker_memory = lambda limit=limit, threads=threads: (limit, threads)
            for K in (5, 1):
                need, lim, _, _ = gram_memory(1, K, D, args.targets)
                cells.append(f"{need / 2**30:.1f} GiB {'fits' if need <= lim else 'refused'}")
        partials = [gram_memory(1, K, D, args.targets)[3] / 2**30 for K in (5, 1)]
        for K in (5, 1):
            need, lim = client_memory(1, K, D, args.targets)
            cells.append(f"{need / 2**30:.1f} GiB {'fits' if need <= lim else 'refused'}")
        print(f"| {D} | {partials[0]:.2f} GiB | {partials[1]:.2f} GiB | " + " | ".join(cells) + " |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_fit":
        _, _, dataset, D, cv, workdir, pcg_alpha, pcg_rank = sys.argv[:8]
        one_fit(dataset, int(D), cv, workdir, pcg_alpha=float(pcg_alpha), pcg_rank=int(pcg_rank))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wall", help="fit at each D and cv; time, peak memory, errors")
    w.add_argument("--dataset", default="letter")
    w.add_argument("--d", type=int, nargs="+", default=[1024, 2048, 4096])
    w.add_argument("--cv", nargs="+", default=["5", "loo"], help="5, loo or pcg (solver='pcg', one alpha)")
    w.add_argument("--workdir", default="/tmp/rfstream-bench")
    w.add_argument("--pcg-alpha", type=float, default=1e-3, help="the alpha of --cv pcg")
    w.add_argument("--pcg-rank", type=int, default=2048, help="the preconditioner's rank of --cv pcg")
    m = sub.add_parser("model", help="the Gram pass's memory, as rfstream checks it")
    m.add_argument("--d", type=int, nargs="+", default=[2048, 4096, 8192, 16384, 20000, 32768])
    m.add_argument("--targets", type=int, default=26, help="T (letter: 26 classes)")
    args = p.parse_args()
    {"wall": wall, "model": model}[args.command](args)


if __name__ == "__main__":
    main()

"""Wide feature spaces: where ridge's Gram memory ends, and what leave-one-out buys.

Run from the repository root (needs ../shared/datasets):

    python benchmarks/solvers/bench_wide.py wall --dataset letter --d 1024 2048 4096 8192
    python benchmarks/solvers/bench_wide.py wall --dataset letter --d 16384 --cv loo
    python benchmarks/solvers/bench_wide.py wall --dataset letter --d 8192 50000 --cv pcg
    python benchmarks/solvers/bench_wide.py model --d 2048 4096 8192 16384 20000 32768
    python benchmarks/solvers/bench_wide.py rate --dataset letter --d 4096 16384
    python benchmarks/solvers/bench_wide.py flat --rows 500000 5000000 --d 20000
    python benchmarks/solvers/bench_wide.py precond --dataset letter --d 8192 --alpha 1e-3
    python benchmarks/solvers/bench_wide.py precision --dataset letter --d 4096 --alpha 1e-3 --tols 1e-4 1e-6

``model`` prints the Gram pass's memory from :func:`rfstream.solvers.memory.gram_memory`
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
import warnings

import numpy as np

from rfstream.bench.measures import wall_seconds
from rfstream.bench.scripts import cache_dir, pcg_rows

ALPHAS = [1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0]


def one_fit(dataset, D, cv, workdir, solver="gram", pcg_alpha=1e-3, pcg_rank=2048, products="mixed"):
    """Fit in this process; print one JSON line (seconds, peak bytes, alpha, test error).

    ``cv`` "5" or "loo": the Gram pass and a cross-validated alpha from :data:`ALPHAS`;
    "pcg": ``solver="pcg"`` at ``pcg_alpha`` (the alpha the cross-validation chose at
    large D) with a preconditioner of rank ``pcg_rank``, its products "mixed" (float32,
    then float64: :data:`rfstream.solvers.ridge.cg.FLOAT32_UNTIL`) or "float64" throughout."""
    import dask
    import numpy as np

    from rfstream.solvers import cg

    if products == "float64":
        cg.FLOAT32_UNTIL = None

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import peak_rss
    from rfstream.datasets import registry
    from rfstream.metrics import error_rate
    from rfstream.preprocess import Standardizer

    X, X_test, y, y_test = registry.train_test(dataset, workdir)
    dask.config.set(scheduler="threads")
    t0 = time.perf_counter()
    row = {"dataset": dataset, "D": D, "cv": cv, "solver": "pcg" if cv == "pcg" else solver, "rows": int(X.shape[0])}
    if cv == "pcg":
        row["products"] = products
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
    runs = [(D, cv, products) for D in args.d for cv in args.cv
            for products in (args.products if cv == "pcg" else ["mixed"])]
    for D, cv, products in runs:
        argv = [sys.executable, os.path.abspath(__file__), "_fit", args.dataset, str(D), cv, args.workdir,
                str(args.pcg_alpha), str(args.pcg_rank), products]
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
            used = f"pcg, {r['products']} products" if r["cv"] == "pcg" else used
            cv_error = f"{r['cv_error']:.4f}" if "cv_error" in r else ""
            print(f"| {r['D']} | {used} | {r['seconds']} | {r['peak_gib']} | {r['passes']} | {r['alpha']:g} | "
                  f"{cv_error} | {r['test_error']:.4f} |")


def gemm_rate(dtype, size=3072, repeats=3):
    """This machine's GEMM rate (flop/s) on square matrices of ``dtype``, best of ``repeats``."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((size, size)).astype(dtype)
    best = min(wall_seconds(lambda: a @ a) for _ in range(repeats))
    return 2 * size**3 / best


def rate(args):
    """Seconds per PCG iteration at each D against the GEMM rate measured in the same run,
    and against the features-only pass on the same rows (the floor of a pass that makes the
    features and keeps nothing of size n, :func:`rfstream.bench.measures.features_only_pass`,
    median of 3; issue 32 asks for an iteration within 1.3x of it).

    An iteration is one pass: for each row block the features (``2 n d D`` flops of the
    projection, ``n D`` cosines), ``Z V`` and ``Z'(Z V)`` (``4 n D T`` flops).  Timed as
    the difference of two fits stopped after ``lo`` and ``hi`` iterations, so the
    statistics pass and the preconditioner cancel.  Also the product of one sub-block
    in float32 against float64, and the float32 product's relative error."""
    import dask
    import numpy as np

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import features_only_pass
    from rfstream.datasets import registry
    from rfstream.preprocess import Standardizer

    dask.config.set(scheduler="threads")
    X, _, y, _ = registry.train_test(args.dataset, args.workdir)
    Xs = Standardizer().fit(X).transform(X)
    n, d = X.shape
    T = int(np.unique(np.asarray(y)).size)
    T = 1 if T == 2 else T
    peak64, peak32 = gemm_rate(np.float64), gemm_rate(np.float32)
    print(f"GEMM 3072^3 on this machine: float64 {peak64 / 1e9:.1f} GFLOP/s, float32 {peak32 / 1e9:.1f} GFLOP/s; "
          f"{args.dataset}: n={n}, d={d}, T={T}")
    print("\n| D | seconds per iteration | GEMM flops per iteration | GFLOP/s | fraction of float64 GEMM "
          "| features-only pass (s) | iteration / features-only pass |")
    print("|---|---|---|---|---|---|---|")
    lo, hi = 3, 13
    for D in args.d:
        Z = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(Xs).transform(Xs)
        times = []
        for k in (lo, hi):
            ridge = StreamingRidgeClassifier(alpha=1e-3, solver="pcg", pcg_rank=256, tol=1e-12, max_iter=k)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # stopped at max_iter on purpose
                t = wall_seconds(lambda ridge=ridge: ridge.fit(Z, y))
            times.append(t)
        per = (times[1] - times[0]) / (hi - lo)
        floor = float(np.median([features_only_pass(Z) for _ in range(3)]))
        flops = 2 * n * D * (d + 2 * T)
        print(f"| {D} | {per:.3f} | {flops / 1e9:.1f} G | {flops / per / 1e9:.1f} | {flops / per / peak64:.2f} "
              f"| {floor:.3f} | {per / floor:.2f} |", flush=True)
    rng = np.random.default_rng(0)
    for D in args.d[:1]:
        z = rng.standard_normal((4096, D)).astype(np.float32)
        V = rng.standard_normal((D, T))
        exact = z.astype(np.float64).T @ (z.astype(np.float64) @ V)
        t64 = min(wall_seconds(lambda: z.astype(np.float64).T @ (z.astype(np.float64) @ V)) for _ in range(3))
        t32 = min(wall_seconds(lambda: z.T @ (z @ V.astype(np.float32))) for _ in range(3))
        approx = z.T @ (z @ V.astype(np.float32))
        err = np.linalg.norm(approx - exact) / np.linalg.norm(exact)
        print(f"\none sub-block (4096 x {D}, T={T}): Z'(Z V) with the float32 features converted to "
              f"float64 {t64 * 1e3:.1f} ms, in float32 {t32 * 1e3:.1f} ms; float32 relative error {err:.1e}")


def one_flat(n_rows, D, iterations):
    """PCG on ``n_rows`` synthetic rows (8 Gaussian columns made inside the tasks, a
    noisy sign label) at ``D``: ``iterations`` passes after the statistics pass; print
    one JSON line with the seconds and this process's peak resident memory."""
    import dask

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.bench.measures import peak_rss

    dask.config.set(scheduler="threads")
    X, y = pcg_rows(n_rows, seed=0)
    t0 = time.perf_counter()
    rff = RandomFourierFeatures(D, gamma=0.1, random_state=0).fit(X)
    ridge = StreamingRidgeClassifier(alpha=1.0, solver="pcg", pcg_rank=512, max_iter=iterations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stopped at max_iter on purpose
        ridge.fit(rff.transform(X), y)
    print(json.dumps({"rows": n_rows, "D": D, "passes": ridge.n_iter_, "seconds": round(time.perf_counter() - t0, 1),
                      "peak_gib": round(peak_rss() / 2**30, 2)}), flush=True)


def flat(args):
    """Peak memory of PCG against the number of rows (a fresh process per n)."""
    print("| rows | D | passes | seconds | peak GiB |\n|---|---|---|---|---|")
    for n in args.rows:
        argv = [sys.executable, os.path.abspath(__file__), "_flat", str(n), str(args.d), str(args.iterations)]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"| {n} | {args.d} | failed: {proc.stderr.strip().splitlines()[-1:]} | | |", flush=True)
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"| {r['rows']:,} | {r['D']} | {r['passes']} | {r['seconds']} | {r['peak_gib']} |", flush=True)


def model(args):
    import psutil

    from rfstream.solvers import memory
    from rfstream.solvers.memory import client_memory, gram_memory

    total = psutil.virtual_memory().total
    print(f"machine: {total / 2**30:.1f} GiB, {os.cpu_count()} cores; threads: limit 80% of it; "
          "2 workers: 40% each, 1 thread each")
    print("\n| D | one partial, 5 folds | one partial, loo | threads: 5 folds | threads: loo | "
          "2 workers: 5 folds | 2 workers: loo | client: 5 folds | client: loo |")
    print("|---|---|---|---|---|---|---|---|---|")

    for D in args.d:
        cells = []
        for limit, threads in ((int(0.8 * total), os.cpu_count()), (int(0.4 * total), 1)):
            memory.worker_memory = lambda limit=limit, threads=threads: (limit, threads)
            for K in (5, 1):
                need, lim, _, _ = gram_memory(1, K, D, args.targets)
                cells.append(f"{need / 2**30:.1f} GiB {'fits' if need <= lim else 'refused'}")
        partials = [gram_memory(1, K, D, args.targets)[3] / 2**30 for K in (5, 1)]
        for K in (5, 1):
            need, lim = client_memory(1, K, D, args.targets)
            cells.append(f"{need / 2**30:.1f} GiB {'fits' if need <= lim else 'refused'}")
        print(f"| {D} | {partials[0]:.2f} GiB | {partials[1]:.2f} GiB | " + " | ".join(cells) + " |")


# ------------------------------------------------------------------ on a Gram held in memory
def features_and_targets(args):
    """``(Z, y, Y)``: float32 Gaussian RFF (``args.d``, gamma "auto") of the standardized
    training split of ``args.dataset``, its labels and their +-1 one-hot targets."""
    from rfstream import RandomFourierFeatures
    from rfstream.datasets import registry
    from rfstream.preprocess import Standardizer

    X, _, y, _ = registry.train_test(args.dataset, args.workdir)
    X, y = np.asarray(X), np.asarray(y)
    Xs = Standardizer().fit(X).transform(X)
    Z = np.asarray(RandomFourierFeatures(args.d, gamma="auto", random_state=0).fit(Xs).transform(Xs), np.float32)
    return Z, y, np.where(y[:, None] == np.unique(y), 1.0, -1.0)


def _pcg_iterations(G, B, alpha, precondition, tol=1e-4, max_iter=3000):
    """PCG iterations to ``tol`` on ``(G + alpha I) W = B`` held in memory."""
    W, R = np.zeros_like(B), B.copy()
    Zr = precondition(R)
    P, rz, norm_b = Zr.copy(), (R * Zr).sum(0), np.linalg.norm(B, axis=0)
    for k in range(1, max_iter + 1):
        AP = G @ P + alpha * P
        step = rz / (P * AP).sum(0)
        W += P * step
        R -= AP * step
        if (np.linalg.norm(R, axis=0) / norm_b).max() < tol:
            return k
        Zr = precondition(R)
        rz_new = (R * Zr).sum(0)
        P, rz = Zr + P * (rz_new / rz), rz_new
    return max_iter


def precond(args):
    """Iterations to tol 1e-4 by preconditioner, on the letter Gram held in memory.

    Jacobi; rfstream's row-sample Nystrom preconditioner (m rows, rank r); the Gaussian
    sketch of Frangella, Tropp & Udell's Algorithm 2.1 (rank r, a pass of 2 n D r flops
    over the data that the row sample avoids).  Also d_eff(alpha) = tr(G (G + alpha I)^-1)."""
    from rfstream.solvers.ridge.nystrom_pcg import NystromPreconditioner

    Z, y, Y = features_and_targets(args)
    Z = Z.astype(np.float64)
    mu = Z.mean(0)
    Zc, n = Z - mu, Z.shape[0]
    G, B = Zc.T @ Zc, Zc.T @ (Y - Y.mean(0))
    ev = np.linalg.eigvalsh(G)
    print(f"{args.dataset}, D={args.d}, alpha={args.alpha:g}: d_eff {np.sum(ev / (ev + args.alpha)):.0f}")
    diag = np.diag(G) + args.alpha
    print("\n| preconditioner | rows sampled | rank r | iterations |\n|---|---|---|---|")
    print(f"| Jacobi | | | {_pcg_iterations(G, B, args.alpha, lambda R: R / diag[:, None])} |", flush=True)
    for m in args.rows:
        for r in (m // 4, m // 2, m):
            P = NystromPreconditioner.from_rows(Z, y, alpha=args.alpha, mu=mu, n_rows=n, m=m, rank=r, seed=0)
            print(f"| row sample (rfstream) | {m} | {r} | {_pcg_iterations(G, B, args.alpha, P)} |", flush=True)
    rng = np.random.default_rng(0)
    for r in args.sketch:
        omega = rng.standard_normal((args.d, r))
        Ysk = G @ omega
        shift = np.sqrt(args.d) * np.finfo(float).eps * np.linalg.norm(Ysk, 2)
        Ysk += shift * omega
        C = np.linalg.cholesky(omega.T @ Ysk)
        U, S, _ = np.linalg.svd(np.linalg.solve(C, Ysk.T).T, full_matrices=False)
        P = NystromPreconditioner(U, np.maximum(S**2 - shift, 0.0), args.alpha)
        print(f"| Gaussian sketch (Alg. 2.1, one more pass) | | {r} | {_pcg_iterations(G, B, args.alpha, P)} |",
              flush=True)


def precision(args):
    """PCG with the products ``Z'(Z V)`` in float32 against float64, in memory.

    The same preconditioner (rfstream's, rank ``--rank``); the true relative residual of
    the normal equations computed in float64 every 5 iterations.  For each product
    precision: the iterations to reach each of ``--tols``, the floor (the lowest true
    residual in ``--max-iter`` iterations: where float32 stalls), and the relative distance
    of the float32 solution from the float64 one at the first tolerance."""
    from rfstream.solvers.ridge.nystrom_pcg import NystromPreconditioner

    Z32, y, Y = features_and_targets(args)
    Z64 = Z32.astype(np.float64)
    Y = Y[:, : 1 if Y.shape[1] == 2 else None]
    mu = Z64.mean(0)
    B = (Z64 - mu).T @ (Y - Y.mean(0))
    P = NystromPreconditioner.from_rows(Z64, y, alpha=args.alpha, mu=mu, n_rows=len(y), m=2 * args.rank,
                                        rank=args.rank, seed=0)
    n, mu32 = len(y), mu.astype(np.float32)

    def product(V, dtype):
        Z, m = (Z32, mu32) if dtype == np.float32 else (Z64, mu)
        Vd = V.astype(dtype)
        ZZV = (Z.T @ (Z @ Vd)).astype(np.float64) - n * np.outer(m, m @ Vd).astype(np.float64)
        return ZZV + args.alpha * V

    def exact_residual(W):
        return (np.linalg.norm(B - product(W, np.float64), axis=0) / np.linalg.norm(B, axis=0)).max()

    tols = sorted(args.tols, reverse=True)
    solutions = {}
    print(f"{args.dataset}, n={n}, D={args.d}, T={B.shape[1]}, alpha={args.alpha:g}, rank {args.rank}\n")
    print("| products | " + " | ".join(f"iterations to {t:g}" for t in tols)
          + f" | floor in {args.max_iter} iterations | seconds per iteration |")
    print("|---|" + "---|" * (len(tols) + 2))
    for dtype in (np.float64, np.float32):
        W, R = np.zeros_like(B), B.copy()
        Zr = P(R)
        D_, rz, reached, best = Zr.copy(), (R * Zr).sum(0), {}, np.inf
        spent = 0.0
        for k in range(1, args.max_iter + 1):
            t0 = time.perf_counter()
            AP = product(D_, dtype)
            spent += time.perf_counter() - t0  # the product's result is used: not wall_seconds
            step = rz / (D_ * AP).sum(0)
            W += D_ * step
            R -= AP * step
            if k % 5 == 0:
                true = exact_residual(W)
                best = min(best, true)
                for t in tols:
                    if t not in reached and true < t:
                        reached[t] = k
                        if t == tols[0]:
                            solutions[np.dtype(dtype).name] = W.copy()
                if len(reached) == len(tols):
                    break
            Zr = P(R)
            rz_new = (R * Zr).sum(0)
            D_, rz = Zr + D_ * (rz_new / rz), rz_new
        print(f"| {np.dtype(dtype).name} | " + " | ".join(str(reached.get(t, "not reached")) for t in tols)
              + f" | {best:.1e} | {spent / k:.3f} |", flush=True)
    if len(solutions) == 2:
        gap = np.linalg.norm(solutions["float32"] - solutions["float64"]) / np.linalg.norm(solutions["float64"])
        print(f"\nat {tols[0]:g}: the float32 solution is {gap:.1e} (relative) from the float64 one")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_flat":
        one_flat(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_fit":
        _, _, dataset, D, cv, workdir, pcg_alpha, pcg_rank, products = sys.argv[:9]
        one_fit(dataset, int(D), cv, workdir, pcg_alpha=float(pcg_alpha), pcg_rank=int(pcg_rank),
                products=products)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wall", help="fit at each D and cv; time, peak memory, errors")
    w.add_argument("--dataset", default="letter")
    w.add_argument("--d", type=int, nargs="+", default=[1024, 2048, 4096])
    w.add_argument("--cv", nargs="+", default=["5", "loo"], help="5, loo or pcg (solver='pcg', one alpha)")
    w.add_argument("--workdir", default=str(cache_dir()))
    w.add_argument("--pcg-alpha", type=float, default=1e-3, help="the alpha of --cv pcg")
    w.add_argument("--pcg-rank", type=int, default=2048, help="the preconditioner's rank of --cv pcg")
    w.add_argument("--products", nargs="+", default=["mixed"], choices=["mixed", "float64"],
                   help="--cv pcg: float32 products then float64 (mixed), or float64 throughout")
    r = sub.add_parser("rate", help="seconds per PCG iteration against the machine's GEMM rate")
    r.add_argument("--dataset", default="letter")
    r.add_argument("--d", type=int, nargs="+", default=[4096, 16384])
    r.add_argument("--workdir", default=str(cache_dir()))
    q = sub.add_parser("precond", help="PCG iterations by preconditioner on a Gram held in memory")
    q.add_argument("--dataset", default="letter")
    q.add_argument("--d", type=int, default=8192)
    q.add_argument("--alpha", type=float, default=1e-3)
    q.add_argument("--rows", type=int, nargs="+", default=[1024, 2048, 4096])
    q.add_argument("--sketch", type=int, nargs="+", default=[256, 512, 1024, 2048])
    q.add_argument("--workdir", default=str(cache_dir()))
    e = sub.add_parser("precision", help="PCG with float32 products against float64, in memory")
    e.add_argument("--dataset", default="letter")
    e.add_argument("--d", type=int, default=4096)
    e.add_argument("--alpha", type=float, default=1e-3)
    e.add_argument("--rank", type=int, default=2048)
    e.add_argument("--max-iter", type=int, default=300)
    e.add_argument("--tols", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5, 1e-6, 1e-7])
    e.add_argument("--workdir", default=str(cache_dir()))
    f = sub.add_parser("flat", help="PCG's peak memory against the number of rows")
    f.add_argument("--rows", type=int, nargs="+", default=[500_000, 5_000_000])
    f.add_argument("--d", type=int, default=20000)
    f.add_argument("--iterations", type=int, default=1)
    m = sub.add_parser("model", help="the Gram pass's memory, as rfstream checks it")
    m.add_argument("--d", type=int, nargs="+", default=[2048, 4096, 8192, 16384, 20000, 32768])
    m.add_argument("--targets", type=int, default=26, help="T (letter: 26 classes)")
    args = p.parse_args()
    {"wall": wall, "model": model, "rate": rate, "flat": flat, "precond": precond,
     "precision": precision}[args.command](args)


if __name__ == "__main__":
    main()

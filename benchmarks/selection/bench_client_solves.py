"""The client's factorizations of a search: their time against their flops and this machine's GEMM.

Run from the repository root:

    python benchmarks/selection/bench_client_solves.py --sizes 500 1000 2000 --alphas 5 --repeats 5

For a D x D Gram ``G = Z'Z`` (Z: 2 D x D normal rows) and T targets, each route's time for A
alphas (``(G + alpha I)^-1 C`` for every alpha), the fastest of ``--repeats`` interleaved rounds:

* ``cholesky``: one Cholesky factorization and solve per alpha (D^3/3 flops each);
* ``tridiagonal``: one reduction ``G = Q T Q'`` (LAPACK ``dsytrd``, 4/3 D^3 flops), a tridiagonal
  solve per alpha and ``Q`` applied by ``dormqr`` (:func:`rfstream.solvers.ridge.cv.tridiagonal_path`);
* ``eigh-evr``, ``eigh-evd``: one eigendecomposition with vectors (about 9 D^3 flops by the
  symmetric QR count of Golub & Van Loan; divide and conquer does fewer) serving every alpha.

Also the GEMM rate (numpy matmul of two 2000 x 2000 float64), each route's GFLOP/s at its own
nominal flop count, and the CPU time over the wall time (about the cores it kept busy);
``--threads 1 --clock cpu`` times one core's work, steadier on a shared, loaded machine.
``--evidence``: the evidence of A alphas by a Cholesky factorization and inverse per alpha against one
tridiagonal reduction.  ``--pool``: 8 Cholesky solves one after another on BLAS's threads or on one, against
:func:`rfstream.cluster.client_map` (at once, one per core).  ``--search`` (``--search-only``) also times the client's solves of a search of 8 gammas x 5 folds x A
alphas (``alpha_path`` of each gamma), at the Cholesky route's flops; with ``PYTHONPATH`` at an
older checkout it times that one's (before/after).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.linalg

CLOCK = {"clock": "wall"}


def _timed(fn, repeats):
    """``(seconds, cpu seconds / wall seconds)`` of the fastest of ``repeats`` calls; seconds of the
    wall clock, or with ``--clock cpu`` of this process's CPU time (a single BLAS thread's work,
    steadier than the wall clock on a machine shared with other jobs)."""
    best, ratio = np.inf, np.nan
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        seconds = cpu if CLOCK["clock"] == "cpu" else wall
        if seconds < best:
            best, ratio = seconds, cpu / wall
    return best, ratio


def gemm_rate(repeats):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2000, 2000)), rng.normal(size=(2000, 2000))
    seconds, cpu = _timed(lambda: a @ b, repeats)
    return 2 * 2000**3 / seconds / 1e9, cpu


def routes(D, T, A, repeats):
    from rfstream.solvers.ridge.cv import solve, tridiagonal_path

    rng = np.random.default_rng(D)
    Z = rng.normal(size=(2 * D, D))
    G, C = Z.T @ Z, rng.normal(size=(D, T))
    alphas = np.logspace(-2, 2, A)

    def cholesky():
        return [solve(G, C, a) for a in alphas]

    def tridiagonal():
        path = tridiagonal_path(G, C)
        return [path(a) for a in alphas]

    def eigh(driver):
        def run():
            e, V = scipy.linalg.eigh(G, driver=driver, check_finite=False)
            VC = V.T @ C
            return [V @ (VC / (e + a)[:, None]) for a in alphas]
        return run

    fns = {"cholesky": cholesky, "tridiagonal": tridiagonal, "eigh-evr": eigh("evr"), "eigh-evd": eigh("evd")}
    flops = {"cholesky": A * D**3 / 3, "tridiagonal": 4 * D**3 / 3, "eigh-evr": 9 * D**3, "eigh-evd": 9 * D**3}
    ref = cholesky()
    out = {}
    for _ in range(repeats):  # interleaved rounds; each route's fastest kept
        for name, fn in fns.items():
            seconds, cpu = _timed(fn, 1)
            if name not in out or seconds < out[name]["seconds"]:
                got = fn() if name not in out else None
                error = (max(np.abs(g - r).max() / np.abs(r).max() for g, r in zip(got, ref))
                         if got is not None else out[name]["max_rel_diff"])
                out[name] = {"seconds": seconds, "cpu_per_wall": round(cpu, 2),
                             "gflops": round(flops[name] / seconds / 1e9, 1), "max_rel_diff": float(error)}
    return out


def search(D, T, A, K, repeats, G=8):
    """The CV search's client solves (:func:`rfstream.solvers.ridge.cv.grid_cross_validate`'s
    ``alpha_path`` of each of G gammas, K folds, A alphas) from synthetic partials, and its rate at the
    Cholesky route's flops (G K A D^3 / 3)."""
    from rfstream.solvers.ridge import cv

    rng = np.random.default_rng(1)
    stats = {"G": [], "C": [], "s": [], "t": [], "n": [], "m": [], "B": []}
    for _ in range(K):
        Z = rng.normal(size=(D + 50, D)) * (1 + np.arange(D)) ** -0.5
        Y = rng.normal(size=(D + 50, T))
        for key, v in (("G", Z.T @ Z), ("C", Z.T @ Y), ("s", Z.sum(0)), ("t", Y.sum(0)),
                       ("n", float(len(Z))), ("m", len(Z)), ("B", Y.T @ Y)):
            stats[key].append(v)
    stats = {k: np.array(v) for k, v in stats.items()}
    total = {k: v.sum(axis=0) for k, v in stats.items()}
    alphas = np.logspace(-2, 2, A)
    if hasattr(cv, "grid_paths"):
        run = lambda: cv.grid_paths([stats] * G, [total] * G, alphas, K, True)
    else:  # before the (gamma, fold) solves ran at once
        run = lambda: [cv.alpha_path(stats, total, alphas, K, True) for _ in range(G)]
    seconds, cpu = _timed(run, repeats)
    return {"gammas": G, "folds": K, "alphas": A, "seconds": round(seconds, 3), "cpu_per_wall": round(cpu, 2),
            "gflops_at_cholesky_flops": round(G * K * A * D**3 / 3 / seconds / 1e9, 1)}


def evidence_routes(D, T, A, repeats):
    """The evidence of A alphas for one gamma: a Cholesky factorization and its inverse per alpha
    (:func:`rfstream.solvers.ridge.evidence.cholesky_path`) against one tridiagonal reduction
    (:func:`~rfstream.solvers.ridge.evidence.tridiagonal_basis` and ``evidence_path``); seconds of
    the fastest of interleaved rounds."""
    from rfstream.solvers.ridge import evidence

    rng = np.random.default_rng(D)
    Z, Y = rng.normal(size=(2 * D, D)), rng.normal(size=(2 * D, T))
    total = {"G": Z.T @ Z, "C": Z.T @ Y, "s": Z.sum(0), "t": Y.sum(0), "n": float(2 * D), "B": Y.T @ Y}
    alphas = np.logspace(-2, 2, A)
    yy, m = evidence.centred_target_energy(total, True), evidence.degrees_of_freedom(total, True)
    runs = {"cholesky": lambda: evidence.cholesky_path(total, yy, m, alphas, True),
            "tridiagonal": lambda: evidence.evidence_path(evidence.tridiagonal_basis(total, True), yy, m, alphas)}
    best = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            seconds, _ = _timed(fn, 1)
            best[name] = min(best.get(name, np.inf), seconds)
    a, b = runs["cholesky"](), runs["tridiagonal"]()
    return {**{k: round(v, 4) for k, v in best.items()},
            "max_rel_diff_log_evidence": float(np.max(np.abs(a[0] - b[0]) / np.abs(a[0])))}


def pool(D, n, repeats):
    """n Cholesky solves of one D x D Gram: one after another on BLAS's threads, one after another on
    one BLAS thread, and at once on the client's cores with one BLAS thread each
    (:func:`rfstream.cluster.client_map`); (wall s, CPU s) of the fastest of interleaved rounds."""
    from threadpoolctl import threadpool_limits

    from rfstream.cluster import client_map
    from rfstream.solvers.ridge.cv import solve

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(2 * D, D))
    G, C = Z.T @ Z, rng.normal(size=(D, 1))
    alphas = np.logspace(-2, 2, n)

    def one_blas_thread():
        with threadpool_limits(1, user_api="blas"):
            return [solve(G, C, a) for a in alphas]

    runs = {"serial, BLAS threads": lambda: [solve(G, C, a) for a in alphas],
            "serial, one BLAS thread": one_blas_thread,
            "client_map": lambda: client_map(lambda a: solve(G, C, a), alphas, width=D)}
    best = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if name not in best or wall < best[name][0]:
                best[name] = (round(wall, 3), round(cpu, 3))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    p.add_argument("--alphas", type=int, default=5)
    p.add_argument("--targets", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--search", action="store_true", help="also time the client's solves of an 8-gamma, 5-fold search")
    p.add_argument("--search-only", action="store_true", help="only the GEMM rate and --search")
    p.add_argument("--pool", action="store_true", help="only: 8 Cholesky solves per D, serial or at once")
    p.add_argument("--evidence", action="store_true", help="only: the evidence's two routes per D")
    p.add_argument("--threads", type=int, default=None, help="BLAS threads (default: the library's)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: this process's CPU time (with --threads 1, a core's work)")
    args = p.parse_args()
    CLOCK["clock"] = args.clock
    if args.threads:  # every mode's BLAS (the pool's own limits aside)
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads, user_api="blas")
    if args.evidence:
        for D in args.sizes:
            print(json.dumps({"D": D, "alphas": args.alphas, "evidence": evidence_routes(D, args.targets, args.alphas,
                                                                                      args.repeats)}), flush=True)
        return
    if args.pool:
        for D in args.sizes:
            print(json.dumps({"D": D, "8 solves (wall s, cpu s)": pool(D, 8, args.repeats)}), flush=True)
        return
    rate, cpu = gemm_rate(args.repeats)
    print(json.dumps({"gemm_gflops": round(rate, 1), "cpu_per_wall": round(cpu, 2)}), flush=True)
    for D in args.sizes:
        if args.search_only:
            print(json.dumps({"D": D, "search": search(D, args.targets, args.alphas, 5, args.repeats)}), flush=True)
            continue
        out = routes(D, args.targets, args.alphas, args.repeats)
        one = out["cholesky"]["seconds"] / args.alphas
        crossover = {name: round(r["seconds"] / one, 2) for name, r in out.items() if name != "cholesky"}
        print(json.dumps({"D": D, "alphas": args.alphas, "targets": args.targets, **out,
                          "shared_route_in_choleskys": crossover}), flush=True)
        if args.search:
            print(json.dumps({"D": D, "search": search(D, args.targets, args.alphas, 5, args.repeats)}), flush=True)


if __name__ == "__main__":
    main()

"""The CV scoring pass's decisions: one product of every fold's models against a product per fold.

    python benchmarks/selection/bench_held_out_products.py --d 500 1000 2000

:func:`rfstream.solvers.ridge.cv.held_out_decisions` on one sub-block of ``--rows`` float32
features (``FUSED_SUB_BLOCK``, as the scoring pass makes them) with each row in one of ``--folds``
folds, for ``K x P`` = folds x columns per fold of 5 ... 130 (P = 1, 2, 4, 6, 8, 13, 26): the
route that copies each fold's rows out and multiplies them by its weights, and the route that
multiplies the whole sub-block by every fold's weights and keeps each row's own; one BLAS thread
(as in a task), the routes alternated, each the fastest of ``--repeats``.  One line per (D, K x P):
both times, their ratio and the largest difference of the decisions (float32 rounding).
The rule this measures: ``ONE_PRODUCT_COLUMNS`` (docs/ridge.md, "The scoring pass's products").
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[500, 1000, 2000])
    p.add_argument("--rows", type=int, default=None, help="rows of the sub-block (default FUSED_SUB_BLOCK)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from rfstream.features.fused import FUSED_SUB_BLOCK
    from rfstream.solvers.ridge import cv

    rng = np.random.default_rng(0)
    m, K = args.rows or FUSED_SUB_BLOCK, args.folds
    folds = rng.integers(0, K, m)
    routes = {"one product": 10**9, "per fold": 0}  # ONE_PRODUCT_COLUMNS of each route
    with threadpool_limits(1):
        for D in args.d:
            z = rng.standard_normal((m, D), dtype=np.float32)
            for P in (1, 2, 4, 6, 8, 13, 26):
                W, b = rng.standard_normal((K, D, P)), rng.standard_normal((K, P))
                best, out = {name: np.inf for name in routes}, {}
                for _ in range(args.repeats):
                    for name, columns in routes.items():
                        cv.ONE_PRODUCT_COLUMNS = columns
                        seconds, out[name] = _timed(lambda: cv.held_out_decisions(z, folds, W, b))
                        best[name] = min(best[name], seconds)
                diff = float(np.abs(out["one product"] - out["per fold"]).max())
                print(f"D={D:5d}  K x P={K * P:4d}  one product {1e3 * best['one product']:7.1f} ms  "
                      f"per fold {1e3 * best['per fold']:7.1f} ms  ratio {best['one product'] / best['per fold']:.2f}  "
                      f"max difference {diff:.1e}", flush=True)


if __name__ == "__main__":
    main()

"""The products of a streaming iteration, ``Z V`` and ``Z'(Z V)``, against a square GEMM.

    python benchmarks/performance/bench_narrow_products.py --d 50000 --targets 1 26 32

A CG or PCG iteration over features made in the task multiplies each sub-block ``Z_s``
(``rfstream.features.fused.stream_rows`` rows of ``--d`` float32 features, as letter's 16
inputs give) by the ``T`` columns of its right-hand sides, then by the result again:
``u = Z_s V`` and ``Z_s' u``, 4 rows x D x T flops.  With one BLAS thread (as in a task) this
times both for each ``T`` of ``--targets`` and a square float32 GEMM of ``--square`` in the same
run, and prints one JSON line: each product's GFLOP/s and its share of the GEMM's.  Few
columns make a narrow GEMM, which BLAS runs below its square rate; that rate is what a
26-target iteration costs beside its features (docs/wide.md).
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=50_000)
    p.add_argument("--n-inputs", type=int, default=16, help="input columns (letter: 16)")
    p.add_argument("--targets", type=int, nargs="+", default=[1, 26, 32])
    p.add_argument("--square", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from rfstream.bench.measures import median_seconds
    from rfstream.features.fused import stream_rows

    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.square, args.square), dtype=np.float32)
    out = {"D": args.d, "n_inputs": args.n_inputs, "products": []}
    with threadpool_limits(1):
        gemm = 2.0 * args.square ** 3 / median_seconds(lambda: a @ a, args.repeats) / 1e9
        out["square_gemm_gflops"] = round(gemm, 1)
        for T in args.targets:
            rows = stream_rows(args.n_inputs, args.d, args.d * T + args.d)  # as a CG pass's sub-block
            Z = rng.standard_normal((rows, args.d), dtype=np.float32)
            V = rng.standard_normal((args.d, T), dtype=np.float32)
            u, back = np.empty((rows, T), dtype=np.float32), np.empty((args.d, T), dtype=np.float32)
            flops = 2.0 * rows * args.d * T
            zv = flops / median_seconds(lambda: np.matmul(Z, V, out=u), args.repeats) / 1e9
            ztu = flops / median_seconds(lambda: np.matmul(Z.T, u, out=back), args.repeats) / 1e9
            out["products"].append({"T": T, "rows": rows,
                                    "ZV_gflops": round(zv, 1), "Ztu_gflops": round(ztu, 1),
                                    "ZV_vs_gemm": round(zv / gemm, 2), "Ztu_vs_gemm": round(ztu / gemm, 2)})
            print(f"T = {T}: Z V {zv:.1f}, Z'u {ztu:.1f} GFLOP/s (square GEMM {gemm:.1f})", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""The Nystrom preconditioner's factor on the client, from float64 and from float32 rows.

    python benchmarks/solvers/bench_nystrom_factor.py --rows 8192 --d 50000 --rank 4096

``rfstream.solvers.ridge.nystrom_pcg.nystrom_factor`` of ``--rows`` sampled rows of random Fourier
features (8 Gaussian input columns, as ``bench_pcg_cluster.py``'s, centred and scaled as
``NystromPreconditioner.from_rows`` scales a million rows' sample), once from float64 rows
(every step in float64) and once from the same rows in float32 (``B B'`` and ``B' Q`` in
float32, the eigenproblem in float64).  Prints one JSON line: each side's seconds, the rank
kept, the largest and the r-th eigenvalue, the float32 side's largest eigenvalue deviation
(of the largest eigenvalue, and of each) and how far its ``U`` is from orthonormal.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--d", type=int, default=50_000)
    p.add_argument("--rank", type=int, default=4096)
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--n-rows", type=float, default=1e6, help="rows the sample stands for")
    args = p.parse_args(argv)

    from rfstream import RandomFourierFeatures
    from rfstream.solvers.ridge.nystrom_pcg import nystrom_factor

    x = np.random.default_rng(0).standard_normal((args.rows, 8), dtype=np.float32)
    rff = RandomFourierFeatures(args.d, gamma=args.gamma, random_state=0, dtype="float64").fit(x)
    B = rff.transform(x)
    B -= B.mean(axis=0)
    B *= np.sqrt(args.n_rows / args.rows)
    out = {"rows": args.rows, "D": args.d, "rank": args.rank}
    lams = {}
    for name in ("float64", "float32"):
        rows = B if name == "float64" else B.astype(np.float32)
        t0 = time.perf_counter()
        U, lam = nystrom_factor(rows, args.rank)
        out[name] = {"seconds": round(time.perf_counter() - t0, 1), "kept": int(lam.size),
                     "largest": float(lam[0]), "last": float(lam[-1])}
        lams[name] = lam
        if name == "float32":
            k = min(50, U.shape[1])
            out[name]["orthonormal_within"] = float(np.abs(U[:, :k].T @ U[:, :k] - np.eye(k)).max())
        del rows, U
        print(name, out[name], flush=True)
    k = min(lams["float64"].size, lams["float32"].size)
    gap = np.abs(lams["float32"][:k] - lams["float64"][:k])
    out["eigenvalues_off_of_largest"] = float(gap.max() / lams["float64"][0])
    out["eigenvalues_off_of_each"] = float((gap / lams["float64"][:k]).max())
    print(json.dumps(out))


if __name__ == "__main__":
    main()

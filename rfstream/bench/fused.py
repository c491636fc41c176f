"""Part 1 of ``rfstream bench``: the fused feature + Gram pass against the same run's GEMM."""
from __future__ import annotations

import sys
import time

from .measures import gemm_gflops, load


def fused_pass(train, D, alpha, scheduler="threads"):
    """Time the single fused pass of a fit (standardizer moments excluded).

    ``scheduler`` as for :func:`rfstream.cluster.connect`: "threads", or None
    for an embedded LocalCluster (one single-threaded worker process per core).
    """
    from .. import io
    from ..cluster import connect
    from ..features import RandomFourierFeatures
    from ..preprocess import Standardizer
    from ..solvers import StreamingRidgeClassifier

    X, y = io.open_dataset(train)
    with connect(scheduler):
        scaler = Standardizer().fit(X)
        Xs = scaler.transform(X)
        rff = RandomFourierFeatures(n_components=D, gamma="auto", random_state=0).fit(Xs)
        Z = rff.transform(Xs)
        solver = StreamingRidgeClassifier(alpha=alpha)
        t0 = time.perf_counter()
        solver.fit(Z, y)
        seconds = time.perf_counter() - t0
    n, d = X.shape
    flops = 2.0 * n * d * D + 1.0 * n * D * (D + 1)
    return {"scheduler": scheduler or "LocalCluster", "rows": n, "d": d, "D": D,
            "chunks": X.numblocks[0], "seconds": seconds,
            "rows_per_s": n / seconds, "gflops": flops / seconds / 1e9}


def fused_vs_gemm(train, D, alpha, repeats):
    """Repeats of the fused pass (threads and LocalCluster), each between two GEMM measurements."""
    import numpy as np

    runs = []
    for r in range(repeats):
        for scheduler in ("threads", None):
            before = gemm_gflops(D)
            run = fused_pass(train, D, alpha, scheduler)
            after = gemm_gflops(D)
            gemm = (before["median"] + after["median"]) / 2
            run.update(repeat=r, gemm_before=before, gemm_after=after, gemm_gflops=gemm,
                       vs_gemm=run["gflops"] / gemm,
                       vs_best_gemm=run["gflops"] / max(before["best"], after["best"]), load=load())
            runs.append(run)
            print(f"fused pass {run['scheduler']}: {run['gflops']:.1f} GFLOP/s = "
                  f"{run['vs_gemm']:.0%} of GEMM ({gemm:.1f})", file=sys.stderr)
    summary = {}
    for sched in ("threads", "LocalCluster"):
        shares = [r["vs_gemm"] for r in runs if r["scheduler"] == sched]
        best = [r["vs_best_gemm"] for r in runs if r["scheduler"] == sched]
        summary[sched] = {"vs_gemm_median": float(np.median(shares)), "vs_gemm_min": min(shares),
                          "vs_gemm_max": max(shares), "vs_best_gemm_median": float(np.median(best))}
    return {"runs": runs, "summary": summary}

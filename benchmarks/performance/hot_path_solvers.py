"""The solvers' A/B tests of bench_hot_path.py (its ``newton`` and ``solvers`` parts): Newton
passes over stored feature blocks against the features made in the task, and SGD epochs and
CG with the library of another checkout against this one, each fit in a fresh process (this
module, run as a script, is that process)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def newton_ab(train, D, repeats, passes=2):
    """``StreamingSGDClassifier(solver="newton")`` on KDD99 (dask threads), ``passes``
    Newton passes over the stored blocks of ``Z`` against the features made in the task
    (``features/fused.fused_pass``): seconds, interleaved, and the peak of numpy
    memory traced during one more single-pass fit of each."""
    import tracemalloc

    from rfstream import io
    from rfstream.cluster import connect
    from rfstream.features import RandomFourierFeatures
    from rfstream.preprocess import Standardizer
    from rfstream.solvers import StreamingSGDClassifier

    X, y = io.open_dataset(train)
    out = {"over the stored feature blocks (before)": [], "features in the task (now)": []}
    peak, objective = {}, {}
    with connect("threads"):
        Xs = Standardizer().fit(X).transform(X)
        rff = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(Xs)

        def fit(key, n_passes):
            Z = rff.transform(Xs)
            Z = Z.copy() if key.startswith("over") else Z  # the same graph, no feature source
            return StreamingSGDClassifier("log_loss", alpha=1e-5, solver="newton", max_iter=n_passes,
                                          tol=None).fit(Z, y)

        for r in range(repeats):
            for key in (list(out) if r % 2 == 0 else list(out)[::-1]):
                t0 = time.perf_counter()
                objective[key] = fit(key, passes).objective_
                out[key].append(time.perf_counter() - t0)
        for key in out:
            tracemalloc.start()
            fit(key, 1)
            peak[key] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    return {"D": D, "passes": passes, **{k: {"seconds": v, "median_s": float(np.median(v)), "objective": objective[k],
                                             "peak_traced_bytes_one_pass": peak[k]} for k, v in out.items()}}


def solver_child(kind, data, D, passes):
    """One timed fit in this process, for ``solvers_ab``: ``kind`` "sgd" (``passes`` epochs of
    ``StreamingSGDClassifier``, tol=None, then its evaluation pass) or "cg" (``StreamingRidge``
    with solver="cg": the statistics pass and ``passes`` product passes) on
    ``Z = rff.transform(X)``, dask threads.  Prints seconds, peak RSS and a result (this
    module run as a script: ``kind data D passes``)."""
    import resource
    import warnings

    from rfstream import io
    from rfstream.cluster import connect
    from rfstream.features import RandomFourierFeatures
    from rfstream.preprocess import Standardizer
    from rfstream.solvers import StreamingRidge, StreamingSGDClassifier

    X, y = io.open_dataset(data)
    with connect("threads"):
        Xs = Standardizer().fit(X).transform(X)
        Z = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(Xs).transform(Xs)
        t0 = time.perf_counter()
        if kind == "sgd":
            est = StreamingSGDClassifier("hinge", alpha=1e-5, max_iter=passes, tol=None).fit(Z, y)
            result = est.objective_
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # max_iter reached: wanted
                est = StreamingRidge(alpha=1.0, solver="cg", tol=1e-12, max_iter=passes).fit(Z, y.astype("f8"))
            result = float(np.abs(est.coef_).sum())
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak, "result": result}))


def solvers_ab(before, data, D, repeats, sgd_epochs=2, cg_passes=4):
    """SGD epochs and CG on ``Z = rff.transform(X)``: the tree at ``before`` (a checkout of
    the commit before the change, e.g. a ``git worktree``) against this one, each fit in a
    fresh process (``solver_child``) with ``PYTHONPATH`` set to its tree, interleaved."""
    import os
    import subprocess

    here = str(Path(__file__).resolve().parents[2])
    trees = {"before": str(Path(before).resolve()), "now": here}
    out = {kind: {tree: [] for tree in trees} for kind in ("sgd", "cg")}
    for r in range(repeats):
        for kind, passes in (("sgd", sgd_epochs), ("cg", cg_passes)):
            for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                env = dict(os.environ, PYTHONPATH=trees[tree])
                cmd = [sys.executable, __file__, kind, data, str(D), str(passes)]
                line = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
                out[kind][tree].append(json.loads(line.strip().splitlines()[-1]))
    summary = {"D": D, "sgd_epochs": sgd_epochs, "cg_passes": cg_passes, "repeats": repeats}
    for kind, runs in out.items():
        summary[kind] = {}
        for tree, rows in runs.items():
            secs = [row["seconds"] for row in rows]
            summary[kind][tree] = {"seconds": secs, "min_s": min(secs), "median_s": float(np.median(secs)),
                                   "peak_rss_mb": [round(row["peak_rss_bytes"] / 2**20) for row in rows],
                                   "result": rows[-1]["result"]}
        paired = [now["seconds"] / before["seconds"] for now, before in zip(runs["now"], runs["before"])]
        summary[kind]["paired_ratios_now_over_before"] = paired
        summary[kind]["paired_ratio_median"] = float(np.median(paired))
        summary[kind]["ratio_of_medians"] = summary[kind]["now"]["median_s"] / summary[kind]["before"]["median_s"]
    return summary


if __name__ == "__main__":
    solver_child(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

"""Where the fused RFF + Gram pass spends its time, and the A/B tests behind its current form.

    python benchmarks/performance/bench_hot_path.py --json docs/benchmarks/hot_path.json   # ~10 min, loaded 2 cores

On one 65,536 x 118 float32 block (KDD99's shape after one-hot encoding) and D features,
with one BLAS thread (what each task gets, see rfstream.cluster), every measurement
repeated ``--repeats`` times with the variants interleaved, medians reported:

1. ``stages``: seconds per stage of the chunk function: x W (GEMM, k = 118),
   + b, cos, * sqrt(2/D), the column sums, Z'Y, and the Gram Z'Z on 8192-row
   sub-blocks (numpy -> SYRK);
2. ``gram``: Gram rate by sub-block size, in SYRK flops (m D^2) per second,
   next to the GEMM rate (2 m D^2) measured in the same rounds, and a GEMM over
   upper-triangular column blocks (4 blocks);
3. ``elementwise_ab``: the previous projection (x W, then + b) and column sums
   (a float64 ``sum``) against the current ones (b folded into the GEMM,
   sums from the Z'[Y, 1] GEMM): paired ratio current / previous per round.
4. ``threads_ab`` (``--kdd``): the fused pass on KDD99 under dask's thread pool
   with BLAS left at one thread per core against one BLAS thread per task.
5. ``sub_block_ab``: the chunk function with the whole feature block made
   first, against the features made in sub-blocks of 1024-8192 rows inside it;
6. ``augmented_ab``: the fused chunk with one SYRK of ``[Z, Y, 1]`` against a SYRK
   and then a narrow ``Z'[Y, 1]`` GEMM per sub-block;
7. ``pass_ab`` (``--kdd``): the whole pass on KDD99 at D, reduced over ``Z`` as
   it is against features in the task over row blocks balanced between threads;
8. ``predict_ab`` (``--kdd``; KDD99 ``corrected`` beside it, ``*_test.zarr``): decision
   values with each task's whole feature block against the features made in the task;
9. ``newton_ab`` (``--kdd``): two Newton passes of the SGD classifier over the stored
   feature blocks against the features made in the task.
10. ``solvers_ab`` (``--before``, ``--data``): SGD epochs and CG on ``Z = rff.transform(X)``
   with the library of another checkout (the commit before a change) against this one,
   each fit in a fresh process, interleaved; seconds and peak RSS:

       git worktree add --detach /tmp/before <commit>
       python benchmarks/performance/bench_hot_path.py --parts solvers --before /tmp/before \
           --data kdd_like.zarr --n-components 1000 --repeats 5
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits


def _time(fn):
    """:func:`rfstream.bench.measures.wall_seconds`, imported on use: the ``_solver`` child
    process runs with another checkout's rfstream, whose bench may not have it."""
    from rfstream.bench.measures import wall_seconds

    return wall_seconds(fn)


def stages(x, W, b, y1, repeats, sub=8192):
    D = W.shape[1]
    z = np.cos(x @ W)
    parts = {
        "projection x@W": lambda: x @ W,
        "+ b": lambda: np.add(z, b, out=z),
        "cos": lambda: np.cos(z, out=z),
        "* sqrt(2/D)": lambda: np.multiply(z, math.sqrt(2.0 / D), out=z),
        "column sums (float64 sum)": lambda: z.sum(axis=0, dtype=np.float64),
        "Z'[Y, 1] (8192-row GEMMs)": lambda: [z[s:s + sub].T @ y1[s:s + sub] for s in range(0, len(z), sub)],
        "Gram Z'Z (8192-row SYRKs)": lambda: [z[s:s + sub].T @ z[s:s + sub] for s in range(0, len(z), sub)],
    }
    out = {k: [] for k in parts}
    for _ in range(repeats):
        for k, fn in parts.items():
            out[k].append(_time(fn))
    return {k: float(np.median(v)) for k, v in out.items()}


def gram_rates(z, repeats):
    m, D = z.shape
    a = np.ascontiguousarray(z[:4096])
    c = np.ascontiguousarray(z[4096:8192])

    def syrk(sub):
        return lambda: [z[s:s + sub].T @ z[s:s + sub] for s in range(0, m, sub)]

    def blocked(nb=4, sub=8192):
        edges = np.linspace(0, D, nb + 1).astype(int)
        return lambda: [z[s:s + sub, edges[i]:edges[i + 1]].T @ z[s:s + sub, edges[i]:]
                        for s in range(0, m, sub) for i in range(nb)]

    variants = {f"syrk sub={s}": syrk(s) for s in (4096, 8192, 16384, 65536)}
    variants["gemm upper blocks x4 sub=8192"] = blocked()
    rates = {k: [] for k in variants}
    rates["gemm (4096 x D)' (4096 x D)"] = []
    for _ in range(repeats):
        for k, fn in variants.items():
            rates[k].append(m * D * D / _time(fn) / 1e9)
        rates["gemm (4096 x D)' (4096 x D)"].append(2 * 4096 * D * D / _time(lambda: a.T @ c) / 1e9)
    return {k: {"median_gflops": float(np.median(v)), "min": min(v), "max": max(v)} for k, v in rates.items()}


def elementwise_ab(x, W, b, Y, repeats, sub=8192):
    from rfstream.features.fourier import project_with_offset

    D, m = W.shape[1], x.shape[0]

    def previous():
        p = x @ W
        p += b
        np.cos(p, out=p)
        p *= math.sqrt(2.0 / D)
        p.sum(axis=0, dtype=np.float64)
        for s in range(0, m, sub):
            p[s:s + sub].T @ Y[s:s + sub]

    def current():
        p = project_with_offset(x, W, b)
        np.cos(p, out=p)
        p *= math.sqrt(2.0 / D)
        y1 = np.ones((m, Y.shape[1] + 1), np.float32)
        y1[:, :-1] = Y
        for s in range(0, m, sub):
            p[s:s + sub].T @ y1[s:s + sub]

    ratios, prev, cur = [], [], []
    for r in range(repeats):
        order = (previous, current) if r % 2 == 0 else (current, previous)
        t = {fn.__name__: _time(fn) for fn in order}
        prev.append(t["previous"])
        cur.append(t["current"])
        ratios.append(t["current"] / t["previous"])
    return {"previous_median_s": float(np.median(prev)), "current_median_s": float(np.median(cur)),
            "paired_ratio_median": float(np.median(ratios)), "paired_ratio_min": min(ratios),
            "paired_ratio_max": max(ratios)}


def threads_ab(train, D, repeats):
    from rfstream import cluster
    from rfstream.bench.fused import fused_pass

    single = cluster.one_blas_thread_per_task
    out = {"blas one thread per core": [], "one BLAS thread per task": []}
    try:
        for r in range(repeats):
            keys = list(out) if r % 2 == 0 else list(out)[::-1]
            for key in keys:
                cluster.one_blas_thread_per_task = (
                    single if key == "one BLAS thread per task" else __import__("contextlib").nullcontext)
                out[key].append(fused_pass(train, D, 1.0, "threads")["seconds"])
    finally:
        cluster.one_blas_thread_per_task = single
    return {k: {"seconds": v, "median": float(np.median(v))} for k, v in out.items()}


def sub_block_ab(x, D, repeats):
    """The chunk function with and without the features computed in sub-blocks.

    "whole block": the RFF block of all rows first, then the Gram on 8192-row
    sub-blocks (what a reduction over ``Z`` does); "features in N-row
    sub-blocks": ``gram_chunk(..., features=feature_source(Z).block)``, what the ridge pass
    does for ``Z = rff.transform(X)``.  Share of the same rounds' 1-thread GEMM
    in the pass's counted flops (2 m d D + m D (D + 1)).
    """
    import dask.array as da

    import rfstream.features.fused as fused_module
    import rfstream.solvers.ridge.gram as gram
    from rfstream.solvers.passes import RowSpec
    from rfstream.features import RandomFourierFeatures, feature_source

    m, d = x.shape
    rff = RandomFourierFeatures(D, gamma=0.01, random_state=0).fit(x[:1])
    block = feature_source(rff.transform(da.from_array(x[:1]))).block  # the map's block function
    y = np.zeros(m)
    layout = gram.gram_layout(D, 1, 1)
    spec = RowSpec(layout=layout, targets=lambda v: v[:, None])

    def chunk(z, y, features=None):
        return gram.gram_chunk(z, y, offset=0, spec=replace(spec, features=features))

    a, c = np.ones((4096, D), np.float32), np.ones((4096, D), np.float32)

    def fused(sub):
        def run():
            old, fused_module.FUSED_SUB_BLOCK = fused_module.FUSED_SUB_BLOCK, sub
            try:
                chunk(x, y, features=block)
            finally:
                fused_module.FUSED_SUB_BLOCK = old
        return run

    variants = {"whole block": lambda: chunk(rff.transform(x), y)}
    variants.update({f"features in {s}-row sub-blocks": fused(s) for s in (1024, 2048, 4096, 8192)})
    seconds = {k: [] for k in variants}
    shares = {k: [] for k in variants}
    flops = 2.0 * m * d * D + 1.0 * m * D * (D + 1)
    for r in range(repeats):
        gemm = 2.0 * 4096 * D * D / min(_time(lambda: a.T @ c) for _ in range(3))
        for k in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            t = _time(variants[k])
            seconds[k].append(t)
            shares[k].append(flops / t / gemm)
    return {k: {"median_s": float(np.median(seconds[k])), "median_share_of_gemm": float(np.median(shares[k])),
                "min_share": min(shares[k]), "max_share": max(shares[k])} for k in variants}


def augmented_ab(x, D, repeats):
    """The fused chunk with one SYRK of the buffer ``[Z_s, Y_s, 1]`` (current) against a
    SYRK of ``Z_s`` and then a GEMM ``Z_s'[Y_s, 1]`` that reads the sub-block again
    (the previous form), both on FUSED_SUB_BLOCK-row sub-blocks; paired ratio per round."""
    from functools import partial

    import dask.array as da

    import rfstream.solvers.ridge.gram as gram
    from rfstream.features import RandomFourierFeatures, feature_source
    from rfstream.solvers.passes import RowSpec
    from rfstream.features.fused import FUSED_SUB_BLOCK, even_sub_blocks, fused_buffer

    m = x.shape[0]
    rff = RandomFourierFeatures(D, gamma=0.01, random_state=0).fit(x[:1])
    block = feature_source(rff.transform(da.from_array(x[:1]))).block  # the map's block function
    y = np.where(np.arange(m) % 3 == 0, 1.0, -1.0)
    layout = gram.gram_layout(D, 1, 1)
    current = partial(gram.gram_chunk, x, y, offset=0,
                      spec=RowSpec(layout=layout, targets=lambda v: v[:, None], features=block))

    def previous():
        parts = layout.unpack(layout.empty())
        zbuf, gbuf = fused_buffer(m, D, np.float32), np.empty((D, D), np.float32)
        y1 = np.ones((m, 2), np.float32)
        y1[:, 0] = y
        for start, stop in even_sub_blocks(m, FUSED_SUB_BLOCK):
            zs = block(x[start:stop], zbuf[: stop - start])
            parts["G"][0] += np.matmul(zs.T, zs, out=gbuf)
            zy = zs.T @ y1[start:stop]
            parts["C"][0] += zy[:, :-1]
            parts["s"][0] += zy[:, -1]

    seconds = {"SYRK then Z'[Y, 1] GEMM (previous)": [], "one SYRK of [Z, Y, 1] (current)": []}
    runs = dict(zip(seconds, (previous, current)))
    for r in range(repeats):
        for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            seconds[k].append(_time(runs[k]))
    prev, cur = (np.array(v) for v in seconds.values())
    return {**{k: {"seconds": v, "median_s": float(np.median(v))} for k, v in seconds.items()},
            "median_ratio_current_over_previous": float(np.median(cur / prev))}


def pass_ab(train, D, repeats):
    """Fused pass on KDD99 (dask threads): reduced over ``Z`` as it is, against the
    features computed in the task in sub-blocks over rows balanced between the threads."""
    from rfstream import io
    from rfstream.bench.measures import gemm_gflops
    from rfstream.cluster import connect
    from rfstream.features import RandomFourierFeatures
    from rfstream.preprocess import Standardizer
    from rfstream.solvers import StreamingRidgeClassifier

    X, y = io.open_dataset(train)
    n, d = X.shape
    flops = 2.0 * n * d * D + 1.0 * n * D * (D + 1)
    out = {"over Z": [], "features in the task, balanced rows": []}
    gemm = []
    with connect("threads"):
        Xs = Standardizer().fit(X).transform(X)
        rff = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(Xs)
        for r in range(repeats):
            gemm.append(gemm_gflops(D)["median"])
            for key in (list(out) if r % 2 == 0 else list(out)[::-1]):
                Z = rff.transform(Xs)
                if key == "over Z":
                    Z = Z.copy()  # the same graph, no feature source: reduced over its blocks
                out[key].append(_time(lambda Z=Z: StreamingRidgeClassifier(alpha=1.0).fit(Z, y)))
            gemm.append(gemm_gflops(D)["median"])
    g = float(np.median(gemm))
    return {"D": D, "gemm_gflops_median": g, **{
        k: {"seconds": v, "median_s": float(np.median(v)),
            "share_of_gemm": flops / float(np.median(v)) / 1e9 / g} for k, v in out.items()}}


def predict_ab(train, test, D, repeats):
    """Decision values on KDD99 ``corrected`` (dask threads), with ``Z = rff.transform(X)``
    reduced as it is (each task makes its whole feature block) against the features made
    in the task a sub-block at a time (``features/fused.feature_sub_blocks``): seconds,
    interleaved, and the peak of numpy memory traced during one more run of each."""
    import tracemalloc

    from rfstream import io
    from rfstream.cluster import compute, connect
    from rfstream.features import RandomFourierFeatures
    from rfstream.preprocess import Standardizer
    from rfstream.solvers import StreamingRidgeClassifier

    X, y = io.open_dataset(train)
    Xt, _ = io.open_dataset(test)
    out = {"whole feature block per task (before)": [], "features in the task, sub-blocks (now)": []}
    peak = {}
    with connect("threads"):
        scaler = Standardizer().fit(X)
        rff = RandomFourierFeatures(D, gamma="auto", random_state=0).fit(scaler.transform(X))
        est = StreamingRidgeClassifier(alpha=1.0).fit(rff.transform(scaler.transform(X)), y)

        def scores(key):
            Z = rff.transform(scaler.transform(Xt))
            if key.startswith("whole"):
                Z = Z.copy()  # the same graph, no feature source
            return est.decision_function(Z)

        for r in range(repeats + 1):
            for key in (list(out) if r % 2 == 0 else list(out)[::-1]):
                if r == repeats:  # one more run of each, traced
                    tracemalloc.start()
                    compute(scores(key))
                    peak[key] = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()
                else:
                    out[key].append(_time(lambda key=key: compute(scores(key))))
    return {"D": D, "rows": Xt.shape[0], **{k: {"seconds": v, "median_s": float(np.median(v)),
                                                "peak_traced_bytes": peak[k]} for k, v in out.items()}}


# ------------------------------------------------------------------ solvers: newton, solvers
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
    script run as ``_solver kind data D passes``).  It imports nothing of rfstream.bench:
    it runs with another checkout's rfstream."""
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
                cmd = [sys.executable, __file__, "_solver", kind, data, str(D), str(passes)]
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


PARTS = ("stages", "gram", "elementwise", "sub_block", "augmented", "threads", "pass", "predict", "newton", "solvers")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--kdd", default=None,
                   help="KDD99 training Zarr (runs/bench/kddcup99_train.zarr, as rfstream bench converts it)")
    p.add_argument("--kdd-components", type=int, default=1000)
    p.add_argument("--json", default=None)
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--before", default=None, help="checkout of the commit before a change, for --parts solvers")
    p.add_argument("--data", default=None, help="Zarr dataset of --parts solvers (e.g. a synthetic KDD-like one)")
    args = p.parse_args(argv)
    import os

    rng = np.random.default_rng(0)
    m, d, D = 65536, 118, args.n_components
    x = rng.standard_normal((m, d)).astype(np.float32)
    W = (rng.standard_normal((d, D)) * 0.1).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, D).astype(np.float32)
    Y = np.where(rng.random((m, 1)) < 0.5, 1.0, -1.0).astype(np.float32)
    y1 = np.ones((m, 2), np.float32)
    y1[:, :1] = Y
    result = {"block": [m, d], "D": D, "repeats": args.repeats, "loadavg_start": list(os.getloadavg())}
    parts = set(args.parts)
    with threadpool_limits(1, user_api="blas"):
        if "stages" in parts:
            result["stages_seconds"] = stages(x, W, b, y1, args.repeats)
        if "gram" in parts:
            result["gram"] = gram_rates(np.cos(x @ W), args.repeats)
        if "elementwise" in parts:
            result["elementwise_ab"] = elementwise_ab(x, W, b, Y, 2 * args.repeats)
        if "sub_block" in parts:
            result["sub_block_ab"] = sub_block_ab(x, D, args.repeats)
        if "augmented" in parts:
            result["augmented_ab"] = augmented_ab(x, D, 2 * args.repeats)
    if args.kdd and "threads" in parts:
        result["threads_ab"] = threads_ab(args.kdd, args.kdd_components, 2)
        result["threads_ab"]["D"] = args.kdd_components
    if args.kdd and "pass" in parts:
        result["pass_ab"] = pass_ab(args.kdd, D, args.repeats)
    if args.kdd and "predict" in parts:
        test = str(Path(args.kdd).with_name(Path(args.kdd).name.replace("_train.zarr", "_test.zarr")))
        result["predict_ab"] = predict_ab(args.kdd, test, D, args.repeats)
    if args.kdd and "newton" in parts:
        result["newton_ab"] = newton_ab(args.kdd, D, args.repeats)
    if args.before and args.data and "solvers" in parts:
        result["solvers_ab"] = solvers_ab(args.before, args.data, args.n_components, args.repeats)
    result["loadavg_end"] = list(os.getloadavg())
    print(json.dumps(result, indent=2))
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_solver"]:  # one fit of solvers_ab, in its own process
        solver_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()

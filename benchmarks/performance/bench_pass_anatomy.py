"""Where one ridge pass spends its wall time, task by task, and what the embedded cluster's
settings cost.

    python benchmarks/performance/bench_pass_anatomy.py --kdd runs/bench/kddcup99_train.zarr --json out.json

KDD99 (the Zarr that ``rfstream bench`` converts), standardized, RFF with D features,
``StreamingRidgeClassifier(alpha=1).fit``: the pass that ``rfstream bench --parts fused``
times.  Three parts, each repeated ``--repeats`` times (the third at least 7):

1. ``tasks``: under dask threads (``dask.diagnostics.Profiler``) and under the embedded
   LocalCluster (``distributed.get_task_stream``), every task longer than 10 ms with its
   start and end relative to the fit's start, per worker; the fit's wall time; the
   per-row-block task times; and the time from the last row-block task's end to the end
   of the fit (the combine steps, the transfer to the client, the solve).
2. ``cluster_config``: interleaved passes on an embedded LocalCluster with
   distributed's defaults and with :data:`rfstream.embedded.EMBEDDED_CONFIG`: wall time,
   CPU seconds of the client process and of each worker process (its busiest thread is
   the task; the others are background work), and system-wide idle core-seconds.
3. ``sub_block``: one sub-block of a row-block task (``rfstream.solvers.ridge.gram.SUB_BLOCK``
   rows at most, as the pass cuts it), its steps timed apart with one BLAS thread (as in a
   worker): the projection ``[x, 1] @ [W; b]``, the cosines (over the buffer's whole rows,
   as the pass takes them), the SYRK of ``[Z, Y, 1]``, its float64 accumulation, and the
   sub-block's share of the task's one scaling of its partials by ``sqrt(2/D)``
   (``G *= 2/D``; the features themselves are not scaled); and a GEMM of the SYRK's shape.
   Their sum against the flops ``rfstream bench`` counts at that GEMM's rate is the
   ceiling of the pass's share of GEMM before any scheduling.
"""
from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import numpy as np


def _pipeline(X, D):
    from rfstream.features import RandomFourierFeatures
    from rfstream.preprocess import Standardizer

    Xs = Standardizer().fit(X).transform(X)
    return RandomFourierFeatures(n_components=D, gamma="auto", random_state=0).fit(Xs).transform(Xs)


def _summary(events, wall):
    """events: (worker, start, end, name) relative to the fit's start."""
    rows = [e for e in events if e[2] - e[1] > 1.0]  # the row-block tasks (seconds each)
    last = max((e[2] for e in rows), default=0.0)
    per_worker = defaultdict(list)
    for w, a, b, name in sorted(events, key=lambda e: e[1]):
        if b - a > 0.01:
            per_worker[str(w)].append([round(a, 3), round(b, 3), name])
    return {"wall_s": wall, "row_block_task_s": sorted(round(b - a, 3) for _, a, b, _ in rows),
            "after_last_row_block_s": wall - last, "timeline": dict(per_worker)}


def tasks(path, D, repeats):
    from dask.diagnostics import Profiler
    from distributed import get_task_stream

    from rfstream import io
    from rfstream.cluster import connect
    from rfstream.solvers import StreamingRidgeClassifier

    X, y = io.open_dataset(path)
    out = {"threads": [], "LocalCluster": []}
    for scheduler, key in (("threads", "threads"), (None, "LocalCluster")):
        with connect(scheduler):
            Z = _pipeline(X, D)
            for _ in range(repeats):
                if scheduler == "threads":
                    with Profiler() as prof:
                        t0 = time.perf_counter()
                        StreamingRidgeClassifier(alpha=1.0).fit(Z, y)
                        wall = time.perf_counter() - t0
                    # the Profiler's clock is timeit.default_timer, i.e. time.perf_counter
                    events = [(r.worker_id, r.start_time - t0, r.end_time - t0,
                               str(r.key[0] if isinstance(r.key, tuple) else r.key).rsplit("-", 1)[0])
                              for r in prof.results]
                else:
                    with get_task_stream() as ts:
                        t0 = time.time()
                        StreamingRidgeClassifier(alpha=1.0).fit(Z, y)
                        wall = time.time() - t0
                    events = [(r["worker"], s["start"] - t0, s["stop"] - t0,
                               f"{s['action']} " + str(r["key"][0] if isinstance(r["key"], tuple)
                                                       else r["key"]).rsplit("-", 1)[0])
                              for r in ts.data for s in r["startstops"]]
                out[key].append(_summary(events, wall))
                print(key, f"wall {wall:.2f} s, row-block tasks",
                      out[key][-1]["row_block_task_s"], flush=True)
    return out


def _process_cpu(pid):
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _thread_cpu():
    import psutil

    return sorted((t.user_time + t.system_time for t in psutil.Process().threads()), reverse=True)


def cluster_config(path, D, repeats):
    import psutil

    from rfstream import cluster, embedded as settings, io
    from rfstream.solvers import StreamingRidgeClassifier

    X, y = io.open_dataset(path)
    ours = dict(settings.EMBEDDED_CONFIG)
    out = {"distributed defaults": [], "EMBEDDED_CONFIG": []}
    try:
        for r in range(repeats):
            for key in (list(out) if r % 2 == 0 else list(out)[::-1]):
                settings.EMBEDDED_CONFIG = ours if key == "EMBEDDED_CONFIG" else {}
                with cluster.connect(None) as client:
                    Z = _pipeline(X, D)
                    StreamingRidgeClassifier(alpha=1.0).fit(Z, y)  # warm the workers
                    me, cpu0, sys0 = os.getpid(), _process_cpu(os.getpid()), psutil.cpu_times()
                    w0 = client.run(_thread_cpu)
                    t0 = time.perf_counter()
                    StreamingRidgeClassifier(alpha=1.0).fit(Z, y)
                    wall = time.perf_counter() - t0
                    w1 = client.run(_thread_cpu)
                    cpu1, sys1 = _process_cpu(me), psutil.cpu_times()
                workers = [{"task_thread_s": b[0] - a[0], "other_threads_s": sum(b[1:]) - sum(a[1:])}
                           for a, b in ((w0[w], w1[w]) for w in w1)]
                out[key].append({"wall_s": wall, "client_process_cpu_s": cpu1 - cpu0, "workers": workers,
                                 "idle_core_s": sys1.idle - sys0.idle})
                print(key, f"wall {wall:.2f} s", out[key][-1], flush=True)
    finally:
        settings.EMBEDDED_CONFIG = ours
    return {k: {"runs": v, "median_wall_s": float(np.median([r["wall_s"] for r in v]))} for k, v in out.items()}


def _whole_row_cosines(buf, D):
    """The cosines as the Gram pass takes them: over the buffer's whole rows, ``[Y, 1]`` zeroed."""
    buf[:, D:] = 0.0
    np.cos(buf, out=buf)


def sub_block(path, D, repeats):
    """Part 3 (module docstring): the steps of one sub-block as a task of ``path`` cuts it."""
    from threadpoolctl import threadpool_limits

    from rfstream import io
    from rfstream.bench.measures import median_seconds
    from rfstream.features.fused import even_sub_blocks
    from rfstream.solvers.ridge.gram import SUB_BLOCK

    X, _ = io.open_dataset(path)
    per_task = list(even_sub_blocks(X.chunks[0][0], SUB_BLOCK))
    start, stop = per_task[0]
    m, d = int(stop - start), int(X.shape[1])
    rng = np.random.default_rng(0)
    xa = np.ones((m, d + 1), dtype=np.float32)
    xa[:, :-1] = rng.standard_normal((m, d), dtype=np.float32)
    Wb = 0.1 * rng.standard_normal((d + 1, D), dtype=np.float32)
    buf = np.ones((m, D + 2), dtype=np.float32)  # [Z, Y, 1], one target
    g = np.empty((D + 2, D + 2), dtype=np.float32)
    G = np.zeros((D, D))
    a, b = (rng.standard_normal((m, D + 2), dtype=np.float32) for _ in range(2))
    steps = {
        "projection": lambda: np.matmul(xa, Wb, out=buf[:, :D]),
        "cosines": lambda: _whole_row_cosines(buf, D),
        "syrk": lambda: np.matmul(buf.T, buf, out=g),
        "float64 accumulation": lambda: G.__iadd__(g[:D, :D]),
        "scaling of the partials": lambda: G.__imul__(2.0 / D),
    }
    with threadpool_limits(1):
        np.matmul(buf.T, buf, out=g)  # warm up
        seconds = {name: median_seconds(fn, max(repeats, 7)) for name, fn in steps.items()}
        gemm_s = median_seconds(lambda: np.matmul(a.T, b, out=g), max(repeats, 7))
    seconds["scaling of the partials"] /= len(per_task)  # once per task
    gemm_rate = 2.0 * m * (D + 2) ** 2 / gemm_s
    counted = 2.0 * m * d * D + 1.0 * m * D * (D + 1)  # the flops rfstream bench counts
    total = sum(seconds.values())
    return {"rows": m, "sub_blocks_per_task": len(per_task), "d": d,
            "ms": {k: round(v * 1e3, 2) for k, v in seconds.items()},
            "sum_ms": round(total * 1e3, 2), "gemm_1_thread_gflops": round(float(gemm_rate) / 1e9, 1),
            "syrk_vs_gemm": round(float(m * (D + 2) * (D + 3) / seconds["syrk"] / gemm_rate), 3),
            "ceiling_vs_gemm": round(float(counted / gemm_rate / total), 3)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kdd", default="runs/bench/kddcup99_train.zarr",
                   help="KDD99 training Zarr, as rfstream bench converts it")
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--parts", nargs="+", default=["tasks", "cluster_config", "sub_block"],
                   choices=["tasks", "cluster_config", "sub_block"])
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    result = {"D": args.n_components, "loadavg_start": list(os.getloadavg())}
    if "tasks" in args.parts:
        result["tasks"] = tasks(args.kdd, args.n_components, args.repeats)
    if "cluster_config" in args.parts:
        result["cluster_config"] = cluster_config(args.kdd, args.n_components, args.repeats)
    if "sub_block" in args.parts:
        result["sub_block"] = sub_block(args.kdd, args.n_components, args.repeats)
        print("sub_block", result["sub_block"], flush=True)
    result["loadavg_end"] = list(os.getloadavg())
    if args.json:
        from rfstream.bench.scripts import write_json

        write_json(args.json, result, indent=2)


if __name__ == "__main__":
    main()

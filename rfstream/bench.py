"""Benchmark of the fused feature-map + Gram pass (``rfstream bench``).

Everything is measured in one run on one machine, so the numbers are ratios
that survive a noisy, shared machine:

1. the machine's own numpy float32 GEMM, GFLOP/s, on the Gram's shape
   (D x m) @ (m x D);
2. rfstream's fused pass (read Zarr chunk -> standardize -> RFF block ->
   SYRK into the Gram, one task per chunk), rows/s and achieved GFLOP/s
   (2 n d D for the projection + n D (D + 1) for the symmetric Gram by
   SYRK: the flops actually performed), next to (1);
3. end to end on the same data: rfstream (Zarr on disk, dask threads) against
   scikit-learn's RBFSampler + RidgeClassifier (all in memory), wall time and
   peak resident memory, each in its own subprocess (VmHWM), plus the
   test error of both when a test set is given.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def add_arguments(p):
    p.add_argument("--train", default=None, help="training Zarr dataset (default: KDD99 10%% converted from --datasets)")
    p.add_argument("--test", default=None, help="test Zarr dataset (default: KDD99 corrected)")
    p.add_argument("--datasets", default=os.environ.get("RFSTREAM_DATASETS", "../shared/datasets"))
    p.add_argument("--workdir", default="runs/bench")
    p.add_argument("--n-components", type=int, default=2000)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--skip-sklearn", action="store_true")
    p.add_argument("--json", default=None, help="write the results here")


def peak_rss():
    """This process's own peak resident memory, in bytes.

    Linux's VmHWM belongs to the address space, which exec replaces. ``ru_maxrss`` does
    not start afresh: a process started by fork + exec reports its parent's peak if that
    was higher. So ``ru_maxrss`` is only the fallback off Linux.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def gemm_gflops(D, m, repeats=5):
    """Best-of float32 GEMM rate on (D x m) @ (m x D).

    Two distinct matrices: numpy routes ``a.T @ a`` to SYRK, which does half
    the flops, and counting 2 m D^2 for it would overstate the baseline 2x.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, D), dtype=np.float32)
    b = rng.standard_normal((m, D), dtype=np.float32)
    a.T @ b  # warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a.T @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * m * D * D / best / 1e9


def _kdd(datasets, workdir):
    from . import io

    workdir = Path(workdir)
    train, test = workdir / "kdd_train.zarr", workdir / "kdd_test.zarr"
    if not train.exists():
        io.convert(str(Path(datasets) / "kddcup99" / "kddcup.data_10_percent.gz"), str(train), positive_class="normal")
    if not test.exists():
        io.convert(str(Path(datasets) / "kddcup99" / "corrected.gz"), str(test), like=str(train))
    return str(train), str(test)


def fused_pass(train, D, alpha, scheduler="threads"):
    """Time the single fused pass of a fit (standardizer moments excluded).

    ``scheduler`` as for :func:`rfstream.cluster.connect`: "threads", or None
    for an embedded LocalCluster (one single-threaded worker process per core).
    """
    from . import io
    from .cluster import connect
    from .features import RandomFourierFeatures
    from .preprocess import Standardizer
    from .solvers import StreamingRidgeClassifier

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


def _child(kind, train, test, D, alpha):
    """Run one end-to-end fit + test error in this process; print JSON with its peak memory."""
    import dask
    import numpy as np

    from . import io

    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    t0 = time.perf_counter()
    if kind == "sklearn":
        from sklearn.kernel_approximation import RBFSampler
        from sklearn.linear_model import RidgeClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from .kernels import auto_gamma

        Xn, yn = X.compute(), y.compute()
        gamma = auto_gamma(StandardScaler().fit_transform(Xn), "gaussian", random_state=0)
        model = make_pipeline(StandardScaler(), RBFSampler(gamma=gamma, n_components=D, random_state=0),
                              RidgeClassifier(alpha=alpha))
        model.fit(Xn, yn)
        fit_s = time.perf_counter() - t0
        err = float(np.mean(model.predict(Xt.compute()) != yt.compute()))
    else:
        from .cli import evaluate_dataset, fit_dataset

        with dask.config.set(scheduler="threads"):
            model, meta = fit_dataset(train, n_components=D, alpha=alpha, random_state=0)
            fit_s = time.perf_counter() - t0
            err = evaluate_dataset(model, meta, test)["value"]
    total = time.perf_counter() - t0
    peak = peak_rss()
    print(json.dumps({"kind": kind, "fit_seconds": fit_s, "total_seconds": total,
                      "peak_rss_bytes": peak, "test_error": err}))


def _run_child(kind, train, test, D, alpha):
    cmd = [sys.executable, "-c",
           f"from rfstream.bench import _child; _child({kind!r}, {train!r}, {test!r}, {D}, {alpha})"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"kind": kind, "error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(args):
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.train is None:
        train, test = _kdd(args.datasets, args.workdir)
    else:
        train, test = args.train, args.test
    D = args.n_components
    result = {"machine": {"cpus": os.cpu_count()}, "train": train, "test": test}
    result["gemm_gflops"] = gemm_gflops(D, 4096)
    result["fused_pass"] = [fused_pass(train, D, args.alpha, s) for s in ("threads", None)]
    for fused in result["fused_pass"]:
        fused["vs_gemm"] = fused["gflops"] / result["gemm_gflops"]
    result["rfstream"] = _run_child("rfstream", train, test, D, args.alpha)
    if not args.skip_sklearn:
        result["sklearn"] = _run_child("sklearn", train, test, D, args.alpha)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result

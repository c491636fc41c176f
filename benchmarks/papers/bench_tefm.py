"""Benchmarks of TEFM-G / TEFM-S (Chen et al. 2015): Figures 1-3 and the scale run.

Run from the repository root (needs ../shared/datasets); results (JSON, PNG) go
to docs/tefm/ by default:

    python benchmarks/papers/bench_tefm.py kernel      # Figure 1: kernel approximation error vs l
    python benchmarks/papers/bench_tefm.py regression  # Figures 2-3: cpusmall relative RMSE vs l and time
    python benchmarks/papers/bench_tefm.py dsweep      # cpusmall: TEFM-G with d = 4, 8, 16 l vs RFF 4 l
    python benchmarks/papers/bench_tefm.py gammacv     # cpusmall: the same with gamma chosen by CV per method
    python benchmarks/papers/bench_tefm.py sketch      # range-finder pass per task: TEFM-S vs TEFM-G
    python benchmarks/papers/bench_tefm.py scale --rows 1000000 5000000   # synthetic KDD-shaped Zarr

Every sub-command runs on dask's threads scheduler (2 cores here); ``scale
--scheduler processes`` fits on a LocalCluster of 2 single-threaded workers
instead.  The scale run writes a synthetic KDD-shaped dataset
(:func:`rfstream.datasets.synthetic.write_kdd_like`) chunk by chunk and fits each size in
its own subprocess, so that the peak resident memory (``ru_maxrss``) of one fit
is measured alone (with ``processes``, the client's only).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import dask
import numpy as np

from rfstream.bench.measures import wall_seconds
from rfstream.bench.scripts import cache_dir, write_json
from rfstream.bench.scripts import cached_dataset as dataset
from rfstream.datasets import DATASETS

ROOT = Path(__file__).resolve().parents[2]
LS = (50, 100, 200, 400)


# ----------------------------------------------------------------- compared maps, figures
def feature_maps(l, gamma, seed):
    """The Figure 1 methods at l output features (d = 4 l for TEFM and compact maps)."""
    from rfstream import TEFM
    from rfstream.features import (
        CompactRandomFeatures,
        FastfoodFeatures,
        RandomFourierFeatures,
    )

    return {
        "RFF (MC)": RandomFourierFeatures(l, gamma=gamma, random_state=seed),
        "ORF": RandomFourierFeatures(l, gamma=gamma, sampler="orthogonal", random_state=seed),
        "QMC": RandomFourierFeatures(l, gamma=gamma, sampler="qmc", random_state=seed),
        "Fastfood": FastfoodFeatures(l, gamma=gamma, random_state=seed),
        "Compact": CompactRandomFeatures(l, gamma=gamma, random_state=seed),
        "TEFM-G": TEFM(l, method="gaussian", gamma=gamma, random_state=seed),
        "TEFM-S": TEFM(l, method="srht", gamma=gamma, random_state=seed),
        # Algorithms 1 and 2 exactly as written in the paper (no power iteration)
        "TEFM-G q=0": TEFM(l, method="gaussian", n_power_iter=0, gamma=gamma, random_state=seed),
        "TEFM-S q=0": TEFM(l, method="srht", n_power_iter=0, gamma=gamma, random_state=seed),
    }


def plot_kernel(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for method, errs in res["mean"].items():
            ls = [int(k) for k in errs]
            ax.semilogy(ls, list(errs.values()), marker="o", label=method,
                        lw=2.2 if method.startswith("TEFM") else 1.2,
                        ls="--" if "q=0" in method else "-")
        ax.set_title(f"{name} (n={res['n_rows']}, d=4l)")
        ax.set_xlabel("number of features l")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("||K - ZZ'||_F / ||K||_F")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_gamma_cv(summary, out):
    """Figures 2-3 from the gammacv summary: RFF as one curve over its feature counts."""
    curves = {}
    for key, v in summary.items():
        l, method = key.split(" ", 1)
        l = int(l)
        name, features = ("RFF (MC)", 4 * l if method == "RFF 4l" else l) if method.startswith("RFF") \
            else (method, l)
        curves.setdefault(name, {})[features] = v
    runs = [{"method": name, "l": f, "rmse": v["test_rmse_mean"], "seconds": v["seconds_median"]}
            for name, pts in curves.items() for f, v in sorted(pts.items())]
    plot_regression({"runs": runs}, out, names=("figure2_gamma_cv_rmse_vs_features.png",
                                                 "figure3_gamma_cv_rmse_vs_time.png"),
                     title="cpusmall, gamma and alpha by 5-fold CV (mean of 5 seeds)")


def plot_regression(results, out, names=("figure2_rmse_vs_features.png", "figure3_rmse_vs_time.png"),
                     title="cpusmall, ridge (alpha by 5-fold CV)"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for r in results["runs"]))
    for key, xlabel, fname in (("l", "number of features", names[0]),
                               ("seconds", "total time (standardize + features + ridge), s", names[1])):
        fig, ax = plt.subplots(figsize=(5.2, 3.8))
        for m in methods:
            runs = [r for r in results["runs"] if r["method"] == m]
            ax.plot([r[key] for r in runs], [r["rmse"] for r in runs], marker="o", label=m,
                    lw=2.2 if m.startswith("TEFM") else 1.2)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("relative RMSE ||y - y_hat|| / ||y||")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)


# ----------------------------------------------------------------- figures 1-3


def cmd_kernel(args):
    """Figure 1: ||K - Z Z'||_F / ||K||_F on n_rows sampled rows, maps fitted on those rows."""
    from rfstream import Standardizer
    from rfstream.kernels import auto_gamma
    from rfstream.metrics import kernel_approximation_error
    from rfstream.random import sample_rows

    results = {}
    for name in args.datasets:
        X, _ = dataset(name)
        Xs = Standardizer().fit(X).transform(X)
        rows = sample_rows(Xs, args.n_rows, 0).astype(np.float64)
        gamma = auto_gamma(rows, "gaussian", random_state=0)
        res = {"n_rows": int(rows.shape[0]), "n_features": int(rows.shape[1]), "gamma": gamma,
               "errors": {}}
        for l in LS:
            for seed in range(args.seeds):
                for method, fm in feature_maps(l, gamma, seed).items():
                    t0 = time.perf_counter()
                    fm.fit(rows)
                    err = kernel_approximation_error(rows, fm, kernel="gaussian", gamma=gamma,
                                                     n_samples=rows.shape[0])
                    res["errors"].setdefault(method, {}).setdefault(str(l), []).append(err)
                    print(f"{name} l={l} seed={seed} {method}: {err:.4f} "
                          f"({time.perf_counter() - t0:.2f} s)", flush=True)
        mean = {m: {k: float(np.mean(v)) for k, v in e.items()} for m, e in res["errors"].items()}
        res["mean"] = mean
        res["ratio_to_rff"] = {m: {k: mean[m][k] / mean["RFF (MC)"][k] for k in mean[m]}
                               for m in mean if m.startswith("TEFM")}
        results[name] = res
    out = Path(args.out)
    write_json(out / "kernel_approximation.json", results)
    plot_kernel(results, out / "figure1_kernel_approximation.png")


def cmd_regression(args):
    """Figures 2-3 on cpusmall: relative test RMSE vs features and vs total time."""
    from sklearn.pipeline import Pipeline

    from rfstream import Standardizer, StreamingRidge
    from rfstream.kernels import auto_gamma
    from rfstream.metrics import relative_rmse
    from rfstream.preprocess import train_test_split
    from rfstream.random import sample_rows

    X, y = dataset("cpusmall")
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    Xtr, Xte, ytr, yte = (a.persist() for a in (Xtr, Xte, ytr, yte))
    std = Standardizer().fit(Xtr)
    gamma = auto_gamma(sample_rows(std.transform(Xtr), 1000, 0), "gaussian", random_state=0)
    alphas = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    counts = (25, 50, 100, 200, 400, 800, 1600)
    results = {"gamma": gamma, "alphas": alphas, "runs": []}
    for l in counts:
        maps = feature_maps(l, gamma, 0)
        for method, fm in maps.items():
            if method.startswith("TEFM") and (l > 400 or "q=0" in method):
                continue
            rmses, times = [], []
            for seed in range(args.seeds):
                fm.set_params(random_state=seed)
                pipe = Pipeline([("std", Standardizer()), ("features", fm),
                                 ("solver", StreamingRidge(alpha=alphas, cv=5))])
                times.append(wall_seconds(lambda pipe=pipe: pipe.fit(Xtr, ytr)))
                rmses.append(relative_rmse(yte, pipe.predict(Xte)))
            run = {"method": method, "l": l, "rmse": float(np.mean(rmses)),
                   "seconds": float(np.min(times))}  # min: the machine is shared
            results["runs"].append(run)
            print(json.dumps(run), flush=True)
    out = Path(args.out)
    write_json(out / "regression_cpusmall.json", results)
    plot_regression(results, out)


def cmd_dsweep(args):
    """cpusmall: TEFM-G with l features over d = 4, 8, 16 l and q = 1, 2 against RFF with l and 4 l."""
    from sklearn.pipeline import Pipeline

    from rfstream import TEFM, RandomFourierFeatures, Standardizer, StreamingRidge
    from rfstream.kernels import auto_gamma
    from rfstream.metrics import relative_rmse
    from rfstream.preprocess import train_test_split
    from rfstream.random import sample_rows

    X, y = dataset("cpusmall")
    Xtr, Xte, ytr, yte = (a.persist() for a in train_test_split(X, y, test_size=0.25, random_state=0))
    gamma = auto_gamma(sample_rows(Standardizer().fit(Xtr).transform(Xtr), 1000, 0), "gaussian",
                       random_state=0)
    alphas = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]

    def rmse(fmap):
        errs = []
        for seed in range(args.seeds):
            fmap.set_params(random_state=seed)
            pipe = Pipeline([("std", Standardizer()), ("features", fmap),
                             ("solver", StreamingRidge(alpha=alphas, cv=5))])
            errs.append(relative_rmse(yte, pipe.fit(Xtr, ytr).predict(Xte)))
        return float(np.mean(errs))

    runs = []
    for l in (50, 100, 200):
        configs = {"RFF l": RandomFourierFeatures(l, gamma=gamma),
                   "RFF 4l": RandomFourierFeatures(4 * l, gamma=gamma)}
        for mult in (4, 8, 16):
            for q in (1, 2):
                configs[f"TEFM-G d={mult}l q={q}"] = TEFM(l, n_random_features=mult * l,
                                                          n_power_iter=q, gamma=gamma)
        for name, fmap in configs.items():
            runs.append({"l": l, "method": name, "rmse": rmse(fmap)})
            print(json.dumps(runs[-1]), flush=True)
    write_json(Path(args.out) / "regression_d_sweep.json", {"gamma": gamma, "runs": runs})


def cmd_gammacv(args):
    """cpusmall with gamma chosen by cross-validation for every method (the paper's Sec. 4.2).

    For each method, seed and gamma = auto x 2^-k on a grid, the pipeline is fitted on the
    training rows (numpy, one process) with ridge's alpha path and 5-fold CV; the gamma
    with the lowest CV mean squared error is chosen (test rows unseen), and its test
    relative RMSE and fit time (feature map fit + transform + ridge fit) are reported.
    """
    from rfstream import TEFM, RandomFourierFeatures, Standardizer, StreamingRidge
    from rfstream.kernels import auto_gamma
    from rfstream.metrics import relative_rmse
    from rfstream.preprocess import train_test_split
    from rfstream.random import sample_rows

    X, y = dataset("cpusmall")
    Xtr, Xte, ytr, yte = (np.asarray(a.compute())
                          for a in train_test_split(X, y, test_size=0.25, random_state=0))
    std = Standardizer().fit(Xtr)
    Str, Ste = std.transform(Xtr), std.transform(Xte)
    gamma = auto_gamma(sample_rows(Str, 1000, 0), "gaussian", random_state=0)
    alphas = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    scales = [2.0 ** -k for k in args.scale_exponents]

    def maps(l):
        return {"RFF l": partial(RandomFourierFeatures, l),
                "RFF 4l": partial(RandomFourierFeatures, 4 * l),
                **{f"TEFM-G d={m}l": partial(TEFM, l, n_random_features=m * l) for m in (4, 8, 16)},
                "TEFM-S d=4l": partial(TEFM, l, method="srht")}

    runs = []
    for l in args.l:
        for method, make in maps(l).items():
            for seed in range(args.seeds):
                grid = []
                for scale in scales:
                    t0 = time.perf_counter()
                    fmap = make(gamma=gamma * scale, random_state=seed).fit(Str)
                    ridge = StreamingRidge(alpha=alphas, cv=5).fit(fmap.transform(Str), ytr)
                    seconds = time.perf_counter() - t0
                    grid.append({"scale": scale, "cv_mse": float(ridge.cv_mse_.min()), "seconds": seconds,
                                 "test_rmse": relative_rmse(yte, ridge.predict(fmap.transform(Ste)))})
                best = min(grid, key=lambda g: g["cv_mse"])
                runs.append({"l": l, "method": method, "seed": seed, "chosen_scale": best["scale"],
                             "test_rmse": best["test_rmse"], "seconds": best["seconds"], "grid": grid})
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "grid"}), flush=True)
    summary = {}
    for run in runs:
        summary.setdefault(f"{run['l']} {run['method']}", []).append(run)
    summary = {k: {"test_rmse_mean": float(np.mean([r["test_rmse"] for r in v])),
                   "test_rmse_se": float(np.std([r["test_rmse"] for r in v], ddof=1) / np.sqrt(len(v))),
                   "seconds_median": float(np.median([r["seconds"] for r in v]))}
               for k, v in summary.items()}
    for k, v in summary.items():
        print(k, json.dumps(v))
    out = Path(args.out)
    write_json(out / "regression_gamma_cv.json",
               {"gamma_auto": gamma, "scales": scales, "alphas": alphas, "summary": summary, "runs": runs})
    plot_gamma_cv(summary, out)


# ----------------------------------------------------------------- scale run
def cmd_sketch(args):
    """Range-finder pass per task: one 65,536-row chunk sketched by TEFM-G and TEFM-S.

    Times, on one standardized chunk of the synthetic KDD-shaped data, the
    chunk function of each sketch (what every task of the pass runs), the
    feature block alone, and TEFM-S with the radix-2 butterfly FWHT in place
    of the GEMM-based Hadamard transform; single-threaded BLAS (as in a dask
    worker), the variants interleaved, median of ``--repeats``.
    """
    from threadpoolctl import threadpool_limits

    import rfstream.datadriven.tefm as tefm_module
    from rfstream import RandomFourierFeatures, Standardizer
    from rfstream.datasets.synthetic import kdd_like_rows
    from rfstream.hadamard import fwht

    x, _ = kdd_like_rows(0, 65536)
    x = Standardizer().fit(x).transform(x).astype(np.float32)
    fast = tefm_module.hadamard_blocks

    def butterflies(blocks):
        return fwht(blocks, axis=1)

    def srht_butterflies(x, offset, **kw):
        tefm_module.hadamard_blocks = butterflies
        try:
            return tefm_module.srht_sketch_chunk(x, offset, **kw)
        finally:
            tefm_module.hadamard_blocks = fast

    variants = {
        "features only": lambda x, offset, rff, **kw: rff.block(x),
        "TEFM-G (Gaussian sketch)": tefm_module.gaussian_sketch_chunk,
        "TEFM-S (GEMM Hadamard)": tefm_module.srht_sketch_chunk,
        "TEFM-S (radix-2 butterflies)": srht_butterflies,
    }
    runs = []
    with threadpool_limits(1, user_api="blas"):
        for l in args.l:
            rff = RandomFourierFeatures(4 * l, gamma=0.01, random_state=0).fit(x[:1])
            times = {name: [] for name in variants}
            for _ in range(args.repeats):
                for name, fn in variants.items():
                    times[name].append(wall_seconds(lambda fn=fn, l=l, rff=rff: fn(x, 0, rff=rff, seed=0,
                                                                                    n_components=l)))
            for name, ts in times.items():
                runs.append({"l": l, "d": 4 * l, "rows": x.shape[0], "variant": name,
                             "median_s": float(np.median(ts)), "all_s": ts})
                print(json.dumps(runs[-1]), flush=True)
    write_json(Path(args.out) / "sketch_chunk.json", {"load_average_end": os.getloadavg(), "runs": runs})


def _fit_one(args):
    """In a subprocess: fit TEFM on a Zarr dataset, report times and peak RSS."""
    from rfstream import TEFM, Standardizer
    from rfstream.io import open_dataset

    client = None
    if args.scheduler == "processes":  # 2 single-threaded worker processes (BLAS: 1 thread each)
        from distributed import Client, LocalCluster

        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None))
    X, _ = open_dataset(args.path)
    std = Standardizer().fit(X)
    Xs = std.transform(X)
    out = {"rows": int(X.shape[0]), "cols": int(X.shape[1]), "method": args.method,
           "l": args.l, "d": 4 * args.l, "q": args.q, "scheduler": args.scheduler}
    t0 = time.perf_counter()
    tefm = TEFM(args.l, method=args.method, n_power_iter=args.q, gamma=0.01, random_state=0)
    tefm.fit(Xs)
    out["fit_seconds"] = time.perf_counter() - t0
    if client is not None:
        client.close()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)


def cmd_scale(args):
    """Fit each (method, q) on each size, ``--repeats`` times, the configs interleaved."""
    from rfstream.datasets.synthetic import write_kdd_like

    results = []
    for n in args.rows:
        path = cache_dir() / f"kdd_like_{n}.zarr"
        if not path.exists():
            t0 = time.perf_counter()
            write_kdd_like(path, n)
            print(f"wrote {path} in {time.perf_counter() - t0:.1f} s", flush=True)
        for rep in range(args.repeats):
            for method, q in args.configs:
                cmd = [sys.executable, __file__, "_fit", str(path), method, str(args.l), str(q),
                       "--scheduler", args.scheduler]
                line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                res = {**json.loads(line.strip().splitlines()[-1]), "repeat": rep,
                       "load_average": os.getloadavg()[0]}
                results.append(res)
                print(json.dumps(res), flush=True)
    name = f"scale_l{args.l}" + ("" if args.scheduler == "threads" else f"_{args.scheduler}")
    write_json(Path(args.out) / f"{name}.json", results)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kernel")
    k.add_argument("--datasets", nargs="+", default=["cpusmall", "magic_gamma", "letter",
                                                     "covtype_sample"], choices=sorted(DATASETS))
    k.add_argument("--n-rows", type=int, default=4000)
    k.add_argument("--seeds", type=int, default=2)
    r = sub.add_parser("regression")
    r.add_argument("--seeds", type=int, default=2)
    w = sub.add_parser("dsweep")
    w.add_argument("--seeds", type=int, default=2)
    g = sub.add_parser("gammacv")
    g.add_argument("--seeds", type=int, default=5)
    g.add_argument("--l", type=int, nargs="+", default=[50, 100, 200, 400])
    g.add_argument("--scale-exponents", type=int, nargs="+", default=list(range(9)),
                   help="gamma = auto x 2^-k for these k")
    c = sub.add_parser("sketch")
    c.add_argument("--l", type=int, nargs="+", default=[100, 400])
    c.add_argument("--repeats", type=int, default=5)
    s = sub.add_parser("scale")
    s.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    s.add_argument("--l", type=int, default=100)
    s.add_argument("--configs", type=lambda v: (v.split(":")[0], int(v.split(":")[1])), nargs="+",
                   default=[("srht", 0), ("gaussian", 0)], help="method:q pairs")
    s.add_argument("--repeats", type=int, default=1)
    s.add_argument("--scheduler", choices=["threads", "processes"], default="threads")
    for q in (k, r, w, g, c, s):
        q.add_argument("--out", default=str(ROOT / "docs" / "tefm"))
    f = sub.add_parser("_fit")
    f.add_argument("path")
    f.add_argument("method")
    f.add_argument("l", type=int)
    f.add_argument("q", type=int)
    f.add_argument("--scheduler", choices=["threads", "processes"], default="threads")
    args = p.parse_args(argv)
    local = getattr(args, "scheduler", "threads") == "threads"
    with dask.config.set(scheduler="threads" if local else None):
        {"kernel": cmd_kernel, "regression": cmd_regression, "dsweep": cmd_dsweep, "gammacv": cmd_gammacv, "sketch": cmd_sketch,
         "scale": cmd_scale,
         "_fit": _fit_one}[args.cmd](args)


if __name__ == "__main__":
    main()

"""``rfstream bench``: performance against the tools users would otherwise pick.

One run on one machine measures three things, so that what is compared was
measured under the same conditions (the development machine is shared and
noisy: ratios within a run are what the results report):

1. **Fused pass vs GEMM.**  rfstream's fused pass (read a Zarr chunk ->
   standardize -> RFF block -> Gram partials, one task per chunk) in GFLOP/s
   (2 n d D for the projection + n D (D + 1) for the symmetric Gram by SYRK:
   the flops actually performed), next to the machine's float32 GEMM on the
   Gram's shape, (D x 4096) @ (4096 x D), measured right before and right
   after every repeat of the pass.  The ratio of each repeat uses the GEMM
   measured around it; ``--repeats`` repeats give a median and a spread.
2. **End to end** (fit + predict, peak memory, test error) of rfstream against
   scikit-learn's RBFSampler + RidgeClassifier and Nystroem + RidgeClassifier,
   and dask-ml's Incremental(SGDClassifier) on RBFSampler features, on
   KDD99-10% (test: ``corrected``) and Adult, at several D.  Every run is its
   own subprocess with an address-space cap (``RLIMIT_AS``), so its peak
   resident memory (VmHWM) is its own and a run that needs more than the cap
   fails with a MemoryError, recorded as "out of memory at cap".  All methods
   get the same preprocessing (numeric columns standardized, one-hot columns
   passed through), the same ``gamma`` and the same ``alpha``.
3. **Scaling**: fit time and peak memory of rfstream at several row counts of
   a synthetic KDD-shaped Zarr dataset (:mod:`rfstream.synthetic`), the
   log-log slope of time against n and the ratio of the largest to the
   smallest peak memory.

Results go to ``<out>/bench.json`` and PNG plots next to it; docs/BENCHMARKS.md
shows them.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

METHODS = ("rfstream", "sklearn-rbf", "sklearn-nystroem", "daskml-sgd")
DATASETS = ("kdd99", "adult")


def add_arguments(p):
    p.add_argument("--datasets", default=os.environ.get("RFSTREAM_DATASETS", "../shared/datasets"),
                   help="folder of the real datasets (kddcup99/, adult/)")
    p.add_argument("--workdir", default="runs/bench", help="converted Zarr datasets are cached here")
    p.add_argument("--out", default="docs/benchmarks", help="bench.json and PNG plots go here")
    p.add_argument("--parts", nargs="+", default=["fused", "e2e", "scaling"],
                   choices=["fused", "e2e", "scaling"], help="what to measure (default: all three)")
    p.add_argument("--fused-components", type=int, default=2000, help="D of the fused-pass measurement")
    p.add_argument("--repeats", type=int, default=3, help="repeats of the fused pass (median and spread)")
    p.add_argument("--n-components", type=int, nargs="+", default=[500, 2000, 5000],
                   help="D values of the end-to-end comparison")
    p.add_argument("--data", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--memory-cap", default="10GB",
                   help="address-space cap of every end-to-end and scaling subprocess")
    p.add_argument("--timeout", type=int, default=1200, help="seconds before a subprocess is stopped")
    p.add_argument("--scaling-rows", type=float, nargs="+", default=[1e6, 2e6, 4e6, 8e6])
    p.add_argument("--scaling-components", type=int, default=500)
    p.add_argument("--no-plots", action="store_true")


# ----------------------------------------------------------------- measures

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


def gemm_gflops(D, m=4096, repeats=5):
    """float32 GEMM rate on (D x m) @ (m x D): ``{"best": ..., "median": ...}`` in GFLOP/s.

    Two distinct matrices: numpy routes ``a.T @ a`` to SYRK, which does half
    the flops, and counting 2 m D^2 for it would overstate the baseline 2x.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, D), dtype=np.float32)
    b = rng.standard_normal((m, D), dtype=np.float32)
    a.T @ b  # warm up
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a.T @ b
        rates.append(2.0 * m * D * D / (time.perf_counter() - t0) / 1e9)
    return {"best": max(rates), "median": float(np.median(rates))}


def load():
    """1, 5 and 15-minute load averages and the core count (the machine is shared)."""
    return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count()}


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


# ------------------------------------------------------------ the datasets

def prepare_data(datasets, workdir):
    """Convert KDD99-10% / corrected and Adult train / test to Zarr once; returns paths."""
    from . import io

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    src = {
        "kdd99": (Path(datasets) / "kddcup99" / "kddcup.data_10_percent.gz",
                  Path(datasets) / "kddcup99" / "corrected.gz", "normal"),
        "adult": (Path(datasets) / "adult" / "adult.data", Path(datasets) / "adult" / "adult.test", ">50K"),
    }
    out = {}
    for name, (train_src, test_src, positive) in src.items():
        prefix = "kdd" if name == "kdd99" else name
        train, test = workdir / f"{prefix}_train.zarr", workdir / f"{prefix}_test.zarr"
        if not train.exists():
            io.convert(str(train_src), str(train), positive_class=positive)
        if not test.exists():
            io.convert(str(test_src), str(test), like=str(train))
        out[name] = (str(train), str(test))
    return out


def shared_gamma(train, seed=0):
    """``gamma`` for every method: rfstream's "auto" rule on the standardized training set."""
    from . import io
    from .kernels import auto_gamma
    from .models import onehot_columns
    from .preprocess import Standardizer

    X, _ = io.open_dataset(train)
    passthrough = onehot_columns(io.dataset_info(train)["attrs"])
    with __import__("dask").config.set(scheduler="threads"):
        Xs = Standardizer(passthrough=passthrough or None).fit(X).transform(X)
        return float(auto_gamma(Xs, "gaussian", random_state=seed))


# ------------------------------------------------------------- subprocesses

def _sklearn_preprocessor(train):
    """StandardScaler on the numeric columns, one-hot columns passed through (as rfstream)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import StandardScaler

    from . import io
    from .models import onehot_columns

    info = io.dataset_info(train)
    onehot = set(onehot_columns(info["attrs"]))
    numeric = [j for j in range(info["shape"][1]) if j not in onehot]
    return ColumnTransformer([("num", StandardScaler(), numeric)], remainder="passthrough")


def _fit_predict(kind, train, test, D, alpha, gamma, seed):
    """Fit on ``train``, predict ``test``: ``(fit_seconds, predict_seconds, test_error)``."""
    import dask
    import numpy as np

    from . import io

    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    t0 = time.perf_counter()
    if kind == "rfstream":
        from .cli import evaluate_dataset, fit_dataset

        with dask.config.set(scheduler="threads"):
            model, meta = fit_dataset(train, n_components=D, alpha=alpha, gamma=gamma, random_state=seed)
            t1 = time.perf_counter()
            err = evaluate_dataset(model, meta, test)["value"]
        return t1 - t0, time.perf_counter() - t1, err
    if kind == "daskml-sgd":
        return _daskml(train, X, y, Xt, yt, D, gamma, seed, t0)
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    Xn, yn = X.compute(), y.compute()
    if kind == "sklearn-rbf":
        fmap = RBFSampler(gamma=gamma, n_components=D, random_state=seed)
    else:
        fmap = Nystroem(kernel="rbf", gamma=gamma, n_components=D, random_state=seed)
    model = make_pipeline(_sklearn_preprocessor(train), fmap, RidgeClassifier(alpha=alpha))
    model.fit(Xn, yn)
    t1 = time.perf_counter()
    err = float(np.mean(model.predict(Xt.compute()) != yt.compute()))
    return t1 - t0, time.perf_counter() - t1, err


def _daskml(train, X, y, Xt, yt, D, gamma, seed, t0):
    """dask-ml's Incremental(SGDClassifier): one epoch of ``partial_fit`` over the row blocks,
    on RBFSampler features computed block by block (the dask-ml way to stay out of core)."""
    import dask
    import dask.array as da
    import numpy as np
    from dask_ml.wrappers import Incremental
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    from .random import sample_rows

    with dask.config.set(scheduler="threads"):
        sample = np.asarray(sample_rows(X, 20000, seed))  # the scaler's moments from a sample
        fmap = make_pipeline(_sklearn_preprocessor(train),
                             RBFSampler(gamma=gamma, n_components=D, random_state=seed)).fit(sample)

        def features(block):
            return fmap.transform(block).astype(np.float32)

        Z = X.map_blocks(features, chunks=(X.chunks[0], (D,)), dtype=np.float32)
        Zt = Xt.map_blocks(features, chunks=(Xt.chunks[0], (D,)), dtype=np.float32)
        classes = da.unique(y).compute()  # a reduction: the label column stays on the workers
        inc = Incremental(SGDClassifier(random_state=seed), scoring=None)
        inc.fit(Z, y, classes=classes)
        t1 = time.perf_counter()
        err = float((inc.predict(Zt) != yt).mean().compute())
    return t1 - t0, time.perf_counter() - t1, err


def _e2e_child(kind, train, test, D, alpha, gamma, seed):
    if kind == "daskml-sgd":
        try:
            import dask_ml  # noqa: F401  optional: not a dependency of rfstream
        except ImportError:
            print(json.dumps({"error": "not installed"}))
            return
    fit_s, predict_s, err = _fit_predict(kind, train, test, D, alpha, gamma, seed)
    print(json.dumps({"fit_seconds": fit_s, "predict_seconds": predict_s,
                      "total_seconds": fit_s + predict_s, "peak_rss_bytes": peak_rss(),
                      "test_error": err}))


def _scaling_child(path, n, D, alpha, seed):
    import dask

    from . import io
    from .cli import fit_dataset

    X, y = io.open_dataset(path)
    attrs = io.dataset_info(path)["attrs"]
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        fit_dataset(path, X=X[:n], y=y[:n], attrs=attrs, n_components=D, alpha=alpha, random_state=seed)
    print(json.dumps({"rows": n, "fit_seconds": time.perf_counter() - t0, "peak_rss_bytes": peak_rss()}))


def run_capped(code, cap_bytes, timeout):
    """Run the Python statements ``code`` in a fresh interpreter under an address-space cap.

    Returns the JSON it prints, or ``{"error": ...}``: "out of memory at cap"
    when it raised MemoryError (numpy's "Unable to allocate" included) or was
    killed by a signal, "timeout" past ``timeout`` seconds.
    """
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    cmd = [sys.executable, "-c", code]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    wall = time.perf_counter() - t0
    lines = out.stdout.strip().splitlines()
    if out.returncode == 0 and lines:
        return json.loads(lines[-1])
    err = out.stderr.strip().splitlines()
    last = err[-1] if err else f"exit status {out.returncode}"
    oom = "MemoryError" in out.stderr or "Unable to allocate" in out.stderr or out.returncode < 0
    return {"error": "out of memory at cap" if oom else "failed", "detail": last[-300:],
            "returncode": out.returncode, "seconds_until_failure": wall}


# --------------------------------------------------------------- the parts

def end_to_end(paths, data, Ds, methods, alpha, cap_bytes, timeout, seed=0):
    rows = []
    for name in data:
        train, test = paths[name]
        gamma = shared_gamma(train, seed)
        for D in Ds:
            for kind in methods:
                call = (f"import rfstream.bench as b; "
                        f"b._e2e_child({kind!r}, {train!r}, {test!r}, {D}, {alpha}, {gamma!r}, {seed})")
                res = run_capped(call, cap_bytes, timeout)
                res.update(dataset=name, method=kind, D=D, gamma=gamma, alpha=alpha, load=load())
                rows.append(res)
                print(f"{name} D={D} {kind}: " + (res.get("error") or
                      f"{res['total_seconds']:.1f} s, {res['peak_rss_bytes'] / 1e9:.2f} GB, "
                      f"error {res['test_error']:.4f}"), file=sys.stderr)
    return rows


def scaling(workdir, rows_list, D, alpha, cap_bytes, timeout, seed=0):
    """rfstream fits on the first n rows of one synthetic dataset of max(rows_list) rows."""
    import dask
    import numpy as np

    from .synthetic import write_kdd_like

    n_max = int(max(rows_list))
    path = Path(workdir) / f"kdd_like_{n_max}.zarr"
    if not path.exists():
        with dask.config.set(scheduler="threads"):
            write_kdd_like(path, n_max)
    runs = []
    for n in sorted(int(r) for r in rows_list):
        call = f"import rfstream.bench as b; b._scaling_child({str(path)!r}, {n}, {D}, {alpha}, {seed})"
        res = run_capped(call, cap_bytes, timeout)
        res.update(rows=n, D=D, load=load())
        runs.append(res)
        print(f"scaling n={n}: " + (res.get("error") or f"{res['fit_seconds']:.1f} s, "
                                   f"{res['peak_rss_bytes'] / 1e9:.2f} GB"), file=sys.stderr)
    ok = [r for r in runs if "error" not in r]
    out = {"dataset": str(path), "D": D, "runs": runs}
    if len(ok) >= 2:
        n = np.log([r["rows"] for r in ok])
        out["loglog_slope_time"] = float(np.polyfit(n, np.log([r["fit_seconds"] for r in ok]), 1)[0])
        mem = [r["peak_rss_bytes"] for r in ok]
        out["peak_memory_max_over_min"] = max(mem) / min(mem)
    return out


# ------------------------------------------------------------------- plots

def plot(result, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    if "fused" in result:
        runs = result["fused"]["runs"]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for i, sched in enumerate(("threads", "LocalCluster")):
            vals = [r["vs_gemm"] * 100 for r in runs if r["scheduler"] == sched]
            ax.bar([i + 0.25 * (j - (len(vals) - 1) / 2) for j in range(len(vals))], vals, width=0.22)
        ax.axhline(70, color="k", ls="--", lw=1, label="target 70%")
        ax.set_xticks([0, 1], ["dask threads", "LocalCluster\n(2 processes)"])
        ax.set_ylabel("fused pass, % of same-run GEMM")
        ax.set_title(f"RFF + Gram pass, D={runs[0]['D']}, one bar per repeat")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "fused_vs_gemm.png", dpi=110)
        plt.close(fig)
    for name in {r["dataset"] for r in result.get("e2e", [])}:
        rows = [r for r in result["e2e"] if r["dataset"] == name]
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        keys = [("total_seconds", "fit + predict seconds"), ("peak_rss_bytes", "peak memory, GB"),
                ("test_error", "test error")]
        for method in METHODS:
            mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["D"])
            good = [r for r in mine if "error" not in r]
            for ax, (key, label) in zip(axes, keys):
                scale = 1e9 if key == "peak_rss_bytes" else 1
                line = ax.plot([r["D"] for r in good], [r[key] / scale for r in good], "o-", label=method)
                failed = [r["D"] for r in mine if r.get("error") == "out of memory at cap"]
                if failed and key == "peak_rss_bytes":
                    ax.plot(failed, [result["memory_cap_bytes"] / 1e9] * len(failed), "x", ms=10,
                            color=line[0].get_color())
                ax.set_xlabel("D (features)")
                ax.set_ylabel(label)
                ax.set_xscale("log")
        axes[1].axhline(result["memory_cap_bytes"] / 1e9, color="k", ls=":", lw=1)
        axes[1].text(axes[1].get_xlim()[0], result["memory_cap_bytes"] / 1e9, " cap (x: out of memory)",
                     va="bottom", fontsize=8)
        axes[0].set_yscale("log")
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{name}: end to end, one subprocess per point")
        fig.tight_layout()
        fig.savefig(out / f"e2e_{name}.png", dpi=110)
        plt.close(fig)
    if result.get("scaling", {}).get("runs"):
        ok = [r for r in result["scaling"]["runs"] if "error" not in r]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        n = [r["rows"] for r in ok]
        axes[0].loglog(n, [r["fit_seconds"] for r in ok], "o-", label="rfstream fit")
        if ok:
            axes[0].loglog(n, [ok[0]["fit_seconds"] * x / n[0] for x in n], "k--", lw=1, label="slope 1")
        axes[0].set_xlabel("rows")
        axes[0].set_ylabel("fit seconds")
        axes[0].set_title(f"slope {result['scaling'].get('loglog_slope_time', float('nan')):.2f}")
        axes[0].legend()
        axes[1].semilogx(n, [r["peak_rss_bytes"] / 1e9 for r in ok], "o-")
        axes[1].set_ylim(bottom=0)
        axes[1].set_xlabel("rows")
        axes[1].set_ylabel("peak memory, GB")
        axes[1].set_title("peak resident memory (VmHWM)")
        fig.suptitle(f"synthetic KDD-shaped Zarr, D={result['scaling']['D']}")
        fig.tight_layout()
        fig.savefig(out / "scaling.png", dpi=110)
        plt.close(fig)


# -------------------------------------------------------------------- main

def _bytes(text):
    from dask.utils import parse_bytes

    return int(parse_bytes(text))


def main(args):
    if not args.no_plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError(  # a one-line user error in the CLI, before an hour of measuring
                'rfstream bench draws its plots with matplotlib: pip install "rfstream[plot]", '
                "or pass --no-plots."
            ) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cap = _bytes(args.memory_cap)
    result = {"command": "rfstream bench " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["bench"]
              else " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
              "load_at_start": load(), "memory_cap_bytes": cap}
    try:
        import dask_ml

        result["dask_ml"] = dask_ml.__version__
    except ImportError:
        result["dask_ml"] = "not installed"
    json_path = out / "bench.json"
    if json_path.exists():  # measure one part and keep the others from an earlier run
        old = json.loads(json_path.read_text())
        result.update({k: old[k] for k in ("fused", "e2e", "scaling") if k in old and k not in args.parts})
    paths = prepare_data(args.datasets, args.workdir) if {"fused", "e2e"} & set(args.parts) else {}
    parts = {
        "fused": lambda: fused_vs_gemm(paths["kdd99"][0], args.fused_components, args.alpha, args.repeats),
        "e2e": lambda: end_to_end(paths, args.data, args.n_components, args.methods, args.alpha, cap,
                                  args.timeout),
        "scaling": lambda: scaling(args.workdir, args.scaling_rows, args.scaling_components, args.alpha,
                                   cap, args.timeout),
    }
    for part, measure in parts.items():
        if part in args.parts:
            result[part] = measure()
            result["load_at_end"] = load()
            json_path.write_text(json.dumps(result, indent=2) + "\n")  # after each part
    if not args.no_plots:
        plot(result, out)
    print(json.dumps({k: result[k] for k in ("load_at_start", "load_at_end")}, indent=2))
    return result

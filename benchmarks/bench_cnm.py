"""Benchmarks of Compact Nonlinear Maps and circulant maps (Yu et al. 2015).

Run from the repository root (needs ../shared/datasets); JSON and PNG go to docs/cnm/:

    python benchmarks/bench_cnm.py figure1 --dataset letter    # Figure 1: accuracy vs k
    python benchmarks/bench_cnm.py figure1 --dataset magic_gamma
    python benchmarks/bench_cnm.py kerapp --dataset letter --k 16 32   # (re)run CNM-kerapp only
    python benchmarks/bench_cnm.py circulant                   # Table 2 pattern at k = d, 2d
    python benchmarks/bench_cnm.py speed                       # circulant vs dense transform
    python benchmarks/bench_cnm.py plot                        # redraw the PNGs from the JSON
    python benchmarks/bench_cnm.py tables                      # markdown tables for docs/cnm.md

Protocol: each dataset is converted to Zarr once (cache in /tmp/rfstream-bench),
split 75/25 with :func:`rfstream.train_test_split` (seed 0), standardized with
the training moments; ``gamma="auto"`` (the paper's Section 7 rule).  Two
linear classifiers on a map: (1) scikit-learn's multinomial
``LogisticRegression`` (lbfgs, C = 100, 300 iterations) on the in-memory
features: a converged baseline for linear / RFF / CNM-kerapp /
circulant-random, also refitted on the CNM features ("accuracy_refit");  (2)
the same Pegasos training as CNM with the map frozen
(``CompactNonlinearMap(theta_step=0)``, "rff_pegasos"), so that RFF and CNM
differ only in whether Theta is learned.  CNM-classification predicts with
its own Pegasos ``w``.  (The paper uses a linear SVM; LinearSVC, C = 10, took
1-2 minutes per fit on letter with 256+ features on this shared machine and
was less accurate than the logistic regression (0.926 vs 0.943 at k = 256);
rfstream's ridge classifier was far weaker on 26-class letter (0.70 vs 0.85
at k = 64), which would have flattered CNM.)  The CNMs read the training rows as dask arrays (row chunks of
4096): every outer iteration gathers its sampled rows chunk by chunk.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("RFSTREAM_DATASETS", ROOT.parent / "shared" / "datasets"))
CACHE = Path(os.environ.get("RFSTREAM_BENCH_CACHE", "/tmp/rfstream-bench"))
OUT = ROOT / "docs" / "cnm"
SOURCES = {
    "letter": ("letter/letter-recognition.data", {"label_column": "first", "header": False}),
    "magic_gamma": ("magic_gamma/magic04.data", {"header": False}),
}
C_LOGISTIC, MAX_ITER_LOGISTIC = 100.0, 300


def load(name):
    """Standardized train/test numpy arrays and dask training arrays of a dataset."""
    import dask.array as da

    from rfstream import Standardizer, train_test_split
    from rfstream.io import convert, open_dataset

    src, kwargs = SOURCES[name]
    dst = CACHE / f"cnm-{name}.zarr"
    if not dst.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        convert(DATASETS / src, dst, rows_per_chunk=4096, **kwargs)
    X, y = open_dataset(dst)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    st = Standardizer().fit(Xtr)
    Xtr, Xte = st.transform(Xtr).compute(), st.transform(Xte).compute()
    ytr, yte = ytr.compute(), yte.compute()
    dask_train = (da.from_array(Xtr, chunks=(4096, -1)), da.from_array(ytr, chunks=4096))
    return Xtr, Xte, ytr, yte, dask_train


def linear_accuracy(Ztr, ytr, Zte, yte):
    """Test accuracy of a converged linear classifier on given features (see module doc)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(C=C_LOGISTIC, max_iter=MAX_ITER_LOGISTIC).fit(Ztr, ytr)
    return float(clf.score(Zte, yte))


def _write(name, data):
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(data, indent=1))
    print("wrote", path)


# ------------------------------------------------------------------ Figure 1
def figure1(args):
    from rfstream import CompactNonlinearMap, RandomFourierFeatures

    Xtr, Xte, ytr, yte, (Xd, yd) = load(args.dataset)
    res = {"dataset": args.dataset, "n_train": len(ytr), "n_test": len(yte), "d": Xtr.shape[1],
           "seeds": args.seeds, "C_logistic": C_LOGISTIC, "runs": []}
    res["linear"] = linear_accuracy(Xtr, ytr, Xte, yte)
    print("linear", res["linear"], flush=True)
    for seed in range(args.seeds):
        for k in args.rff_k:
            rff = RandomFourierFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
            acc = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
            res["runs"].append({"method": "rff", "k": k, "seed": seed, "accuracy": acc})
            print("rff", k, seed, acc, flush=True)
            _write(f"figure1_{args.dataset}.json", res)
            if k <= args.pegasos_max_k:
                peg = CompactNonlinearMap(k, theta_step=0.0, random_state=seed).fit(Xd, yd)
                acc = float(peg.score(Xte, yte))
                res["runs"].append({"method": "rff_pegasos", "k": k, "seed": seed, "accuracy": acc})
                print("rff_pegasos", k, seed, acc, flush=True)
        for k in args.cnm_k:
            t0 = time.perf_counter()
            cnm = CompactNonlinearMap(k, random_state=seed).fit(Xd, yd)
            sec = time.perf_counter() - t0
            run = {"method": "cnm", "k": k, "seed": seed, "accuracy": float(cnm.score(Xte, yte)),
                   "accuracy_refit": linear_accuracy(cnm.transform(Xtr), ytr, cnm.transform(Xte), yte),
                   "fit_seconds": sec, "best_iter": cnm.best_iter_, "n_iter": cnm.n_iter_,
                   "validation_path": cnm.validation_path_, "gamma": cnm.gamma_}
            res["runs"].append(run)
            print("cnm", k, seed, run["accuracy"], run["accuracy_refit"], f"{sec:.0f}s", flush=True)
            _write(f"figure1_{args.dataset}.json", res)
        if seed < args.kerapp_seeds:
            _kerapp_runs(res, args.kerapp_k, seed, args.kerapp_iter, Xtr, Xte, ytr, yte, Xd)
        _write(f"figure1_{args.dataset}.json", res)
    plot(args)


def _kerapp_runs(res, ks, seed, max_iter, Xtr, Xte, ytr, yte, Xd):
    from rfstream import CompactNonlinearMap

    for k in ks:
        t0 = time.perf_counter()
        cnm = CompactNonlinearMap(k, objective="kernel", max_iter=max_iter, random_state=seed).fit(Xd)
        sec = time.perf_counter() - t0
        acc = linear_accuracy(cnm.transform(Xtr), ytr, cnm.transform(Xte), yte)
        res["runs"].append({"method": "cnm_kerapp", "k": k, "seed": seed, "accuracy": acc,
                            "fit_seconds": sec, "validation_mse_path": cnm.validation_path_})
        print("kerapp", k, seed, acc, f"{sec:.0f}s", flush=True)


def kerapp(args):
    """Add CNM-kerapp runs to an existing figure1 JSON (figure1 --kerapp-seeds 0 skips them)."""
    path = OUT / f"figure1_{args.dataset}.json"
    res = json.loads(path.read_text())
    Xtr, Xte, ytr, yte, (Xd, _) = load(args.dataset)
    res["runs"] = [r for r in res["runs"] if not (r["method"] == "cnm_kerapp" and r["k"] in args.k)]
    _kerapp_runs(res, args.k, 0, args.kerapp_iter, Xtr, Xte, ytr, yte, Xd)
    _write(path.name, res)
    plot(args)


# ------------------------------------------------------------------ Table 2
def circulant(args):
    from rfstream import CirculantFeatures, CompactNonlinearMap, RandomFourierFeatures

    res = {"seeds": args.seeds, "C_logistic": C_LOGISTIC, "runs": []}
    for name in ("letter", "magic_gamma"):
        Xtr, Xte, ytr, yte, (Xd, yd) = load(name)
        d = Xtr.shape[1]
        for mult in (1, 2):
            k = mult * d
            for seed in range(args.seeds):
                row = {"dataset": name, "k": k, "d": d, "seed": seed}
                rff = RandomFourierFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
                row["rff"] = linear_accuracy(rff.transform(Xtr), ytr, rff.transform(Xte), yte)
                circ = CirculantFeatures(k, gamma="auto", random_state=seed).fit(Xtr)
                row["circulant_random"] = linear_accuracy(circ.transform(Xtr), ytr,
                                                         circ.transform(Xte), yte)
                # the same Pegasos training with r fixed (theta_step=0) and with r learned
                fixed = CompactNonlinearMap(k, structure="circulant", theta_step=0.0,
                                            random_state=seed).fit(Xd, yd)
                opt = CompactNonlinearMap(k, structure="circulant", random_state=seed).fit(Xd, yd)
                row["circulant_random_pegasos"] = float(fixed.score(Xte, yte))
                row["circulant_optimized"] = float(opt.score(Xte, yte))
                row["circulant_optimized_refit"] = linear_accuracy(opt.transform(Xtr), ytr,
                                                                  opt.transform(Xte), yte)
                res["runs"].append(row)
                print(row, flush=True)
        _write("table2_circulant.json", res)


# ------------------------------------------------------------------ speed
def speed(args):
    """Transform time of ``rows`` rows, dense RFF vs circulant, at k = d and 4 d.

    Timed with one BLAS/FFT thread (how a dask task runs it: rfstream.cluster
    limits BLAS to one thread per task) and with the library defaults (BLAS on
    every core, scipy.fft single-threaded).  The minimum over ``repeats`` runs
    is the figure of merit (the machine is shared; the median is kept too).
    """
    from threadpoolctl import threadpool_limits

    from rfstream import CirculantFeatures, RandomFourierFeatures

    rng = np.random.default_rng(0)
    res = {"rows": args.rows, "dtype": "float32", "repeats": args.repeats, "runs": []}
    for d in args.dims:
        X = rng.normal(size=(args.rows, d)).astype(np.float32)
        for mult, threads in ((1, 1), (4, 1), (1, None), (4, None)):
            k = mult * d
            row = {"d": d, "k": k, "threads": threads or "default"}
            with threadpool_limits(threads):
                for name, cls in (("dense", RandomFourierFeatures), ("circulant", CirculantFeatures)):
                    fm = cls(k, gamma=1.0 / d, random_state=0).fit(X[:2])
                    fm.transform(X[:64])  # warm-up (FFT plans, BLAS threads)
                    times = []
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        fm.transform(X)
                        times.append(time.perf_counter() - t0)
                    nbytes = sum(v.nbytes for key, v in vars(fm).items()
                                 if key.endswith("_") and isinstance(v, np.ndarray))
                    row[name] = {"seconds": float(np.min(times)), "median": float(np.median(times)),
                                 "param_bytes": int(nbytes)}
            row["speedup"] = row["dense"]["seconds"] / row["circulant"]["seconds"]
            res["runs"].append(row)
            print(row, flush=True)
    _write("speed.json", res)
    plot(args)


# ------------------------------------------------------------------ plots
def _finish(ax, xlabel, ylabel):
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig, name):
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(OUT / name, dpi=110)
    plt.close(fig)
    print("wrote", OUT / name)


def plot(args=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = [OUT / f"figure1_{n}.json" for n in SOURCES if (OUT / f"figure1_{n}.json").exists()]
    if files:
        fig, axes = plt.subplots(1, len(files), figsize=(5.5 * len(files), 4), squeeze=False)
        for ax, path in zip(axes[0], files):
            res = json.loads(path.read_text())
            ax.axhline(res["linear"], color="gray", ls="--", label="Linear (logistic on x)")
            for method, label, key in (("rff", "RFFM + logistic", "accuracy"),
                                       ("rff_pegasos", "RFFM + Pegasos (CNM, Theta frozen)", "accuracy"),
                                       ("cnm_kerapp", "CNM-kerapp + logistic", "accuracy"),
                                       ("cnm", "CNM-classification", "accuracy"),
                                       ("cnm", "CNM features + logistic", "accuracy_refit")):
                runs = [r for r in res["runs"] if r["method"] == method]
                ks = sorted({r["k"] for r in runs})
                if not ks:
                    continue
                mean = [np.mean([r[key] for r in runs if r["k"] == k]) for k in ks]
                ax.plot(ks, mean, marker="o", label=label,
                        ls=":" if key == "accuracy_refit" or method == "rff_pegasos" else "-")
            ax.set_title(f"{res['dataset']} (n_train={res['n_train']}, d={res['d']})")
            _finish(ax, "k (number of features)", "test accuracy")
        _save(fig, "figure1_accuracy_vs_k.png")
    if (OUT / "speed.json").exists():
        res = json.loads((OUT / "speed.json").read_text())
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for mult, ls in ((1, "-"), (4, "--")):
            runs = [r for r in res["runs"] if r["k"] == mult * r["d"] and r["threads"] == 1]
            dims = [r["d"] for r in runs]
            for name in ("dense", "circulant"):
                ax.plot(dims, [r[name]["seconds"] for r in runs], marker="o", ls=ls,
                        label=f"{name}, k={mult}d")
        ax.set_yscale("log")
        _finish(ax, "d (input dimension)", f"transform seconds ({res['rows']} rows, 1 thread)")
        _save(fig, "speed.png")


def tables(args=None):
    """Markdown tables of the results (pasted into docs/cnm.md)."""
    def mean(values):
        return f"{np.mean(values):.3f}" if values else "-"

    for name in SOURCES:
        path = OUT / f"figure1_{name}.json"
        if not path.exists():
            continue
        res = json.loads(path.read_text())
        runs = res["runs"]
        ks = sorted({r["k"] for r in runs})
        cols = [("rff", "accuracy", "RFF + logistic"), ("rff_pegasos", "accuracy", "RFF + Pegasos"),
                ("cnm_kerapp", "accuracy", "CNM-kerapp + logistic"),
                ("cnm", "accuracy", "CNM-classification"), ("cnm", "accuracy_refit", "CNM + logistic")]
        print(f"\n{name}: linear {res['linear']:.3f}, seeds {res['seeds']}\n")
        print("| k | " + " | ".join(c[2] for c in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for k in ks:
            cells = [mean([r[key] for r in runs if r["method"] == m and r["k"] == k]) for m, key, _ in cols]
            print(f"| {k} | " + " | ".join(cells) + " |")
    path = OUT / "table2_circulant.json"
    if path.exists():
        runs = json.loads(path.read_text())["runs"]
        keys = ["rff", "circulant_random", "circulant_random_pegasos", "circulant_optimized",
                "circulant_optimized_refit"]
        print("\n| dataset (k) | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for name in SOURCES:
            for k in sorted({r["k"] for r in runs if r["dataset"] == name}):
                sel = [r for r in runs if r["dataset"] == name and r["k"] == k]
                cells = [f"{np.mean([r[c] for r in sel]):.3f} +- {np.std([r[c] for r in sel]):.3f}"
                         for c in keys]
                print(f"| {name} ({k}) | " + " | ".join(cells) + " |")
    path = OUT / "speed.json"
    if path.exists():
        res = json.loads(path.read_text())
        print("\n| d | k | threads | dense s | circulant s | speedup | dense params (bytes) | circulant params (bytes) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in res["runs"]:
            print(f"| {r['d']} | {r['k']} | {r['threads']} | {r['dense']['seconds']:.3f} | "
                  f"{r['circulant']['seconds']:.3f} | {r['speedup']:.2f} | "
                  f"{r['dense']['param_bytes']:,} | {r['circulant']['param_bytes']:,} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("figure1")
    p.add_argument("--dataset", choices=sorted(SOURCES), required=True)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--rff-k", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--cnm-k", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--kerapp-k", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--kerapp-seeds", type=int, default=1)
    p.add_argument("--pegasos-max-k", type=int, default=64)
    p.add_argument("--kerapp-iter", type=int, default=10)
    p.set_defaults(fn=figure1)
    p = sub.add_parser("kerapp")
    p.add_argument("--dataset", choices=sorted(SOURCES), required=True)
    p.add_argument("--k", type=int, nargs="+", default=[16, 32])
    p.add_argument("--kerapp-iter", type=int, default=10)
    p.set_defaults(fn=kerapp)
    p = sub.add_parser("circulant")
    p.add_argument("--seeds", type=int, default=2)
    p.set_defaults(fn=circulant)
    p = sub.add_parser("speed")
    p.add_argument("--dims", type=int, nargs="+", default=[256, 1024, 2048, 4096])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.set_defaults(fn=speed)
    p = sub.add_parser("plot")
    p.set_defaults(fn=plot)
    p = sub.add_parser("tables")
    p.set_defaults(fn=tables)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import dask

    dask.config.set(scheduler="threads")
    main()

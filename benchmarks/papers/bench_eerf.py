"""Benchmarks of EERF (Shahrampour et al. 2018) and LKRF (Sinha & Duchi 2016).

Run from the repository root (needs ../shared/datasets); results (JSON, PNG) go
to docs/eerf/ by default:

    python benchmarks/papers/bench_eerf.py table3   # Adult, M = 100: error and t_pp / t_train / t_test
    python benchmarks/papers/bench_eerf.py table3 --standardize-all   # the same, one-hot columns scaled too
    python benchmarks/papers/bench_eerf.py table3 --methods RFF EERF --seeds $(seq 0 19) --tag _20seeds
    python benchmarks/papers/bench_eerf.py rho      # LKRF's rho chosen on a validation split
    python benchmarks/papers/bench_eerf.py sweep --seeds 0 1 2 3 4 --m0s 500 2000 4000 --subsamples 0.05 0.2 1.0
    python benchmarks/papers/bench_eerf.py curves   # Figure 1: test error vs M, Adult / letter / magic04
    python benchmarks/papers/bench_eerf.py arccos   # Tables 4-5 setting: arc-cosine features on letter

All runs use dask's threads scheduler.  ``table3`` reads the Zarr datasets as
dask arrays (the library's out-of-core path, what the timings refer to);
``rho``, ``curves`` and ``arccos`` load the small training sets into memory
(numpy input, same code) to fit many models quickly.  Every method of one
seed gets the same standardizer and the same ``gamma`` (the papers' rule,
:func:`rfstream.kernels.auto_gamma`), and the ridge classifier picks its alpha
by 5-fold cross-validation in its single pass.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import dask
import numpy as np

from rfstream.bench.scripts import cache_dir, write_json
from rfstream.bench.scripts import cached_dataset as dataset

ROOT = Path(__file__).resolve().parents[2]
ALPHAS = [10.0**k for k in range(-4, 5)]
# name -> (M grid, M0, N0/N) for the Figure 1 curves; Adult's M0 and N0/N are Table 3's
SETTINGS = {
    "adult": ((10, 25, 50, 100, 200), 2000, 0.05),
    "magic04": ((10, 25, 50, 100, 200), 2000, 0.1),
    "letter": ((25, 50, 100, 200, 400), 4000, 0.5),
}


# ------------------------------------------------------------------ data

def adult():
    """Adult train (adult.data) and test (adult.test) as dask arrays + one-hot columns."""
    from rfstream.datasets import prepare
    from rfstream.io import dataset_info, onehot_columns, open_dataset

    train, test = prepare("adult", cache_dir(), rows_per_chunk=8192)
    passthrough = onehot_columns(dataset_info(train)["attrs"])
    return (*open_dataset(train), *open_dataset(test), passthrough)


def load(name):
    """(X_train, y_train, X_test, y_test, passthrough) as dask arrays.

    letter: the first 15,000 rows train, the last 5,000 test (Table 4);
    magic04: a seeded random third of the rows is the test set.
    """
    from rfstream.preprocess import train_test_split

    if name == "adult":
        return adult()
    if name == "letter":
        X, y = dataset("letter")
        return X[:15000], y[:15000], X[15000:], y[15000:], None
    X, y = dataset("magic_gamma")
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=1 / 3, random_state=0)
    return Xtr, ytr, Xte, yte, None


def standardized(name, in_memory, standardize_all=False):
    """Standardized train / test arrays and the papers' gamma.

    One-hot columns (Adult) pass through unscaled, as in ``rfstream fit``;
    ``standardize_all`` scales them too, as the EERF paper does ("features
    scaled to zero mean and unit variance").
    """
    from rfstream import Standardizer
    from rfstream.kernels import auto_gamma

    Xtr, ytr, Xte, yte, passthrough = load(name)
    std = Standardizer(passthrough=None if standardize_all else passthrough).fit(Xtr)
    Xtr, Xte = std.transform(Xtr), std.transform(Xte)
    if in_memory:
        Xtr, ytr, Xte, yte = dask.compute(Xtr, ytr, Xte, yte)
    gamma = auto_gamma(Xtr, "gaussian", random_state=0)
    return Xtr, ytr, Xte, yte, gamma


# --------------------------------------------------------------- methods

def make_map(method, M, seed, gamma, *, m0, subsample, rho=1.0, base="fourier"):
    import rfstream
    from rfstream import (
        ArcCosineFeatures,
        EERFFeatures,
        LKRFFeatures,
        RandomFourierFeatures,
    )

    common = {"n_candidates": m0, "subsample": subsample, "random_state": seed, "base": base,
              "gamma": gamma if base == "fourier" else 1.0}
    if method == "RFF":
        return RandomFourierFeatures(M, gamma=gamma, random_state=seed)
    if method == "ORF":
        return RandomFourierFeatures(M, gamma=gamma, sampler="orthogonal", random_state=seed)
    if method == "SES":
        ses = getattr(rfstream, "SESFeatures", None)
        if ses is None:
            from rfstream.datadriven.ses import SESFeatures as ses
        return ses(max(M // 2, 1), gamma=gamma, random_state=seed)  # 2 features per frequency
    if method == "EERF":
        return EERFFeatures(M, **common)
    if method == "EERF raw (eq. 7)":
        return EERFFeatures(M, score_mode="raw", **common)
    if method == "LKRF":
        return LKRFFeatures(M, rho=rho, **common)
    if method.startswith("arccos"):
        return ArcCosineFeatures(M, degree=int(base[-1]), random_state=seed)
    raise ValueError(method)


def ses_available():
    try:
        from rfstream.datadriven.ses import SESFeatures  # noqa: F401
    except ImportError:
        return False
    return True


def run_one(fmap, Xtr, ytr, Xte, yte):
    """Test error and the three timings of Table 3 (pre-processing = fitting the map)."""
    from rfstream import StreamingRidgeClassifier
    from rfstream.cluster import compute

    t0 = time.perf_counter()
    fmap.fit(Xtr, ytr)
    t_pp = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf = StreamingRidgeClassifier(alpha=ALPHAS).fit(fmap.transform(Xtr), ytr)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = compute(clf.predict(fmap.transform(Xte)))
    err = float(np.mean(pred != np.asarray(compute(yte))))
    t_test = time.perf_counter() - t0
    return {"error": err, "t_pp": t_pp, "t_train": t_train, "t_test": t_test,
            "n_features": len(fmap.get_feature_names_out()), "alpha": clf.alpha_}


# --------------------------------------------------------------- figures

def summarize(runs, key="error"):
    v = np.array([r[key] for r in runs])
    return {"mean": float(v.mean()), "stderr": float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0}


def plot_style():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def error_axes(ax, runs, xlabel, title):
    """Mean test error (%) +- standard error against M, one line per method."""
    for method, by_m in runs.items():
        ms = [int(m) for m in by_m]
        s = [summarize(by_m[str(m)]) for m in ms]
        ax.errorbar(ms, [100 * v["mean"] for v in s], yerr=[100 * v["stderr"] for v in s],
                    marker="o", capsize=3, label=method)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test error (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_curves(out, names):
    """Figure 1 (test error against M) from the curves_<name>.json of ``names`` in ``out``,
    and every letter arc-cosine figure there."""
    for f in Path(out).glob("letter*_arccos.json"):
        plot_arccos(f)
    plt = plot_style()
    files = [Path(out) / f"curves_{n}.json" for n in names]
    files = [f for f in files if f.exists()]
    fig, axes = plt.subplots(1, len(files), figsize=(5 * len(files), 4), squeeze=False)
    for ax, f in zip(axes[0], files):
        res = json.loads(f.read_text())
        error_axes(ax, res["runs"], "number of features M",
                    f"{res['dataset']} (M0={res['M0']}, N0/N={res['subsample']})")
    fig.tight_layout()
    fig.savefig(Path(out) / "figure1_error_vs_M.png", dpi=110)


def plot_arccos(path):
    """One panel per degree: plain arc-cosine features, LKRF and EERF against M."""
    res = json.loads(Path(path).read_text())
    plt = plot_style()
    degrees = sorted({k[-2] if k.endswith(")") else k[-1] for k in res["runs"]})
    fig, axes = plt.subplots(1, len(degrees), figsize=(5 * len(degrees), 4), squeeze=False)
    for ax, deg in zip(axes[0], degrees):
        runs = {k: v for k, v in res["runs"].items() if f"arccos{deg}" in k}
        error_axes(ax, runs, "number of features M (M0 = 5 M, N0 = N)",
                    f"{res['dataset']}, arc-cosine degree {deg}")
    fig.tight_layout()
    fig.savefig(Path(path).with_suffix(".png"), dpi=110)


# --------------------------------------------------------------- commands

def cmd_rho(args):
    """LKRF's rho chosen on a validation split of each training set (M = 100, seed 0)."""
    from rfstream.preprocess import train_test_split

    results = {}
    for name in args.datasets:
        _, m0, sub = SETTINGS[name]
        Xtr, ytr, _, _, gamma = standardized(name, in_memory=True)
        Xa, Xv, ya, yv = train_test_split(Xtr, ytr, test_size=0.25, random_state=1)
        errs = {}
        for rho in args.rhos:
            fmap = make_map("LKRF", 100, 0, gamma, m0=m0, subsample=sub, rho=rho)
            errs[str(rho)] = run_one(fmap, Xa, ya, Xv, yv)["error"]
            print(name, rho, errs[str(rho)], flush=True)
        best = min(args.rhos, key=lambda r: (errs[str(r)], r))
        results[name] = {"validation_error": errs, "best_rho": best, "M": 100, "M0": m0, "subsample": sub}
    print(write_json(Path(args.out) / "lkrf_rho.json", results))


def _best_rho(args, name):
    path = Path(args.out) / "lkrf_rho.json"
    if path.exists():
        return json.loads(path.read_text()).get(name, {}).get("best_rho", 1.0)
    return 1.0


def cmd_table3(args):
    """Adult, M = 100, M0 = 2000, N0/N = 5%: Table 3 (dask input from Zarr)."""
    M, m0, sub = 100, 2000, 0.05
    Xtr, ytr, Xte, yte, gamma = standardized("adult", in_memory=False, standardize_all=args.standardize_all)
    methods = args.methods or ["RFF", "ORF", "EERF", "EERF raw (eq. 7)", "LKRF"] + (["SES"] if ses_available() else [])
    rho = _best_rho(args, "adult")
    results = {"dataset": "adult", "standardize_all": args.standardize_all, "M": M, "M0": m0,
               "subsample": sub, "gamma": gamma,
               "lkrf_rho": rho, "seeds": list(args.seeds), "runs": {}, "summary": {}}
    for method in methods:
        runs = []
        for seed in args.seeds:
            fmap = make_map(method, M, seed, gamma, m0=m0, subsample=sub, rho=rho)
            runs.append({"seed": seed, **run_one(fmap, Xtr, ytr, Xte, yte)})
            print(method, json.dumps(runs[-1]), flush=True)
        results["runs"][method] = runs
        results["summary"][method] = {k: summarize(runs, k) for k in ("error", "t_pp", "t_train", "t_test")}
    print(write_json(Path(args.out) / f"adult_table3{'_standardize_all' if args.standardize_all else ''}{args.tag}.json",
                     results))


def cmd_sweep(args):
    """Adult, M = 100: EERF's test error over M0 and N0/N (the paper: M0 = 5-20 M, N0 = 0.1 N)."""
    Xtr, ytr, Xte, yte, gamma = standardized("adult", in_memory=True, standardize_all=args.standardize_all)
    res = {"dataset": "adult", "standardize_all": args.standardize_all, "M": 100, "gamma": gamma,
           "seeds": list(args.seeds), "runs": {}}
    res["runs"]["RFF"] = [run_one(make_map("RFF", 100, s, gamma, m0=None, subsample=None), Xtr, ytr, Xte, yte)
                          for s in args.seeds]
    print("RFF", summarize(res["runs"]["RFF"]), flush=True)
    for m0 in args.m0s:
        for sub in args.subsamples:
            runs = [run_one(make_map("EERF", 100, s, gamma, m0=m0, subsample=sub), Xtr, ytr, Xte, yte)
                    for s in args.seeds]
            res["runs"][f"EERF M0={m0} N0/N={sub}"] = runs
            print(m0, sub, summarize(runs), flush=True)
    print(write_json(Path(args.out) / f"adult_sweep{'_standardize_all' if args.standardize_all else ''}.json", res))


def cmd_curves(args):
    """Figure 1: test error vs M on Adult, letter and magic04."""
    methods = ["RFF", "ORF", "LKRF", "EERF"] + (["SES"] if ses_available() else [])
    for name in args.datasets:
        grid, m0, sub = SETTINGS[name]
        Xtr, ytr, Xte, yte, gamma = standardized(name, in_memory=True)
        rho = _best_rho(args, name)
        res = {"dataset": name, "M0": m0, "subsample": sub, "gamma": gamma, "lkrf_rho": rho,
               "seeds": list(args.seeds), "grid": list(grid), "runs": {}}
        for method in methods:
            res["runs"][method] = {}
            for M in grid:
                runs = [run_one(make_map(method, M, s, gamma, m0=max(m0, M), subsample=sub, rho=rho),
                                Xtr, ytr, Xte, yte) for s in args.seeds]
                res["runs"][method][str(M)] = runs
                print(name, method, M, summarize(runs), flush=True)
        write_json(Path(args.out) / f"curves_{name}.json", res)
    plot_curves(args.out, SETTINGS)


def cmd_arccos(args):
    """Arc-cosine features on letter: EERF vs LKRF vs plain features (Tables 4-5 setting)."""
    Xtr, ytr, Xte, yte, _ = standardized("letter", in_memory=True)
    if args.binary:  # the two-class letter task: A-M (codes 0-12) against N-Z
        ytr, yte = (ytr < 13).astype(np.int32), (yte < 13).astype(np.int32)
    grid = (25, 50, 100, 200, 400)
    res = {"dataset": "letter" + (" A-M vs N-Z" if args.binary else ""), "M0_factor": 5,
           "subsample": 1.0, "seeds": list(args.seeds), "grid": list(grid),
           "lkrf_rho": args.arccos_rho, "runs": {}}
    for degree in args.degrees:
        base = f"arccos{degree}"
        for method in ("arccos", "LKRF", "EERF"):
            key = f"{method} ({base})" if method != "arccos" else base
            res["runs"][key] = {}
            for M in grid:
                runs = [run_one(make_map(method if method != "arccos" else base, M, s, None, m0=5 * M,
                                         subsample=1.0, rho=args.arccos_rho, base=base),
                                Xtr, ytr, Xte, yte) for s in args.seeds]
                res["runs"][key][str(M)] = runs
                print(key, M, summarize(runs), flush=True)
    stem = "letter_binary_arccos" if args.binary else "letter_arccos"
    path = write_json(Path(args.out) / f"{stem}.json", res)
    plot_arccos(path)
    print(path)


def cmd_report(args):
    """Markdown tables of every JSON present in --out (pasted into docs/eerf.md)."""
    out = Path(args.out)
    for f in sorted(out.glob("adult_table3*.json")):
        res = json.loads(f.read_text())
        print(f"\n{f.name}: Adult, M={res['M']}, M0={res['M0']}, N0/N={res['subsample']}, "
              f"seeds {res['seeds']}, LKRF rho={res['lkrf_rho']}, gamma={res['gamma']:.4g}\n")
        print("| method | test error % (stderr) | t_pp s | t_train s | t_test s |")
        print("|---|---|---|---|---|")
        for method, summ in res["summary"].items():
            e = summ["error"]
            print(f"| {method} | {100 * e['mean']:.2f} ({100 * e['stderr']:.2f}) | "
                  f"{summ['t_pp']['mean']:.2f} | {summ['t_train']['mean']:.2f} | {summ['t_test']['mean']:.2f} |")
    for f in sorted(out.glob("adult_sweep*.json")):
        res = json.loads(f.read_text())
        print(f"\n{f.name}: seeds {res['seeds']}\n")
        print("| configuration | test error % (stderr) |")
        print("|---|---|")
        for key, runs in res["runs"].items():
            e = summarize(runs)
            print(f"| {key} | {100 * e['mean']:.2f} ({100 * e['stderr']:.2f}) |")
    for f in sorted(out.glob("curves_*.json")) + sorted(out.glob("letter*_arccos.json")):
        res = json.loads(f.read_text())
        grid = res["grid"]
        print(f"\n{f.name}: seeds {res['seeds']}, LKRF rho={res['lkrf_rho']}\n")
        print("| method | " + " | ".join(f"M={m}" for m in grid) + " |")
        print("|---|" + "---|" * len(grid))
        for method, by_m in res["runs"].items():
            cells = [summarize(by_m[str(m)]) for m in grid if str(m) in by_m]
            print(f"| {method} | " + " | ".join(f"{100 * c['mean']:.2f} ({100 * c['stderr']:.2f})"
                                               for c in cells) + " |")
    rho = out / "lkrf_rho.json"
    if rho.exists():
        res = json.loads(rho.read_text())
        print("\nlkrf_rho.json: validation error % at M=100\n")
        rhos = list(next(iter(res.values()))["validation_error"])
        print("| dataset | " + " | ".join(f"rho={r}" for r in rhos) + " | chosen |")
        print("|---|" + "---|" * (len(rhos) + 1))
        for name, r in res.items():
            print(f"| {name} | " + " | ".join(f"{100 * r['validation_error'][k]:.2f}" for k in rhos)
                  + f" | {r['best_rho']} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["table3", "rho", "sweep", "curves", "arccos", "plot", "report"])
    p.add_argument("--out", default=str(ROOT / "docs" / "eerf"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--datasets", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--rhos", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0, 100.0, 1000.0])
    p.add_argument("--degrees", type=int, nargs="+", default=[2])
    p.add_argument("--arccos-rho", type=float, default=1.0)
    p.add_argument("--binary", action="store_true", help="arccos: letter as A-M against N-Z")
    p.add_argument("--standardize-all", action="store_true",
                   help="table3, sweep: standardize Adult's one-hot columns too (the paper's preprocessing)")
    p.add_argument("--methods", nargs="+", default=None, help="table3: methods (default: all)")
    p.add_argument("--tag", default="", help="table3: suffix of the JSON file name")
    p.add_argument("--m0s", type=int, nargs="+", default=[500, 1000, 2000, 4000], help="sweep: M0 values")
    p.add_argument("--subsamples", type=float, nargs="+", default=[0.05, 0.1, 0.2, 1.0],
                   help="sweep: N0/N values")
    args = p.parse_args(argv)
    with dask.config.set(scheduler="threads"):
        {"table3": cmd_table3, "rho": cmd_rho, "sweep": cmd_sweep, "curves": cmd_curves, "arccos": cmd_arccos,
         "plot": lambda a: plot_curves(a.out, SETTINGS), "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()

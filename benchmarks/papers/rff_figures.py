"""Rahimi & Recht (2007) random Fourier features: the three figures, from real data.

    python benchmarks/papers/rff_figures.py --datasets ../shared/datasets --out docs/rff   # ~10 min on 2 cores

On Adult (32,561 training rows, 16,281 test rows; numeric columns standardized,
one-hot columns passed through, the same ``gamma`` for everything: rfstream's
"auto" rule on the training set):

1. kernel approximation error ||K - ZZ'||_F / ||K||_F on 1000 sampled training
   rows against D: rfstream RFF (Monte Carlo and orthogonal frequencies) and
   scikit-learn's RBFSampler;
2. test error against D: rfstream RFF + StreamingRidgeClassifier (from the Zarr
   dataset, dask threads) against scikit-learn RBFSampler + RidgeClassifier
   (in memory), alpha = 1, three seeds each;
3. test error against fit time, the same runs.

Writes ``rff.json`` and three PNGs into ``--out``.  Timings are wall-clock on a
shared machine: the load average is recorded next to them.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=None, help="real datasets folder (default: $RFSTREAM_DATASETS, "
                   "else ../shared/datasets beside the repository)")
    p.add_argument("--workdir", default="runs/bench")
    p.add_argument("--out", default="docs/rff")
    p.add_argument("--n-components", type=int, nargs="+", default=[100, 200, 500, 1000, 2000])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--alpha", type=float, default=1.0)
    args = p.parse_args(argv)

    import dask
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    from rfstream import io
    from rfstream.bench.e2e import shared_gamma, sklearn_preprocessor
    from rfstream.datasets import prepare
    from rfstream.bench.measures import load
    from rfstream.bench.scripts import write_json
    from rfstream.features import RandomFourierFeatures
    from rfstream.metrics import kernel_approximation_error
    from rfstream.pipeline import evaluate_dataset, fit_dataset

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train, test = (str(p) for p in prepare("adult", args.workdir, args.datasets))
    gamma = shared_gamma(train)
    X, y = io.open_dataset(train)
    Xt, yt = io.open_dataset(test)
    Xn, yn, Xtn, ytn = X.compute(), y.compute(), Xt.compute(), yt.compute()
    Xs = sklearn_preprocessor(train).fit(Xn).transform(Xn)
    result = {"command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "dataset": "adult",
              "gamma": gamma, "alpha": args.alpha, "load_at_start": load(), "kernel": [], "fits": []}

    for D in args.n_components:
        maps = {"rfstream mc": RandomFourierFeatures(D, gamma=gamma, random_state=0),
                "rfstream orthogonal": RandomFourierFeatures(D, gamma=gamma, sampler="orthogonal",
                                                             random_state=0),
                "sklearn RBFSampler": RBFSampler(gamma=gamma, n_components=D, random_state=0)}
        for name, fmap in maps.items():
            err = kernel_approximation_error(Xs, fmap.fit(Xs), kernel="gaussian", gamma=gamma)
            result["kernel"].append({"method": name, "D": D, "error": err})
        print(f"kernel D={D}: " + ", ".join(f"{r['error']:.4f}" for r in result["kernel"][-3:]), file=sys.stderr)

    for D in args.n_components:
        for seed in args.seeds:
            t0 = time.perf_counter()
            with dask.config.set(scheduler="threads"):
                model, meta = fit_dataset(train, n_components=D, alpha=args.alpha, gamma=gamma,
                                          random_state=seed)
                fit_s = time.perf_counter() - t0
                err = evaluate_dataset(model, meta, test)["value"]
            result["fits"].append({"method": "rfstream", "D": D, "seed": seed, "fit_seconds": fit_s,
                                   "test_error": err})
            t0 = time.perf_counter()
            sk = make_pipeline(sklearn_preprocessor(train), RBFSampler(gamma=gamma, n_components=D,
                                                                        random_state=seed),
                               RidgeClassifier(alpha=args.alpha)).fit(Xn, yn)
            fit_s = time.perf_counter() - t0
            err = float(np.mean(sk.predict(Xtn) != ytn))
            result["fits"].append({"method": "sklearn", "D": D, "seed": seed, "fit_seconds": fit_s,
                                   "test_error": err})
            print(f"fit D={D} seed={seed}: " + ", ".join(
                f"{r['method']} {r['test_error']:.4f} {r['fit_seconds']:.1f}s" for r in result["fits"][-2:]),
                file=sys.stderr)
    result["load_at_end"] = load()
    write_json(out / "rff.json", result, indent=2)
    plot(result, out)


def plot(result, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name in dict.fromkeys(r["method"] for r in result["kernel"]):
        rows = [r for r in result["kernel"] if r["method"] == name]
        ax.loglog([r["D"] for r in rows], [r["error"] for r in rows], "o-", label=name)
    D = np.array(sorted({r["D"] for r in result["kernel"]}), dtype=float)
    first = min((r for r in result["kernel"]), key=lambda r: r["D"])
    ax.loglog(D, first["error"] * np.sqrt(D[0] / D), "k--", lw=1, label="D^-1/2")
    ax.set_xlabel("D (features)")
    ax.set_ylabel("||K - ZZ'||_F / ||K||_F")
    ax.set_title("Adult: Gaussian kernel approximation")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "kernel_error_vs_features.png", dpi=110)
    plt.close(fig)

    for key, fname, xlabel in (("D", "test_error_vs_features.png", "D (features)"),
                               ("fit_seconds", "test_error_vs_time.png", "fit seconds")):
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for name in ("rfstream", "sklearn"):
            rows = [r for r in result["fits"] if r["method"] == name]
            Ds = sorted({r["D"] for r in rows})
            mean_x = [np.mean([r[key] for r in rows if r["D"] == d]) for d in Ds]
            errs = [[r["test_error"] * 100 for r in rows if r["D"] == d] for d in Ds]
            line = ax.plot(mean_x, [np.mean(e) for e in errs], "o-",
                           label=f"{name} RFF + ridge" if name == "rfstream" else "sklearn RBFSampler + Ridge")
            ax.errorbar(mean_x, [np.mean(e) for e in errs],
                        yerr=[[np.mean(e) - min(e) for e in errs], [max(e) - np.mean(e) for e in errs]],
                        fmt="none", color=line[0].get_color(), capsize=3)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test error, % (mean, min-max over seeds)")
        ax.set_title("Adult: test error")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()

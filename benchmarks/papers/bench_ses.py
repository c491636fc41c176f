"""Benchmarks of SES (Chang et al. 2017): Figures 1-3 and Table 2 of the paper.

Run from the repository root (needs ../shared/datasets); results (JSON, PNG) go
to docs/ses/ by default:

    python benchmarks/papers/bench_ses.py kernel       # Figure 1: held-out kernel error vs M
    python benchmarks/papers/bench_ses.py supervised   # Table 2: ridge / classifier errors
    python benchmarks/papers/bench_ses.py weights      # Figure 2: weight histograms (adult)
    python benchmarks/papers/bench_ses.py sketch       # Figure 3: kernel error vs sketch size r
    python benchmarks/papers/bench_ses.py negative     # negative weights: NNLS vs clipping
    python benchmarks/papers/bench_ses.py plot         # redraw the figures from the JSON files

Methods (all :class:`rfstream.SESFeatures`, so each compares weights on the
same kind of frequencies): MC = uniform weights on Monte Carlo frequencies; QMC
= uniform weights on scrambled Sobol frequencies; BQ = Bayesian Quadrature
weights on QMC frequencies (as in the paper); SES = shrinkage weights on the
*same* MC frequencies as MC (same seed), SES-QMC = shrinkage weights on the QMC
frequencies.  Maps are fitted on the training rows (a lazy, standardized dask
array read from Zarr: only sampled rows are gathered) and the kernel error is
measured on 1000 rows of the held-out test split.  dask's threads scheduler.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rfstream.bench.scripts import cache_dir, write_json

ROOT = Path(__file__).resolve().parents[2]
TEST_SIZE = 0.2  # held out of datasets without a test file (Adult has one)
MS = (16, 32, 64, 128, 256, 512)
METHODS = {  # label -> SESFeatures keyword arguments
    "MC": {"weights": "uniform", "sampler": "mc"},
    "QMC": {"weights": "uniform", "sampler": "qmc"},
    "BQ": {"weights": "bq", "sampler": "qmc"},
    "SES": {"weights": "ses", "sampler": "mc"},
    "SES-QMC": {"weights": "ses", "sampler": "qmc"},
}


def load(name):
    """Standardized lazy (Xtr, ytr, Xte, yte, task) of a real dataset (Zarr cached in rfstream.bench.scripts.cache_dir())."""
    from rfstream import Standardizer
    from rfstream.datasets import get, prepare, train_test
    from rfstream.io import dataset_info, onehot_columns

    Xtr, Xte, ytr, yte = train_test(name, cache_dir(), test_size=None if get(name).test else TEST_SIZE)
    attrs = dataset_info(prepare(name, cache_dir())[0])["attrs"]
    std = Standardizer(passthrough=onehot_columns(attrs) or None).fit(Xtr)
    return std.transform(Xtr), ytr, std.transform(Xte), yte, attrs["task"]


def gamma_of(Xtr):
    from rfstream.kernels import auto_gamma

    return auto_gamma(Xtr, "gaussian", random_state=0)


def held_out(name):
    """(lazy standardized training rows, gamma, 1000 held-out test rows as numpy)."""
    from rfstream.random import sample_rows

    Xtr, _, Xte, _, _ = load(name)
    return Xtr, gamma_of(Xtr), sample_rows(Xte, 1000, 0).astype(np.float64)


def _save(out, fname, results):
    write_json(Path(out) / fname, results)
    return Path(out)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------ Figure 1: kernel
def cmd_kernel(args):
    from rfstream import SESFeatures
    from rfstream.metrics import kernel_approximation_error

    results = {}
    for name in args.datasets:
        Xtr, gamma, test = held_out(name)
        res = {"n_train": int(Xtr.shape[0]), "n_features": int(Xtr.shape[1]), "gamma": gamma,
               "n_test_rows": int(test.shape[0]), "errors": {}, "n_negative": {}, "reg": {},
               "sigma_gp": {}, "fit_seconds": {}}
        for m in args.ms:
            for seed in range(args.seeds):
                for label, kw in METHODS.items():
                    t0 = time.perf_counter()
                    fm = SESFeatures(m, gamma=gamma, random_state=seed, **kw).fit(Xtr)
                    sec = time.perf_counter() - t0
                    err = kernel_approximation_error(test, fm, n_samples=test.shape[0])
                    for key, val in (("errors", err), ("n_negative", fm.n_negative_), ("reg", fm.reg_),
                                     ("sigma_gp", fm.sigma_gp_), ("fit_seconds", sec)):
                        res[key].setdefault(label, {}).setdefault(str(m), []).append(val)
                    print(f"{name} M={m} seed={seed} {label}: {err:.4f} ({sec:.1f} s)", flush=True)
        mean = {lab: {k: float(np.mean(v)) for k, v in e.items()} for lab, e in res["errors"].items()}
        res["mean"] = mean
        res["ratio_to_mc"] = {lab: {k: mean[lab][k] / mean["MC"][k] for k in mean[lab]} for lab in mean}
        results[name] = res
    plot_kernel(results, _save(args.out, "kernel_approximation.json", results))


# --------------------------------------------------------- Table 2: supervised
def cmd_supervised(args):
    from rfstream.metrics import error_rate, relative_rmse
    from rfstream.pipeline import make_model

    alphas = [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
    results = {}
    for name, m in zip(args.datasets, args.ms):
        Xtr, ytr, Xte, yte, task = load(name)
        gamma = gamma_of(Xtr)
        res = {"task": task, "M": m, "gamma": gamma, "alphas": alphas, "errors": {}}
        for label, kw in METHODS.items():
            for seed in range(args.seeds):
                model = make_model(task, features="ses", standardize=False,
                                   feature_params={"n_components": m, "gamma": gamma,
                                                   "random_state": seed, **kw},
                                   solver_params={"alpha": alphas, "cv": 5})
                model.fit(Xtr, ytr)
                pred = model.predict(Xte)
                err = error_rate(yte, pred) if task == "classification" else relative_rmse(yte, pred)
                res["errors"].setdefault(label, []).append(err)
                print(f"{name} M={m} seed={seed} {label}: {err:.4f}", flush=True)
        res["mean"] = {k: float(np.mean(v)) for k, v in res["errors"].items()}
        res["std"] = {k: float(np.std(v)) for k, v in res["errors"].items()}
        results[name] = res
    _save(args.out, "supervised.json", results)


# ---------------------------------------------------------- Figure 2: weights
def cmd_weights(args):
    from rfstream import SESFeatures

    Xtr, _, _, _, _ = load(args.dataset)
    gamma = gamma_of(Xtr)
    results = {"dataset": args.dataset, "gamma": gamma, "weights": {}, "sums": {}}
    for m in args.ms:
        for label in ("SES", "BQ"):
            fm = SESFeatures(m, gamma=gamma, random_state=0, **METHODS[label]).fit(Xtr)
            results["weights"].setdefault(label, {})[str(m)] = fm.weights_.tolist()
            sums = [float(fm.weights_.sum())]
            sums += [float(SESFeatures(m, gamma=gamma, random_state=s, **METHODS[label]).fit(Xtr)
                           .weights_.sum()) for s in range(1, args.seeds)]
            results["sums"].setdefault(label, {})[str(m)] = sums
            print(f"M={m} {label}: sum {np.mean(sums):.3f}, M*beta in "
                  f"[{m * fm.weights_.min():.2f}, {m * fm.weights_.max():.2f}]", flush=True)
    plot_weights(results, _save(args.out, "weights.json", results))


# --------------------------------------------------------- Figure 3: sketch r
def cmd_sketch(args):
    from rfstream import SESFeatures
    from rfstream.metrics import kernel_approximation_error

    results = {}
    for name in args.datasets:
        Xtr, gamma, test = held_out(name)
        res = {"gamma": gamma, "runs": {}}
        for m in args.ms:
            runs = {}
            for label in ("MC", "QMC"):
                runs[label] = float(np.mean([kernel_approximation_error(
                    test, SESFeatures(m, gamma=gamma, random_state=s, **METHODS[label]).fit(Xtr),
                    n_samples=1000) for s in range(args.seeds)]))
            for factor in args.factors:
                r = max(1, round(factor * m))
                for label in ("BQ", "SES"):
                    errs = [kernel_approximation_error(
                        test, SESFeatures(m, gamma=gamma, n_pairs=r, random_state=s,
                                          **METHODS[label]).fit(Xtr), n_samples=1000)
                        for s in range(args.seeds)]
                    runs.setdefault(label, {})[str(r)] = float(np.mean(errs))
                    print(f"{name} M={m} r={r} {label}: {np.mean(errs):.4f}", flush=True)
            res["runs"][str(m)] = runs
        results[name] = res
    plot_sketch(results, _save(args.out, "sketch_size.json", results))


# ------------------------------------------------- negative weights: NNLS vs clip
def cmd_negative(args):
    """Held-out kernel error of three treatments of the negative SES weights, same pairs and reg:
    beta >= 0 by NNLS (what SESFeatures does), the unconstrained solution clipped at 0, and the
    unconstrained signed weights (an indefinite kernel estimate, not a feature map)."""
    from rfstream import SESFeatures
    from rfstream.datadriven.ses import MIN_PAIRS
    from rfstream.kernels import kernel_matrix

    results = {}
    for name in args.datasets:
        Xtr, gamma, test = held_out(name)
        K = kernel_matrix(test, test, "gaussian", gamma)
        res = {}
        for m in args.ms:
            rows = {"nnls": [], "clip": [], "signed": [], "n_negative": []}
            for seed in range(args.seeds):
                ses = SESFeatures(m, gamma=gamma, random_state=seed).fit(Xtr)
                r = max(4 * m, MIN_PAIRS)  # the default n_pairs: the same pairs as the fit
                (H, t), _ = ses._sample_pairs(ses._check_input(Xtr, reset=False), r)
                beta = np.linalg.solve(H.T @ H + ses.reg_ * np.eye(m), H.T @ t)
                Z = ses.rff_.transform(test).astype(np.float64) * np.sqrt(m)
                h = Z[:, :m], Z[:, m:]
                for key, w in (("nnls", ses.weights_), ("clip", np.maximum(beta, 0)), ("signed", beta)):
                    Kt = (h[0] * w) @ h[0].T + (h[1] * w) @ h[1].T
                    rows[key].append(float(np.linalg.norm(K - Kt) / np.linalg.norm(K)))
                rows["n_negative"].append(ses.n_negative_)
            res[str(m)] = {k: float(np.mean(v)) for k, v in rows.items()}
            print(name, m, res[str(m)], flush=True)
        results[name] = res
    _save(args.out, "negative_weights.json", results)


# -------------------------------------------------------------------- plots
def _log_ticks(ax, values):
    from matplotlib.ticker import NullLocator

    ax.set_xticks(values)
    ax.set_xticklabels([str(v) for v in values], fontsize=7)
    ax.xaxis.set_minor_locator(NullLocator())


def plot_kernel(results, out):
    plt = _plt()
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for label, errs in res["mean"].items():
            ax.loglog([int(k) for k in errs], list(errs.values()), marker="o", label=label,
                      lw=2.2 if label.startswith("SES") else 1.2)
        ax.set_title(f"{name} (d={res['n_features']})")
        _log_ticks(ax, [int(k) for k in res["mean"]["MC"]])
        ax.set_xlabel("number of frequencies M")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("held-out ||K - K~||_F / ||K||_F")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "figure1_kernel_approximation.png", dpi=110)


def plot_weights(results, out):
    plt = _plt()
    shown = [m for m in (32, 128, 512) if str(m) in results["weights"]["SES"]]
    fig, axes = plt.subplots(1, len(shown) + 1, figsize=(4 * (len(shown) + 1), 3.4), squeeze=False)
    for ax, m in zip(axes[0], shown):
        for label in ("BQ", "SES"):
            ax.hist(np.asarray(results["weights"][label][str(m)]) * m, bins=30, alpha=0.6, label=label)
        ax.axvline(1.0, color="k", lw=1.5, label="MC / QMC (1/M)")
        ax.set_title(f"{results['dataset']}, M = {m}")
        ax.set_xlabel("M x weight")
    axes[0][0].set_ylabel("number of frequencies")
    axes[0][0].legend(fontsize=8)
    ax = axes[0][-1]
    for label in ("BQ", "SES"):
        sums = results["sums"][label]
        ax.semilogx([int(k) for k in sums], [np.mean(v) for v in sums.values()], marker="o", label=label)
    ax.axhline(1.0, color="k", lw=1.0)
    _log_ticks(ax, [int(k) for k in results["sums"]["SES"]])
    ax.set_xlabel("M")
    ax.set_title("sum of weights vs M")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "figure2_weights.png", dpi=110)


def plot_sketch(results, out):
    plt = _plt()
    panels = [(n, m) for n in results for m in results[n]["runs"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False)
    for ax, (name, m) in zip(axes[0], panels):
        runs = results[name]["runs"][m]
        for label in ("BQ", "SES"):
            ax.semilogx([int(r) for r in runs[label]], list(runs[label].values()), marker="o", label=label)
        for label, style in (("MC", ":"), ("QMC", "--")):
            ax.axhline(runs[label], ls=style, color="gray", label=label)
        ax.set_title(f"{name}, M = {m}")
        _log_ticks(ax, [int(r) for r in runs["SES"]])
        ax.set_xlabel("sketch size r (pairs)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("held-out ||K - K~||_F / ||K||_F")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "figure3_sketch_size.png", dpi=110)


def cmd_plot(args):
    """Redraw every figure from the JSON files in --out."""
    out = Path(args.out)
    for fname, plot in (("kernel_approximation.json", plot_kernel), ("weights.json", plot_weights),
                        ("sketch_size.json", plot_sketch)):
        if (out / fname).exists():
            plot(json.loads((out / fname).read_text()), out)


def main(argv=None):
    import dask

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("kernel")
    p.add_argument("--datasets", nargs="+", default=["cpusmall", "magic_gamma", "letter", "adult"])
    p.add_argument("--ms", nargs="+", type=int, default=list(MS))
    p.add_argument("--seeds", type=int, default=5)
    p.set_defaults(func=cmd_kernel)
    p = sub.add_parser("supervised")
    p.add_argument("--datasets", nargs="+", default=["cpusmall", "adult", "magic_gamma"])
    p.add_argument("--ms", nargs="+", type=int, default=[512, 64, 128],
                   help="M per dataset (the paper: cpu 512, adult 64)")
    p.add_argument("--seeds", type=int, default=3)
    p.set_defaults(func=cmd_supervised)
    p = sub.add_parser("weights")
    p.add_argument("--dataset", default="adult")
    p.add_argument("--ms", nargs="+", type=int, default=list(MS))
    p.add_argument("--seeds", type=int, default=3)
    p.set_defaults(func=cmd_weights)
    p = sub.add_parser("sketch")
    p.add_argument("--datasets", nargs="+", default=["magic_gamma", "adult"])
    p.add_argument("--ms", nargs="+", type=int, default=[64, 256])
    p.add_argument("--factors", nargs="+", type=float, default=[0.25, 0.5, 1, 2, 4, 8, 16])
    p.add_argument("--seeds", type=int, default=3)
    p.set_defaults(func=cmd_sketch)
    p = sub.add_parser("negative")
    p.add_argument("--datasets", nargs="+", default=["cpusmall", "magic_gamma", "letter", "adult"])
    p.add_argument("--ms", nargs="+", type=int, default=[128, 512])
    p.add_argument("--seeds", type=int, default=3)
    p.set_defaults(func=cmd_negative)
    p = sub.add_parser("plot", help="redraw the figures from the JSON files")
    p.set_defaults(func=cmd_plot)
    for p in sub.choices.values():
        p.add_argument("--out", default=str(ROOT / "docs" / "ses"))
    args = parser.parse_args(argv)
    with dask.config.set(scheduler="threads"):
        args.func(args)


if __name__ == "__main__":
    main()

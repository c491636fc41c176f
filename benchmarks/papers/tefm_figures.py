"""The compared maps and the figures of the TEFM benchmarks (bench_tefm.py): Figure 1's
methods and kernel approximation error, Figures 2-3's relative RMSE, from the results its
sub-commands compute."""
from __future__ import annotations


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

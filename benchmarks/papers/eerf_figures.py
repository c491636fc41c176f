"""The figures of the EERF benchmarks (bench_eerf.py), drawn from the JSON its commands write,
and the mean and standard error both its figures and tables report."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


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

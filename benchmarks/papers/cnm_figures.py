"""The figures and tables of the CNM benchmarks (``python benchmarks/papers/bench_cnm.py plot`` and
``tables``): drawn from the JSON that bench_cnm.py's experiments write to docs/cnm/."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "cnm"
DATASETS = ("letter", "magic_gamma")  # entries of rfstream.datasets.registry


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

    files = [OUT / f"figure1_{n}.json" for n in DATASETS if (OUT / f"figure1_{n}.json").exists()]
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
    _plot_gamma(plt)
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


def _variant(run):
    """(multiclass, max_iter, alpha) of a CNM run of the bandwidth grid."""
    return run["multiclass"], run.get("max_iter", 30), run.get("alpha", 1e-4)


def _variant_label(v):
    mc, it, alpha = v
    return mc + ("" if it == 30 else f", {it} it") + ("" if alpha == 1e-4 else f", alpha {alpha:g}")


def _grid(runs, method, k, scale, variant=None, key="accuracy"):
    """Mean, std and count of ``key`` over the seeds of one cell of the bandwidth grid."""
    sel = [r[key] if key != "validation" else max(r["validation_path"]) for r in runs
           if r["method"] == method and r["k"] == k and r["scale"] == scale
           and (method == "rff" or _variant(r) == variant)]
    return (float(np.mean(sel)), float(np.std(sel)), len(sel)) if sel else None


def _plot_gamma(plt):
    """Accuracy against gamma / auto: RFF at k and 8 k, CNM at k (docs/cnm/gamma_accuracy.png)."""
    files = [OUT / f"gamma_{n}.json" for n in DATASETS if (OUT / f"gamma_{n}.json").exists()]
    if not files:
        return
    fig, axes = plt.subplots(1, len(files), figsize=(6 * len(files), 4.2), squeeze=False)
    for ax, path in zip(axes[0], files):
        runs = json.loads(path.read_text())["runs"]
        scales = sorted({r["scale"] for r in runs})
        present = {_variant(r) for r in runs if r["method"] == "cnm"}
        # the default, and the best variants measured (the tables have all of them)
        variants = [v for v in (("ovr", 30, 1e-4), ("crammer-singer", 30, 1e-4),
                                ("crammer-singer", 200, 1e-4), ("crammer-singer", 200, 1e-5),
                                ("ovr", 200, 1e-4)) if v in present]
        lines = [("rff", k, None) for k in sorted({r["k"] for r in runs if r["method"] == "rff"})]
        lines += [("cnm", k, v) for v in variants
                  for k in sorted({r["k"] for r in runs if r["method"] == "cnm"})]
        for i, (method, k, v) in enumerate(lines):
            cells = [(s, _grid(runs, method, k, s, v)) for s in scales]
            xs, ys = [s for s, c in cells if c], [c[0] for s, c in cells if c]
            if method == "rff":
                label, style = f"RFF-{k} + logistic", {"ls": "--", "color": str(0.75 - 0.15 * i)}
            else:
                label = f"CNM-{k} {_variant_label(v)}"
                style = {"ls": "-" if k == 16 else ":", "color": f"C{variants.index(v)}"}
            ax.plot(xs, ys, marker="o", label=label, **style)
        ax.axvline(4.0, color="k", lw=0.5)
        ax.set_title(f"{path.stem[6:]} (vertical line: Section 7 read literally)")
        _finish(ax, "gamma / auto_gamma", "test accuracy")
        ax.legend(fontsize=6, ncol=2)
    _save(fig, "gamma_accuracy.png")


def _gamma_tables(name):
    """Tables of the bandwidth grid: accuracy per scale, and the k vs 8 k comparison."""
    path = OUT / f"gamma_{name}.json"
    if not path.exists():
        return
    runs = json.loads(path.read_text())["runs"]

    def cell(v):
        return f"{v[0]:.3f} +- {v[1]:.3f}" if v else "-"

    scales = sorted({r["scale"] for r in runs}, reverse=True)
    variants = sorted({_variant(r) for r in runs if r["method"] == "cnm"},
                      key=lambda v: (v[1], -v[2], ["ovr", "crammer-singer", "multinomial"].index(v[0])))
    rff_k = sorted({r["k"] for r in runs if r["method"] == "rff"})
    cnm_k = sorted({r["k"] for r in runs if r["method"] == "cnm"})
    seeds = sorted({r["seed"] for r in runs})
    print(f"\n{name}: test accuracy at gamma = scale x auto, mean +- std over seeds {seeds}\n")
    print("| scale | " + " | ".join(f"RFF-{k}" for k in rff_k) + " |")
    print("|---" * (len(rff_k) + 1) + "|")
    for s in scales:
        print(f"| {s:g} | " + " | ".join(cell(_grid(runs, "rff", k, s)) for k in rff_k) + " |")
    print("\n| CNM variant | k | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    print("|---" * (len(scales) + 2) + "|")
    for v in variants:
        for k in cnm_k:
            print(f"| {_variant_label(v)} | {k} | " + " | ".join(
                cell(_grid(runs, "cnm", k, s, v)) for s in scales) + " |")
    print("\nheld-out accuracy (CNM's own validation rows, best over the path)\n")
    print("| CNM variant | k | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    print("|---" * (len(scales) + 2) + "|")
    for v in variants:
        for k in cnm_k:
            print(f"| {_variant_label(v)} | {k} | " + " | ".join(
                cell(_grid(runs, "cnm", k, s, v, "validation")) for s in scales) + " |")
    print(f"\n{name}: CNM at k against RFF at 8 k at the same gamma (difference in points)\n")
    print("| CNM variant | " + " | ".join(
        f"{k} vs {8 * k} @ {s:g}" for s in scales for k in cnm_k) + " |")
    print("|---" * (len(scales) * len(cnm_k) + 1) + "|")
    print("| RFF-8k | " + " | ".join(
        cell(_grid(runs, "rff", 8 * k, s))[:5] for s in scales for k in cnm_k) + " |")
    for v in variants:
        cells = []
        for s in scales:
            for k in cnm_k:
                c, base = _grid(runs, "cnm", k, s, v), _grid(runs, "rff", 8 * k, s)
                cells.append(f"{c[0]:.3f} ({100 * (c[0] - base[0]):+.1f})" if c and base else "-")
        print(f"| {_variant_label(v)} | " + " | ".join(cells) + " |")
    print(f"\n{name}: each method at its best scale (by test accuracy)\n")
    for k in cnm_k:
        best_rff = max(((_grid(runs, "rff", 8 * k, s) or (-1,))[0], s) for s in scales)
        for v in variants:
            best = max(((_grid(runs, "cnm", k, s, v) or (-1,))[0], s) for s in scales)
            if best[0] >= 0 and best_rff[0] >= 0:
                print(f"- CNM-{k} {_variant_label(v)}: {best[0]:.3f} at scale {best[1]:g}; "
                      f"RFF-{8 * k}: {best_rff[0]:.3f} at scale {best_rff[1]:g} "
                      f"({100 * (best[0] - best_rff[0]):+.1f} points)")


def tables(args=None):
    """Markdown tables of the results (pasted into docs/cnm.md)."""
    def mean(values):
        return f"{np.mean(values):.3f}" if values else "-"

    for name in DATASETS:
        _gamma_tables(name)

    for name in DATASETS:
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
        for name in DATASETS:
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

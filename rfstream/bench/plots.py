"""The PNG plots of ``rfstream bench`` (matplotlib, Agg backend)."""
from __future__ import annotations

from pathlib import Path

from .cases import METHODS


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

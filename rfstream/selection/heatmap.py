"""The search surface of a fit as a heat map PNG (``report=True``, ``rfstream fit --report``).

One cell per (gamma, alpha) of :func:`rfstream.selection.selection_summary`'s table, the
brightest the best, the chosen one framed; matplotlib is optional
(``pip install rfstream[plot]``).  docs/selection.md.
"""
from __future__ import annotations

import io

import numpy as np

HEATMAP_FILE = "cv_heatmap.png"
#: scores of which greater is better (the others are errors)
GREATER_IS_BETTER = ("roc_auc", "log_evidence")


def score_label(scoring):
    """What a cell of the map holds, in words: "log evidence" or "mean CV <scoring>"."""
    return "log evidence" if scoring == "log_evidence" else f"mean CV {scoring}"


def surface_title(selection):
    """The map's title: what it shows, which way is better, and its size."""
    cv = selection["cv"]
    size = f"{len(_gamma_labels(cv))} x {len(set(cv['alpha']))}"
    better = "greater" if selection["scoring"] in GREATER_IS_BETTER else "lower"
    return f"{score_label(selection['scoring'])}, {better} is better ({size})"


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def cv_heatmap_png(selection, title=""):
    """PNG bytes of the heat map of ``selection`` (a :func:`selection_summary` dict)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cv = selection["cv"]
    alphas = sorted(set(cv["alpha"]))
    labels = _gamma_labels(cv)
    grid = np.full((len(labels), len(alphas)), np.nan)
    chosen = None
    for i, (label, alpha, score) in enumerate(zip(_row_labels(cv), cv["alpha"], cv["mean_score"])):
        grid[labels.index(label), alphas.index(alpha)] = np.nan if score is None else score
        if alpha == selection["alpha"] and (selection.get("gamma") is None or "gamma" not in cv
                                            or cv["gamma"][i] == selection["gamma"]):
            chosen = (labels.index(label), alphas.index(alpha))
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(alphas), 1.2 + 0.5 * len(labels)))
    greater = selection["scoring"] in GREATER_IS_BETTER
    finite = grid[np.isfinite(grid)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    image = ax.imshow(grid, cmap="viridis" if greater else "viridis_r", aspect="auto", vmin=low, vmax=high)
    for (r, c), value in np.ndenumerate(grid):
        red, green, blue, _ = image.cmap(image.norm(value))
        light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
        ax.text(c, r, f"{value:.4g}", ha="center", va="center", fontsize=7,
                color="black" if light or (r, c) == chosen else "white",
                bbox={"facecolor": "white", "edgecolor": "red"} if (r, c) == chosen else None)
    ax.set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("alpha")
    ax.set_ylabel("gamma")
    ax.set_title(title or surface_title(selection), fontsize=9)
    fig.colorbar(image, ax=ax, label=score_label(selection["scoring"]).replace("mean CV ", ""))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _row_labels(cv):
    if "gamma_label" in cv:
        return [f"{label} ({g:.3g})" if label.startswith("auto") else label
                for label, g in zip(cv["gamma_label"], cv["gamma"])]
    if "gamma" in cv:
        return [f"{g:.3g}" for g in cv["gamma"]]
    return ["-"] * len(cv["alpha"])


def _gamma_labels(cv):
    """The distinct row labels, smallest gamma first."""
    rows = _row_labels(cv)
    order = np.argsort(cv["gamma"], kind="stable") if "gamma" in cv else range(len(rows))
    seen = []
    for i in order:
        if rows[i] not in seen:
            seen.append(rows[i])
    return seen

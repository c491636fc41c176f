"""The report's curves: the criterion against the number of features, and interval calibration.

:func:`size_curve_png`: the best criterion of each size of a list of ``n_components``, with
the CV standard error; :func:`coverage_png`: the coverage of Gaussian intervals on the exact
leave-one-out residuals of a calibrated regressor against the nominal level, beside the
conformal intervals' diagonal.  docs/selection.md.
"""
from __future__ import annotations

import io

import numpy as np
from scipy.stats import norm

SIZE_CURVE_FILE = "n_components_curve.png"
COVERAGE_FILE = "interval_calibration.png"


def size_curve(table, gamma=None):
    """``(sizes, best, se)``: per size, the best criterion over alpha at ``gamma`` (every
    gamma when None) and its standard error over the folds (nan without folds)."""
    sizes = np.asarray(table["n_components"])
    mean = np.asarray(table["mean_score"], dtype=np.float64)
    std = np.asarray(table.get("std_score", np.full(mean.size, np.nan)), dtype=np.float64)
    folds = np.asarray(table["fold_scores"]).shape[1] if "fold_scores" in table else 1
    keep = np.ones(mean.size, bool) if gamma is None or "gamma" not in table else np.isclose(table["gamma"], gamma)
    greater = table["scoring"] in ("roc_auc", "log_evidence")
    out_sizes, best, se = [], [], []
    for n in np.unique(sizes[keep]):
        rows = np.flatnonzero(keep & (sizes == n))
        i = rows[np.nanargmax(mean[rows]) if greater else np.nanargmin(mean[rows])]
        out_sizes.append(int(n))
        best.append(mean[i])
        se.append(std[i] / np.sqrt(folds) if folds > 1 else np.nan)
    return np.array(out_sizes), np.array(best), np.array(se)


def smallest_within_one_se(table, gamma=None):
    """The smallest size whose best CV score is within one standard error of the best
    size's (the one-standard-error rule, Hastie, Tibshirani & Friedman, ESL 2nd ed.,
    Section 7.10); None without folds (the evidence) or without a list of sizes."""
    if "n_components" not in table or table.get("cv") in ("evidence", "loo"):
        return None
    sizes, best, se = size_curve(table, gamma)
    greater = table["scoring"] in ("roc_auc",)
    top = int(np.nanargmax(best) if greater else np.nanargmin(best))
    if not np.isfinite(se[top]):
        return None
    within = best >= best[top] - se[top] if greater else best <= best[top] + se[top]
    return int(sizes[np.flatnonzero(within)[0]])


def _png(fig):
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def size_curve_png(table, gamma=None, title=""):
    """PNG bytes of :func:`size_curve` (the chosen gamma's curve)."""
    plt = _pyplot()
    sizes, best, se = size_curve(table, gamma)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.errorbar(sizes, best, yerr=None if np.all(np.isnan(se)) else se, marker="o", capsize=3)
    ax.set_xscale("log")
    ax.set_xlabel("n_components")
    label = "log evidence" if table["scoring"] == "log_evidence" else f"mean CV {table['scoring']}"
    ax.set_ylabel(f"{label} (best alpha)")
    ax.set_title(title or "criterion against the number of features", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def gaussian_coverage(counts, levels):
    """The share of leave-one-out scores ``|r| / s`` within ``z_(1+L)/2`` for each level L:
    the coverage of Gaussian intervals on the training rows (bin edges: the score's upper edge)."""
    from ..solvers.ridge.calibration import SCORE_EDGES

    counts = np.asarray(counts, dtype=np.float64)
    upper = np.append(SCORE_EDGES, np.inf)  # bin i holds scores below upper[i]
    cumulative = np.cumsum(counts) / max(counts.sum(), 1e-300)
    z = norm.ppf(0.5 + np.asarray(levels) / 2)
    return np.array([cumulative[np.searchsorted(upper, q)] if q < upper[-2] else 1.0 for q in z])


def coverage_png(counts, title=""):
    """PNG bytes of the calibration plot of a regressor's ``conformal_counts_`` (first target)."""
    plt = _pyplot()
    levels = np.linspace(0.05, 0.99, 40)
    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.plot([0, 1], [0, 1], color="0.6", label="conformal (by construction)")
    ax.plot(levels, gaussian_coverage(np.asarray(counts)[0], levels), marker=".", label="Gaussian std")
    ax.set_xlabel("nominal level")
    ax.set_ylabel("coverage on leave-one-out rows")
    ax.legend(fontsize=8)
    ax.set_title(title or "interval calibration", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def at_size(selection, n):
    """``selection`` (a :func:`rfstream.selection.selection_summary` dict) with only the
    candidates of ``n`` features in its table: the (gamma, alpha) surface of the chosen size."""
    cv = selection["cv"]
    if "n_components" not in cv:
        return selection
    keep = [i for i, size in enumerate(cv["n_components"]) if size == n]
    table = {key: [values[i] for i in keep] for key, values in cv.items()}
    return {**selection, "cv": table}


def report_files(selection, solver, title=""):
    """The report's PNG files beyond the heat map: the curve over ``n_components`` (a list of
    sizes) and the calibration plot (a calibrated regressor), by file name."""
    files = {}
    if "n_components" in selection.get("cv", {}):
        files[SIZE_CURVE_FILE] = size_curve_png(solver.cv_results_, getattr(solver, "gamma_", None))
    if hasattr(solver, "conformal_counts_"):
        files[COVERAGE_FILE] = coverage_png(solver.conformal_counts_)
    return files

"""What a search chose, as the fit summary and the model's metadata show it."""
from __future__ import annotations

import numpy as np

from ..solvers.ridge_cv import grid_edge


def selection_summary(solver, fmap=None):
    """What cross-validation chose, for the fit summary and the model's metadata: the
    chosen ``alpha`` and (with the feature map ``fmap``) ``gamma``, the CV table (mean and
    std of every candidate) and the ``edge`` of a grid the choice sits on (empty for a
    ``solver`` that searched no list of alphas or gammas)."""
    table = getattr(solver, "cv_results_", None)
    if table is None:
        return {}
    cv = {key: [float(v) for v in table[key]] for key in ("gamma", "alpha", "mean_score", "std_score")
          if key in table}
    if "gamma_label" in table:
        cv["gamma_label"] = list(table["gamma_label"])
    summary = {"alpha": float(solver.alpha_), "gamma": getattr(fmap, "gamma_", None),
               "scoring": table["scoring"], "best_score": float(solver.best_score_), "cv": cv}
    chosen = {"alpha": solver.alpha_, "gamma": getattr(solver, "gamma_", None)}
    edges = {}
    for name in ("gamma", "alpha"):
        if name in table:
            values = np.unique(table[name])
            side = grid_edge(values, int(np.searchsorted(values, chosen[name])))
            if side is not None:
                edges[name] = side
    if edges:
        summary["edge"] = edges
    return summary

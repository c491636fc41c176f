"""A gamma grid for the maps that draw per gamma: one fit per gamma, the best by CV or the evidence.

A data-driven map's passes depend on gamma, so a Pipeline (standardizer, map, ridge) is
fitted once per gamma, each with the ridge's K-fold CV over its alphas (the same folds), and
the best mean score (or log evidence) is kept: G times the passes of one fit.  Deviation:
each map is fitted on all the rows, held-out folds included, so its CV scores are slightly
optimistic, alike for every gamma.  docs/selection.md.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ..param_lists import gamma_items, item_label, item_value
from ..solvers.ridge.cv import GREATER_IS_BETTER
from ..solvers.ridge.cv import warn_on_edge


def fit_gamma_loop(model, X, y, **fit_params):
    """Fit ``model`` (a Pipeline with steps "features" and "solver", the map's ``gamma`` a
    grid, the solver a ridge estimator) once per gamma; returns the best fitted Pipeline,
    its solver's ``cv_results_`` holding every (gamma, alpha) as a grid searched in one
    pass would (:func:`rfstream.solvers.ridge.cv.cv_table`)."""
    solver = model.named_steps["solver"]
    items, _ = gamma_items(model.named_steps["features"].gamma)
    labels = [item_label(item) for item in items]
    alphas = list(np.atleast_1d(np.asarray(solver.alpha, dtype=np.float64)))
    fits = []
    for item in items:
        fitted = clone(model).set_params(features__gamma=item_value(item), solver__alpha=alphas)
        fits.append(fitted.fit(X, y, **fit_params))
    scores = np.array([f.named_steps["solver"].best_score_ for f in fits])
    tables = [f.named_steps["solver"].cv_results_ for f in fits]
    scoring = tables[0]["scoring"]  # "log_evidence" with select="evidence": greater is better
    best = int(np.nanargmax(scores) if scoring in GREATER_IS_BETTER else np.nanargmin(scores))
    chosen = fits[best].named_steps["solver"]
    gammas = np.array([f.named_steps["features"].gamma_ for f in fits])
    table = {"gamma": np.repeat(gammas, len(alphas)), "alpha": np.tile(alphas, len(fits)),
             "scoring": scoring}
    if "cv" in tables[0]:
        table["cv"] = tables[0]["cv"]
    for key in ("mean_score", "std_score", "fold_scores", "auc_error_bound", "log_evidence",
                "noise_variance", "effective_parameters"):
        if key in tables[0]:
            table[key] = np.concatenate([t[key] for t in tables], axis=0)
    table["gamma_label"] = [label for label in labels for _ in alphas]
    chosen.cv_results_ = table
    chosen.gammas_ = gammas
    chosen.gamma_ = float(gammas[best])
    if hasattr(chosen, "cv_mse_"):  # not for the evidence
        chosen.cv_mse_ = np.concatenate([f.named_steps["solver"].cv_mse_ for f in fits])
    warn_on_edge(gammas, best, "gamma", labels)
    return fits[best]

"""A gamma grid for the maps that draw per gamma: one fit per gamma, the best by CV or the evidence.

The maps that scale one draw to every gamma (``shares_draw_across_gamma``) search a
grid in the ridge solver's two passes (:mod:`rfstream.features.grid`,
:mod:`rfstream.solvers.ridge.gram`).  A data-driven map cannot share its passes between gammas: TEFM's range finder,
SES's sketch, EERF's and LKRF's scores of a candidate pool are computed on the
features of one gamma, so the passes that fit the map depend on gamma.  Here a
Pipeline (standardizer, map, ridge) is fitted once per gamma, each fit with the
ridge's K-fold cross-validation over its alphas (same folds: a function of the
seed and the row index), and the fit with the best mean score is kept: G times
the passes of one fit.  With ``select="evidence"`` each fit's log evidence (greater
is better) compares the gammas instead.  Deviation: each map is fitted on all the rows, held-out
folds included (as the standardizer is), so its CV scores are slightly
optimistic, alike for every gamma.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ..features.grid import gamma_items, item_label
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
        gamma = item if isinstance(item, float) else item_label(item)
        fitted = clone(model).set_params(features__gamma=gamma, solver__alpha=alphas)
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

"""What a search chose, and what a calibrated model keeps, as the fit summary and the model's
metadata show them (JSON: no NaN, no arrays)."""
from __future__ import annotations

import math

import numpy as np

from ..solvers.ridge.cv import grid_edge
from .curves import smallest_within_one_se

#: the columns of an evidence table (``select="evidence"``, :mod:`rfstream.solvers.ridge.evidence`)
#: shown besides the scores: per candidate, the noise variance at its maximum and the
#: effective number of parameters
EVIDENCE_COLUMNS = ("log_evidence", "noise_variance", "effective_parameters")


def _number(value):
    """A float for JSON: None for NaN or an infinity (JSON has neither)."""
    value = float(value)
    return value if math.isfinite(value) else None


def selection_summary(solver, fmap=None):
    """What the search chose, for the fit summary and the model's metadata: the chosen
    ``alpha`` and (with the feature map ``fmap``) ``gamma``, the table of every candidate
    (``cv``: mean and std of its CV score, or with ``select="evidence"`` its log evidence,
    noise variance and effective number of parameters), the ``scoring`` ("log_evidence"
    for the evidence, greater is better) and the ``edge`` of a grid the choice sits on
    (empty for a ``solver`` that searched no list of alphas or gammas).  With a list of
    ``n_components``: the chosen size, and the smallest size whose CV score is within one
    standard error of the best size's (:func:`rfstream.selection.curves.smallest_within_one_se`).

    The evidence's noise variance is per target column; with several targets the table
    shows their mean per candidate (the summary says so in ``noise_variance_of``).
    """
    table = getattr(solver, "cv_results_", None)
    if table is None:
        return {}
    evidence = table.get("scoring") == "log_evidence"
    keys = ("gamma", "n_components", "alpha", "mean_score") + (EVIDENCE_COLUMNS if evidence else ("std_score",))
    cv = {}
    for key in keys:
        if key in table:
            values = np.asarray(table[key], dtype=np.float64)
            if values.ndim == 2:  # noise variance: candidates x targets
                values = values.mean(axis=1)
            cv[key] = [int(v) for v in values] if key == "n_components" else [_number(v) for v in values]
    if "gamma_label" in table:
        cv["gamma_label"] = list(table["gamma_label"])
    summary = {"alpha": float(solver.alpha_), "gamma": getattr(fmap, "gamma_", None),
               "scoring": table["scoring"], "best_score": _number(solver.best_score_), "cv": cv}
    if "n_components" in table:  # a list of sizes: the chosen one, and the 1-SE rule's (CV)
        summary["n_components"] = int(solver.n_components_)
        smallest = smallest_within_one_se(table, getattr(solver, "gamma_", None))
        if smallest is not None:
            summary["smallest_n_components_within_1se"] = smallest
    targets = np.shape(table.get("noise_variance", ()))
    if evidence and len(targets) == 2 and targets[1] > 1:
        summary["noise_variance_of"] = f"the mean over {targets[1]} target columns"
    chosen = {"alpha": solver.alpha_, "gamma": getattr(solver, "gamma_", None)}
    edges = {}
    for name in ("gamma", "alpha"):
        if name in table:
            values = np.unique(table[name])
            side = grid_edge(values, int(np.searchsorted(values, chosen[name])))
            if side is not None:
                edges[name] = side
    sizes = np.unique(table.get("n_components", ()))
    if sizes.size >= 2 and solver.n_components_ == sizes.max():  # warned about as the alpha's and gamma's edges
        edges["n_components"] = "largest"
    if edges:
        summary["edge"] = edges
    return summary


def calibration_summary(solver):
    """What a calibrated ridge estimator (``calibrate``) keeps, for the fit summary and the
    model's metadata: a regressor's ``noise_variance`` (sigma^2 per target column, the
    noise of its posterior predictive std and intervals); a classifier's Platt
    coefficients ``platt`` ([A, B] per target column).  ``outputs`` names what the model
    can then give (``predict(return_std=True)``, ``predict_interval``, ``predict_proba``).
    Empty for a model fitted without calibration."""
    if hasattr(solver, "posterior_factor_"):
        return {"noise_variance": [_number(v) for v in np.atleast_1d(solver.noise_variance_)],
                "outputs": ["std", "interval"]}
    if hasattr(solver, "platt_"):
        return {"platt": [[_number(a), _number(b)] for a, b in np.asarray(solver.platt_)],
                "outputs": ["predict_proba"]}
    return {}

"""Ridge's cross-validation from the partials of one pass: every (gamma, alpha, fold).

The Gram pass (:mod:`rfstream.solvers.gram`) gives per fold k, and per gamma g
of a bandwidth grid (:mod:`rfstream.solvers.grid_pass`), the partials of the
rows of fold k; "all folds but k" are the training statistics.  Each training
Gram is eigendecomposed once, ``G = V diag(e) V'``, and the whole alpha path
``W(alpha) = V diag(1 / (e + alpha)) V' Z'Y`` follows with no pass (the
standard eigen-trick of ridge paths, e.g. Hastie, Tibshirani & Friedman, The
Elements of Statistical Learning, 2nd ed., Section 3.4.1); for a few alphas a
Cholesky solve per alpha is cheaper (:data:`EIGH_MIN_ALPHAS`).  The held-out
squared error of each model comes from fold k's own partials; a classifier's
metric needs one more pass that predicts every held-out row with every
(gamma, alpha, fold) model at once (:mod:`rfstream.solvers.cv_scores`).  Two
passes in all, whatever the grid's size.

The best mean score picks (gamma, alpha); of equal scores the first in the
grid's order (gamma by gamma, then alpha), as ``np.argmin`` over an explicit
loop in that order would.  A choice on the edge of a grid of at least three
values is warned about (:func:`warn_on_edge`): the best value may lie outside.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ..cluster import compute
from .cv_scores import best_candidate, cv_table, fold_scores, score_pass


def check_alpha(alpha):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64)) if not isinstance(alpha, str) else None
    if alphas is None or alphas.ndim != 1 or alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
        raise ValueError(
            f"alpha must be a float >= 0 or a non-empty list of floats >= 0; got {alpha!r}."
        )
    return alphas


def check_totals(totals):
    """Refuse a Gram pass that saw no rows, non-finite values or only zero weights."""
    for total in totals:
        if total["m"] == 0:
            raise ValueError("cannot fit on 0 rows: X is empty.")
        if not all(np.isfinite(v).all() for v in total.values()):
            raise ValueError(
                "X, y or sample_weight contains NaN or infinity (the Gram reduction is not "
                "finite); remove or impute them before fitting."
            )
        if total["n"] <= 0:
            raise ValueError("every row has weight zero (sample_weight times class_weight): nothing "
                             "to fit; give some rows a weight > 0.")


def normal_equations(stats, fit_intercept):
    """(G, C, mu, nu): Z'Z and Z'Y, centred on the row means mu, nu if fitting an intercept.

    The centred Gram ``G - n mu mu'`` is made in place of its outer product: the same operations and
    the same numbers as ``G - n * np.outer(mu, mu)``, whose temporaries put two new D x D arrays on
    the client at once (256 MB against 128 MB at D = 4096, tracemalloc)."""
    if not fit_intercept:
        return stats["G"], stats["C"], np.zeros(stats["G"].shape[0]), np.zeros(stats["C"].shape[1])
    n = max(stats["n"], 1.0)
    mu, nu = stats["s"] / n, stats["t"] / n
    G = np.outer(mu, mu)
    G *= n
    np.subtract(stats["G"], G, out=G)
    C = stats["C"] - n * np.outer(mu, nu)
    return G, C, mu, nu


def solve(G, C, alpha):
    """(G + alpha I)^-1 C by Cholesky, falling back to least squares if singular.

    The factor overwrites one copy of ``G`` (no finiteness scan: the caller checked
    the partials): half the time of ``scipy.linalg.solve(..., assume_a="pos")`` at
    D = 1000 on this machine (6.5 ms against 13.7 ms).
    """
    A = G.copy()
    A[np.diag_indices_from(A)] += alpha
    try:
        factor = scipy.linalg.cho_factor(A, overwrite_a=True, check_finite=False)
        return scipy.linalg.cho_solve(factor, C, check_finite=False)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        return scipy.linalg.lstsq(G + alpha * np.eye(G.shape[0]), C, cond=None)[0]


def held_out_moments(mu, nu, fold):
    """``(AA, AB, BB)``: the second moments of one fold's centred features and targets,
    ``(z - mu)``, ``(y - nu)``, from its partials: once per fold, for every alpha."""
    n, s, t = fold["n"], fold["s"], fold["t"]
    AA = fold["G"] - np.outer(s, mu) - np.outer(mu, s) + n * np.outer(mu, mu)
    AB = fold["C"] - np.outer(s, nu) - np.outer(mu, t) + n * np.outer(mu, nu)
    BB = np.trace(fold["B"]) - 2 * t @ nu + n * nu @ nu
    return AA, AB, BB


def held_out_sse(W, moments):
    """Squared error on one fold of the predictions (z - mu) W + nu, from its
    :func:`held_out_moments`."""
    AA, AB, BB = moments
    return BB - 2 * np.sum(W * AB) + np.sum(W * (AA @ W))


#: From this many alphas on, one eigendecomposition per fold serves every alpha; below it
#: each (fold, alpha) is one Cholesky solve: on this machine (2 cores) the eigh of a
#: 1000 x 1000 Gram took 0.32 s and a Cholesky solve 0.04 s.
EIGH_MIN_ALPHAS = 8


def _eigen_path(G, C):
    """``alpha -> (G + alpha I)^-1 C`` from one eigendecomposition of ``G``."""
    e, V = scipy.linalg.eigh(G)
    VC = V.T @ C

    def at(a):
        return V @ (VC / (np.maximum(e, 0) + a)[:, None]) if a > 0 or e.min() > 0 else solve(G, C, a)

    return at


def alpha_path(stats, total, alphas, scored, fit_intercept):
    """``(W, b, sse, n)``: the weights (K, D, A x T) and intercepts (K, A x T) of every
    (scored fold, alpha), their held-out squared errors (K, A) and the folds' weights
    (K,): per fold a Cholesky solve per alpha, or one eigh for :data:`EIGH_MIN_ALPHAS`
    alphas or more; no data pass (a fold with no weight: zeros)."""
    D, T = total["C"].shape
    W_all, b_all = np.zeros((scored, D, alphas.size * T)), np.zeros((scored, alphas.size * T))
    sse, fold_n = np.zeros((scored, alphas.size)), np.zeros(scored)
    for k in range(scored):
        fold = {key: v[k] for key, v in stats.items()}
        if fold["n"] == 0:
            continue
        train = {key: total[key] - fold[key] for key in total}
        G, C, mu, nu = normal_equations(train, fit_intercept)
        path = _eigen_path(G, C) if alphas.size >= EIGH_MIN_ALPHAS else lambda a, G=G, C=C: solve(G, C, a)
        moments = held_out_moments(mu, nu, fold)
        for i, a in enumerate(alphas):
            W = path(a)
            sse[k, i] = held_out_sse(W, moments)
            W_all[k, :, i * T:(i + 1) * T], b_all[k, i * T:(i + 1) * T] = W, nu - mu @ W
        fold_n[k] = fold["n"]
    return W_all, b_all, sse, fold_n


def grid_cross_validate(groups, y, stats, totals, alphas, cv, weights, *, scoring, classes,
                        fit_intercept, seed):
    """``(table, cv_mse, best)``: :func:`rfstream.solvers.cv_scores.cv_table` of every
    (gamma, alpha), the mean held-out squared error of each (same order) and the
    index of the best candidate.

    ``groups``: the :class:`rfstream.solvers.grid_pass.FeatureGroups` of the Gram
    pass, ``stats``/``totals`` its per-group partials and their sums over folds;
    ``cv`` and ``weights`` as the pass had them.
    """
    scored = cv[1]
    paths = [alpha_path(s, t, alphas, scored, fit_intercept) for s, t in zip(stats, totals)]
    fold_n = paths[0][3]
    sse = np.concatenate([p[2] for p in paths], axis=1)  # (K, G x A)
    cv_mse = sse.sum(axis=0) / max(fold_n.sum(), 1.0)
    bound = None
    if scoring == "squared_error":
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = sse / fold_n[:, None]
    else:
        counts, layout = score_pass(groups, y, [p[0] for p in paths], [p[1] for p in paths],
                                    scoring=scoring, classes=classes, cv=cv, weights=weights, seed=seed)
        counts = compute(counts)
        per_group = [fold_scores(layout.unpack(part), scoring)
                     for part in np.split(counts, groups.n_groups)]
        scores = np.concatenate([s for s, _ in per_group], axis=1)
        if scoring == "roc_auc":
            bound = np.concatenate([b for _, b in per_group], axis=1)
    table = cv_table(alphas, scores, fold_n, scoring, bound, gammas=groups.gammas)
    return table, cv_mse, best_candidate(table)


def grid_edge(values, chosen):
    """"smallest" or "largest" when ``values[chosen]`` is at that end of three or more
    distinct values (the best may lie outside the grid), else None."""
    values = np.asarray(values, dtype=np.float64)
    if np.unique(values).size < 3:
        return None
    value = values[chosen]
    return "smallest" if value == values.min() else "largest" if value == values.max() else None


def warn_on_edge(values, chosen, name, labels=None):
    """Warn when the choice sits on the edge of the grid (:func:`grid_edge`), naming the
    direction to extend it; returns the side or None."""
    side = grid_edge(values, chosen)
    if side is not None:
        shown = labels[chosen] if labels is not None else f"{float(np.asarray(values)[chosen]):g}"
        towards = "smaller" if side == "smallest" else "larger"
        warnings.warn(f"the chosen {name}={shown} is the {side} of its grid; the best may lie beyond "
                      f"it: extend the grid towards {towards} {name} values.", UserWarning, stacklevel=4)
    return side

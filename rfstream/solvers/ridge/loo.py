"""Exact leave-one-out cross-validation of ridge from one Gram: ``cv="loo"``.

Sherman-Morrison (Hastie, Tibshirani & Friedman, The Elements of Statistical Learning, 2nd
ed., eq. 7.52 and exercise 7.3): ``r_i = e_i / (1 - c_i h_ii)``,
``h_ii = 1/n + (z_i - mu)' (G + alpha I)^-1 (z_i - mu)``; one eigendecomposition ``G = U S U'``
gives every alpha, so one more pass after the Gram pass scores every (gamma, alpha) exactly,
with memory O(D^2) instead of K-fold's O(K D^2).  docs/ridge.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ... import lapack
from ...cluster import client_map, compute
from ...devices import is_numpy, symmetric_eigh
from ...reductions import Layout
from ..passes import RowSpec, row_sum, sub_blocks, weight_fields
from ..targets import encode_classes
from .cv import (
    _add_counts,
    apply_q,
    best_candidate,
    chosen_platt,
    cv_table,
    fold_scores,
    score_layout,
    tridiagonal_solve,
)
from .gram import group_chunk, group_spec
from .on_device import device_rotation


def loo_basis(total, fit_intercept):
    """What the pass needs of one gamma's full-data partials: ``U``, ``S`` (clipped at
    0), ``U' Z_c' C Y``, ``mu``, ``nu`` and ``1 / n`` (0 without an intercept).
    ``total["G"]`` is consumed (centred in place, overwritten by ``syevr``): the client
    holds two D x D arrays; the final solve reuses ``U`` (:func:`loo_solution`)."""
    G, C = total["G"], total["C"]
    mu, nu = np.zeros(G.shape[0]), np.zeros(C.shape[1])
    if fit_intercept:
        n = max(total["n"], 1.0)
        mu, nu = total["s"] / n, total["t"] / n
        G -= n * np.outer(mu, mu)  # in place (the outer product is one more D x D, briefly)
        C = C - n * np.outer(mu, nu)
    s, U = symmetric_eigh(G) or lapack.syevr(G, overwrite_a=True)  # without the GIL: gammas at once
    total["G"] = None
    return {"U": U, "s": np.maximum(s, 0.0), "UC": U.T @ C, "mu": mu, "nu": nu,
            "inv_n": 1.0 / max(total["n"], 1e-300) if fit_intercept else 0.0}


def loo_solution(basis, alpha):
    """``(W, b)`` of the full-data ridge fit for ``alpha`` from the eigendecomposition, or from
    the tridiagonal reduction of :func:`rfstream.solvers.ridge.evidence.tridiagonal_basis`."""
    if "U" in basis:
        W = basis["U"] @ (basis["UC"] / (basis["s"] + alpha)[:, None])
    else:
        x = tridiagonal_solve(basis["reduction"], basis["QC"], alpha)
        if x is None:
            raise np.linalg.LinAlgError(f"the centred Gram plus alpha={alpha:g} times I is singular; use an alpha > 0.")
        W = apply_q(basis["reduction"], x, "N")
    return W, basis["nu"] - basis["mu"] @ W


def loo_layout(n_alphas, n_classes, scoring, platt_targets=0):
    """Squared-error sums (``sse``, ``sse2``: sum c r^2 and sum c r^4, per alpha), the
    weight, and for a classifier the counts of :func:`rfstream.solvers.ridge.cv.score_layout`
    (with ``platt_targets``, the leave-one-out decisions' Platt histograms)."""
    shapes = {"sse": (n_alphas,), "sse2": (n_alphas,), "n": (1,)}
    if n_classes:
        shapes.update(score_layout(1, n_alphas, n_classes, scoring, platt_targets).shapes)
    return Layout(**shapes)


@dataclass(frozen=True, eq=False, kw_only=True)
class LooSpec(RowSpec):
    """The leave-one-out pass's :class:`rfstream.solvers.passes.RowSpec`: ``targets``,
    ``classes`` (None for a regressor), one group's ``basis`` (:func:`loo_basis`), the
    ``alphas`` and the ``scoring`` metric."""

    basis: dict
    alphas: np.ndarray
    scoring: str


def loo_chunk(z, *rows, offset, spec, out=None):
    """The leave-one-out sums of one row block (docs/ridge.md) for every alpha.

    ``z`` and ``rows`` (labels, then sample weights when they travel) as
    :func:`rfstream.solvers.ridge.gram.gram_chunk`; ``spec`` a :class:`LooSpec`.
    """
    basis, layout, scoring = spec.basis, spec.layout, spec.scoring
    out = layout.empty() if out is None else out
    m = z.shape[0]
    if m == 0:
        return out
    parts = layout.unpack(out)
    y = spec.take(rows)["y"]
    Y = np.asarray(spec.targets(y), dtype=np.float64)
    c = spec.row_weights(rows, offset)
    c = np.ones(m) if c is None else c
    parts["n"] += c.sum()
    codes = encode_classes(y, spec.classes) if spec.classes is not None else None
    blocks = sub_blocks(z, spec, basis["U"].shape[0])  # stored sub-blocks sliced, or features made
    U, s, UC, mu, nu = basis["U"], basis["s"], basis["UC"], basis["mu"], basis["nu"]
    for start, stop, zs in blocks:
        sub = slice(start, stop)
        zs = zs.toarray() if sp.issparse(zs) else zs
        # U'(z_i - mu), one GEMM (rows on a device: made there, in float64)
        a = (np.asarray(zs, dtype=np.float64) @ U if is_numpy(zs) else device_rotation(zs, U)) - mu @ U
        decisions = []
        for alpha in spec.alphas:
            inv = 1.0 / (s + alpha)
            with np.errstate(divide="ignore", invalid="ignore"):
                h = basis["inv_n"] + (a * a) @ inv
                residual = (Y[sub] - (a * inv) @ UC - nu) / (1.0 - c[sub] * h)[:, None]
            decisions.append(Y[sub] - residual)
            sq = np.sum(residual * residual, axis=1)
            i = len(decisions) - 1
            parts["sse"][i] += c[sub] @ sq
            parts["sse2"][i] += c[sub] @ (sq * sq)
        if codes is not None and scoring != "squared_error":
            _add_counts(parts, np.hstack(decisions), np.zeros(stop - start, dtype=np.intp), codes[sub],
                        c[sub], scoring)
    return out


def loo_cross_validate(groups, y, totals, alphas, weights, *, target_fn, scoring, classes,
                       fit_intercept, platt=False):
    """``(table, cv_mse, best, bases, platt_counts)`` of exact leave-one-out: the first three as
    :func:`rfstream.solvers.ridge.cv.grid_cross_validate` gives them for K folds (one
    eigendecomposition per gamma on the client, one pass over the rows), the
    eigendecomposition of each gamma (:func:`loo_basis`), from which :func:`loo_solution`
    gives the full-data fit, and with ``platt`` (a classifier's metric) the best candidate's
    leave-one-out decision histograms for Platt scaling (T, 2, DECISION_BINS), else None.
    ``totals[g]["G"]`` is consumed."""
    D = totals[0]["C"].shape[0]
    bases = client_map(lambda t: loo_basis(t, fit_intercept), totals, width=D,
                       shown=("eigendecompositions", 1, f"D={D:,}"))
    n_classes = len(classes) if classes is not None else 0
    platt = platt and n_classes > 0 and scoring != "squared_error"  # the counts ride on the metric's
    layout = loo_layout(alphas.size, n_classes, scoring, platt_targets=totals[0]["C"].shape[1] if platt else 0)
    w, weight_args = weights
    spec = LooSpec(layout=layout, targets=target_fn, basis=bases[0], alphas=alphas, scoring=scoring,
                   classes=classes, class_weight=weight_fields(weight_args)["class_weight"])
    group = group_spec(loo_chunk, groups, spec, [{"basis": b} for b in bases])
    sums = compute(row_sum(group_chunk, groups.n_groups * layout.size, groups.rows, group, y=y, w=w))
    parts = [layout.unpack(p) for p in np.split(sums, groups.n_groups)]
    n = parts[0]["n"][0]
    sse = np.concatenate([p["sse"] for p in parts])
    cv_mse = sse / max(n, 1e-300)
    bound = None
    if scoring == "squared_error":
        scores = cv_mse[None, :]
        with np.errstate(invalid="ignore"):
            std = np.sqrt(np.maximum(np.concatenate([p["sse2"] for p in parts]) / n - cv_mse ** 2, 0.0))
    else:
        per_group = [fold_scores(p, scoring) for p in parts]
        scores = np.concatenate([sc for sc, _ in per_group], axis=1)
        if scoring == "roc_auc":
            bound = np.concatenate([b for _, b in per_group], axis=1)
        std = np.sqrt(scores[0] * (1 - scores[0])) if scoring == "error_rate" else np.full(scores.shape[1], np.nan)
    table = cv_table(alphas, scores, np.array([n]), scoring, bound, gammas=groups.gammas)
    table["std_score"] = std  # over the rows: a fold of one row has no spread of its own
    table["cv"] = "loo"
    best = best_candidate(table)
    return table, cv_mse, best, bases, chosen_platt(parts, best, alphas.size) if platt else None

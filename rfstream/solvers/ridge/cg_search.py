"""A list of alphas searched by conjugate gradients: every (fold, alpha) system in the same passes.

Past the Gram's memory each (fold, alpha, target) is a ridge system of its own; they run as
columns of the block CG of :func:`rfstream.solvers.ridge.cg.solve_systems` (Hestenes & Stiefel
1952; Saad 2003, Algorithm 9.1), sharing the statistics and product passes, then one scoring
pass predicts every held-out row with its fold's models.  Folds are the Gram route's
(:func:`rfstream.solvers.folds.check_cv`); exact leave-one-out is refused.  docs/ridge.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cluster import compute
from ...random import check_seed
from ...reductions import Layout
from ..folds import check_cv
from ..memory import check_cg_memory
from ..passes import RowSpec, fused_row_sum, weight_fields
from .cg import (
    Systems,
    check_iterative_search,
    nystrom_factory,
    solve_systems,
    statistics,
)
from .cv import best_candidate, cv_table, fold_scores, held_out_decisions, score_pass


@dataclass(frozen=True, eq=False, kw_only=True)
class HeldOutSpec(RowSpec):
    """The held-out squared error pass's :class:`rfstream.solvers.passes.RowSpec`: ``W``
    (K, D, A x T) and ``b`` (K, A x T), the weights of every (scored fold, alpha)."""

    W: np.ndarray
    b: np.ndarray


def held_out_sse_chunk(z, *rows, offset, spec, out):
    """Adds, per (scored fold k, alpha), the weighted squared error of the rows of fold k
    predicted by fold k's models (:func:`rfstream.solvers.ridge.cv.held_out_decisions`, as
    the scoring pass predicts them) into ``out`` (``spec.layout``: ``sse`` (K, A)); rows of no
    scored fold add nothing."""
    m = z.shape[0]
    if m == 0:
        return
    K = spec.W.shape[0]
    folds = spec.row_folds(m, rows, offset)
    keep = folds < K
    c = spec.row_weights(rows, offset)
    Y = spec.targets(spec.take(rows)["y"])[keep]
    err = held_out_decisions(z, folds, spec.W, spec.b)[keep] - np.tile(Y, spec.W.shape[2] // Y.shape[1])
    err = np.square(err).reshape(Y.shape[0], -1, Y.shape[1]).sum(axis=2)  # (rows, A)
    if c is not None:
        err *= c[keep, None]
    one_hot = folds[keep, None] == np.arange(K)
    spec.layout.unpack(out)["sse"][:] += one_hot.T @ err


def fold_columns(n_scored, n_alphas, n_targets):
    """``(held_out, alpha_index, target)`` of the systems, fold by fold (the scored folds, then
    -1: every row), alpha by alpha, target by target."""
    folds = np.r_[np.arange(n_scored), -1]
    held_out = np.repeat(folds, n_alphas * n_targets)
    alpha_index = np.tile(np.repeat(np.arange(n_alphas), n_targets), folds.size)
    target = np.tile(np.arange(n_targets), folds.size * n_alphas)
    return held_out, alpha_index, target


def cg_cross_validate(estimator, Z, y, target_fn, n_targets, alphas, groups, *, sample_weight=None,
                      weight_args=None):
    """Search ``alphas`` for a ridge ``estimator`` with ``solver`` "cg" or "pcg" (module
    docstring).

    Returns ``(table, cv_mse, best, W, b, info)``: :func:`rfstream.solvers.ridge.cv.cv_table`
    of the alphas, their mean held-out squared error (None when a classifier scores by
    another metric), the best alpha's index, the weights (D, A x T) and intercepts (A x T)
    of every alpha fitted on every row, and ``info`` with ``m`` (rows) and ``n_iter`` (all
    passes: statistics, iterations, scoring).
    """
    check_iterative_search(estimator, grid=groups.gammas is not None)
    cv = check_cv(estimator.cv, Z, y)
    seed = check_seed(estimator.random_state)
    n_folds, scored, folds = cv
    A, T = alphas.size, n_targets
    check_cg_memory(estimator.solver, Z.shape[1], T * (scored + 1) * A)
    make = nystrom_factory(estimator, Z, y, float(alphas[0]), T, sample_weight=sample_weight,
                           weight_args=weight_args, columns=(scored + 1) * A)
    st = statistics(Z, y, target_fn, T, sample_weight=sample_weight, weight_args=weight_args, cv=cv, seed=seed,
                    diagonal=make is None)
    held_out, alpha_index, target = fold_columns(scored, A, T)
    systems = Systems.from_statistics(st, held_out, alphas[alpha_index], target, estimator.fit_intercept)
    precondition = systems.jacobi
    if make is not None:
        whole = systems.n[held_out < 0][0]
        precondition = make(systems.mu[:, -1], int(st["m"].sum())).columns(systems.alpha, systems.n / whole)
    labels = y if weight_fields(weight_args)["class_weight"] is not None else None
    W, n_iter, _ = solve_systems(Z, systems, precondition, labels=labels, sample_weight=sample_weight,
                                 weight_args=weight_args, cv=cv, seed=seed, tol=estimator.tol,
                                 max_iter=estimator.max_iter)
    b = systems.intercepts(W)
    D, AT = W.shape[0], A * T
    W_folds = W[:, :scored * AT].reshape(D, scored, AT).transpose(1, 0, 2)
    b_folds = b[:scored * AT].reshape(scored, AT)
    fold_n = st["n"][:scored]
    classes = getattr(estimator, "classes_", None)
    cv_mse, bound = None, None
    if classes is None or estimator.scoring == "squared_error":
        spec = HeldOutSpec(layout=Layout(sse=(scored, A)), targets=target_fn, n_folds=n_folds, seed=seed,
                           W=W_folds.astype(Z.dtype), b=b_folds, **weight_fields(weight_args))
        sse = compute(fused_row_sum(held_out_sse_chunk, spec.layout.size, Z, spec, y=y, w=sample_weight,
                                    folds=folds)).reshape(scored, A)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = sse / fold_n[:, None]
        cv_mse = sse.sum(axis=0) / max(fold_n.sum(), 1.0)
    else:
        counts, layout = score_pass(groups, y, [W_folds], [b_folds], scoring=estimator.scoring,
                                    classes=classes, cv=cv, weights=(sample_weight, weight_args), seed=seed)
        scores, bound = fold_scores(layout.unpack(compute(counts)), estimator.scoring)
    table = cv_table(alphas, scores, fold_n, estimator.scoring, bound)
    info = {"m": float(st["m"].sum()), "n_iter": 1 + n_iter + 1}
    return table, cv_mse, best_candidate(table), W[:, scored * AT:], b[scored * AT:], info

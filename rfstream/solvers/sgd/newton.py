"""Newton's method as distributed reductions: one fused pass per iteration.

Damped Newton on the SGD solvers' objective: IRLS for the log loss, one exact step for the
squared loss, the generalized Newton method for the squared hinge (Mangasarian 2002; Keerthi
& DeCoste 2005, Algorithm 1), and for the hinge a smoothing of Chapelle 2007's Huber loss with
continuation; each pass returns the Armijo line search of the last direction and the gradient
and (D+1) x (D+1) Hessian at the full step.  Exact, and independent of the row order and the
chunking.  docs/sgd.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from sklearn.exceptions import ConvergenceWarning

from ...reductions import Layout
from ..passes import RowSpec
from ..ridge.gram import SUB_BLOCK
from .epochs import encode_targets
from .losses import second_order

STEPS = 2.0 ** -np.arange(16)
ARMIJO = 1e-4
SMOOTHING_START = 2.0  # margin 1 at w = 0 lies inside the quadratic zone
SMOOTHING_MIN = 1e-5
SHARPEN = 0.1


def newton_layout(K, D, J=1):
    S = STEPS.size
    return Layout(n=(), f=(K, S), f_exact=(K, S), g=(K, J, D + 1), H=(K, J, D + 1, D + 1))


@dataclass(frozen=True, eq=False, kw_only=True)
class NewtonSpec(RowSpec):
    """A Newton pass's :class:`rfstream.solvers.passes.RowSpec`: the SGD ``task``
    (:func:`rfstream.solvers.sgd.epochs.encode_targets`), the ``loss``, ``intercept_scaling``
    and hinge ``smoothing``, the point ``W`` (K, D), ``v`` (K,), the direction ``dW``,
    ``dv``, and ``at`` (K, J): indices into :data:`STEPS` of the points w + s d where
    each problem's gradient and Hessian are computed."""

    task: dict
    loss: str
    intercept_scaling: float
    smoothing: float
    W: np.ndarray
    v: np.ndarray
    dW: np.ndarray
    dv: np.ndarray
    at: np.ndarray


def newton_chunk(z, *rows, offset, spec, out=None):
    """Partials of one row block (docs/sgd.md, newton.py), added to ``out`` if given.

    ``rows``: the block's labels, then its sample weights when they travel;
    ``spec`` a :class:`NewtonSpec`.
    """
    W, v, dW, dv, at, loss, smoothing = spec.W, spec.v, spec.dW, spec.dv, spec.at, spec.loss, spec.smoothing
    layout = spec.layout
    out = layout.empty() if out is None else out
    m = z.shape[0]
    if m == 0:
        return out
    if sp.issparse(z):  # e.g. binning features: the (D+1)^2 Hessian is dense anyway
        z = z.toarray()
    if z.dtype not in (np.float32, np.float64):
        z = z.astype(np.float64)
    parts = layout.unpack(out)
    got = spec.take(rows)
    target, _, weight = encode_targets(got["y"], spec.task, w=got["w"], offset=offset)
    c = np.ones(m) if weight is None else np.asarray(weight, dtype=np.float64)
    s = spec.intercept_scaling
    K, D = W.shape
    P = (z @ np.vstack([W, dW]).T.astype(z.dtype, copy=False)).astype(np.float64, copy=False)
    p0, pd = P[:, :K] + s * v, P[:, K:] + s * dv
    parts["n"][...] += m
    for j, step in enumerate(STEPS):
        value, _, _ = second_order(loss, p0 + step * pd, target, smoothing)
        f = c @ value
        parts["f"][:, j] += f
        if loss == "hinge":
            parts["f_exact"][:, j] += c @ np.maximum(1.0 - target * (p0 + step * pd), 0.0)
        else:
            parts["f_exact"][:, j] += f
    for k in range(K):
        for i, j in enumerate(at[k]):
            if j in at[k][:i]:  # the same point again (newton_fit picks the first)
                continue
            p = p0[:, k : k + 1] + STEPS[j] * pd[:, k : k + 1]
            _, d1, d2 = second_order(loss, p, target[:, k : k + 1], smoothing)
            g1, h = c * d1[:, 0], c * d2[:, 0]
            parts["g"][k, i, :D] += (g1.astype(z.dtype) @ z).astype(np.float64)
            parts["g"][k, i, D] += s * g1.sum()
            _weighted_gram(z, h, s, parts["H"][k, i])
    return out


def _weighted_gram(z, h, s, H):
    """H += [z, s]' diag(h) [z, s] over the rows with h > 0 (float64 sums of
    sub-block products in z's dtype)."""
    D = z.shape[1]
    rows = np.flatnonzero(h > 0)
    dense = rows.size == h.size  # every row: slices, no gathering
    for start in range(0, rows.size, SUB_BLOCK):
        r = slice(start, start + SUB_BLOCK) if dense else rows[start : start + SUB_BLOCK]
        root = np.sqrt(h[r]).astype(z.dtype)
        zs = z[r] * root[:, None]
        H[:D, :D] += zs.T @ zs
        H[:D, D] += s * (root @ zs).astype(np.float64)
        H[D, D] += s * s * h[r].sum()
    H[D, :D] = H[:D, D]


def _candidates(last):
    """Grid indices where the next pass computes gradient and Hessian: the
    full step for the smooth losses; for the smoothed hinge, whose steps get
    cut back as h shrinks, the last accepted step, twice and half of it."""
    return np.stack([np.maximum(last - 1, 0), last, np.minimum(last + 1, STEPS.size - 1)], axis=1)


def newton_fit(run_pass, task, K, D, *, loss, alpha, intercept_scaling, max_iter, tol):
    """Damped Newton from w = 0; returns a dict with the model and the path.

    ``run_pass(spec, size)`` sums the partials of :func:`newton_chunk` with the
    :class:`NewtonSpec` ``spec`` over all row blocks; ``task`` is the SGD task
    (:func:`rfstream.solvers.sgd.epochs.encode_targets`).  ``max_iter``
    passes at most; ``tol`` (relative) on the estimated gap, None: run
    ``max_iter`` passes (or until no step decreases f).
    """
    s = intercept_scaling
    hinge = loss == "hinge"
    h = SMOOTHING_START if hinge else 0.0
    J = 3 if hinge else 1
    layout = newton_layout(K, D, J)
    rows = np.arange(K)
    Wt = np.zeros((K, D + 1))  # [w, v]: v = intercept / s (0 without intercept)
    dWt = np.zeros((K, D + 1))  # the direction to try in the next pass
    f_cur = np.full(K, np.inf)  # (smoothed) objective of each problem at Wt
    fe_cur = np.full(K, np.inf)  # exact objective of each problem at Wt
    slope = np.zeros(K)
    last = np.zeros(K, dtype=np.intp)  # grid index of the last accepted step
    done = np.zeros(K, dtype=bool)
    path = []
    gap = np.inf
    for _ in range(max_iter):
        at = _candidates(last) if hinge else np.zeros((K, 1), dtype=np.intp)
        at[~np.any(dWt != 0, axis=1)] = 0  # no direction: evaluate the point itself
        spec = NewtonSpec(layout=layout, task=task, loss=loss, intercept_scaling=s, smoothing=h,
                          W=Wt[:, :D], v=Wt[:, D], dW=dWt[:, :D], dv=dWt[:, D], at=at)
        res = layout.unpack(run_pass(spec, layout.size))
        if not all(np.isfinite(v).all() for v in res.values()):
            raise ValueError(
                "X or y contains NaN or infinity (the Newton pass is not finite); remove or "
                "impute them before fitting."
            )
        n = max(float(res["n"]), 1.0)
        pts = Wt[:, None, :] + STEPS[None, :, None] * dWt[:, None, :]  # (K, S, D+1)
        reg = 0.5 * alpha * np.sum(pts**2, axis=2)
        F, FE = reg + res["f"] / n, reg + res["f_exact"] / n
        # backtracking line search (Armijo) on the step sizes of this pass; a
        # step where g and H were computed is preferred among the accepted ones
        j = np.zeros(K, dtype=np.intp)
        known = np.full(K, -1)  # which of the J points is the new one (-1: none)
        for k in range(K):
            if not np.any(dWt[k] != 0):
                known[k] = 0
                continue
            ok = F[k] <= f_cur[k] + ARMIJO * STEPS * slope[k]
            cand = [i for i, jc in enumerate(at[k]) if ok[jc]]
            if cand:
                i = min(cand, key=lambda i: (F[k, at[k, i]], i))
                j[k], known[k] = at[k, i], i
            elif ok.any():
                j[k] = np.flatnonzero(ok)[0]
            elif F[k].min() < f_cur[k]:
                j[k] = int(np.argmin(F[k]))
            else:  # no decrease at any step: converged to working precision
                j[k], done[k] = -1, True
        move = j >= 0
        jj = np.maximum(j, 0)
        Wt[move] = pts[rows, jj][move]
        f_cur[move], fe_cur[move] = F[rows, jj][move], FE[rows, jj][move]
        last[move & np.any(dWt != 0, axis=1)] = jj[move & np.any(dWt != 0, axis=1)]
        # the next direction where g and H are known at the new point
        dec = np.where(known < 0, np.inf, 0.0)
        dWt = np.zeros((K, D + 1))
        for k in np.flatnonzero((known >= 0) & ~done):
            g = res["g"][k, known[k]] / n + alpha * Wt[k]
            H = res["H"][k, known[k]] / n
            H[np.diag_indices_from(H)] += alpha
            if not s:  # no intercept: its coordinate stays 0
                g[D], H[D, :], H[:, D], H[D, D] = 0.0, 0.0, 0.0, 1.0
            try:
                d = -cho_solve(cho_factor(H), g)
            except LinAlgError:  # float32 Gram rounding: fall back to a gradient step
                d = -g / (alpha + np.trace(H) / (D + 1))
            dWt[k] = d
            slope[k] = g @ d
            dec[k] = -0.5 * slope[k]
        objective = float(fe_cur.sum())
        smooth_err = float(np.sum(fe_cur - f_cur)) if hinge else 0.0
        gap = float(dec.sum()) + smooth_err
        path.append(objective)
        if tol is not None and gap <= tol * objective:
            break
        if hinge and np.isfinite(gap) and dec.sum() <= 0.1 * smooth_err and h > SMOOTHING_MIN:
            h *= SHARPEN  # the smoothing error dominates: sharpen, re-evaluate here
            dWt[:] = 0.0
            f_cur[:] = np.inf
            done[:] = False
        elif done.all():
            break
    if tol is not None and gap > tol * objective and len(path) >= max_iter:
        warnings.warn(f"Newton stopped after max_iter={max_iter} passes with the estimated gap at "
                      f"{gap / objective:.2g} of the objective (tol={tol}); raise max_iter.",
                      ConvergenceWarning, stacklevel=3)
    return {"W": Wt[:, :D].copy(), "v": Wt[:, D].copy(), "objective": path[-1], "path": path,
            "n_iter": len(path), "gap": gap}

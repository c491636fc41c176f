"""The step kernel of the SGD solvers: mini-batch Pegasos steps on a model in memory.

Algorithm 1 of Yu et al. (2015) (CNM's w-step; Pegasos, Shalev-Shwartz et
al. 2011): on a mini-batch A at step t,

    W <- (1 - eta_t alpha) W - eta_t / |A| sum_{i in A} c_i L'(p_i) z_i',   eta_t = 1 / (alpha t),

with ``c_i`` the row's weight (class weight times its scaled ``sample_weight``,
:mod:`rfstream.solvers.epochs`), then the projection of each problem's (w, b/s)
onto the ball that holds the optimum (:func:`rfstream.solvers.losses.ball_radius`), and the polynomial-decay
average of the iterates (Shamir & Zhang 2013).  The objective, the schedules
and the parallel epochs around these steps are described in docs/sgd.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .losses import CLASS_INDEX_LOSSES, LOSSES, ball_radius

LEARNING_RATES = ("pegasos", "optimal", "constant")
# Losses whose gradient grows with the margin: a step larger than
# 1 / (c max_i w_i ||z_i||^2) on a mini-batch overshoots (c = the loss's curvature,
# w_i the row weight).
SMOOTHNESS = {"squared_hinge": 2.0, "squared": 1.0}


@dataclass(frozen=True)
class StepSpec:
    """What a step needs besides the model: loss, lambda, schedule, intercept."""

    loss: str
    alpha: float
    learning_rate: str = "pegasos"
    eta0: float = 0.01
    intercept_scaling: float = 1.0  # 0: no intercept
    radius: float = np.inf
    joint_ball: bool = False  # class-index losses: one ball for the whole matrix
    average: bool = True  # polynomial-decay averaging of the iterates

    def eta(self, t):
        """Step size at step t: 1/(alpha t) (Pegasos); Bottou's 1/(alpha (t + t0)); eta0."""
        if self.learning_rate == "pegasos":
            return 1.0 / (self.alpha * t)
        if self.learning_rate == "optimal":  # eta_1 ~ eta0
            return 1.0 / (self.alpha * (t + 1.0 / (self.alpha * self.eta0)))
        return self.eta0


def scores(z, W, v, s):
    """Float64 scores ``z W' + s v`` (a product in z's dtype)."""
    p = z @ W.T.astype(z.dtype, copy=False)
    p = p.astype(np.float64, copy=False)
    return p + s * v if s else p


def _project(W, v, spec):
    if not np.isfinite(spec.radius):
        return W, v
    if spec.joint_ball:
        norm = np.sqrt(np.sum(W**2) + np.sum(v**2))
        scale = min(1.0, spec.radius / norm) if norm > 0 else 1.0
        return W * scale, v * scale
    norm = np.sqrt(np.sum(W**2, axis=1) + v**2)
    scale = np.minimum(1.0, spec.radius / np.maximum(norm, 1e-300))
    return W * scale[:, None], v * scale


def run_steps(W, v, take, target, weight, batches, t, spec, avg=None, offset=None):
    """Mini-batch steps over ``batches`` (row index arrays); returns (W, v, t, avg).

    ``take(idx)`` returns the feature rows ``idx`` (stored rows, or features made
    for the batch: :mod:`rfstream.features.fused`); ``target`` and ``weight`` are
    indexed by the same rows.  ``W`` (K, D) and ``v`` (K,) are float64; ``v`` is
    the intercept over ``spec.intercept_scaling`` (the weight of the constant
    feature).  ``avg`` = (Wbar, vbar) is the running polynomial-decay average of
    the iterates (Shamir & Zhang 2013, eta = 3):
    Wbar_t = (1 - 4/(t+3)) Wbar_{t-1} + 4/(t+3) W_t.  ``offset`` (K,) is a fixed
    intercept added to the scores (``sgd_steps`` with intercept_scaling=0).
    """
    fn = LOSSES[spec.loss]
    s = spec.intercept_scaling
    curvature = SMOOTHNESS.get(spec.loss)
    for idx in batches:
        zb = take(idx)
        t += 1
        eta = spec.eta(t)
        if curvature:  # unbounded gradients: keep eta below 1 / (batch smoothness)
            sq = np.asarray(zb.multiply(zb).sum(axis=1)).ravel() if sp.issparse(zb) else np.einsum(
                "ij,ij->i", zb, zb)
            lip = curvature * (np.max(sq + s * s) if weight is None else np.max(weight[idx] * (sq + s * s)))
            eta = min(eta, 1.0 / max(lip, 1e-12))
        p = scores(zb, W, v, s)
        _, g = fn(p if offset is None else p + offset, target[idx])
        if weight is not None:
            g *= weight[idx, None]
        g /= len(idx)
        shrink = 1.0 - eta * spec.alpha
        gW = g.T.astype(zb.dtype) @ zb
        gv = s * g.sum(axis=0)
        W = shrink * W - eta * gW
        if s:
            v = shrink * v - eta * gv
        W, v = _project(W, v, spec)
        if avg is not None:
            rho = 4.0 / (t + 3.0)
            avg = ((1.0 - rho) * avg[0] + rho * W, (1.0 - rho) * avg[1] + rho * v)
    return W, v, t, avg


def sgd_steps(coef, intercept, batches, *, loss="hinge", alpha=1e-4, t0=0,
              learning_rate="pegasos", eta0=0.01, intercept_scaling=1.0, project=True):
    """Run one SGD step per mini-batch from a given model: the w-step of CNM.

    Algorithm 1 of Yu et al. (2015) (Pegasos) with the defaults: for each batch
    (Z, y), step t = t0 + 1, t0 + 2, ... with eta_t = 1/(alpha t), then the
    projection onto the ball that holds the optimum.

    Parameters
    ----------
    coef : array of shape (K, D) or (D,)
        Current weights (K = 1 for a binary problem, K classes for OvR or
        multinomial).
    intercept : array of shape (K,) or float
    batches : iterable of (Z, y)
        Features ``Z`` (m, D) (numpy, any float dtype) and targets: +-1 of
        shape (m,) or (m, K) for "hinge", "squared_hinge", "log_loss" (one
        binary problem per column); class indices (m,) for "multinomial" and
        "crammer_singer"; real values for "squared".
    loss : {"hinge", "squared_hinge", "log_loss", "multinomial", "crammer_singer", "squared"}
    alpha : float
        lambda of the objective (docs/sgd.md).
    t0 : int
        Steps already taken (continue a schedule: pass the returned ``t``).
    learning_rate, eta0 : as :class:`rfstream.StreamingSGDClassifier`.
    intercept_scaling : float
        Value of the constant feature whose weight is intercept / scaling
        (regularized like the other weights); 0 keeps the intercept fixed.
    project : bool
        Project onto the ball of radius :func:`rfstream.solvers.losses.ball_radius`.

    Returns
    -------
    coef, intercept, t : the updated weights (same shapes as given, float64) and
        the step counter after the last step.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}; got {loss!r}.")
    if learning_rate not in LEARNING_RATES:
        raise ValueError(f"learning_rate must be one of {LEARNING_RATES}; got {learning_rate!r}.")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0; got {alpha!r}.")
    coef = np.asarray(coef, dtype=np.float64)
    one = coef.ndim == 1
    W = np.atleast_2d(coef).copy()
    s = float(intercept_scaling)
    v = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (W.shape[0],)) / (s or 1.0)
    v = v.copy() if s else np.zeros(W.shape[0])
    b_fixed = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (W.shape[0],)).copy()
    radius = ball_radius(loss, alpha, max(W.shape[0], 2)) if project else np.inf
    spec = StepSpec(loss, float(alpha), learning_rate, float(eta0), s, radius, loss in CLASS_INDEX_LOSSES)
    t = int(t0)
    for Z, y in batches:
        Z = np.asarray(Z)
        if Z.dtype not in (np.float32, np.float64):
            Z = Z.astype(np.float64)
        y = np.asarray(y)
        if loss not in CLASS_INDEX_LOSSES and y.ndim == 1:
            y = y[:, None]
        batch = [np.arange(Z.shape[0])]
        W, v, t, _ = run_steps(W, v, Z.__getitem__, y, None, batch, t, spec,
                               offset=None if s else b_fixed)
    b = s * v if s else b_fixed
    return (W[0], b[0], t) if one else (W, b, t)

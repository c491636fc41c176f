"""Losses of the SGD solvers (value and derivative in the score), and log-loss probabilities.

Hinge (Pegasos; CNM eq. 7), squared hinge, log loss, multinomial, the multi-class hinge of
Crammer & Singer (2001) and the squared loss, each returning ``(loss, dloss)`` in float64;
:func:`second_order` adds what Newton needs.  ``predict_proba``: sigmoid, softmax, or
normalized one-vs-rest sigmoids (Zadrozny & Elkan 2002).  docs/sgd.md.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from scipy.special import expit, log_expit, log_softmax, logsumexp, softmax
from sklearn.utils.metaestimators import available_if


def hinge(p, y):
    margin = 1.0 - y * p
    active = margin > 0
    return np.where(active, margin, 0.0).sum(axis=1), np.where(active, -y, 0.0)


def squared_hinge(p, y):
    margin = np.maximum(1.0 - y * p, 0.0)
    return (margin**2).sum(axis=1), -2.0 * y * margin


def log_loss(p, y):
    yp = y * p
    return -log_expit(yp).sum(axis=1), -y * expit(-yp)


def multinomial(p, y):
    lse = logsumexp(p, axis=1)
    rows = np.arange(p.shape[0])
    loss = lse - p[rows, y]
    grad = softmax(p, axis=1)
    grad[rows, y] -= 1.0
    return loss, grad


def crammer_singer(p, y):
    """Multi-class hinge of Crammer & Singer (2001): ``max(0, 1 + max_{j != y} p_j - p_y)``.

    ``p`` (m, K) scores, ``y`` (m,) class indices; returns the per-row loss
    (m,) and a subgradient with respect to ``p`` (m, K): ``+1`` at the most
    violating wrong class ``r``, ``-1`` at ``y``, on the rows with a positive
    loss (the convention above).
    """
    rows = np.arange(p.shape[0])
    margins = p + 1.0 - p[rows, y][:, None]
    margins[rows, y] = 0.0
    r = np.argmax(margins, axis=1)
    loss = margins[rows, r]
    g = np.zeros_like(p)
    active = loss > 0
    g[rows[active], r[active]] = 1.0
    g[rows[active], y[active]] -= 1.0
    return loss, g


def squared(p, y):
    r = p - y
    return 0.5 * (r**2).sum(axis=1), r


LOSSES = {
    "hinge": hinge,
    "squared_hinge": squared_hinge,
    "log_loss": log_loss,
    "multinomial": multinomial,
    "squared": squared,
    "crammer_singer": crammer_singer,
}
#: losses whose targets are class indices (m,) and whose weights share one ball
CLASS_INDEX_LOSSES = ("multinomial", "crammer_singer")

LOSS_AT_ZERO = {"hinge": 1.0, "squared_hinge": 1.0, "log_loss": float(np.log(2.0)), "crammer_singer": 1.0}


def ball_radius(loss, alpha, n_classes=2, max_weight=1.0):
    """Radius of a ball that holds the regularized optimum of one problem.

    Hinge: ||w*|| <= 1/sqrt(alpha) by duality (Pegasos, Theorem 1), times
    sqrt(max class weight).  Other losses: alpha/2 ||w*||^2 <= f(w*) <= f(0)
    gives sqrt(2 L(0) / alpha), with L(0) = log K for the multinomial loss.
    ``inf`` for the squared loss (L(0) depends on the targets).
    """
    if loss == "hinge":
        return float(np.sqrt(max_weight / alpha))
    if loss == "multinomial":
        return float(np.sqrt(2.0 * max_weight * np.log(n_classes) / alpha))
    if loss in LOSS_AT_ZERO:
        return float(np.sqrt(2.0 * max_weight * LOSS_AT_ZERO[loss] / alpha))
    return np.inf


def second_order(loss, p, y, smoothing=0.0):
    """Per-column loss, first and second derivative of a binary / OvR loss.

    ``p``, ``y`` (+-1) of shape (m, K); returns three (m, K) float64 arrays.
    ``squared`` takes real targets ``y`` (regression).
    The second derivative of the squared hinge is the generalized one
    (2 where the margin is violated; Mangasarian 2002, Keerthi & DeCoste 2005).
    ``hinge`` is replaced by its smoothing with width ``h = smoothing`` > 0
    (a one-sided variant of Chapelle 2007's Huber loss, section 4):

        L_h(m) = 0 (m <= 0),  m^2 / (2h) (0 < m < h),  m - h/2 (m >= h),

    with m = 1 - y p.  It never exceeds the hinge and is within h/2 of it, so
    min f_h <= min f: the smoothed optimum is a lower bound for the hinge one.
    """
    if loss == "log_loss":
        yp = y * p
        sig = expit(-yp)
        return -log_expit(yp), -y * sig, sig * (1.0 - sig)
    if loss == "squared":  # real targets y: (p - y)^2 / 2
        r = p - y
        return 0.5 * r**2, r, np.ones_like(r)
    margin = 1.0 - y * p
    if loss == "squared_hinge":
        pos = np.maximum(margin, 0.0)
        return pos**2, -2.0 * y * pos, 2.0 * (margin > 0)
    if loss == "hinge":
        h = float(smoothing)
        quad = (margin > 0) & (margin < h)
        lin = margin >= h
        value = np.where(lin, margin - 0.5 * h, np.where(quad, margin**2 / (2.0 * h), 0.0))
        d1 = np.where(lin, -y, np.where(quad, -y * margin / h, 0.0))
        return value, d1, quad / h
    raise ValueError(f"no second-order form of loss {loss!r}.")


def log_proba_block(scores, kind):
    """Log-probabilities (m, K) of decision values ``scores`` ((m,) for two classes).

    ``kind``: "binary", "multinomial" or "ovr" (docs/sgd.md, losses.py).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if kind == "binary":
        return np.stack([log_expit(-scores), log_expit(scores)], axis=1)
    if kind == "multinomial":
        return log_softmax(scores, axis=1)
    log_p = log_expit(scores)  # one-vs-rest: normalize the K sigmoids
    return log_p - logsumexp(log_p, axis=1, keepdims=True)


def proba_block(scores, kind):
    """Probabilities (m, K) of decision values ``scores``; rows sum to one."""
    return np.exp(log_proba_block(scores, kind))


def _has_proba(estimator):
    return getattr(estimator, "loss", None) == "log_loss"


class LogLossProbaMixin:
    """``predict_proba`` / ``predict_log_proba`` for a linear classifier fitted with
    ``loss="log_loss"``; absent (``AttributeError``, as scikit-learn) for other losses."""

    def _proba_kind(self):
        if self.classes_.size == 2:
            return "binary"
        return "multinomial" if self.multi_class == "multinomial" else "ovr"

    def _scores_to(self, fn, X):
        scores = self.decision_function(X)
        kind = self._proba_kind()
        K = self.classes_.size
        if isinstance(scores, da.Array):
            return scores.map_blocks(
                fn, kind, dtype=np.float64, chunks=(scores.chunks[0], (K,)),
                new_axis=[1] if scores.ndim == 1 else None,
                meta=np.empty((0, 0), dtype=np.float64),
            )
        return fn(scores, kind)

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), columns in the order of ``classes_``.

        Sigmoid of the decision value for two classes, softmax of the class scores
        for the multinomial loss, normalized one-vs-rest sigmoids otherwise (as
        scikit-learn's ``SGDClassifier``).  Numpy in, numpy out; dask in, lazy dask
        out with ``X``'s row chunks.  Only for ``loss="log_loss"``.
        """
        return self._scores_to(proba_block, X)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed from the decision values
        (finite where the probability underflows to 0).  Only for ``loss="log_loss"``."""
        return self._scores_to(log_proba_block, X)

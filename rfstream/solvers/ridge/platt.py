"""Platt scaling of a ridge classifier's decision values (Platt 1999), from histograms.

The sigmoid ``P(positive | d) = 1 / (1 + exp(-(A d + B)))`` is fitted per target column to
decision values that did not train the model: out-of-fold ones, as Platt's Section 2.2 asks
(a hold-out set or cross-validation), counted by the K-fold scoring pass at every candidate
(:func:`rfstream.solvers.ridge.cv.score_pass`), or exact leave-one-out ones, counted by the
leave-one-out pass (:mod:`rfstream.solvers.ridge.loo`) or the calibration pass
(:mod:`rfstream.solvers.ridge.calibration`).  A pass keeps histograms, never n
values: :data:`DECISION_BINS` bins over [-DECISION_LIMIT, DECISION_LIMIT].  docs/ridge.md.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.optimize
from scipy.special import expit, log_expit

DECISION_BINS = 4096
DECISION_LIMIT = 8.0


def fits_beside_gram(n_candidates, n_targets, n_folds, n_features):
    """Whether the scoring pass may carry the Platt histograms of every candidate of a group
    (``n_candidates x n_targets`` columns of ``2 x DECISION_BINS`` floats): when they take no more
    than the group's Gram partials (``n_folds D^2`` floats), which the Gram pass's memory plan
    already held (docs/ridge.md, "Platt from the scoring pass")."""
    return n_candidates * n_targets * 2 * DECISION_BINS <= n_folds * n_features**2


def count_decisions(counts, decisions, positive, weights):
    """Add the rows' decision values ``decisions`` (m, T) into ``counts`` (T, 2, DECISION_BINS),
    each row in its column's negative (0) or positive (1) histogram by ``positive`` (m, T), with
    weight ``weights`` (m,); values beyond the limits are counted in the end bins."""
    m, T = decisions.shape
    if m == 0:
        return counts
    scaled = (np.clip(decisions, -DECISION_LIMIT, DECISION_LIMIT) + DECISION_LIMIT) / (2 * DECISION_LIMIT)
    index = np.minimum((scaled * DECISION_BINS).astype(np.intp), DECISION_BINS - 1)
    index += (2 * np.arange(T) + positive) * DECISION_BINS
    # in place: a bincount's array of every bin, new per call, cost twice as much at 130 columns
    flat = counts.reshape(-1)
    if not np.shares_memory(flat, counts):  # a reshape that copied would add into the copy
        raise ValueError("count_decisions adds into a contiguous counts array")
    np.add.at(flat, index.ravel(), np.repeat(weights, T))
    return counts


def decision_centres():
    width = 2 * DECISION_LIMIT / DECISION_BINS
    return -DECISION_LIMIT + width * (np.arange(DECISION_BINS) + 0.5)


def fit_platt(counts):
    """``(A, B)`` of ``P(positive | d) = sigmoid(A d + B)`` for one column's histograms
    (2, DECISION_BINS): negatives, positives; Platt's prior-corrected targets
    ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)`` (docs/ridge.md)."""
    neg, pos = counts[0], counts[1]
    n_neg, n_pos = neg.sum(), pos.sum()
    t_pos, t_neg = (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0)
    x = decision_centres()
    used = (neg + pos) > 0
    x, neg, pos = x[used], neg[used], pos[used]

    def loss(params):
        a, b = params
        f = a * x + b
        lp, ln = log_expit(f), log_expit(-f)  # log p, log (1 - p)
        value = -(pos @ (t_pos * lp + (1 - t_pos) * ln) + neg @ (t_neg * lp + (1 - t_neg) * ln))
        p = expit(f)
        g = pos * (p - t_pos) + neg * (p - t_neg)
        return value, np.array([g @ x, g.sum()])

    prior = math.log((n_pos + 1.0) / (n_neg + 1.0))
    result = scipy.optimize.minimize(loss, np.array([1.0, prior]), jac=True, method="L-BFGS-B")
    return result.x


def platt_probabilities(decisions, platt):
    """Probabilities (m, K) from decision values ((m,) or (m, K)) and per-column ``platt``
    (K', 2); two classes: ``[1 - p, p]``; more: normalized one-vs-rest sigmoids."""
    d = np.asarray(decisions, dtype=np.float64)
    if d.ndim == 1:
        p = expit(platt[0, 0] * d + platt[0, 1])
        return np.stack([1.0 - p, p], axis=1)
    p = expit(d * platt[:, 0] + platt[:, 1])
    total = p.sum(axis=1, keepdims=True)
    uniform = total[:, 0] <= 0
    p[uniform] = 1.0 / p.shape[1]
    total[uniform] = 1.0
    return p / total

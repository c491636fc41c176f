"""Calibration from exact leave-one-out residuals: conformal intervals and Platt probabilities.

After the fit, one more pass over the rows at the chosen (gamma, alpha) computes
every row's exact leave-one-out (LOO) residual of the ridge fit, from the
eigendecomposition of the chosen gamma's centred Gram (the identity of
:mod:`rfstream.solvers.loo`):

    r_i = e_i / (1 - c_i h_i),    h_i = 1/n + (z_i - mu)' (G + alpha I)^-1 (z_i - mu),

and what the pass keeps of them is a bounded-memory summary, never n values:

* a regressor: the conformity score of split/jackknife conformal prediction
  normalized by the posterior predictive standard deviation (Vovk, Gammerman &
  Shafer, Algorithmic Learning in a Random World, 2005; the normalized scores of
  Papadopoulos et al. 2008; jackknife residuals as in Barber et al. 2021,
  "Predictive inference with the jackknife+"),

      u_i = |r_i| / s_(-i),   s_(-i)^2 = sigma^2 (1 + h_i / (1 - c_i h_i)),

  the predictive variance at ``z_i`` of the model fitted without row i
  (Sherman-Morrison), counted (weighted by c_i) in a histogram of
  :data:`SCORE_BINS` log-spaced bins over [1e-4, 1e4] (and one bin below, one
  above).  An interval at level L is ``prediction +- q_L std(x)`` with ``q_L`` the
  ``ceil((n + 1) L)``-th smallest score (:func:`conformal_quantile`).  Taking the
  upper edge of its bin, ``q_L`` is at least the exact order statistic and at most
  ``10**(8 / 4096)`` (0.45%) above it, so the binning can only widen an interval,
  by at most 0.45%.
* a classifier: its LOO decision values ``Y_i - r_i`` per target column, split by
  whether the row is the column's class, in histograms of :data:`DECISION_BINS`
  bins over [-8, 8] (width 0.004; values beyond are counted at the ends).  Platt
  scaling (Platt 1999, with his prior-corrected targets ``(N+ + 1) / (N+ + 2)``
  and ``1 / (N- + 2)``) is fitted per column on the bin centres weighted by the
  counts (:func:`fit_platt`): two classes, ``sigmoid(A d + B)``; more, one-vs-rest
  sigmoids normalized to sum to one, as scikit-learn's ``CalibratedClassifierCV``.

Deviation from the issue's wording ("the out-of-fold residuals that the CV
scoring pass already computes"): a K-fold regression has no scoring pass (its
squared error is exact from the partials) and the evidence has no folds, so the
residuals are the exact leave-one-out ones (n folds) at the chosen
hyperparameters, for every route, in one extra pass that costs what the Gram
pass costs.  The hyperparameters were chosen on the same rows, a small optimism
that conformal prediction's exchangeability argument does not cover.

Second deviation, for scale: with more than :data:`CALIBRATION_ROWS` (2^18) rows the
pass keeps a random sample of about that many, row i when
``row_uniform(seed, STREAM_CALIBRATION, i) < 2^18 / n`` (so the sample does not depend
on the chunking), and makes the features of those rows only.  Each kept row's
residual is still its exact leave-one-out residual of the fit on all n rows; the
histograms are of the sample.  The rule, set before measuring: the cost of the
calibration should not grow with n once its statistical error is below what the
binning already allows.  A conformal quantile from m exchangeable scores has coverage
within ``1 / (m + 1)`` of its level on average and a standard deviation of about
``sqrt(L (1 - L) / m)``: at m = 2^18 and L = 0.9, 0.0006, about the coverage that the
bins' 0.45% widening adds near a typical quantile; Platt's two parameters from 2^18
decision values are as settled.  Without the sample, this pass cost what the Gram
pass costs, O(n D^2): 68% of a 4.9-million-row fit before the factor was made
triangular (docs/BENCHMARKS.md, "KDD99 at full size").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit, log_expit

from ..cluster import compute
from ..random import STREAM_CALIBRATION, row_uniform
from ..reductions import Layout
from .grid_pass import FeatureGroups, group_chunk, group_spec
from .passes import RowSpec, row_sum, sub_blocks, weight_fields

SCORE_BINS = 4096
SCORE_EDGES = np.geomspace(1e-4, 1e4, SCORE_BINS + 1)
DECISION_BINS = 4096
DECISION_LIMIT = 8.0
#: The calibration pass keeps about this many rows; more rows are sampled (module docstring).
CALIBRATION_ROWS = 2**18
#: Column blocks of the leverages' triangular product (:func:`triangular_product`).
TRIANGLE_BLOCKS = 8


def posterior_basis(basis, alpha):
    """``F = U diag(1 / sqrt(s + alpha))``: ``(G + alpha I)^-1 = F F'``, the D x D factor
    the model keeps for its predictive variance."""
    return basis["U"] / np.sqrt(basis["s"] + alpha)


def posterior_triangle(F, dtype):
    """The lower triangle ``L`` (D x D, ``dtype``) with ``L L' = F F' = (G + alpha I)^-1``:
    ``L = R'`` of the QR decomposition ``F' = Q R``.  A row's leverage is then
    ``||(z - mu) L||^2``, a triangular product (:func:`triangular_product`)."""
    R = scipy.linalg.qr(F.T, mode="r", check_finite=False)[0]
    return np.ascontiguousarray(R.T, dtype=dtype)


def triangular_product(c, L, out):
    """``out = c @ L`` for a lower-triangular ``L``, as :data:`TRIANGLE_BLOCKS` products of
    ``c``'s trailing columns with a column block of ``L`` (the block's zero rows skipped).

    This does ``(1/2 + 1/(2 k))`` of a full product's flops with ``k`` blocks.  BLAS's own
    ``trmm`` does half, but scipy's wrapper holds the GIL, which stops the threads
    scheduler's workers running two at once; numpy's ``matmul`` releases it.  Measured
    at D = 2,000, 4,096 rows, one thread: full product 0.30 s, ``trmm`` 0.165 s, eight
    blocks 0.20 s; two threads at once: ``trmm`` no faster than one, ``matmul`` 1.96x."""
    D = L.shape[0]
    edges = np.linspace(0, D, min(TRIANGLE_BLOCKS, D) + 1).astype(int)
    for start, stop in zip(edges[:-1], edges[1:]):
        np.matmul(c[:, start:], L[start:, start:stop], out=out[:, start:stop])
    return out


def leverage_and_decisions(zs, spec, buffers):
    """Each row of the dense sub-block ``zs``: its leverage ``(z - mu)' (G + alpha I)^-1 (z - mu)``
    as ``||(z - mu) L||^2`` and its decision values ``(z - mu) W + (b + mu W)``, made in the
    dtype of ``spec.L`` (the features' own) from the centred rows, returned as float64.
    ``buffers``: two arrays of at least ``zs``'s shape in that dtype, reused."""
    m = zs.shape[0]
    centred, a = buffers[0][:m], buffers[1][:m]
    np.subtract(zs, spec.mu, out=centred)
    decisions = (centred @ spec.W).astype(np.float64) + spec.intercept
    return leverages(centred, spec.L, a), decisions


def leverages(centred, L, out):
    """``||c L||^2`` of each row ``c`` of ``centred`` (float64 sums of squares made in
    ``out``, an array of ``centred``'s shape and dtype)."""
    triangular_product(centred, L, out)
    np.multiply(out, out, out=out)
    return out.sum(axis=1, dtype=np.float64)


def noise_variance(basis, yy, m, alpha):
    """``sigma^2`` per target at its maximum for ``alpha`` (:mod:`rfstream.solvers.evidence`)."""
    energy = yy - (1.0 / (basis["s"] + alpha)) @ (basis["UC"] ** 2)
    return np.maximum(energy, 1e-12 * max(float(yy.max()), 1e-300)) / max(m, 1e-300)


@dataclass(frozen=True, eq=False, kw_only=True)
class CalibrationSpec(RowSpec):
    """The calibration pass's spec: the chosen model ``W`` (D, T, the features' dtype), its
    intercept at the centred rows ``intercept = b + mu W`` (T,), the triangle ``L`` (D, D) of
    :func:`posterior_triangle`, the column means ``mu``, ``inv_n`` (1/n, 0 without an
    intercept), the noise variance ``noise`` (T,), whether the targets are a classifier's
    coded ones, and the ``fraction`` of the rows the pass keeps (drawn from ``seed``)."""

    W: np.ndarray
    intercept: np.ndarray
    L: np.ndarray
    mu: np.ndarray
    inv_n: float
    noise: np.ndarray
    classifier: bool
    fraction: float = 1.0


def calibration_layout(n_targets, classifier):
    if classifier:
        return Layout(counts=(n_targets, 2, DECISION_BINS), n=(1,))
    return Layout(counts=(n_targets, SCORE_BINS + 2), n=(1,))


def calibration_chunk(z, *rows, offset, spec):
    """The histograms of one row block (module docstring)."""
    out = spec.layout.empty()
    if spec.fraction < 1.0:
        z, rows = sampled_rows(z, rows, offset, spec)
    m = z.shape[0]
    if m == 0:
        return out
    parts = spec.layout.unpack(out)
    Y = np.asarray(spec.targets(spec.take(rows)["y"]), dtype=np.float64)
    c = spec.row_weights(rows, offset)
    c = np.ones(m) if c is None else c
    parts["n"] += c.sum()
    buffers = None
    for start, stop, zs in sub_blocks(z, spec, spec.L.shape[0]):
        zs = zs.toarray() if sp.issparse(zs) else np.asarray(zs)
        if buffers is None or buffers[0].shape[0] < zs.shape[0]:
            buffers = [np.empty(zs.shape, dtype=spec.L.dtype) for _ in range(2)]
        h, decisions = leverage_and_decisions(zs, spec, buffers)
        h += spec.inv_n
        cs = c[start:stop]
        keep = 1.0 - cs * h
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = (Y[start:stop] - decisions) / keep[:, None]
        ok = (keep > 1e-12) & (cs > 0)
        if spec.classifier:
            _count_decisions(parts["counts"], (Y[start:stop] - residual)[ok], Y[start:stop][ok], cs[ok])
        else:
            var = spec.noise[None, :] * (1.0 + h / keep)[:, None]
            score = np.abs(residual[ok]) / np.sqrt(var[ok])
            for t in range(score.shape[1]):
                parts["counts"][t] += np.bincount(np.searchsorted(SCORE_EDGES, score[:, t], side="right"),
                                                  weights=cs[ok], minlength=SCORE_BINS + 2)
    return out


def sampled_rows(z, rows, offset, spec):
    """The block's rows (and its row arrays') that the calibration sample keeps: row i when
    ``row_uniform(seed, STREAM_CALIBRATION, i) < fraction``, whatever the chunking."""
    u = row_uniform(spec.seed, STREAM_CALIBRATION, offset, offset + z.shape[0])
    keep = np.flatnonzero(u < spec.fraction)
    return z[keep], tuple(None if r is None else np.asarray(r)[keep] for r in rows)


def _count_decisions(counts, decisions, coded, weights):
    scaled = (np.clip(decisions, -DECISION_LIMIT, DECISION_LIMIT) + DECISION_LIMIT) / (2 * DECISION_LIMIT)
    index = np.minimum((scaled * DECISION_BINS).astype(np.intp), DECISION_BINS - 1)
    for t in range(decisions.shape[1]):
        positive = coded[:, t] > 0
        for side, rows in ((0, ~positive), (1, positive)):
            counts[t, side] += np.bincount(index[rows, t], weights=weights[rows], minlength=DECISION_BINS)


def calibration_pass(groups, chosen, y, target_fn, weights, model, *, classifier, seed=0):
    """The histograms of the chosen gamma's rows (``groups``: the fit's
    :class:`rfstream.solvers.grid_pass.FeatureGroups`, ``chosen`` the gamma's index);
    ``model``: ``W``, ``b``, ``F`` (the posterior factor), ``mu``, ``inv_n``, ``noise``.

    The leverages are made in the features' dtype (float32 by default), as the Gram
    itself was, from the centred rows (so that no large mean cancels): their rounding
    error, about ``eps cond(G + alpha I)^(1/2)`` relative, is below the float32 Gram's
    own, about ``eps cond(G + alpha I)``.  The triangle (16 MB at D = 2,000 in float32)
    is one key of the pass's graph (:func:`rfstream.reductions.shared`), sent once."""
    one = FeatureGroups(groups.rows, (groups.blocks[chosen],), groups.dtype)
    model = dict(model)
    dtype = np.dtype(groups.dtype)
    model["L"] = posterior_triangle(model.pop("F"), dtype)
    model["intercept"] = model.pop("b") + model["mu"] @ model["W"]
    model["W"] = model["W"].astype(dtype)
    w, weight_args = weights
    layout = calibration_layout(model["W"].shape[1], classifier)
    n_rows = one.rows.shape[0]  # NaN for unknown chunk sizes: every row is kept
    fraction = CALIBRATION_ROWS / n_rows if n_rows > CALIBRATION_ROWS else 1.0
    spec = CalibrationSpec(layout=layout, targets=target_fn, classifier=classifier, seed=seed,
                           fraction=fraction, **weight_fields(weight_args), **model)
    sums = compute(row_sum(group_chunk, layout.size, one.rows, group_spec(calibration_chunk, one, spec),
                           y=y, w=w))
    return layout.unpack(sums)["counts"].copy()


# ------------------------------------------------------------------ regression: conformal
def check_level(level):
    if not isinstance(level, (int, float, np.floating)) or isinstance(level, bool) or not 0 < level < 1:
        raise ValueError(f"level must be a number between 0 and 1 (exclusive), e.g. 0.9; got {level!r}.")
    return float(level)


def conformal_quantile(counts, level):
    """The upper bin edge of the ``ceil((n + 1) level)``-th smallest score in ``counts``
    (SCORE_BINS + 2 bins; n their weight): infinite when that rank exceeds n (too few
    rows for the level) or falls in the overflow bin."""
    level = check_level(level)
    total = float(counts.sum())
    rank = math.ceil((total + 1.0) * level - 1e-9)
    if total <= 0 or rank > total:
        return math.inf
    index = int(np.searchsorted(np.cumsum(counts), rank - 1e-9 * max(total, 1.0)))
    return float(SCORE_EDGES[index]) if index <= SCORE_BINS else math.inf


# ------------------------------------------------------------------ classification: Platt
def decision_centres():
    width = 2 * DECISION_LIMIT / DECISION_BINS
    return -DECISION_LIMIT + width * (np.arange(DECISION_BINS) + 0.5)


def fit_platt(counts):
    """``(A, B)`` of ``P(positive | d) = sigmoid(A d + B)`` for one column's histograms
    (2, DECISION_BINS): negatives, positives (module docstring)."""
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

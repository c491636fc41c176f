"""Calibration from exact leave-one-out residuals: conformal intervals and Platt probabilities.

After the fit, one more pass over the rows at the chosen (gamma, alpha) computes
every row's exact leave-one-out (LOO) residual of the ridge fit, from the
eigendecomposition of the chosen gamma's centred Gram (the identity of
:mod:`rfstream.solvers.ridge.loo`):

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

Predictive uncertainty of a ridge regressor and probabilities of a ridge classifier.

Under the Bayesian reading of ridge (:mod:`rfstream.solvers.ridge.evidence`), the
posterior of the weights at the chosen (alpha, sigma^2) is Gaussian with
covariance ``sigma^2 (G + alpha I)^-1`` (Bishop 2006, eq. 3.53-3.54, with the
flat-prior intercept adding ``sigma^2 / n``), so a new row's predictive variance
(Bishop eq. 3.59) is

    std(x)^2 = sigma^2 (1 + 1/n + ||(z - mu)' F||^2),    (G + alpha I)^-1 = F F',

with ``z`` the row's features, ``mu`` their training mean and ``F`` the D x D
factor the fitted model keeps (``posterior_factor_``): one more product of the
features with a D x D matrix (for more than 2 D rows a triangular one, ``L L' = F F'``,
in the features' dtype: :func:`rfstream.solvers.ridge.calibration.leverages`), made in the
prediction's own tasks (for dask input the features of ``X = map.transform(rows)`` are
made there a sub-block at a time, as :mod:`rfstream.solvers.linear` does; never an
n x D array).  The noise
term is included: this is the spread of a new target, as
``sklearn.linear_model.BayesianRidge.predict(return_std=True)`` gives it.

``predict_interval`` widens ``std(x)`` by the conformal quantile of
:mod:`rfstream.solvers.ridge.calibration`, so its coverage does not rest on the
Gaussian assumption; ``predict_proba`` of the ridge classifier applies the Platt
scaling fitted there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
from dask.base import is_dask_collection
from scipy.special import expit, log_expit
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_X
from ...cluster import compute
from ...features.fused import feature_sub_blocks, fused_buffer
from ...features.source import fused_rows
from ...random import STREAM_CALIBRATION, row_uniform
from ...reductions import Layout, shared
from ..passes import RowSpec, row_sum, sub_blocks, weight_fields
from .gram import FeatureGroups, group_chunk, group_spec

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
    """``sigma^2`` per target at its maximum for ``alpha`` (:mod:`rfstream.solvers.ridge.evidence`)."""
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
    :class:`rfstream.solvers.ridge.gram.FeatureGroups`, ``chosen`` the gamma's index);
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


def _moments(z, spec):
    """``[prediction | std]`` (m, 2T) of a block of features ``z``."""
    z = z.toarray() if hasattr(z, "toarray") else np.asarray(z)
    z = z if z.dtype in (np.float32, np.float64) else z.astype(np.float64)
    mean = (z @ spec["coef"].T.astype(z.dtype)).astype(np.float64) + spec["intercept"]  # as predict
    if spec["L"] is not None:  # the triangle, in the features' dtype (as the calibration pass)
        centred = np.subtract(z, spec["mu"], dtype=spec["L"].dtype)
        h = leverages(centred, spec["L"], np.empty_like(centred))
    else:  # a few rows: the factor itself, in float64
        a = (z.astype(np.float64) - spec["mu"]) @ spec["F"]
        h = np.einsum("ij,ij->i", a, a)
    var = spec["noise"][None, :] * (1.0 + spec["inv_n"] + h)[:, None]
    return np.hstack([mean, np.sqrt(var)])


def _leverage_factor(F, X):
    """``{"L": triangle, "F": None}`` of :func:`rfstream.solvers.ridge.calibration.posterior_triangle`
    in ``X``'s float dtype when ``X`` has more than ``2 D`` rows, else ``{"L": None, "F": F}``:
    the triangle's QR costs about ``4/3 D^3`` flops once and saves about ``0.9 m D^2``, so for a
    few rows (one row at a time, say) the product with ``F`` is cheaper."""
    D = F.shape[0]
    if X.shape[0] <= 2 * D:  # not for NaN rows (unknown chunks): they take the triangle
        return {"L": None, "F": F}
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    return {"L": posterior_triangle(F, dtype), "F": None}


def _moments_block(x, spec, features=None, dtype=None, n_features=None):
    if features is None:
        return _moments(x, spec)
    out = np.empty((x.shape[0], 2 * spec["coef"].shape[0]))
    for start, stop, z in feature_sub_blocks(x, features, fused_buffer(x.shape[0], n_features, dtype)):
        out[start:stop] = _moments(z, spec)
    return out


def _will_calibrate(estimator):
    """Before ``fit``: whether the parameters ask for calibration (``calibrate=True``, or "auto"
    with a list of alphas or the evidence; a gamma grid on the map is not known here)."""
    calibrate = getattr(estimator, "calibrate", False)
    searching = np.ndim(getattr(estimator, "alpha", 0.0)) > 0 or getattr(estimator, "select", "cv") == "evidence"
    return calibrate is True or (calibrate == "auto" and searching)


def _has_posterior(estimator):
    return hasattr(estimator, "posterior_factor_") if hasattr(estimator, "coef_") else _will_calibrate(estimator)


def _has_proba(estimator):
    return hasattr(estimator, "platt_") if hasattr(estimator, "coef_") else _will_calibrate(estimator)


class PosteriorPredictMixin:
    """``predict(X, return_std=)`` and ``predict_interval(X, level=)`` of a calibrated
    ridge regressor (``posterior_factor_``, ``feature_mean_``, ``noise_variance_``,
    ``conformal_counts_``)."""

    def predict(self, X, return_std=False):
        """Predictions: numpy in, numpy out; dask in, lazy dask out.  With
        ``return_std=True`` also the posterior predictive standard deviation of each
        prediction (module docstring), a model fitted with ``calibrate`` only."""
        if not return_std:
            return self._decision(X)
        mean, std = self._predictive_moments(X)
        return mean, std

    @available_if(_has_posterior)
    def predict_interval(self, X, level=0.9):
        """``(lower, upper)`` prediction intervals at ``level``, each shaped as ``predict``'s
        output: ``prediction -+ q std(x)`` with ``q`` the conformal quantile of the
        normalized leave-one-out residuals (:mod:`rfstream.solvers.ridge.calibration`).  An
        infinite ``q`` (too few training rows for the level) gives infinite bounds."""
        return self.interval_from_moments(*self._predictive_moments(X), level)

    @available_if(_has_posterior)
    def interval_from_moments(self, mean, std, level=0.9):
        """``(lower, upper)`` from ``predict(X, return_std=True)``'s ``(mean, std)``: what
        :meth:`predict_interval` gives, for a caller that needs the mean and std as well
        (one product with the posterior factor per block instead of two)."""
        level = check_level(level)
        q = np.array([conformal_quantile(c, level) for c in self.conformal_counts_])
        q = q[0] if np.ndim(mean) == 1 else q
        return mean - q * std, mean + q * std

    def _predictive_moments(self, X):
        check_is_fitted(self)
        if not hasattr(self, "posterior_factor_"):
            raise ValueError(f"this {type(self).__name__} keeps no posterior: it was fitted with "
                             "calibrate=False (or calibrate='auto' without a search, or an iterative "
                             "solver); refit with calibrate=True for return_std and predict_interval.")
        coef = np.atleast_2d(self.coef_)
        T = coef.shape[0]
        spec = {"coef": coef, "intercept": np.atleast_1d(self.intercept_),
                "noise": np.atleast_1d(self.noise_variance_), "inv_n": float(self.inverse_weight_)}
        if is_dask_collection(X):
            features, rows = fused_rows(X, even=False)
            X = check_X(self, X, reset=False)
        else:
            X = check_X(self, X, reset=False, accept_sparse="csr")
        spec.update(_leverage_factor(self.posterior_factor_, X), mu=self.feature_mean_)
        if is_dask_collection(X):
            kwargs = {"dtype": np.float64, "chunks": (X.chunks[0], (2 * T,)), "drop_axis": [],
                      "meta": np.empty((0, 0), np.float64)}
            if features is not None:
                both = rows.map_blocks(_moments_block, shared(spec), shared(features), X.dtype, X.shape[1],
                                       **kwargs)
            else:
                both = X.map_blocks(_moments_block, shared(spec), **kwargs)
        else:
            both = _moments_block(X, spec)
        mean, std = both[:, :T], both[:, T:]
        if np.ndim(self.coef_) == 1:
            mean, std = mean[:, 0], std[:, 0]
        return mean, std


def _proba_block(scores, platt):
    return platt_probabilities(scores, platt)


class CalibratedProbaMixin:
    """``predict_proba`` / ``predict_log_proba`` of a ridge classifier fitted with ``calibrate``:
    Platt scaling of its decision values (:mod:`rfstream.solvers.ridge.calibration`)."""

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes) in the order of ``classes_``: Platt's sigmoid of
        the decision value (two classes), normalized one-vs-rest sigmoids (more), fitted on
        the exact leave-one-out decision values.  Numpy in, numpy out; dask in, lazy dask out."""
        check_is_fitted(self, "platt_")
        scores = self.decision_function(X)
        if isinstance(scores, da.Array):
            K = self.classes_.size
            return scores.map_blocks(_proba_block, self.platt_, dtype=np.float64,
                                     chunks=(scores.chunks[0], (K,)),
                                     new_axis=[1] if scores.ndim == 1 else None,
                                     meta=np.empty((0, 0), dtype=np.float64))
        return _proba_block(scores, self.platt_)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """The logarithm of :meth:`predict_proba`."""
        p = self.predict_proba(X)
        return da.log(p) if isinstance(p, da.Array) else np.log(p)

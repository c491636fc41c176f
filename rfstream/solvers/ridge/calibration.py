"""Calibration and the posterior: conformal intervals, Platt probabilities, predictive std.

One pass at the chosen (gamma, alpha) counts each row's exact leave-one-out residual
(:mod:`rfstream.solvers.ridge.loo`) in histograms: normalized conformity scores for a
regressor's intervals (Vovk, Gammerman & Shafer 2005; Papadopoulos et al. 2008; Barber et al.
2021), decision values for a classifier's Platt scaling (Platt 1999).  The predictive std is
Bishop 2006, eq. 3.59 (posterior eq. 3.53-3.54).  Deviation: leave-one-out residuals, not
out-of-fold ones, on a sample of :data:`CALIBRATION_ROWS` rows beyond that; a classifier searched
by K-fold CV or leave-one-out takes Platt's sigmoid from its scoring pass's held-out decisions
instead, with no pass of its own (:mod:`rfstream.solvers.ridge.platt`).  docs/ridge.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.sparse as sp
from dask.base import is_dask_collection
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ... import lapack
from ..._validation import check_X
from ...cluster import compute
from ...devices import array_namespace, is_numpy, numpy_dtype, on_device_once, take_rows, to_host, xp_dtype
from ...features.on_device import device_block
from ...features.fused import feature_sub_blocks, fused_buffer
from ...features.source import fused_rows
from ...options import ParameterError
from ...random import STREAM_CALIBRATION, row_uniform
from ...reductions import Layout, shared
from ..passes import RowSpec, row_sum, sub_blocks, weight_fields
from .cv import normal_equations
from .gram import FeatureGroups, group_chunk, group_spec
from .on_device import device_leverage_and_decisions
from .platt import DECISION_BINS, count_decisions, platt_probabilities

SCORE_BINS = 4096
SCORE_EDGES = np.geomspace(1e-4, 1e4, SCORE_BINS + 1)
#: bins of a calibrated regressor's histogram of conformity scores per target (one below, one above)
CONFORMAL_BINS = SCORE_BINS + 2
#: the fitted attributes of a calibrated ridge regressor's posterior: all of them or none
POSTERIOR = ("posterior_factor_", "feature_mean_", "noise_variance_", "inverse_weight_", "conformal_counts_")
#: The calibration pass keeps about this many rows; more rows are sampled (docs/ridge.md).
CALIBRATION_ROWS = 2**18
#: Column blocks of the leverages' triangular product (:func:`triangular_product`).
TRIANGLE_BLOCKS = 8


def posterior_basis(basis, alpha):
    """``F = U diag(1 / sqrt(s + alpha))``: ``(G + alpha I)^-1 = F F'``, the D x D factor
    the model keeps for its predictive variance."""
    return basis["U"] / np.sqrt(basis["s"] + alpha)


def posterior_triangle(F, dtype):
    """The lower triangle ``L`` (D x D, ``dtype``) with ``L L' = F F' = (G + alpha I)^-1``:
    ``F`` itself when it is lower triangular (:func:`cholesky_posterior`'s), else ``L = R'`` of
    the QR decomposition ``F' = Q R``.  A row's leverage is then ``||(z - mu) L||^2``, a
    triangular product (:func:`triangular_product`)."""
    if not np.any(np.triu(F, 1)):
        return np.ascontiguousarray(F, dtype=dtype)
    R = scipy.linalg.qr(F.T, mode="r", check_finite=False)[0]
    return np.ascontiguousarray(R.T, dtype=dtype)


def cholesky_posterior(total, alpha, fit_intercept):
    """The chosen alpha's solution and posterior factor from one Cholesky factorization, for a
    search that made no eigendecomposition (cross-validation, the evidence by Cholesky).

    With ``P`` the matrix that reverses the order of the features, ``P (G_c + alpha I) P = K K'``
    (``G_c`` the centred Gram); ``L = P K^-T P`` is then lower triangular with ``L L' = (G_c +
    alpha I)^-1``, so that ``W = L (L' C_c)`` (the ridge solution), ``||L' C_c||^2`` per target
    the explained energy of the noise variance (Bishop 2006, eq. 3.86's ``E(m_N)`` at the
    maximum over sigma^2) and ``||(z - mu) L||^2`` a row's leverage (:func:`leverages`, no QR):
    ``2/3 D^3`` flops (``potrf`` and ``trtri``) where the eigendecomposition and the QR of its
    factor cost about ``10 D^3``.  Returns ``{"W", "b", "L", "mu", "inv_n", "explained"}``, or
    None when ``G_c + alpha I`` is not positive definite (alpha = 0 and a singular Gram: the
    caller takes the eigendecomposition).  ``total`` is not modified."""
    G, C, mu, nu = normal_equations(total, fit_intercept)
    A = np.array(G[::-1, ::-1], order="F")  # P G_c P
    del G
    A[np.diag_indices_from(A)] += alpha
    try:
        K = np.tril(lapack.potrf(A, overwrite_a=True))
        inverse = lapack.trtri(K)  # K^-1, zero above its diagonal as K is
    except np.linalg.LinAlgError:
        return None
    L = np.ascontiguousarray(inverse.T[::-1, ::-1])  # P K^-T P: lower triangular
    half = L.T @ C  # L' C_c
    W = L @ half
    return {"W": W, "b": nu - mu @ W, "L": L, "mu": mu, "explained": np.sum(half * half, axis=0),
            "inv_n": 1.0 / max(total["n"], 1e-300) if fit_intercept else 0.0}


def triangular_product(c, L, out):
    """``out = c @ L`` for a lower-triangular ``L``, as :data:`TRIANGLE_BLOCKS` products of
    ``c``'s trailing columns with a column block of ``L`` (the block's zero rows skipped).

    ``(1/2 + 1/(2 k))`` of a full product's flops with ``k`` blocks; not scipy's ``trmm``,
    whose wrapper holds the GIL (docs/ridge.md, calibration.py)."""
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
    if not is_numpy(zs):
        return device_leverage_and_decisions(zs, spec)
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


def noise_variance(explained, yy, m):
    """``sigma^2`` per target at its maximum (:mod:`rfstream.solvers.ridge.evidence`), from the
    centred target energy ``yy`` and the part the fit explains, ``diag(C_c' (G_c + alpha I)^-1 C_c)``."""
    energy = yy - explained
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


def calibration_chunk(z, *rows, offset, spec, out=None):
    """The histograms of one row block (docs/ridge.md)."""
    out = spec.layout.empty() if out is None else out
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
        zs = zs.toarray() if sp.issparse(zs) else zs
        if is_numpy(zs) and (buffers is None or buffers[0].shape[0] < zs.shape[0]):
            buffers = [np.empty(zs.shape, dtype=spec.L.dtype) for _ in range(2)]
        h, decisions = leverage_and_decisions(zs, spec, buffers)
        h += spec.inv_n
        cs = c[start:stop]
        keep = 1.0 - cs * h
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = (Y[start:stop] - decisions) / keep[:, None]
        ok = (keep > 1e-12) & (cs > 0)
        if spec.classifier:
            count_decisions(parts["counts"], (Y[start:stop] - residual)[ok], Y[start:stop][ok] > 0, cs[ok])
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
    return take_rows(z, keep), tuple(None if r is None else np.asarray(r)[keep] for r in rows)


def calibration_pass(groups, chosen, y, target_fn, weights, model, *, classifier, seed=0):
    """The histograms of the chosen gamma's rows (``groups``: the fit's
    :class:`rfstream.solvers.ridge.gram.FeatureGroups`, ``chosen`` the gamma's index);
    ``model``: ``W``, ``b``, ``F`` (the posterior factor), ``mu``, ``inv_n``, ``noise``.

    The leverages are made in the features' dtype from the centred rows (their rounding:
    docs/ridge.md); the triangle is one key of the pass's graph, sent once."""
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
    if not is_numpy(x):  # rows on a device: the products there, the moments on the host
        return _device_moments_block(x, spec, features)
    if features is None:
        return _moments(x, spec)
    out = np.empty((x.shape[0], 2 * spec["coef"].shape[0]))
    for start, stop, z in feature_sub_blocks(x, features, fused_buffer(x.shape[0], n_features, dtype)):
        out[start:stop] = _moments(z, spec)
    return out


def _device_moments_block(x, spec, features):
    """:func:`_moments_block` of rows on a device: their features, decisions and ``(z - mu) L``
    (or ``F``) made there (:mod:`rfstream.solvers.ridge.on_device`); mean and std as float64 on the host."""
    z = x if features is None else device_block(features)(x)
    xp = array_namespace(z)
    dtype = numpy_dtype(z) if spec["L"] is not None else np.dtype(np.float64)
    mean = xp.matmul(z, xp.matrix_transpose(on_device_once(spec["coef"], xp, numpy_dtype(z))))  # as predict
    mean = to_host(xp.astype(mean, xp.float64)) + spec["intercept"]
    centred = xp.astype(z, xp_dtype(xp, dtype)) - on_device_once(spec["mu"], xp, dtype)
    a = xp.matmul(centred, on_device_once(spec["L"] if spec["L"] is not None else spec["F"], xp, dtype))
    h = to_host(xp.sum(xp.astype(a * a, xp.float64), axis=1))
    var = spec["noise"][None, :] * (1.0 + spec["inv_n"] + h)[:, None]
    return np.hstack([mean, np.sqrt(var)])


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
        prediction (docs/ridge.md), a model fitted with ``calibrate`` only."""
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
            raise ParameterError(f"this {type(self).__name__} keeps no posterior: it was fitted with "
                                 "{calibrate=False} (or {calibrate='auto'} without a search, or an iterative "
                                 "solver); refit with {calibrate=True} for {return_std} and {predict_interval}.",
                                 calibrate=self.calibrate, return_std=None, predict_interval=None)
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
    return platt_probabilities(to_host(scores), platt)  # decisions on a device: Platt's sigmoids on the host


class CalibratedProbaMixin:
    """``predict_proba`` / ``predict_log_proba`` of a ridge classifier fitted with ``calibrate``:
    Platt scaling of its decision values (:mod:`rfstream.solvers.ridge.calibration`)."""

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes) in the order of ``classes_``: Platt's sigmoid of
        the decision value (two classes), normalized one-vs-rest sigmoids (more), fitted on
        out-of-fold decision values (K-fold CV) or the exact leave-one-out ones
        (:mod:`rfstream.solvers.ridge.platt`).  Numpy in, numpy out; dask in, lazy dask out."""
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


def posterior_state(view, d, targets):
    """A saved calibrated regressor's posterior and conformal histogram, all or none
    (:mod:`rfstream.io.model_checks`)."""
    present = [name for name in POSTERIOR if name in view.fitted]
    if not present:
        return
    if len(present) != len(POSTERIOR):
        view.fail(f"it has {', '.join(present)} but not {', '.join(n for n in POSTERIOR if n not in present)}")
    view.array("posterior_factor_", (d, d))
    view.array("feature_mean_", (d,))
    view.array("noise_variance_", (targets,), nonnegative=True)
    view.number("inverse_weight_", nonnegative=True)
    view.array("conformal_counts_", (targets, CONFORMAL_BINS), nonnegative=True)

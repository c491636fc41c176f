"""Predictive uncertainty of a ridge regressor and probabilities of a ridge classifier.

Under the Bayesian reading of ridge (:mod:`rfstream.solvers.evidence`), the
posterior of the weights at the chosen (alpha, sigma^2) is Gaussian with
covariance ``sigma^2 (G + alpha I)^-1`` (Bishop 2006, eq. 3.53-3.54, with the
flat-prior intercept adding ``sigma^2 / n``), so a new row's predictive variance
(Bishop eq. 3.59) is

    std(x)^2 = sigma^2 (1 + 1/n + ||(z - mu)' F||^2),    (G + alpha I)^-1 = F F',

with ``z`` the row's features, ``mu`` their training mean and ``F`` the D x D
factor the fitted model keeps (``posterior_factor_``): one more product of the
features with a D x D matrix (for more than 2 D rows a triangular one, ``L L' = F F'``,
in the features' dtype: :func:`rfstream.solvers.calibration.leverages`), made in the
prediction's own tasks (for dask input the features of ``X = map.transform(rows)`` are
made there a sub-block at a time, as :mod:`rfstream.solvers.linear` does; never an
n x D array).  The noise
term is included: this is the spread of a new target, as
``sklearn.linear_model.BayesianRidge.predict(return_std=True)`` gives it.

``predict_interval`` widens ``std(x)`` by the conformal quantile of
:mod:`rfstream.solvers.calibration`, so its coverage does not rest on the
Gaussian assumption; ``predict_proba`` of the ridge classifier applies the Platt
scaling fitted there.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._validation import check_X
from ..features.fused import feature_sub_blocks, fused_buffer, fused_rows
from ..reductions import shared
from .calibration import check_level, conformal_quantile, leverages, platt_probabilities, posterior_triangle


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
    """``{"L": triangle, "F": None}`` of :func:`rfstream.solvers.calibration.posterior_triangle`
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
        normalized leave-one-out residuals (:mod:`rfstream.solvers.calibration`).  An
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
    Platt scaling of its decision values (:mod:`rfstream.solvers.calibration`)."""

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


"""Choosing (gamma, alpha) by the evidence: ridge as Bayesian linear regression on the features.

The log marginal likelihood of Bishop, Pattern Recognition and Machine Learning, 2006,
Section 3.5 (MacKay 1992; eq. 3.82, 3.86, and 3.91 for the effective number of parameters),
from the Gram pass's statistics and one eigendecomposition per gamma.  Deviation: ``sigma^2``
is maximized in closed form and ``alpha`` searched over the user's grid, rather than both
precisions iterated; a classifier's is the evidence of its least-squares +-1 targets.
docs/ridge.md.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from ...cluster import client_work
from ...options import ParameterError
from .cv import EIGH_MIN_ALPHAS, normal_equations


def check_evidence_alphas(alphas):
    """Refuse an alpha of 0: the prior ``w ~ N(0, sigma^2 / alpha I)`` is then improper and
    the evidence undefined."""
    if np.any(alphas <= 0):
        raise ParameterError("{select='evidence'} needs every alpha > 0 (the prior precision); got {alpha=}. "
                             "Drop the 0, or use {select='cv'}.", alpha=alphas.tolist(), select="evidence")


def centred_target_energy(total, fit_intercept):
    """``diag(Y_c' C Y_c)``, per target, from the pass's ``B`` (Y'CY), ``t`` and ``n``."""
    yy = np.diagonal(total["B"]).astype(np.float64)
    if fit_intercept:
        n = max(total["n"], 1e-300)
        yy = yy - total["t"] ** 2 / n
    return np.maximum(yy, 0.0)


def degrees_of_freedom(total, fit_intercept):
    """``m`` of docs/ridge.md (evidence.py): the weight of the rows, less one for the intercept."""
    return float(total["n"]) - (1.0 if fit_intercept else 0.0)


def evidence_path(basis, yy, m, alphas):
    """``(log_evidence (A,), noise_variance (A, T), effective_parameters (A,))`` of every
    alpha for one gamma, from its eigendecomposition ``basis`` (``s``: the eigenvalues of
    the centred Gram, ``UC``: ``V' Z_c' C Y``, :func:`rfstream.solvers.ridge.loo.loo_basis`)
    and the centred target energy ``yy`` (T,) (docs/ridge.md)."""
    s, P2 = basis["s"], basis["UC"] ** 2
    m = max(m, 1e-300)
    log_ev = np.empty(alphas.size)
    noise = np.empty((alphas.size, yy.size))
    effective = np.empty(alphas.size)
    for i, alpha in enumerate(alphas):
        energy = np.maximum(yy - (1.0 / (s + alpha)) @ P2, 1e-300 * max(yy.max(), 1.0))
        noise[i] = energy / m
        log_ev[i] = (-0.5 * m * np.sum(np.log(2 * np.pi * noise[i]) + 1.0)
                     - 0.5 * yy.size * np.sum(np.log1p(s / alpha)))
        effective[i] = np.sum(s / (s + alpha))
    return log_ev, noise, effective


def cholesky_path(total, yy, m, alphas, fit_intercept):
    """:func:`evidence_path` by one Cholesky factorization ``L L' = G + alpha I`` per alpha,
    for fewer than :data:`rfstream.solvers.ridge.cv.EIGH_MIN_ALPHAS` alphas (cheaper than
    one eigendecomposition, as for cross-validation): ``sum_j log(1 + e_j / alpha) =
    2 sum log diag(L) - D log alpha``, ``E(alpha) = yy - diag(C_c' (G + alpha I)^-1 C_c)``,
    and the effective parameters ``D - alpha trace((G + alpha I)^-1)``."""
    G, C, _, _ = normal_equations(total, fit_intercept)
    D = G.shape[0]
    m = max(m, 1e-300)
    log_ev, noise, effective = np.empty(alphas.size), np.empty((alphas.size, yy.size)), np.empty(alphas.size)
    for i, alpha in enumerate(alphas):
        A = G.copy()
        A[np.diag_indices_from(A)] += alpha
        L = scipy.linalg.cholesky(A, lower=True, overwrite_a=True, check_finite=False)
        half = scipy.linalg.solve_triangular(L, C, lower=True, check_finite=False)  # L^-1 C_c
        energy = np.maximum(yy - np.sum(half * half, axis=0), 1e-300 * max(yy.max(), 1.0))
        noise[i] = energy / m
        logdet = 2.0 * np.sum(np.log(np.diagonal(L))) - D * np.log(alpha)
        log_ev[i] = -0.5 * m * np.sum(np.log(2 * np.pi * noise[i]) + 1.0) - 0.5 * yy.size * logdet
        inverse, _ = scipy.linalg.lapack.dtrtri(L, lower=1)  # L^-1
        effective[i] = D - alpha * np.sum(inverse * inverse)
    return log_ev, noise, effective


def evidence_bases(totals, alphas, fit_intercept, eigen_basis):
    """The eigendecomposition of every gamma's Gram (``eigen_basis(total)``, which consumes
    it) for :data:`EIGH_MIN_ALPHAS` alphas or more, else None per gamma (Cholesky)."""
    if alphas.size < EIGH_MIN_ALPHAS:
        return [None] * len(totals)
    bases = []
    with client_work(len(totals), "eigendecompositions") as step:
        for t in totals:
            bases.append(eigen_basis(t, fit_intercept))
            step(1, f"D={bases[-1]['U'].shape[0]:,}")
    return bases


def evidence_table(bases, totals, alphas, *, fit_intercept, gammas=None):
    """``(table, best)``: the log evidence, the noise variance at its maximum (per target)
    and the effective number of parameters of every (gamma, alpha), gamma by gamma; the
    index of the largest evidence (of equal ones the first, as ``np.argmax``).  A gamma
    whose basis is None is done by :func:`cholesky_path`."""
    check_evidence_alphas(alphas)
    paths = []
    count = sum(basis is None for basis in bases) * alphas.size
    with client_work(count, "Cholesky factorizations") as step:
        for basis, total in zip(bases, totals):
            yy, m = centred_target_energy(total, fit_intercept), degrees_of_freedom(total, fit_intercept)
            paths.append(evidence_path(basis, yy, m, alphas) if basis is not None
                         else cholesky_path(total, yy, m, alphas, fit_intercept))
            if basis is None:
                step(alphas.size, f"D={total['s'].shape[0]:,}")
    table = {"alpha": np.tile(alphas, len(bases)),
             "log_evidence": np.concatenate([p[0] for p in paths]),
             "noise_variance": np.concatenate([p[1] for p in paths]),
             "effective_parameters": np.concatenate([p[2] for p in paths])}
    if gammas is not None:
        table["gamma"] = np.repeat(np.asarray(gammas, dtype=np.float64), alphas.size)
    return table, int(np.argmax(table["log_evidence"]))

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

from ... import lapack
from ...cluster import client_map
from ...options import ParameterError
from .cv import (
    apply_q,
    normal_equations,
    tridiagonal_reduction,
    tridiagonal_solve,
)


#: From this many alphas on, the evidence of a gamma comes from one tridiagonal reduction of its Gram
#: (:func:`tridiagonal_basis`); below it, one Cholesky factorization and its inverse per alpha
#: (:func:`cholesky_path`), each 2/3 D^3 flops, so the crossover comes earlier than
#: :data:`rfstream.solvers.ridge.cv.SHARED_MIN_ALPHAS`'s.  The rule and its measurement: docs/ridge.md,
#: "The evidence".
EVIDENCE_SHARED_MIN_ALPHAS = 4


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


def tridiagonal_basis(total, fit_intercept):
    """What the evidence of every alpha of one gamma needs, from one reduction of its centred Gram
    ``G = Q T Q'`` (:func:`rfstream.solvers.ridge.cv.tridiagonal_reduction`, 4/3 D^3 flops, where an
    eigendecomposition with vectors costs several times more): ``s``, the eigenvalues of ``T`` (and
    ``G``) without vectors (LAPACK ``dsterf``, O(D^2)), ``QC = Q' Z_c' C Y``, the reduction itself,
    ``mu``, ``nu`` and ``1 / n``; :func:`rfstream.solvers.ridge.loo.loo_solution` solves the chosen
    alpha from it."""
    G, C, mu, nu = normal_equations(total, fit_intercept)
    reduction = tridiagonal_reduction(G)
    del G
    s, info = scipy.linalg.lapack.dsterf(reduction[1], reduction[2])
    if info != 0:  # pragma: no cover - QL iterations that do not converge
        raise np.linalg.LinAlgError(f"dsterf failed to converge (info={info})")
    return {"reduction": reduction, "s": np.maximum(s, 0.0), "QC": apply_q(reduction, C, "T"), "mu": mu,
            "nu": nu, "inv_n": 1.0 / max(total["n"], 1e-300) if fit_intercept else 0.0}


def explained_energy(basis, alpha):
    """``diag(C_c' (G + alpha I)^-1 C_c)`` (T,): from the eigenvectors (``UC``) or from the
    tridiagonal reduction (``QC``, one O(D T) solve)."""
    if "UC" in basis:
        return (1.0 / (basis["s"] + alpha)) @ (basis["UC"] ** 2)
    x = tridiagonal_solve(basis["reduction"], basis["QC"], alpha)
    return np.sum(basis["QC"] * x, axis=0)


def evidence_path(basis, yy, m, alphas):
    """``(log_evidence (A,), noise_variance (A, T), effective_parameters (A,))`` of every
    alpha for one gamma, from its :func:`tridiagonal_basis` (or an eigendecomposition ``basis``,
    ``s``: the eigenvalues of the centred Gram, ``UC``: ``V' Z_c' C Y``,
    :func:`rfstream.solvers.ridge.loo.loo_basis`) and the centred target energy ``yy`` (T,)
    (docs/ridge.md)."""
    s = basis["s"]
    m = max(m, 1e-300)
    log_ev = np.empty(alphas.size)
    noise = np.empty((alphas.size, yy.size))
    effective = np.empty(alphas.size)
    for i, alpha in enumerate(alphas):
        energy = np.maximum(yy - explained_energy(basis, alpha), 1e-300 * max(yy.max(), 1.0))
        noise[i] = energy / m
        log_ev[i] = (-0.5 * m * np.sum(np.log(2 * np.pi * noise[i]) + 1.0)
                     - 0.5 * yy.size * np.sum(np.log1p(s / alpha)))
        effective[i] = np.sum(s / (s + alpha))
    return log_ev, noise, effective


def cholesky_path(total, yy, m, alphas, fit_intercept):
    """:func:`evidence_path` by one Cholesky factorization ``L L' = G + alpha I`` per alpha,
    for fewer than :data:`EVIDENCE_SHARED_MIN_ALPHAS` alphas (cheaper than one reduction):
    ``sum_j log(1 + e_j / alpha) =
    2 sum log diag(L) - D log alpha``, ``E(alpha) = yy - diag(C_c' (G + alpha I)^-1 C_c)``,
    and the effective parameters ``D - alpha trace((G + alpha I)^-1)``."""
    G, C, _, _ = normal_equations(total, fit_intercept)
    D = G.shape[0]
    m = max(m, 1e-300)
    log_ev, noise, effective = np.empty(alphas.size), np.empty((alphas.size, yy.size)), np.empty(alphas.size)
    for i, alpha in enumerate(alphas):
        A = np.array(G, order="F", copy=True)
        A[np.diag_indices_from(A)] += alpha
        L = np.tril(lapack.potrf(A, overwrite_a=True))  # without the GIL (rfstream.lapack): the gammas' threads at once
        inverse = lapack.trtri(L)  # L^-1
        half = inverse @ C  # L^-1 C_c
        energy = np.maximum(yy - np.sum(half * half, axis=0), 1e-300 * max(yy.max(), 1.0))
        noise[i] = energy / m
        logdet = 2.0 * np.sum(np.log(np.diagonal(L))) - D * np.log(alpha)
        log_ev[i] = -0.5 * m * np.sum(np.log(2 * np.pi * noise[i]) + 1.0) - 0.5 * yy.size * logdet
        effective[i] = D - alpha * np.sum(inverse * inverse)
    return log_ev, noise, effective


def evidence_bases(totals, alphas, fit_intercept):
    """The :func:`tridiagonal_basis` of every gamma's Gram for :data:`EVIDENCE_SHARED_MIN_ALPHAS`
    alphas or more, else None per gamma (Cholesky); ``totals`` are not modified."""
    if alphas.size >= EVIDENCE_SHARED_MIN_ALPHAS:
        D = totals[0]["C"].shape[0]
        return client_map(lambda t: tridiagonal_basis(t, fit_intercept), totals, width=D,
                          shown=("tridiagonal reductions", 1, f"D={D:,}"))
    return [None] * len(totals)


def evidence_table(bases, totals, alphas, *, fit_intercept, gammas=None):
    """``(table, best)``: the log evidence, the noise variance at its maximum (per target)
    and the effective number of parameters of every (gamma, alpha), gamma by gamma; the
    index of the largest evidence (of equal ones the first, as ``np.argmax``).  A gamma
    whose basis is None is done by :func:`cholesky_path`."""
    check_evidence_alphas(alphas)

    def path(pair):
        basis, total = pair
        yy, m = centred_target_energy(total, fit_intercept), degrees_of_freedom(total, fit_intercept)
        return (evidence_path(basis, yy, m, alphas) if basis is not None
                else cholesky_path(total, yy, m, alphas, fit_intercept))

    D = totals[0]["C"].shape[0]
    cholesky = sum(basis is None for basis in bases)
    shown = ("Cholesky factorizations", alphas.size, f"D={D:,}") if cholesky == len(bases) else None
    paths = client_map(path, zip(bases, totals), width=D, shown=shown)  # gammas at once
    table = {"alpha": np.tile(alphas, len(bases)),
             "log_evidence": np.concatenate([p[0] for p in paths]),
             "noise_variance": np.concatenate([p[1] for p in paths]),
             "effective_parameters": np.concatenate([p[2] for p in paths])}
    if gammas is not None:
        table["gamma"] = np.repeat(np.asarray(gammas, dtype=np.float64), alphas.size)
    return table, int(np.argmax(table["log_evidence"]))

"""A low-rank preconditioner of the ridge normal equations from a sample of rows.

Conjugate gradients on ``A = Z_c' C Z_c + alpha I`` (:mod:`rfstream.solvers.ridge.cg`)
need as many passes as the spread of A's eigenvalues allows; for dense random
features the Gram's spectrum decays steeply and the Jacobi preconditioner
(``diag(A)``) hardly narrows it.  This module builds the randomized Nystrom
preconditioner of Frangella, Tropp & Udell ("Randomized Nystrom preconditioning",
SIAM J. Matrix Anal. Appl. 44(2), 2023): from a rank-r approximation
``A - alpha I ~ U diag(lam) U'`` with orthonormal ``U`` (D x r),

    P^-1 = (lam_r + alpha) U diag(1 / (lam + alpha)) U' + (I - U U')       (their eq. 5.3)

which maps the r leading eigenvalues of A to about ``lam_r + alpha`` and leaves
the rest, already below it, alone.  Their Theorem 5.1: once r is about twice the
effective dimension ``d_eff(alpha) = tr(G (G + alpha I)^-1)``, the preconditioned
system's condition number is a small constant, so CG converges in a few passes.

**Deviation, for streaming.**  Their Algorithm 2.1 (RandNysAppx) sketches
``Y = A Omega`` with a Gaussian ``Omega`` (D x r): for A = Z'CZ that is a pass over
the rows costing ``2 n D r`` flops, several CG iterations' worth (an iteration
costs ``4 n D T`` for T targets) and at D = 50,000, n = 10^6 hours on a few cores.
Here the approximation comes instead from ``m`` rows drawn uniformly without
replacement, as FALKON approximates its Hessian by its M centres (Rudi, Carratino &
Rosasco, "FALKON: an optimal large scale kernel method", NeurIPS 2017, Section 3,
``K_nM' K_nM ~ (n / M) K_MM^2``): with ``B`` the sampled rows' centred features, each
scaled by ``sqrt(c_i n_rows / m)``, ``B'B`` is an unbiased estimate of ``Z_c' C Z_c``,
and its eigendecomposition comes from the m x m matrix ``B B' = Q diag(s) Q'`` as
``U = B' Q diag(s)^-1/2``, ``lam = s``.  Random Fourier features are bounded
(``|z_j| <= sqrt(2 / D)``), so no row has a large leverage and uniform sampling
suffices (the argument of FALKON's Theorem 3 for uniform centres).  Cost: reading
the ``m`` input rows (one gather, no feature pass), their features on the client,
``m^2 D`` flops (in float32 for float32 features: :func:`nystrom_factor`) and ``m D``
values of the features' dtype and ``r D`` float64 of memory; no pass over the data.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ...cluster import compute
from ...features.fused import feature_source
from ..weights import row_weights

#: Default rank r of the preconditioner (at most D), and the rows sampled per unit of
#: rank: the sampled Gram's trailing eigenpairs are noisy, so its leading half is
#: kept (the iteration counts behind both: docs/wide.md, "PCG").
PCG_RANK = 2048
ROWS_PER_RANK = 2


def sample_rows(n_rows, m, seed):
    """Sorted indices of ``min(m, n_rows)`` rows drawn uniformly without replacement."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_rows, size=min(m, n_rows), replace=False))


def sampled_features(Z, y, sample_weight, idx):
    """``(features, labels, weights)`` of the rows ``idx`` of ``Z`` (dense m x D, in the
    features' own float32 or float64; float64 for any other dtype).

    For ``Z = map.transform(X)`` only the m input rows are read and their features made
    here (:mod:`rfstream.features.fused`); otherwise the rows of ``Z`` are gathered.  The
    rows, labels and weights come in one computation.
    """
    source = feature_source(Z)
    rows = source.rows if source is not None else Z
    x, labels, weights = compute(*(None if a is None else a[idx] for a in (rows, y, sample_weight)))
    z = source.block(np.asarray(x)) if source is not None else x
    z = z.toarray() if sp.issparse(z) else np.asarray(z)
    return (z if z.dtype in (np.float32, np.float64) else z.astype(np.float64)), labels, weights


#: Columns of ``U`` made per product in :func:`nystrom_factor` (float32 ``B``): each
#: product's float32 result (D x 512) is copied into the float64 ``U`` at once.
FACTOR_COLUMNS = 512


def nystrom_factor(B, rank):
    """``(U, lam)``: the ``rank`` leading eigenpairs of ``B'B`` from the m x m ``B B'``.

    ``U`` (D x r, float64) has orthonormal columns; eigenvalues below the rounding level of
    the largest are dropped (the rank then is smaller).

    **Deviation (precision).**  For float32 features ``B`` the two products, ``B B'``
    (m^2 D flops) and ``B' Q`` (m r D), run in float32, and only the m x m eigenproblem in
    float64 (LAPACK's float32 one took 4 times longer at m = 8,192).  At m = 8,192,
    D = 50,000, r = 4,096 that took the client's factor from 135 s to 92 s and ``B`` from
    3.3 to 1.6 GB; the eigenvalues moved by at most 3e-10 of the largest, ``U``'s columns
    are orthonormal to 1e-8 (``benchmarks/bench_nystrom_factor.py``, docs/wide.md).  A
    preconditioner need not be exact (the CG residuals are the true system's), and the
    rounding level for float32 is taken as ``eps32 sqrt(D)`` of the largest eigenvalue,
    that of random rounding in sums of D products: a conservative floor, which there kept
    2,024 of the 4,096 eigenpairs (those above alpha = 1).
    """
    D = B.shape[1]
    gram = B @ B.T
    s, Q = scipy.linalg.eigh(np.asarray(gram, dtype=np.float64), overwrite_a=True, check_finite=False)
    del gram
    order = np.argsort(s)[::-1][:rank]
    s, Q = s[order], Q[:, order]
    rounding = max(np.finfo(np.float64).eps * D, np.finfo(B.dtype).eps * np.sqrt(D))
    keep = s > s[0] * rounding if s.size and s[0] > 0 else np.zeros(0, bool)
    s, Q = s[keep], Q[:, keep] / np.sqrt(s[keep])
    if B.dtype == np.float64:
        return B.T @ Q, s
    U = np.empty((D, s.size))
    for j in range(0, s.size, FACTOR_COLUMNS):
        U[:, j:j + FACTOR_COLUMNS] = B.T @ Q[:, j:j + FACTOR_COLUMNS].astype(B.dtype)
    return U, s


class NystromPreconditioner:
    """``P^-1`` of eq. 5.3 (module docstring) for ``A = Z_c' C Z_c + alpha I``.

    Built by :meth:`from_rows` from a uniform row sample; :meth:`__call__` applies it
    to a D x T block of residuals.
    """

    def __init__(self, U, lam, alpha):
        self.U = U
        self.lam = lam
        self.alpha = float(alpha)
        floor = lam[-1] if lam.size else 0.0
        self._scale = (floor + self.alpha) / (lam + self.alpha)  # eigen-directions' factors

    @property
    def rank(self):
        return self.lam.size

    @classmethod
    def from_rows(cls, Z, y, *, alpha, mu, n_rows, m, rank, seed, sample_weight=None, weight_args=None):
        """Sample ``m`` of the ``n_rows`` rows (seeded), centre their features on ``mu``
        (the weighted column means; zeros without an intercept), weight them by
        ``c_i n_rows / m`` and keep the ``rank`` leading eigenpairs."""
        t0 = time.perf_counter()
        idx = sample_rows(n_rows, m, seed)
        z, labels, w = sampled_features(Z, y, sample_weight, idx)
        c = row_weights(labels, w, **(weight_args or {}))
        z -= mu
        z *= np.sqrt((n_rows / idx.size) * (np.ones(idx.size) if c is None else c))[:, None]
        U, lam = nystrom_factor(z, min(rank, idx.size))
        precond = cls(U, lam, alpha)
        precond.sample_rows = idx.size
        precond.seconds = time.perf_counter() - t0
        return precond

    def __call__(self, R):
        """``P^-1 R`` for residuals ``R`` (D, T)."""
        UR = self.U.T @ R
        return R + self.U @ ((self._scale - 1.0)[:, None] * UR)

    def columns(self, alphas, fractions):
        """``precondition(R, cols)``: eq. 5.3 for systems of their own ``alphas`` (P,) whose
        matrices are ``fractions`` (P,) of the sampled one (a CV fold's training rows: its
        weight over the whole weight, :mod:`rfstream.solvers.ridge.cg_search`), applied to the
        residuals ``R`` (D, len(cols)) of the columns ``cols``.  The eigenvectors are shared:
        a fold's training Gram is, up to sampling, that fraction of the whole."""
        lam, floor = self.lam[:, None] * fractions, (self.lam[-1] if self.lam.size else 0.0) * fractions
        scale = (floor + alphas) / np.where(lam + alphas > 0, lam + alphas, 1.0) - 1.0  # (r, P)

        def precondition(R, cols):
            return R + self.U @ (scale[:, cols] * (self.U.T @ R))

        return precondition

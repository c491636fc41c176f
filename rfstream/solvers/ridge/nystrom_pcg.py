"""A low-rank preconditioner of the ridge normal equations from a sample of rows.

The randomized Nystrom preconditioner of Frangella, Tropp & Udell (SIAM J. Matrix Anal.
Appl. 44(2), 2023), ``P^-1 = (lam_r + alpha) U diag(1 / (lam + alpha)) U' + (I - U U')``
(their eq. 5.3; Theorem 5.1).  Deviation, for streaming: the rank-r approximation comes from
``m`` rows sampled uniformly (as FALKON's centres, Rudi, Carratino & Rosasco 2017, Section 3)
instead of their Algorithm 2.1's sketch ``A Omega``, which would cost a pass; float32 features
keep float32 products.  docs/ridge.md.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ...cluster import compute
from ...devices import to_host
from ...features.source import fused_rows
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
    features' own float32 or float64; float64 for any other dtype), in one computation; for
    ``Z = map.transform(X)`` only the m input rows are read and their features made here."""
    block, rows = fused_rows(Z, even=False)
    x, labels, weights = compute(*(None if a is None else a[idx] for a in (rows, y, sample_weight)))
    x = to_host(x)  # rows on a device: the m sampled rows' features made on the client, as on the CPU
    z = block(np.asarray(x)) if block is not None else x
    z = z.toarray() if sp.issparse(z) else np.asarray(z)
    return (z if z.dtype in (np.float32, np.float64) else z.astype(np.float64)), labels, weights


#: Columns of ``U`` made per product in :func:`nystrom_factor` (float32 ``B``): each
#: product's float32 result (D x 512) is copied into the float64 ``U`` at once.
FACTOR_COLUMNS = 512


def nystrom_factor(B, rank):
    """``(U, lam)``: the ``rank`` leading eigenpairs of ``B'B`` from the m x m ``B B'``.

    ``U`` (D x r, float64) has orthonormal columns; eigenvalues below the rounding level of
    the largest are dropped (the rank then is smaller).  Deviation: for float32 ``B`` the
    products ``B B'`` and ``B' Q`` run in float32, only the m x m eigenproblem in float64,
    and the rounding level is ``eps32 sqrt(D)`` of the largest eigenvalue (docs/ridge.md).
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
    """``P^-1`` of eq. 5.3 (docs/ridge.md) for ``A = Z_c' C Z_c + alpha I``.

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

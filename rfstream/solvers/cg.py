"""Ridge by preconditioned conjugate gradients on the implicit normal equations.

For wide sparse features (random binning with many bins per grid) the D x D
Gram of :mod:`rfstream.solvers.gram` does not fit.  Conjugate gradients only
need products with

    A = Z_c' Z_c + alpha I,    Z_c = Z - 1 mu'  (columns centred when fitting an intercept),

and ``A V = Z'(Z V) - n mu (mu' V) + alpha V`` costs one pass over the rows
(a :func:`rfstream.reductions.sum_rows` reduction; for CSR blocks each pass is
O(nnz)).  A first pass gathers n, mu, nu, Z'Y and the diagonal of Z'Z, which
gives the Jacobi preconditioner ``diag(A)`` (for random binning the diagonal
of Z'Z holds the bin counts).  The T targets run as T independent CG
recursions that share each pass (Hestenes & Stiefel 1952; Saad, "Iterative
Methods for Sparse Linear Systems", 2003, Algorithm 9.1).

Only D x T arrays live on the client; the stopping rule is the relative
residual ``||r|| <= tol ||b||`` of every target, or ``max_iter`` passes.

Every pass goes through :func:`rfstream.features.fused.fused_pass`: for dense
``Z = map.transform(X)`` (``solver="cg"`` chosen for dense features) each task
makes its features a sub-block at a time and converts only that sub-block to
float64; for stored blocks, and for sparse maps (random binning attaches no
feature source: its CSR block, made by the transform task that feeds the
reduction, holds ``rows x P`` non-zeros, not ``rows x D`` values), each task
reduces over its block of ``Z`` as it is, O(nnz) per pass.
"""
from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from ..cluster import compute
from ..features.fused import fused_pass
from ..reductions import Layout, sum_rows


def _as_float64(z):
    return sp.csr_matrix(z, dtype=np.float64) if sp.issparse(z) else np.asarray(z, dtype=np.float64)


def _stats_chunk(z, y, *, offset, target_fn, layout, out):
    """Adds n, Z'1, diag(Z'Z), Y'1 and Z'Y of one block into ``out``."""
    if z.shape[0] == 0:
        return
    z, Y = _as_float64(z), target_fn(y)
    parts = layout.unpack(out)
    parts["n"][...] += z.shape[0]
    parts["s"][:] += np.asarray(z.sum(axis=0)).ravel()
    parts["d"][:] += np.asarray((z.multiply(z) if sp.issparse(z) else z * z).sum(axis=0)).ravel()
    parts["t"][:] += Y.sum(axis=0)
    parts["C"][:] += z.T @ Y


def _product_chunk(z, *, offset, V, out):
    """Adds Z'(Z V) of one block into ``out``."""
    if z.shape[0] == 0:
        return
    z = _as_float64(z)
    out += np.asarray(z.T @ (z @ V)).ravel()


def ridge_cg(Z, y, target_fn, n_targets, *, alpha, fit_intercept=True, tol=1e-4, max_iter=200):
    """Solve ``min ||Y - Z W - 1 b'||^2 + alpha ||W||^2`` by Jacobi-preconditioned CG.

    ``Z`` is a numpy/CSR array or a dask array (dense or CSR blocks), ``y``
    its labels aligned by rows, ``target_fn`` turns a block of labels into
    the (rows, T) targets.  Returns ``(W (D, T), b (T,), stats)`` with
    ``stats`` holding ``n``, ``n_iter`` (passes after the first) and the final
    relative residuals.
    """
    D, T = Z.shape[1], n_targets
    layout = Layout(n=(), s=(D,), d=(D,), t=(T,), C=(D, T))
    fn, rows = fused_pass(Z, partial(_stats_chunk, target_fn=target_fn, layout=layout), layout.size)
    vec = compute(sum_rows(fn, layout.size, rows, y))
    st = {k: np.array(v) for k, v in layout.unpack(vec).items()}
    n = float(st["n"])
    if n == 0:
        raise ValueError("cannot fit on 0 rows: X is empty.")
    if not all(np.isfinite(v).all() for v in st.values()):
        raise ValueError("X or y contains NaN or infinity (the reduction is not finite); remove or "
                         "impute them before fitting.")
    mu = st["s"] / n if fit_intercept else np.zeros(D)
    nu = st["t"] / n if fit_intercept else np.zeros(T)
    rhs = st["C"] - n * np.outer(mu, nu)
    precond = np.maximum(st["d"] - n * mu**2, 0.0) + alpha
    precond[precond <= 0] = 1.0  # alpha = 0 and an empty column: leave that coordinate alone

    def apply(V):
        fn, rows = fused_pass(Z, partial(_product_chunk, V=V), D * T)
        ZZV = compute(sum_rows(fn, D * T, rows)).reshape(D, T)
        return ZZV - n * np.outer(mu, mu @ V) + alpha * V

    W = np.zeros((D, T))
    R = rhs.copy()
    norm_b = np.maximum(np.linalg.norm(rhs, axis=0), np.finfo(float).tiny)
    Zr = R / precond[:, None]
    Pd = Zr.copy()
    rz = np.sum(R * Zr, axis=0)
    n_iter = 0
    res = np.linalg.norm(R, axis=0) / norm_b
    while n_iter < max_iter and np.any(res > tol):
        AP = apply(Pd)
        n_iter += 1
        pap = np.sum(Pd * AP, axis=0)
        step = np.where(pap > 0, rz / np.where(pap > 0, pap, 1.0), 0.0)
        step[res <= tol] = 0.0  # converged targets stay put
        W += Pd * step
        R -= AP * step
        Zr = R / precond[:, None]
        rz_new = np.sum(R * Zr, axis=0)
        Pd = Zr + Pd * np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        rz = rz_new
        res = np.linalg.norm(R, axis=0) / norm_b
    if np.any(res > tol):
        warnings.warn(f"CG stopped after max_iter={max_iter} passes with a relative residual of "
                      f"{res.max():.2g} (tol={tol}); raise max_iter.", ConvergenceWarning, stacklevel=3)
    return W, nu - mu @ W, {"n": n, "n_iter": n_iter, "residual": res}

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
``solver="pcg"`` replaces Jacobi by a Nystrom preconditioner of rank r built
from a sample of rows after the first pass
(:mod:`rfstream.solvers.nystrom_pcg`: D x r more on the client); for dense
random features at small alpha it needs several times fewer passes
(docs/wide.md, "PCG").

**Mixed precision (a deviation from the textbook's exact products).**  For dense
float32 features each task multiplies in float32 while the relative residual is
above :data:`FLOAT32_UNTIL`, a product with about 1e-7 relative error, summed over
tasks in float64; below it, one float64 pass computes the true residual ``b - A W``
and CG restarts from ``W`` with float64 products until ``tol``.  The restart is
iterative refinement: whatever the float32 phase's rounding, the returned ``W``
meets ``tol`` on the true residual (measured in docs/wide.md).

Row weights ``c_i`` (``sample_weight`` times ``class_weight``,
:mod:`rfstream.solvers.weights`) give weighted least squares,
``A = Z_c' C Z_c + alpha I`` with weighted column means: the first pass sums
``c``, ``Z'c``, ``diag(Z'CZ)``, ``Y'c`` and ``Z'CY``, each product pass
``Z'(C (Z V))``.

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
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from ..cluster import compute
from ..random import check_seed
from ..reductions import Layout
from .memory import check_pcg_memory
from .nystrom_pcg import ROWS_PER_RANK, NystromPreconditioner
from .passes import RowSpec, fused_row_sum, weight_fields

#: The products ``Z'(Z V)`` of dense float32 features run in float32 (half the time of
#: float64, and no float64 copy of each sub-block) while the relative residual is above
#: this (or ``tol``, if larger); one float64 pass then measures the true residual and,
#: where it is above ``tol``, the iterations restart from there in float64.  float32
#: alone stalls near 2e-5 (letter, D = 4096: docs/wide.md, "float32 products").
FLOAT32_UNTIL = 1e-4  # None: float64 products throughout (for comparisons)


def _as_float64(z):
    return sp.csr_matrix(z, dtype=np.float64) if sp.issparse(z) else np.asarray(z, dtype=np.float64)


#: Columns of a dense sub-block of :data:`STATS_ROWS` rows converted to float64 at a time by
#: :func:`stats_chunk`: its float64 work is 2 x rows x STATS_COLUMNS x 8 bytes (64 MiB for 4096
#: rows) instead of two float64 copies of the whole sub-block (3.2 GiB at D = 50,000:
#: docs/wide.md).  A sub-block of fewer rows (:func:`rfstream.features.fused.stream_rows`) is
#: converted in proportionally wider slices: the same float64 work, and as many calls per row.
STATS_COLUMNS = 1024
STATS_ROWS = 4096


def float64_columns(z):
    """``(cols, float64 copy of z[:, cols])`` over a block: :data:`STATS_COLUMNS` columns per
    :data:`STATS_ROWS` rows at a time when dense, the whole block when sparse (its copy holds
    only the non-zeros)."""
    step = z.shape[1] if sp.issparse(z) else STATS_COLUMNS * max(1, STATS_ROWS // max(z.shape[0], 1))
    for j in range(0, z.shape[1], step):
        zj = _as_float64(z if step == z.shape[1] else z[:, j:j + step])
        yield slice(j, j + zj.shape[1]), zj


def stats_chunk(z, *rows, offset, spec, out):
    """Adds n (the weight sum), m (rows), Z'c, diag(Z'CZ), Y'c and Z'CY of one block into ``out``;
    ``rows``: the labels, then the sample weights when they travel; ``spec`` a
    :class:`rfstream.solvers.passes.RowSpec` (targets, class weights, layout).  A dense block
    is summed in float64 :data:`STATS_COLUMNS` columns at a time (each column's sums are
    those of the whole block in float64: the same numbers, without its float64 copy)."""
    if z.shape[0] == 0:
        return
    Y = spec.targets(spec.take(rows)["y"])
    c = spec.row_weights(rows, offset)
    parts = spec.layout.unpack(out)
    parts["m"][...] += z.shape[0]
    parts["n"][...] += z.shape[0] if c is None else c.sum()
    parts["t"][:] += Y.sum(axis=0) if c is None else c @ Y
    cY = Y if c is None else c[:, None] * Y
    for cols, zj in float64_columns(z):
        zz = zj.multiply(zj) if sp.issparse(zj) else zj * zj
        if c is None:
            parts["s"][cols] += np.asarray(zj.sum(axis=0)).ravel()
            parts["d"][cols] += np.asarray(zz.sum(axis=0)).ravel()
        else:
            parts["s"][cols] += np.asarray(zj.T @ c).ravel()
            parts["d"][cols] += np.asarray(zz.T @ c).ravel()
        parts["C"][cols] += zj.T @ cY


@dataclass(frozen=True, eq=False, kw_only=True)
class ProductSpec(RowSpec):
    """A CG product pass's :class:`rfstream.solvers.passes.RowSpec`: the block ``V`` (D, T)
    that ``Z'(C (Z V))`` multiplies; the labels travel only for class weights."""

    V: np.ndarray


def product_chunk(z, *rows, offset, spec, out):
    """Adds Z'(Z V) of one block into ``out``; Z'(C (Z V)) when labels with class weights or
    sample weights travel in ``rows`` (:meth:`rfstream.solvers.passes.RowSpec.row_weights`).
    A float32 ``spec.V``: the products in the features' float32 (dense blocks), summed into
    ``out`` in float64; a float64 one: in float64, :data:`STATS_COLUMNS` columns of the
    block converted at a time."""
    if z.shape[0] == 0:
        return
    V = spec.V
    c = spec.row_weights(rows, offset)
    if V.dtype == np.float32 and not sp.issparse(z):
        z = np.asarray(z, dtype=np.float32)
        zv = z @ V
        if c is not None:
            zv *= c[:, None]
        out += (z.T @ zv).ravel()
        return
    # float64 products, the block converted a few columns at a time (float64_columns, as the
    # statistics pass): the same sums, without a float64 copy of the whole dense sub-block
    # (1.6 GB of a 4,096-row sub-block at D = 50,000)
    zv = np.zeros((z.shape[0], V.shape[1]))
    for cols, zj in float64_columns(z):
        zv += zj @ V[cols]
    if c is not None:
        zv *= c[:, None]
    product = out.reshape(z.shape[1], V.shape[1])  # a view: out is one flat partial
    for cols, zj in float64_columns(z):
        product[cols] += np.asarray(zj.T @ zv)


def ridge_cg(Z, y, target_fn, n_targets, *, alpha, fit_intercept=True, tol=1e-4, max_iter=200,
             sample_weight=None, weight_args=None, preconditioner=None):
    """Solve ``min ||C^(1/2) (Y - Z W - 1 b')||^2 + alpha ||W||^2`` by preconditioned CG.

    ``Z`` is a numpy/CSR array or a dask array (dense or CSR blocks), ``y``
    its labels aligned by rows, ``target_fn`` turns a block of labels into
    the (rows, T) targets; the row weights C are ``sample_weight`` (checked,
    aligned with ``Z``: :func:`rfstream.solvers.weights.check_sample_weight`) times
    the class weights in ``weight_args`` (``classes``, ``class_weight``), or 1.
    ``preconditioner``: None for Jacobi (``diag(A)``), or ``make(mu, n_rows)`` returning
    a function that applies ``P^-1`` to a D x T block, called once after the first pass
    (:class:`rfstream.solvers.nystrom_pcg.NystromPreconditioner`).
    Returns ``(W (D, T), b (T,), stats)`` with ``stats`` holding ``n`` (the weight
    sum), ``m`` (rows), ``n_iter`` (passes after the first) and the final relative
    residuals.
    """
    D, T = Z.shape[1], n_targets
    weights = weight_fields(weight_args)
    layout = Layout(n=(), m=(), s=(D,), d=(D,), t=(T,), C=(D, T))
    spec = RowSpec(layout=layout, targets=target_fn, **weights)
    vec = compute(fused_row_sum(stats_chunk, layout.size, Z, spec, y=y, w=sample_weight))
    st = {k: np.array(v) for k, v in layout.unpack(vec).items()}
    n = float(st["n"])
    if float(st["m"]) == 0:
        raise ValueError("cannot fit on 0 rows: X is empty.")
    if n == 0:
        raise ValueError("every row has weight zero (sample_weight times class_weight): nothing "
                         "to fit; give some rows a weight > 0.")
    if not all(np.isfinite(v).all() for v in st.values()):
        raise ValueError("X or y contains NaN or infinity (the reduction is not finite); remove or "
                         "impute them before fitting.")
    mu = st["s"] / n if fit_intercept else np.zeros(D)
    nu = st["t"] / n if fit_intercept else np.zeros(T)
    rhs = st["C"] - n * np.outer(mu, nu)
    if preconditioner is None:
        diag = np.maximum(st["d"] - n * mu**2, 0.0) + alpha
        diag[diag <= 0] = 1.0  # alpha = 0 and an empty column: leave that coordinate alone
        precondition = lambda R: R / diag[:, None]  # noqa: E731
    else:
        precondition = preconditioner(mu, int(st["m"]))

    labels = y if weights["class_weight"] is not None else None  # only class weights read them

    def apply(V, single=False):
        product = ProductSpec(layout=Layout(ZV=(D, T)), V=V.astype(np.float32) if single else V, **weights)
        ZZV = compute(fused_row_sum(product_chunk, D * T, Z, product, y=labels, w=sample_weight)).reshape(D, T)
        return ZZV - n * np.outer(mu, mu @ V) + alpha * V

    W = np.zeros((D, T))
    R = rhs.copy()
    norm_b = np.maximum(np.linalg.norm(rhs, axis=0), np.finfo(float).tiny)
    n_iter = 0
    res = np.linalg.norm(R, axis=0) / norm_b
    single = (FLOAT32_UNTIL is not None and np.dtype(Z.dtype) == np.float32
              and not sp.issparse(getattr(Z, "_meta", Z)))

    def first_direction(R):
        Zr = precondition(R)
        return Zr, np.sum(R * Zr, axis=0)

    Pd, rz = first_direction(R)
    while n_iter < max_iter:
        goal = max(tol, FLOAT32_UNTIL) if single else tol
        if not np.any(res > goal):
            if not single:
                break
            single = False  # float32 has done its part: the true residual, in float64
            if n_iter > 0:
                R = rhs - apply(W)
                n_iter += 1
                res = np.linalg.norm(R, axis=0) / norm_b
                Pd, rz = first_direction(R)  # restart from W: the float32 recurrences end here
            continue
        AP = apply(Pd, single)
        n_iter += 1
        pap = np.sum(Pd * AP, axis=0)
        step = np.where(pap > 0, rz / np.where(pap > 0, pap, 1.0), 0.0)
        step[res <= goal] = 0.0  # converged targets stay put
        W += Pd * step
        R -= AP * step
        Zr = precondition(R)
        rz_new = np.sum(R * Zr, axis=0)
        Pd = Zr + Pd * np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        rz = rz_new
        res = np.linalg.norm(R, axis=0) / norm_b
    if np.any(res > tol):
        warnings.warn(f"CG stopped after max_iter={max_iter} passes with a relative residual of "
                      f"{res.max():.2g} (tol={tol}); raise max_iter.", ConvergenceWarning, stacklevel=3)
    return W, nu - mu @ W, {"n": n, "m": float(st["m"]), "n_iter": n_iter, "residual": res}


def check_single_candidate(estimator, grid=False):
    """Refuse, before any pass, a search (a list of alphas, or ``grid``: a gamma grid)
    for a ridge ``estimator`` whose ``solver`` is "cg" or "pcg": their iterations solve
    one system; cross-validation needs the Gram pass."""
    if estimator.solver in ("cg", "pcg") and (np.ndim(estimator.alpha) > 0 or grid):
        raise ValueError(
            f"solver={estimator.solver!r} takes a single alpha and gamma (cross-validation needs "
            f"the Gram pass); got alpha={estimator.alpha!r}{' and a gamma grid' if grid else ''}. "
            "Pass one alpha and gamma, or solver='gram' (cv='loo' keeps one Gram).")


def fit_iterative(estimator, Z, y, target_fn, n_targets, alphas, groups, *, sample_weight=None,
                  weight_args=None):
    """:func:`ridge_cg` with a ridge estimator's parameters: ``solver`` "cg" (Jacobi) or
    "pcg" (:class:`rfstream.solvers.nystrom_pcg.NystromPreconditioner` of rank
    ``pcg_rank``, its rows drawn with ``random_state``); one alpha and one gamma only.

    Returns :func:`ridge_cg`'s ``(W, b, stats)``.
    """
    check_single_candidate(estimator, grid=groups.gammas is not None)
    alpha, preconditioner = float(alphas[0]), None
    if estimator.solver == "pcg":
        rank = min(estimator.pcg_rank, Z.shape[1])
        check_pcg_memory(Z.shape[1], rank, n_targets)

        def preconditioner(mu, n_rows):
            return NystromPreconditioner.from_rows(
                Z, y, alpha=alpha, mu=mu, n_rows=n_rows, m=ROWS_PER_RANK * rank, rank=rank,
                seed=check_seed(estimator.random_state), sample_weight=sample_weight,
                weight_args=weight_args)

    return ridge_cg(Z, y, target_fn, n_targets, alpha=alpha, fit_intercept=estimator.fit_intercept,
                    tol=estimator.tol, max_iter=estimator.max_iter, sample_weight=sample_weight,
                    weight_args=weight_args, preconditioner=preconditioner)

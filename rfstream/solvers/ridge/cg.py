"""Ridge by preconditioned conjugate gradients on the implicit normal equations, and their statistics.

Past the Gram's memory: ``A V = Z'(Z V) - n mu (mu' V) + alpha V`` is one pass over the rows,
and the columns of :class:`Systems` (targets, alphas, held-out folds) run as independent CG
recursions sharing each pass (Hestenes & Stiefel 1952; Saad 2003, Algorithm 9.1), with the
Jacobi preconditioner from the statistics pass (:func:`stats_chunk`) or the Nystrom one of
:mod:`rfstream.solvers.ridge.nystrom_pcg`.  Deviation: dense float32 features multiply in
float32 until :data:`FLOAT32_UNTIL`, then restart in float64 (iterative refinement).
docs/ridge.md.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from ...cluster import compute
from ...devices import is_numpy
from ...options import ParameterError
from ...random import check_seed
from ...reductions import Layout
from ..memory import check_cg_memory, check_pcg_memory
from ..passes import RowSpec, fused_row_sum, weight_fields
from .nystrom_pcg import ROWS_PER_RANK, NystromPreconditioner
from .on_device import device_normal_product, device_stats

#: Columns of a dense sub-block of :data:`STATS_ROWS` rows converted to float64 at a time by
#: :func:`stats_chunk`: its float64 work is 2 x rows x STATS_COLUMNS x 8 bytes (64 MiB for 4096
#: rows) instead of two float64 copies of the whole sub-block (3.2 GiB at D = 50,000:
#: docs/wide.md).  A sub-block of fewer rows (:func:`rfstream.features.fused.stream_rows`) is
#: converted in proportionally wider slices: the same float64 work, and as many calls per row.
STATS_COLUMNS = 1024
STATS_ROWS = 4096


#: The degree in the features of each part of :func:`stats_layout` that holds them.
FEATURE_DEGREES = {"s": 1, "d": 2, "C": 1}

_WORK = threading.local()


def work_array(name, shape):
    """A float64 array of ``shape`` in this thread's work memory ``name``, reused by every later
    call (grown when too small): the float64 slices of :func:`float64_columns`, up to
    ``STATS_ROWS x STATS_COLUMNS x 8`` bytes (32 MiB) each.  Reused because a fresh array per
    sub-block is faulted in page by page in a distributed worker (docs/ridge.md, cg.py)."""
    size = int(np.prod(shape))
    buf = getattr(_WORK, name, None)
    if buf is None or buf.size < size:
        buf = np.empty(size)
        setattr(_WORK, name, buf)
    return buf[:size].reshape(shape)


def release_work_arrays():
    """Free this thread's :func:`work_array` memory (the next float64 pass makes it again)."""
    _WORK.__dict__.clear()


def float64_columns(z):
    """``(cols, float64 copy of z[:, cols])`` over a block: :data:`STATS_COLUMNS` columns per
    :data:`STATS_ROWS` rows at a time when dense (each copy in the work array "columns": valid
    until the next step), the whole block when sparse (its copy holds only the non-zeros)."""
    if sp.issparse(z):
        yield slice(0, z.shape[1]), sp.csr_matrix(z, dtype=np.float64)
        return
    step = STATS_COLUMNS * max(1, STATS_ROWS // max(z.shape[0], 1))
    for j in range(0, z.shape[1], step):
        part = z[:, j:j + step]
        zj = work_array("columns", part.shape)
        np.copyto(zj, part)
        yield slice(j, j + part.shape[1]), zj


def stats_layout(n_features, n_targets, n_folds=1, diagonal=True):
    """The statistics pass's partials, per fold (``n_folds`` 1: one): the weight sum ``n``, rows
    ``m``, ``s = Z'c``, ``d = diag(Z'CZ)`` (with ``diagonal`` only: the Jacobi preconditioner's,
    which the Nystrom one does without), ``t = Y'c`` and ``C = Z'CY``."""
    K, D, T = n_folds, n_features, n_targets
    parts = dict(n=(K,), m=(K,), s=(K, D), d=(K, D), t=(K, T), C=(K, D, T))
    if not diagonal:
        del parts["d"]
    return Layout(**parts)


def stats_chunk(z, *rows, offset, spec, out):
    """Adds :func:`stats_layout`'s sums of one block into ``out``, each row into its fold's
    (``spec.row_folds``; one fold when ``spec.n_folds`` is 1); ``rows``: the labels, then the
    sample weights and fold indices when they travel; ``spec`` a
    :class:`rfstream.solvers.passes.RowSpec` (targets, class weights, folds, layout).  A dense
    block is summed in float64 :data:`STATS_COLUMNS` columns at a time (each column's sums are
    those of the whole block in float64: the same numbers, without its float64 copy)."""
    m = z.shape[0]
    if m == 0:
        return
    Y = spec.targets(spec.take(rows)["y"])
    c = spec.row_weights(rows, offset)
    parts = spec.layout.unpack(out)
    K, T = parts["t"].shape
    F = np.zeros((m, K))
    F[np.arange(m), spec.row_folds(m, rows, offset)] = 1.0  # each row's fold, one-hot
    Fc = F if c is None else F * c[:, None]
    parts["m"][:] += F.sum(axis=0)
    parts["n"][:] += Fc.sum(axis=0)
    parts["t"][:] += Fc.T @ Y
    cY = Y if c is None else c[:, None] * Y
    FY = cY if K == 1 else (F[:, :, None] * cY[:, None, :]).reshape(m, K * T)
    G = np.column_stack([Fc, FY])  # s and C of every fold from one product per slice
    if not is_numpy(z) and not sp.issparse(z):  # features on a device: the products there
        sums, squares = device_stats(z, G, Fc if "d" in parts else None)
        parts["s"][:] += sums[:K]
        parts["C"][:] += sums[K:].reshape(K, T, -1).transpose(0, 2, 1)
        if "d" in parts:
            parts["d"][:] += squares
        return
    for cols, zj in float64_columns(z):
        if sp.issparse(zj):
            sums = np.asarray(zj.T @ G).T
            squares = np.asarray(zj.multiply(zj).T @ Fc).T if "d" in parts else None
        else:  # G' zj, not zj' G: the faster order (docs/ridge.md); every array in work memory
            sums = np.matmul(G.T, zj, out=work_array("sums", (G.shape[1], zj.shape[1])))
            if "d" in parts:  # the squares: half a statistics task's float64 work
                zz = np.multiply(zj, zj, out=work_array("squares", zj.shape))
                squares = np.matmul(Fc.T, zz, out=work_array("diagonal", (K, zj.shape[1])))
        parts["s"][:, cols] += sums[:K]  # (K + K T, cols): the folds' Z'c, then their Z'CY
        parts["C"][:, cols] += sums[K:].reshape(K, T, -1).transpose(0, 2, 1)
        if "d" in parts:
            parts["d"][:, cols] += squares


def statistics(Z, y, target_fn, n_targets, *, sample_weight=None, weight_args=None, cv=(1, 1, None),
               seed=0, diagonal=True):
    """The statistics pass (:func:`stats_chunk`): its partials per fold of ``cv``
    (:func:`rfstream.solvers.folds.check_cv`'s ``(n_folds, scored, folds)``), checked;
    ``diagonal``: with ``d`` (:func:`stats_layout`)."""
    n_folds, _, folds = cv
    layout = stats_layout(Z.shape[1], n_targets, n_folds, diagonal)
    spec = RowSpec(layout=layout, targets=target_fn, n_folds=n_folds, seed=seed, **weight_fields(weight_args))
    # the products pass applies random Fourier features' constant to its partials: so does this one
    degrees = {name: d for name, d in FEATURE_DEGREES.items() if name in layout.shapes}
    vec = compute(fused_row_sum(stats_chunk, layout.size, Z, spec, degrees, y=y, w=sample_weight, folds=folds))
    st = {k: np.array(v) for k, v in layout.unpack(vec).items()}
    if float(st["m"].sum()) == 0:
        raise ValueError("cannot fit on 0 rows: X is empty.")
    if float(st["n"].sum()) == 0:
        raise ValueError("every row has weight zero (sample_weight times class_weight): nothing "
                         "to fit; give some rows a weight > 0.")
    if not all(np.isfinite(v).all() for v in st.values()):
        raise ValueError("X or y contains NaN or infinity (the reduction is not finite); remove or "
                         "impute them before fitting.")
    return st


#: The products ``Z'(Z V)`` of dense float32 features run in float32 (cheaper than
#: float64, and no float64 copy of each sub-block) while the relative residual is above
#: this (or ``tol``, if larger); one float64 pass then measures the true residual and,
#: where it is above ``tol``, the iterations restart from there in float64.  float32
#: alone stalls short of small tolerances (docs/ridge.md, cg.py).
FLOAT32_UNTIL = 1e-4  # None: float64 products throughout (for comparisons)


@dataclass(frozen=True, eq=False, kw_only=True)
class ProductSpec(RowSpec):
    """A CG product pass's :class:`rfstream.solvers.passes.RowSpec`: the block ``V`` (D, P)
    that ``Z'(C (Z V))`` multiplies; the labels travel only for class weights.  ``held_out``
    (P,): the fold whose rows column j's system leaves out (-1: none; fold indices from
    ``spec.row_folds``), or None when every system takes every row."""

    V: np.ndarray
    held_out: np.ndarray | None = None


def _mask_held_out(zv, rows, offset, spec):
    """Zero ``zv[i, j]`` where row i is in the fold that column j's system leaves out."""
    if spec.held_out is not None:
        zv *= spec.row_folds(zv.shape[0], rows, offset)[:, None] != spec.held_out[None, :]


def product_chunk(z, *rows, offset, spec, out):
    """Adds Z'(Z V) of one block into ``out``; Z'(C (Z V)) when labels with class weights or
    sample weights travel in ``rows`` (:meth:`rfstream.solvers.passes.RowSpec.row_weights`),
    each column without the rows of the fold its system leaves out (``spec.held_out``).
    A float32 ``spec.V``: the products in the features' float32 (dense blocks), summed into
    ``out`` in float64; a float64 one: in float64, a few columns of the
    block converted at a time (:func:`rfstream.solvers.ridge.cg.float64_columns`)."""
    if z.shape[0] == 0:
        return
    V = spec.V
    c = spec.row_weights(rows, offset)
    if not is_numpy(z) and not sp.issparse(z):  # features on a device: the products there
        keep = None
        if spec.held_out is not None:
            keep = spec.row_folds(z.shape[0], rows, offset)[:, None] != spec.held_out[None, :]
        out += device_normal_product(z, V, c, keep)
        return
    if V.dtype == np.float32 and not sp.issparse(z):
        z = np.asarray(z, dtype=np.float32)
        zv = z @ V
        if c is not None:
            zv *= c[:, None]
        _mask_held_out(zv, rows, offset, spec)
        out += (z.T @ zv).ravel()
        return
    # float64 products, the block converted a few columns at a time (float64_columns, as the
    # statistics pass): the same sums, without a float64 copy of the whole dense sub-block
    # (1.6 GB of a 4,096-row sub-block at D = 50,000)
    zv = np.zeros((z.shape[0], V.shape[1]))
    last = None
    for cols, zj in float64_columns(z):
        zv += zj @ V[cols]
        last = cols, zj
    if c is not None:
        zv *= c[:, None]
    _mask_held_out(zv, rows, offset, spec)
    product = out.reshape(z.shape[1], V.shape[1])  # a view: out is one flat partial
    whole = last is not None and last[0] == slice(0, z.shape[1])  # one slice, still in work memory
    for cols, zj in [last] if whole else float64_columns(z):
        # (zv' zj)' rather than zj' zv: the faster order for several columns (docs/ridge.md)
        product[cols] += np.asarray(zj.T @ zv) if sp.issparse(zj) else (zv.T @ zj).T


def _training_sums(v, held_out):
    """Per-fold sums ``v`` (K, ...) -> the training sums (P, ...) of systems that leave out
    the folds ``held_out`` (-1: none): the totals less the held-out fold's."""
    drop = np.where(held_out >= 0, 1.0, 0.0).reshape((-1,) + (1,) * (v.ndim - 1))
    return v.sum(axis=0)[None] - drop * v[np.maximum(held_out, 0)]


@dataclass(frozen=True)
class Systems:
    """P ridge systems ``(Z_c' C Z_c + alpha_j I) w_j = Z_c' C y_j`` that share each pass, one per
    column: column j trains on every row but those of fold ``held_out[j]`` (-1: every row),
    with ``alpha[j]`` and target ``target[j]``.  ``n`` (P,), ``mu`` (D, P), ``nu`` (P,): each
    system's weight sum and column means (zeros without an intercept); ``rhs`` (D, P) its
    right-hand side and ``diag`` (D, P) the diagonal of its matrix (None when the statistics
    pass did not sum it: :meth:`jacobi` needs it)."""

    held_out: np.ndarray
    alpha: np.ndarray
    target: np.ndarray
    n: np.ndarray
    mu: np.ndarray
    nu: np.ndarray
    rhs: np.ndarray
    diag: np.ndarray

    @classmethod
    def from_statistics(cls, st, held_out, alpha, target, fit_intercept):
        """The systems of :func:`rfstream.solvers.ridge.cg.statistics`' partials: a fold's training sums are the totals
        less that fold's."""
        held_out, target = np.asarray(held_out, np.int64), np.asarray(target, np.int64)
        n, s, t = (_training_sums(st[k], held_out) for k in ("n", "s", "t"))
        s = s.T  # (D, P)
        C = st["C"].sum(axis=0)[:, target] - (held_out >= 0) * st["C"][np.maximum(held_out, 0), :, target].T
        t = t[np.arange(target.size), target]
        safe = np.where(n > 0, n, 1.0)
        mu = s / safe if fit_intercept else np.zeros_like(s)
        nu = t / safe if fit_intercept else np.zeros_like(t)
        alpha = np.asarray(alpha, np.float64)
        diag = None  # without the statistics' "d": no Jacobi preconditioner (solver="pcg")
        if "d" in st:
            diag = np.maximum(_training_sums(st["d"], held_out).T - n * mu**2, 0.0) + alpha
            diag[diag <= 0] = 1.0  # alpha = 0 and an empty column: leave that coordinate alone
        return cls(held_out, alpha, target, n, mu, nu, C - n * mu * nu, diag)

    def jacobi(self, R, cols):
        return R / self.diag[:, cols]

    def intercepts(self, W):
        return self.nu - np.sum(self.mu * W, axis=0)


def solve_systems(Z, systems, precondition, *, labels, sample_weight, weight_args, cv=(1, 1, None),
                  seed=0, tol=1e-4, max_iter=200):
    """``(W (D, P), n_iter, residuals (P,))``: preconditioned CG on every column of ``systems``
    at once, one pass per iteration for all of them (docs/ridge.md); ``precondition(R, cols)``
    applies ``P^-1`` to the residuals of the columns ``cols``.  Only the columns not yet
    converged are multiplied: a pass's products shrink as the systems converge."""
    D, P = systems.rhs.shape
    weights = weight_fields(weight_args)
    n_folds, _, folds = cv

    def apply(V, cols, single=False):
        held = systems.held_out[cols]
        product = ProductSpec(layout=Layout(ZV=(D, V.shape[1])), V=V.astype(np.float32) if single else V,
                              held_out=held if np.any(held >= 0) else None, n_folds=n_folds, seed=seed,
                              **weights)
        ZZV = compute(fused_row_sum(product_chunk, product.layout.size, Z, product, {"ZV": 2}, y=labels,
                                    w=sample_weight, folds=folds if product.held_out is not None else None))
        ZZV = ZZV.reshape(D, -1)
        mu, n = systems.mu[:, cols], systems.n[cols]
        return ZZV - mu * (n * np.sum(mu * V, axis=0)) + systems.alpha[cols] * V

    everything = np.arange(P)
    W, R = np.zeros((D, P)), systems.rhs.copy()
    norm_b = np.maximum(np.linalg.norm(R, axis=0), np.finfo(float).tiny)
    res, n_iter = np.linalg.norm(R, axis=0) / norm_b, 0
    single = (FLOAT32_UNTIL is not None and np.dtype(Z.dtype) == np.float32
              and not sp.issparse(getattr(Z, "_meta", Z)))
    Zr = precondition(R, everything)
    Pd, rz = Zr, np.sum(R * Zr, axis=0)
    while n_iter < max_iter:
        goal = max(tol, FLOAT32_UNTIL) if single else tol
        active = np.flatnonzero(res > goal)
        if active.size == 0:
            if not single:
                break
            single = False  # float32 has done its part: the true residual (in float32 only if tol allows it)
            if n_iter > 0:
                R = systems.rhs - apply(W, everything, tol >= FLOAT32_UNTIL)
                n_iter += 1
                res = np.linalg.norm(R, axis=0) / norm_b
                Zr = precondition(R, everything)  # restart from W: the float32 recurrences end here
                Pd, rz = Zr, np.sum(R * Zr, axis=0)
            continue
        AP = apply(Pd[:, active], active, single)
        n_iter += 1
        pap = np.sum(Pd[:, active] * AP, axis=0)
        step = np.where(pap > 0, rz[active] / np.where(pap > 0, pap, 1.0), 0.0)
        W[:, active] += Pd[:, active] * step  # converged columns stay put
        R[:, active] -= AP * step
        Zr = precondition(R[:, active], active)
        rz_new = np.sum(R[:, active] * Zr, axis=0)
        old = rz[active]
        Pd[:, active] = Zr + Pd[:, active] * np.where(old > 0, rz_new / np.where(old > 0, old, 1.0), 0.0)
        rz[active] = rz_new
        res[active] = np.linalg.norm(R[:, active], axis=0) / norm_b[active]
    if np.any(res > tol):
        warnings.warn(f"CG stopped after max_iter={max_iter} passes with a relative residual of "
                      f"{res.max():.2g} (tol={tol}); raise max_iter.", ConvergenceWarning, stacklevel=4)
    return W, n_iter, res


def ridge_cg(Z, y, target_fn, n_targets, *, alpha, fit_intercept=True, tol=1e-4, max_iter=200,
             sample_weight=None, weight_args=None, preconditioner=None):
    """Solve ``min ||C^(1/2) (Y - Z W - 1 b')||^2 + alpha ||W||^2`` by preconditioned CG.

    ``Z`` is a numpy/CSR array or a dask array (dense or CSR blocks), ``y``
    its labels aligned by rows, ``target_fn`` turns a block of labels into
    the (rows, T) targets; the row weights C are ``sample_weight`` (checked,
    aligned with ``Z``: :func:`rfstream.solvers.weights.check_sample_weight`) times
    the class weights in ``weight_args`` (``classes``, ``class_weight``), or 1.
    ``preconditioner``: None for Jacobi (``diag(A)``), or ``make(mu, n_rows)`` returning
    a :class:`rfstream.solvers.ridge.nystrom_pcg.NystromPreconditioner`, called once after the
    first pass.
    Returns ``(W (D, T), b (T,), stats)`` with ``stats`` holding ``n`` (the weight
    sum), ``m`` (rows), ``n_iter`` (passes after the first) and the final relative
    residuals.
    """
    st = statistics(Z, y, target_fn, n_targets, sample_weight=sample_weight, weight_args=weight_args,
                    diagonal=preconditioner is None)
    T = n_targets
    systems = Systems.from_statistics(st, np.full(T, -1), np.full(T, float(alpha)), np.arange(T), fit_intercept)
    precondition = systems.jacobi
    if preconditioner is not None:
        precondition = preconditioner(systems.mu[:, 0], int(st["m"].sum())).columns(systems.alpha, np.ones(T))
    labels = y if weight_fields(weight_args)["class_weight"] is not None else None  # only class weights read them
    W, n_iter, res = solve_systems(Z, systems, precondition, labels=labels, sample_weight=sample_weight,
                                   weight_args=weight_args, tol=tol, max_iter=max_iter)
    return W, systems.intercepts(W), {"n": float(st["n"].sum()), "m": float(st["m"].sum()), "n_iter": n_iter,
                                      "residual": res}


def check_iterative_search(estimator, grid=False):
    """Refuse, before any pass, what the iterations of a ridge ``estimator`` whose ``solver``
    is "cg" or "pcg" cannot search: a gamma grid (``grid``) and exact leave-one-out (both need
    the Gram pass).  A list of alphas is searched by k-fold CV (:mod:`rfstream.solvers.ridge.cg_search`)."""
    if estimator.solver not in ("cg", "pcg"):
        return
    if grid:
        raise ParameterError("{solver=} takes a single gamma (a gamma grid is searched from the Gram pass's "
                             "per-gamma partials); pass one gamma, or {solver='gram'}.", solver=estimator.solver)
    if np.ndim(estimator.alpha) > 0 and isinstance(estimator.cv, str):
        raise ParameterError("{solver=} searches a list of alphas by k-fold cross-validation; {cv=} needs "
                             "the Gram (its inverse). Pass an int cv, or {solver='gram'}.", solver=estimator.solver,
                             cv=estimator.cv)


def nystrom_factory(estimator, Z, y, alpha, n_targets, *, sample_weight=None, weight_args=None, columns=1):
    """For ``solver="pcg"``: ``make(mu, n_rows)`` building the
    :class:`rfstream.solvers.ridge.nystrom_pcg.NystromPreconditioner` of rank ``pcg_rank`` (its
    rows drawn with ``random_state``) after the statistics pass, its client memory checked
    for ``columns`` systems per target first; None for "cg" (Jacobi)."""
    if estimator.solver != "pcg":
        return None
    rank = min(estimator.pcg_rank, Z.shape[1])
    check_pcg_memory(Z.shape[1], rank, n_targets * columns)

    def make(mu, n_rows):
        return NystromPreconditioner.from_rows(
            Z, y, alpha=alpha, mu=mu, n_rows=n_rows, m=ROWS_PER_RANK * rank, rank=rank,
            seed=check_seed(estimator.random_state), sample_weight=sample_weight, weight_args=weight_args)

    return make


def fit_iterative(estimator, Z, y, target_fn, n_targets, alphas, groups, *, sample_weight=None,
                  weight_args=None):
    """:func:`ridge_cg` with a ridge estimator's parameters: ``solver`` "cg" (Jacobi) or
    "pcg" (:func:`nystrom_factory`); one alpha and one gamma (a list of alphas:
    :func:`rfstream.solvers.ridge.cg_search.cg_cross_validate`).

    Returns :func:`ridge_cg`'s ``(W, b, stats)``.
    """
    check_iterative_search(estimator, grid=groups.gammas is not None)
    check_cg_memory(estimator.solver, Z.shape[1], n_targets)
    alpha = float(alphas[0])
    preconditioner = nystrom_factory(estimator, Z, y, alpha, n_targets, sample_weight=sample_weight,
                                     weight_args=weight_args)
    return ridge_cg(Z, y, target_fn, n_targets, alpha=alpha, fit_intercept=estimator.fit_intercept,
                    tol=estimator.tol, max_iter=estimator.max_iter, sample_weight=sample_weight,
                    weight_args=weight_args, preconditioner=preconditioner)

"""The statistics pass of conjugate gradients, and the float64 slices of dense sub-blocks.

:func:`stats_chunk` sums, per CV fold (one fold without a search), what the
iterations of :mod:`rfstream.solvers.cg` start from: the weight sum, the column
sums ``Z'c``, the diagonal of ``Z'CZ`` (the Jacobi preconditioner), ``Y'c``,
``Z'CY`` (the right-hand sides) and ``sum c ||y||^2``.  They are sums of float64
products, exact whatever the features' float32: a dense sub-block is converted to
float64 a slice of columns at a time (:func:`float64_columns`), into work memory
each thread reuses (:func:`work_array`), never as a float64 copy of the whole
sub-block (3.2 GiB at 4,096 rows and D = 50,000; docs/wide.md).  The float64
product pass of :func:`rfstream.solvers.cg.product_chunk` converts its sub-blocks
the same way.
"""
from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

from ..cluster import compute
from ..reductions import Layout
from .passes import RowSpec, fused_row_sum, weight_fields


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
    ``STATS_ROWS x STATS_COLUMNS x 8`` bytes (32 MiB) each.  A fresh array per sub-block is
    mapped from the kernel and faulted in page by page in a worker whose allocator keeps large
    arrays out of its heap (distributed's default, ``MALLOC_TRIM_THRESHOLD_``): 10.2 ms for the
    statistics of 40 rows at D = 50,000, against 3.7 ms with the arrays reused (docs/wide.md)."""
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
    for cols, zj in float64_columns(z):
        if sp.issparse(zj):
            sums = np.asarray(zj.T @ G).T
            squares = np.asarray(zj.multiply(zj).T @ Fc).T if "d" in parts else None
        else:  # G' zj, not zj' G: 2.5x faster at 40 x 50,000; every array in work memory
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

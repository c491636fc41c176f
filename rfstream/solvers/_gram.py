"""One pass over (Z, Y) that gathers everything ridge needs, per CV fold.

For each fold k the chunk function accumulates, in float64,

    n_k, s_k = Z_k' 1, t_k = Y_k' 1, G_k = Z_k' Z_k, C_k = Z_k' Y_k, B_k = Y_k' Y_k.

Sums over folds give the full-data statistics, and "all folds but k" gives
the training statistics of fold k; the held-out squared error of any weight
matrix follows from fold k's own statistics.  So the whole alpha path and
K-fold cross-validation cost a single pass over the data.

Fold membership of a row is a function of (seed, global row index) only
(:func:`rfstream.random.row_integers`), so the result does not depend on the
chunking.  Inside a block the Gram is accumulated over sub-blocks of
:data:`SUB_BLOCK` rows in the features' dtype (numpy sends ``z.T @ z`` to
BLAS SYRK, which does half the flops of a GEMM) and the results are added in
float64: BLAS speed, with the float32 rounding confined to sums of at most
SUB_BLOCK products.  Measured on 65,536 x 2000 float32 features: scipy's
``ssyrk`` on 4096-row sub-blocks 1.25 s, numpy 4096 rows 0.97 s, numpy 8192
rows about 0.9 s (see docs/benchmarks.md).
"""
from __future__ import annotations

import numpy as np

from ..random import STREAM_FOLDS, row_integers
from ..reductions import Layout

SUB_BLOCK = 8192


def gram_layout(n_features: int, n_targets: int, n_folds: int) -> Layout:
    D, T, K = n_features, n_targets, n_folds
    return Layout(n=(K,), s=(K, D), t=(K, T), G=(K, D, D), C=(K, D, T), B=(K, T, T))


def gram_chunk(z, y, *, offset, n_folds, seed, target_fn, layout):
    """Partials of one row block; ``target_fn`` turns raw labels into Y (m x T)."""
    out = layout.empty()
    if z.shape[0] == 0:
        return out
    Y = target_fn(y)
    z = np.ascontiguousarray(z if z.dtype in (np.float32, np.float64) else z.astype(np.float64))
    parts = layout.unpack(out)
    if n_folds > 1:
        folds = row_integers(seed, STREAM_FOLDS, offset, offset + z.shape[0], n_folds)
    else:
        folds = np.zeros(z.shape[0], dtype=np.int64)
    for k in range(n_folds):
        rows = np.flatnonzero(folds == k) if n_folds > 1 else slice(None)
        zk, yk = z[rows], Y[rows]
        parts["n"][k] = zk.shape[0]
        parts["s"][k] = zk.sum(axis=0, dtype=np.float64)
        parts["t"][k] = yk.sum(axis=0)
        parts["B"][k] = yk.T @ yk
        yk_z = yk.astype(z.dtype)
        for start in range(0, zk.shape[0], SUB_BLOCK):
            zs = zk[start : start + SUB_BLOCK]
            parts["G"][k] += zs.T @ zs
            parts["C"][k] += zs.T @ yk_z[start : start + SUB_BLOCK]
    return out

"""The Gram pass: n, Z'1, Y'1, Z'Z, Z'Y and Y'Y per CV fold, in one pass over the rows.

Sums over folds give the full-data statistics and "all folds but k" fold k's training ones,
so the alpha path and K-fold CV cost one pass.  Folds come from (seed, row index); sub-blocks
of :data:`SUB_BLOCK` rows are summed by SYRK in the features' dtype and added in float64;
row weights scale the rows by ``sqrt(c_i)``.  A gamma grid runs the chunk function once per
gamma on features made from the same rows (:class:`FeatureGroups`), and a list of
``n_components`` slices the largest map's Gram (:func:`expand_sizes`).  docs/ridge.md.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ...devices import CPU_FIX, DeviceError, current_precision, is_numpy
from ...features.components import prefix_block
from ...features.fused import (
    even_sub_blocks,
    feature_sub_blocks,
    fused_buffer,
    unscaled_block,
    whole_rows,
)
from ...features.source import feature_source, fused_rows
from ...io.checkpoints import stored_nbytes
from ...reductions import Layout, even_rows
from .on_device import device_gram_chunk

SUB_BLOCK = 8192


def gram_layout(n_features: int, n_targets: int, n_folds: int) -> Layout:
    D, T, K = n_features, n_targets, n_folds
    return Layout(n=(K,), m=(K,), s=(K, D), t=(K, T), G=(K, D, D), C=(K, D, T), B=(K, T, T))


def symmetric_spans(layout: Layout, n_groups: int) -> list:
    """``(offset, count, size)`` of the symmetric partials (each fold's ``Z'Z`` and ``Y'Y``)
    in the Gram pass's flat vector of ``n_groups`` layouts: what travels through the reduction
    tree as triangles over several blocks (:func:`rfstream.reductions.sum_rows`, ``symmetric=``)
    and what a checkpoint stores packed (:func:`rfstream.io.pass_encoding.symmetric_blocks`)."""
    return [span for g in range(n_groups) for span in layout.square_spans("G", "B", base=g * layout.size)]


def checkpoint_nbytes(n_groups: int, n_folds: int, n_features: int, n_targets: int) -> int:
    """An upper bound on the bytes the Gram pass's result takes in a checkpoint
    (:func:`rfstream.io.checkpoints.stored_nbytes`), packed triangles counted."""
    layout = gram_layout(n_features, n_targets, n_folds)
    return stored_nbytes([((n_groups * layout.size,), np.float64, symmetric_spans(layout, n_groups))])


def gram_chunk(z, *rows, offset, spec, out=None):
    """Partials of one row block: ``rows`` are the block's labels, then its sample
    weights and its fold indices when they travel (:class:`rfstream.solvers.passes.RowSpec`:
    ``spec.columns``; explicit CV splits give the folds, else a row's fold comes from
    (seed, row index)); ``spec.targets`` turns raw labels into Y (m x T).  With
    ``spec.features`` (a feature map's block function,
    :func:`rfstream.features.source.fused_rows`, whose blocks are of ``spec.dtype``)
    ``z`` holds the input rows and the features are computed here (:func:`_fused_fold`).
    """
    if not is_numpy(z):  # rows on a device: the same partials, made there
        return device_gram_chunk(z, *rows, offset=offset, spec=spec, label_sums=_label_sums, sub_block=SUB_BLOCK)
    layout, n_folds = spec.layout, spec.n_folds
    out = layout.empty() if out is None else out
    if z.shape[0] == 0:
        return out
    Y = spec.targets(spec.take(rows)["y"])
    c = spec.row_weights(rows, offset)
    folds = spec.row_folds(z.shape[0], rows, offset)
    if spec.features is None:
        if sp.issparse(z):
            return _sparse_gram_chunk(sp.csr_matrix(z, dtype=np.float64), Y, c, out, layout, folds)
        z = np.ascontiguousarray(z if z.dtype in (np.float32, np.float64) else z.astype(np.float64))
    parts = layout.unpack(out)
    buffers = {}  # reused by every sub-block and fold of the chunk
    features, scale = unscaled_block(spec.features)
    split = whole_rows(spec.features)  # (projection, ufunc) of random Fourier features, else None
    every = n_folds == 1 and "folds" not in spec.columns
    for k in range(n_folds):
        rows_k = slice(None) if every else np.flatnonzero(folds == k)
        zk, yk = z[rows_k], Y[rows_k]
        root = None if c is None else np.sqrt(c[rows_k])
        _label_sums(parts, k, yk, None if c is None else c[rows_k])
        fold = {name: parts[name][k] for name in ("G", "C", "s")}  # views, added to in place
        if spec.features is None:
            _stored_fold(zk, yk, fold, buffers, root)
        else:
            _fused_fold(zk, yk, fold, buffers, features, np.dtype(spec.dtype), root, split)
    if scale != 1.0:  # the features were made without their constant factor
        layout.scale_parts(out, scale, G=2, C=1, s=1)
    return out


def _label_sums(parts, k, Y, c):
    """Fold k's row count m, weight sum n, Y'c and Y'CY, exactly in float64."""
    parts["m"][k] = Y.shape[0]
    if c is None:
        parts["n"][k] = Y.shape[0]
        parts["t"][k] = Y.sum(axis=0)
        parts["B"][k] = Y.T @ Y
    else:
        parts["n"][k] = c.sum()
        parts["t"][k] = c @ Y
        parts["B"][k] = Y.T @ (c[:, None] * Y)


def _stored_fold(z, Y, fold, buffers, root=None):
    """G, C and s of one fold of stored features ``z``, a SYRK per sub-block.

    ``Z'Y`` and the column sums ``Z'1`` come from one GEMM against ``[Y, 1]``;
    with row weights, rows (and ``[Y, 1]``) are scaled by ``root = sqrt(c)`` first.
    """
    y1 = np.ones((z.shape[0], Y.shape[1] + 1), dtype=z.dtype)
    y1[:, :-1] = Y
    if root is not None:
        y1 *= root.astype(z.dtype)[:, None]
    for start, stop in even_sub_blocks(z.shape[0], SUB_BLOCK):
        zs = z[start:stop]
        if root is not None:
            zs = zs * root[start:stop].astype(z.dtype)[:, None]
        if "G" not in buffers:
            buffers["G"] = np.empty((zs.shape[1], zs.shape[1]), dtype=zs.dtype)
        fold["G"] += np.matmul(zs.T, zs, out=buffers["G"])
        zy = zs.T @ y1[start:stop]
        fold["C"] += zy[:, :-1]
        fold["s"] += zy[:, -1]


def _fused_fold(x, Y, fold, buffers, features, dtype, root=None, split=None):
    """G, C and s of one fold when the task computes the features of its rows ``x``.

    Sub-blocks of at most :data:`SUB_BLOCK` rows go into the first D columns of one reused
    buffer ``[Z_s, Y_s, 1]`` (``[r Z_s, r Y_s, r]``, ``r = root = sqrt(c)``, with row weights),
    whose one SYRK gives ``Z_s'Z_s``, ``Z_s'Y_s`` and ``Z_s'1``; ``Y'Y``, ``Y'1`` and the count
    stay exact in float64.  ``features`` may be unscaled
    (:func:`rfstream.features.fused.unscaled_block`: :func:`gram_chunk` scales the partials);
    ``split``: the map's parts (:func:`rfstream.features.fused.whole_rows`).  docs/ridge.md.
    """
    D, T = fold["G"].shape[0], Y.shape[1]
    width = D + T + 1
    needed = fused_buffer(x.shape[0], 0, dtype, SUB_BLOCK).shape[0]
    if buffers.get("Z") is None or buffers["Z"].shape[0] < needed:
        buffers["Z"] = fused_buffer(x.shape[0], width, dtype, SUB_BLOCK)
        buffers["G"] = np.empty((width, width), dtype=dtype)
    zbuf, gbuf = buffers["Z"], buffers["G"]
    project, ufunc = split if split is not None else (features, None)
    for start, stop, _ in feature_sub_blocks(x, project, zbuf[:, :D], SUB_BLOCK):
        zs = zbuf[: stop - start]
        if ufunc is not None:
            zs[:, D:] = 0.0  # the last sub-block's [Y, 1], or a new buffer's garbage: finite for the ufunc
            ufunc(zs, out=zs)
        zs[:, D:-1] = Y[start:stop]
        zs[:, -1] = 1.0
        if root is not None:
            zs *= root[start:stop].astype(dtype)[:, None]
        g = np.matmul(zs.T, zs, out=gbuf)
        fold["G"] += g[:D, :D]
        fold["C"] += g[:D, D:-1]
        fold["s"] += g[:D, -1]


def _sparse_gram_chunk(z, Y, c, out, layout, folds):
    """The same partials for a CSR block (random binning, hybrid features), in float64;
    row weights ``c`` (or None) scale the rows by ``sqrt(c)``.  Columns non-zero in more
    than a quarter of a sub-block's rows are densified for BLAS, the rest scattered:
    ``O(dense**2 + q * dense + q**2)`` per row, never ``O(D**2)`` (docs/ridge.md)."""
    parts = layout.unpack(out)
    all_cols = np.arange(z.shape[1])
    for k in range(parts["n"].shape[0]):
        rows = np.flatnonzero(folds == k)
        yk = Y[rows]
        _label_sums(parts, k, yk, None if c is None else c[rows])
        G = parts["G"][k]
        for start in range(0, rows.size, SUB_BLOCK):
            zs, ys = z[rows[start : start + SUB_BLOCK]], yk[start : start + SUB_BLOCK]
            if c is None:
                parts["s"][k] += np.asarray(zs.sum(axis=0)).ravel()
            else:
                root = np.sqrt(c[rows[start : start + SUB_BLOCK]])
                zs, ys = zs.copy(), ys * root[:, None]
                zs.data *= np.repeat(root, np.diff(zs.indptr))
                parts["s"][k] += np.asarray(zs.T @ root).ravel()
            parts["C"][k] += zs.T @ ys
            is_dense = np.bincount(zs.indices, minlength=z.shape[1]) > zs.shape[0] // 4
            dense, rest = all_cols[is_dense], all_cols[~is_dense]
            if dense.size:
                zd, zs = zs[:, dense].toarray(), zs[:, rest]
                G[np.ix_(dense, dense)] += zd.T @ zd
                cross = np.asarray(zs.T @ zd)
                G[np.ix_(rest, dense)] += cross
                G[np.ix_(dense, rest)] += cross.T
            g = zs.T @ zs
            if not dense.size:
                G += g.toarray()  # a dense add beats a scatter (docs/BENCHMARKS.md)
                continue
            g = g.tocoo()  # canonical: no repeated (row, col)
            G[rest[g.row], rest[g.col]] += g.data
    return out


class FeatureGroups(NamedTuple):
    """What a pass over ``Z`` reduces over, and how each task makes the features.

    Attributes
    ----------
    rows : array
        The rows the pass reduces over: the input rows for fused features or a
        grid, else ``Z`` itself.
    blocks : tuple of (callable or None, bool)
        Per group, the block function (None: ``rows`` are the features) and
        whether it is applied to a task's rows whole (CSR output) instead of a
        sub-block at a time.
    dtype : numpy dtype of the features
    gammas : ndarray of shape (G,) or None (no grid)
    labels : tuple of str (the grid items as given) or None
    select : callable ``(index)`` that fixes the map's gamma (and size), or None
    sizes : ndarray of shape (n_groups,) or None
        The number of features of each group, for a map fitted with a list of
        ``n_components`` (:mod:`rfstream.solvers.ridge.gram`).
    """

    rows: object
    blocks: tuple
    dtype: np.dtype
    gammas: np.ndarray | None = None
    labels: tuple | None = None
    select: object = None
    sizes: np.ndarray | None = None

    @property
    def n_groups(self):
        return len(self.blocks)


def feature_groups(Z):
    """The :class:`FeatureGroups` of a pass over ``Z``: one per gamma of a grid, else one."""
    source = feature_source(Z)
    grid = None if source is None else source.grid
    if grid is None:
        features, rows = fused_rows(Z)
        return FeatureGroups(rows, ((features, False),), np.dtype(Z.dtype))
    blocks = tuple((block, grid.sparse) for block in grid.blocks)
    return FeatureGroups(even_rows(source.rows), blocks, np.dtype(Z.dtype), np.asarray(grid.gammas),
                         tuple(grid.labels), grid.select)


@dataclass(frozen=True, eq=False)
class GroupSpec:
    """The spec of :func:`group_chunk`: a pass's ``chunk`` and, per group, its block
    function and whether it runs whole (``blocks``, :class:`FeatureGroups`), and the
    :class:`rfstream.solvers.passes.RowSpec` that ``chunk`` runs with (``specs``)."""

    chunk: Callable
    blocks: tuple
    specs: tuple

    def for_rows(self, **arrays):
        """Every group's spec with ``columns`` naming the ``arrays`` that are not None."""
        return replace(self, specs=tuple(spec.for_rows(**arrays) for spec in self.specs))


def group_spec(chunk, groups, spec, models=None):
    """The :class:`GroupSpec` of a pass of ``chunk`` over ``groups``: ``spec`` with each
    group's block function as ``features`` (None for CSR blocks, made whole by
    :func:`group_chunk`), the features' dtype, and ``models[g]`` (the fields of that
    gamma's models, e.g. the scoring pass's weights) when given."""
    specs = tuple(replace(spec, features=None if whole else block, dtype=groups.dtype, precision=current_precision(),
                          **(models[g] if models is not None else {}))
                  for g, (block, whole) in enumerate(groups.blocks))
    return GroupSpec(chunk, groups.blocks, specs)


def group_chunk(x, *rows, offset, spec):
    """The partials of every group of one row block, end to end: group g runs the pass's
    chunk function ``spec.chunk`` with ``spec.specs[g]`` (dense features made inside the
    chunk), or on its CSR features made here, into its part of one output vector (``out=``:
    one allocation of the block's partials, not one per group and their concatenation)."""
    if not is_numpy(x) and any(whole for _, whole in spec.blocks):
        raise DeviceError("sparse features do not run on a device; " f"{CPU_FIX}.", device="cuda")
    sizes = [group.layout.size for group in spec.specs]
    out = np.zeros(sum(sizes))
    for (block, whole), group, stop, size in zip(spec.blocks, spec.specs, np.cumsum(sizes), sizes):
        view = out[stop - size:stop]
        part = spec.chunk(block(x) if whole else x, *rows, offset=offset, spec=group, out=view)
        if part is not view:  # a chunk that made its own vector (rows on a device)
            view[:] = part
    return out


def slice_statistics(stats, columns, scale):
    """The partials (fold axis first) of the map of ``columns`` times ``scale``."""
    index = np.asarray(columns)
    out = dict(stats)
    out["G"] = stats["G"][:, index[:, None], index[None, :]] * scale ** 2
    out["C"] = stats["C"][:, index, :] * scale
    out["s"] = stats["s"][:, index] * scale
    return out


def expand_sizes(groups, stats, source):
    """``(groups, stats)`` with one group per (gamma, size), gamma by gamma, then size.

    ``groups``/``stats``: the Gram pass's :class:`rfstream.solvers.ridge.gram.FeatureGroups`
    and partials at the largest size; ``source``: the map's
    :class:`rfstream.features.source.PrefixSizes`.  The new groups' ``select(i)``
    fixes the gamma (with a grid) and the size of candidate group ``i``.
    """
    n_sizes = len(source.sizes)
    blocks, sliced = [], []
    for g, ((block, whole), part) in enumerate(zip(groups.blocks, stats)):
        largest = source.block if groups.gammas is None else block
        for columns, scale in zip(source.columns, source.scales):
            blocks.append((partial(prefix_block, block=largest, columns=columns, scale=scale), whole))
            sliced.append(slice_statistics(part, columns, scale))

    def select(index):
        g, s = divmod(int(index), n_sizes)
        if groups.select is not None:
            groups.select(g)
        source.select(source.sizes[s])

    repeat = (lambda values: None if values is None else np.repeat(np.asarray(values), n_sizes))
    labels = None if groups.labels is None else tuple(label for label in groups.labels for _ in source.sizes)
    expanded = FeatureGroups(groups.rows, tuple(blocks), groups.dtype, repeat(groups.gammas), labels, select,
                             np.tile(np.asarray(source.sizes), groups.n_groups))
    return expanded, sliced

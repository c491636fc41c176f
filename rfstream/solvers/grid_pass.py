"""One pass over many feature groups: every gamma of a bandwidth grid from one read of the rows.

A ridge pass (the Gram pass, the scoring pass) is a sum over row blocks of a
chunk function of the block's features.  For a map fitted with a gamma grid
(:mod:`rfstream.features.grid`) the features of each gamma come from the same
input rows, so each task reads its rows once and runs the chunk function once
per gamma, on the features of that gamma made inside the task (a sub-block at a
time for dense maps, whole for random binning's CSR blocks); the partials of
the G groups are laid end to end in one vector and reduced together.  G
bandwidths cost one read of the data and G feature and Gram computations.
Without a grid there is one group: the features of ``Z`` as every pass makes
them (:func:`rfstream.features.fused.fused_rows`).

The Gram pass keeps one D x D partial per fold and gamma in every task's
output: G x K x D^2 float64.  :func:`check_grid_memory` refuses, before any
pass, partials that would not fit a worker.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..cluster import worker_memory
from ..features.fused import fused_rows
from ..features.grid import grid_source
from ..reductions import even_rows


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
    select : callable ``(index)`` that fixes the map's gamma, or None
    """

    rows: object
    blocks: tuple
    dtype: np.dtype
    gammas: np.ndarray | None = None
    labels: tuple | None = None
    select: object = None

    @property
    def n_groups(self):
        return len(self.blocks)


def feature_groups(Z):
    """The :class:`FeatureGroups` of a pass over ``Z``: one per gamma of a grid, else one."""
    grid = grid_source(Z)
    if grid is None:
        features, rows = fused_rows(Z)
        return FeatureGroups(rows, ((features, False),), np.dtype(Z.dtype))
    blocks = tuple((block, grid.sparse) for block in grid.blocks)
    return FeatureGroups(even_rows(grid.rows), blocks, np.dtype(Z.dtype), np.asarray(grid.gammas),
                         tuple(grid.labels), grid.select)


def group_chunk(x, *others, offset, chunk, blocks, group_kwargs=None, **kwargs):
    """The partials of every group of one row block, end to end.

    ``chunk(z, *others, offset=, features=, **kwargs)`` is a pass's chunk function
    (:func:`rfstream.solvers.gram.gram_chunk`, :func:`rfstream.solvers.cv_scores.score_chunk`);
    group g runs it with its block function as ``features`` (made a sub-block at a
    time inside ``chunk``), or on its CSR features made here, plus ``group_kwargs[g]``
    (the weights of that gamma's models, for scoring).
    """
    parts = []
    for g, (block, whole) in enumerate(blocks):
        extra = group_kwargs[g] if group_kwargs is not None else {}
        if whole:
            parts.append(chunk(block(x), *others, offset=offset, features=None, **kwargs, **extra))
        else:
            parts.append(chunk(x, *others, offset=offset, features=block, **kwargs, **extra))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def gram_memory(n_groups, n_folds, n_features, n_targets):
    """``(need, limit, threads, partial)``: the bytes a worker needs for the Gram pass's
    partials (G x K x D^2 float64 each; about ``threads + 2`` of them at once: one per
    running task plus the two being added in the tree reduction), the smallest worker's
    memory limit and threads (:func:`rfstream.cluster.worker_memory`), and one partial's bytes."""
    G, K, D, T = n_groups, n_folds, n_features, n_targets
    partial = 8 * G * K * (D * D + D * (T + 1) + T * T + 2)
    limit, threads = worker_memory()
    return partial * (threads + 2), limit, threads, partial


def client_memory(n_groups, n_folds, n_features, n_targets):
    """``(need, limit)``: the client's bytes for the solve (the reduced partials, plus for
    K folds a fold's training Gram, its centred copy, its eigenvectors and LAPACK's
    workspace, 4 D^2; for leave-one-out the eigenvectors of every gamma and one D^2 more,
    :func:`rfstream.solvers.loo.loo_basis`) and 80% of this machine's memory (docs/wide.md
    compares it with measured peaks)."""
    import psutil

    D = n_features
    extra = 8 * D * D * (4 if n_folds > 1 else n_groups + 1)
    return gram_memory(n_groups, n_folds, n_features, n_targets)[3] + extra, int(
        0.8 * psutil.virtual_memory().total)


def gram_fits(n_groups, n_folds, n_features, n_targets):
    """Whether the Gram pass's partials fit the workers and the solve the client."""
    need, limit, _, _ = gram_memory(n_groups, n_folds, n_features, n_targets)
    client, client_limit = client_memory(n_groups, n_folds, n_features, n_targets)
    return need <= limit and client <= client_limit


def check_grid_memory(n_groups, n_folds, n_features, n_targets):
    """Refuse, before any pass, a Gram pass whose partials cannot fit a worker or whose
    solve cannot fit the client (:func:`gram_memory`, :func:`client_memory`), naming the
    sizes and what to lower."""
    if gram_fits(n_groups, n_folds, n_features, n_targets):
        return
    need, limit, threads, partial = gram_memory(n_groups, n_folds, n_features, n_targets)
    client, client_limit = client_memory(n_groups, n_folds, n_features, n_targets)
    G, K, D = n_groups, n_folds, n_features
    grid = f"{G} gammas x " if G > 1 else ""
    lower = "the number of gammas, cv or n_components" if G > 1 else "cv or n_components"
    where = (f"about {need / 2**30:.1f} GiB per worker with {threads} threads, over its "
             f"{limit / 2**30:.1f} GiB" if need > limit else
             f"and the client's solve {client / 2**30:.1f} GiB, over its {client_limit / 2**30:.1f} GiB")
    raise ValueError(
        f"the Gram pass needs {grid}{K} fold(s) x D^2 (D={D}) float64 partials: "
        f"{partial / 2**30:.2f} GiB per task, {where}; lower {lower}"
        + (", or use cv='loo' (one Gram)" if K > 1 and gram_fits(G, 1, D, n_targets) else "")
        + (", or use solver='pcg' with one alpha, whose memory is D x pcg_rank" if G == 1 else "")
        + " (or machines with more memory)."
    )

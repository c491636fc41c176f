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
output: G x K x D^2 float64.  :func:`rfstream.solvers.memory.check_gram_memory`
refuses, before any pass, partials that would not fit a worker.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

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
    select : callable ``(index)`` that fixes the map's gamma (and size), or None
    sizes : ndarray of shape (n_groups,) or None
        The number of features of each group, for a map fitted with a list of
        ``n_components`` (:mod:`rfstream.solvers.size_search`).
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
    grid = grid_source(Z)
    if grid is None:
        features, rows = fused_rows(Z)
        return FeatureGroups(rows, ((features, False),), np.dtype(Z.dtype))
    blocks = tuple((block, grid.sparse) for block in grid.blocks)
    return FeatureGroups(even_rows(grid.rows), blocks, np.dtype(Z.dtype), np.asarray(grid.gammas),
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
    specs = tuple(replace(spec, features=None if whole else block, dtype=groups.dtype,
                          **(models[g] if models is not None else {}))
                  for g, (block, whole) in enumerate(groups.blocks))
    return GroupSpec(chunk, groups.blocks, specs)


def group_chunk(x, *rows, offset, spec):
    """The partials of every group of one row block, end to end.

    ``spec.chunk(z, *rows, offset=, spec=)`` is a pass's chunk function
    (:func:`rfstream.solvers.gram.gram_chunk`, :func:`rfstream.solvers.cv_scores.score_chunk`,
    :func:`rfstream.solvers.loo.loo_chunk`); group g runs it with ``spec.specs[g]``, whose
    ``features`` are the group's block function (made a sub-block at a time inside the
    chunk), or on its CSR features made here.
    """
    parts = []
    for (block, whole), group in zip(spec.blocks, spec.specs):
        parts.append(spec.chunk(block(x) if whole else x, *rows, offset=offset, spec=group))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)

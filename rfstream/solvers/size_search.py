"""Every listed number of features from one Gram pass: leading blocks of the largest Gram.

A map fitted with a list of ``n_components`` draws the largest map; the map of a
smaller size n is its columns ``prefix_columns(n)`` times ``c = prefix_scale(n)``
(:mod:`rfstream.features.components`, :mod:`rfstream.features.prefix`).  So the
statistics of size n are slices of those of the largest map:

    G_n = c^2 G[P, P],   C_n = c C[P, :],   s_n = c s[P],   (t, B, n unchanged),

per fold and per gamma of a grid, with no further pass.  Each (gamma, size) becomes
one candidate group of the search (:mod:`rfstream.solvers.ridge_search`): the
evidence and the cross-validated squared error read only these statistics; a
classifier's scoring pass, the leave-one-out pass and the calibration pass make a
group's features from the largest map's block, sliced and scaled
(:func:`rfstream.features.components.prefix_block`): one read of the rows for every
size.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..features.components import prefix_block
from .grid_pass import FeatureGroups


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

    ``groups``/``stats``: the Gram pass's :class:`rfstream.solvers.grid_pass.FeatureGroups`
    and partials at the largest size; ``source``: the map's
    :class:`rfstream.features.components.SizesSource`.  The new groups' ``select(i)``
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

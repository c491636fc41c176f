"""The one record a pass reads from a feature map's dask output: its :class:`FeatureSource`.

``Z = fmap.transform(X)`` on dask input carries where it came from: the map's block
function and ``X`` (so that a pass makes the features inside its own tasks,
:mod:`rfstream.features.fused`), and, while a solver still has to choose, the map's
gamma grid (:mod:`rfstream.features.grid`) and its list of sizes
(:mod:`rfstream.features.components`).  Only the very array ``transform`` returned
has one; anything derived from it has none and is reduced over its stored blocks, as
is a numpy ``Z``.  Narrative: docs/rff.md.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import dask.array as da
import numpy as np

from ..reductions import even_rows

_ATTRIBUTE = "_rfstream_features"
#: The graph-layer name prefix of the stacked features of a gamma grid: an array made from
#: them (``rechunk``, ``astype``, a slice) keeps that layer in its graph, so a pass can tell
#: it from plain features.
GRID_LAYER = "rfstream-gamma-grid-"


class GammaGrid(NamedTuple):
    """The gammas of a map fitted with a gamma grid, whose stacked features ``Z`` holds.

    Attributes
    ----------
    blocks : tuple of callables ``(x, out=None) -> features``
        The block function of each gamma's map (pure numpy, picklable).
    sparse : bool
        Whether the blocks are CSR matrices (random binning): a pass makes each
        task's features whole, not a sub-block at a time.
    gammas : ndarray of shape (G,)
    labels : tuple of str
        The grid items as given (``auto*0.5``), for tables and reports.
    select : callable ``(index) -> None``
        Makes the map the ordinary map of ``gammas[index]``.
    """

    blocks: tuple
    sparse: bool
    gammas: np.ndarray
    labels: tuple
    select: Callable


class PrefixSizes(NamedTuple):
    """The sizes of a map fitted with a list of ``n_components``, all in its largest map.

    Attributes
    ----------
    sizes : tuple of int
    columns : tuple of int ndarrays, the map's columns that make each size (``prefix_columns``)
    scales : tuple of float, ``prefix_scale`` of each size
    select : callable ``(size) -> None``, makes the map the ordinary map of that size
    block : callable ``(x, out=None)``, the largest map's block function, of a copy that
        the selection leaves as it is
    """

    sizes: tuple
    columns: tuple
    scales: tuple
    select: Callable
    block: Callable


@dataclass(frozen=True)
class FeatureSource:
    """Where a dask feature array came from: ``Z = map.transform(rows)``.

    Attributes
    ----------
    block : callable ``(x, out=None) -> ndarray``, or None
        The map's block function (``FeatureMap._fused_block()``, often a
        :class:`rfstream.features.fused.ScaledBlock`): the features of input rows ``x``,
        written into ``out`` where the map can.  Pure numpy and picklable: it runs inside
        the pass's tasks.  None when a pass cannot make ``Z``'s columns from it (sparse
        features, or a grid's stacked features).
    rows : dask array of shape (n_samples, n_features_in)
        The input rows, with the row chunks of ``Z``.
    grid : :class:`GammaGrid` or None
        The gamma grid whose stacked features ``Z`` is, until a solver chooses.
    sizes : :class:`PrefixSizes` or None
        The listed sizes of the map, until a solver chooses.

    A source unpacks as ``block, rows = source``.
    """

    block: Callable | None
    rows: da.Array
    grid: GammaGrid | None = None
    sizes: PrefixSizes | None = None

    def __iter__(self):
        return iter((self.block, self.rows))


def attach_source(Z, source):
    """Record the :class:`FeatureSource` ``source`` on the dask array ``Z``; returns ``Z``."""
    setattr(Z, _ATTRIBUTE, source)
    return Z


def feature_source(Z):
    """The :class:`FeatureSource` of ``Z`` when it is a feature map's ``transform`` output, else None."""
    return getattr(Z, _ATTRIBUTE, None) if isinstance(Z, da.Array) else None


def fused_rows(Z, *, even=True):
    """``(features, rows)`` that a pass over ``Z`` reduces over: for ``Z = map.transform(X)``
    of a dense map, the map's block function and ``X`` (in equal row blocks with ``even=True``,
    :func:`rfstream.reductions.even_rows`; ``Z``'s own row chunks with ``even=False``, for SGD's
    averaging and prediction); otherwise ``(None, Z)``."""
    source = feature_source(Z)
    if source is None or source.block is None:
        check_not_from_grid(Z)
        return None, Z
    return source.block, even_rows(source.rows) if even else source.rows


def check_not_from_grid(Z):
    """Refuse a gamma grid's stacked features, or an array made from them, in a pass over rows:
    only the ridge solver's search, reading the source's :class:`GammaGrid`, may use them
    (docs/rff.md, rfstream/features/source.py)."""
    if isinstance(Z, da.Array) and any(str(name).startswith(GRID_LAYER) for name in Z.__dask_graph__().layers):
        raise ValueError(
            "these features are (made from) the stacked features of a gamma grid, every gamma side by "
            "side, and lost the source that lets a solver search them (a rechunk, astype or slice of the "
            "map's transform); pass map.transform(X) itself to the ridge solver (a Pipeline does), or "
            "give the map one gamma.")

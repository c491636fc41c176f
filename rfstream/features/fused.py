"""Fused features: a pass over ``Z = map.transform(X)`` makes the features inside its own tasks.

Every pass over the rows (ridge's Gram, prediction, Newton, SGD epochs, CG) reduces over
``X`` instead of ``Z`` when ``Z`` has a :class:`~rfstream.features.source.FeatureSource`,
making each task's features a sub-block at a time into one reused buffer: the task's
``rows x D`` block never exists, and the features are the numbers ``Z``'s graph would give.
:func:`fused_pass` wraps a sum's chunk function; :class:`ScaledBlock` lets a pass apply a
constant factor to its partials; :func:`feature_sub_blocks` is the loop of passes with their
own.  Narrative: docs/rff.md; figures: docs/BENCHMARKS.md, "Fused features in SGD epochs and CG".
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from ..devices import is_numpy
from ..reductions import even_chunks
from .on_device import device_block
from .source import fused_rows

#: Rows per sub-block when a task computes the features itself: small enough for a
#: sub-block to stay in cache between the map and its product, large enough for BLAS
#: (docs/BENCHMARKS.md, "Measurements behind the solvers").
FUSED_SUB_BLOCK = 4096

#: The fewest features of a streaming pass's sub-block (:func:`stream_rows`), so that a
#: sub-block's fixed costs (its calls, its partials) stay small.
MIN_SUB_BLOCK_FEATURES = 2**20


class ScaledBlock(NamedTuple):
    """A block function whose features are a constant ``scale`` times those of ``unscaled``.

    Calling it gives the scaled features, as the map's ``_block_into`` would; a pass may
    instead apply ``scale`` to its partials (:func:`unscaled_block`).  ``parts``, when given,
    is ``(project, ufunc)``: ``unscaled(x, out)`` is ``project(x, out)`` then ``ufunc`` in
    place (:func:`whole_rows`).  ``device``: the same features in the rows' array namespace
    (:mod:`rfstream.features.on_device`), or None.
    """

    unscaled: Callable
    scale: float
    parts: tuple | None = None
    device: Callable | None = None

    def __call__(self, x, out=None):
        z = self.unscaled(x, out)
        z *= self.scale  # a Python float keeps the float32 loop
        return z


def unscaled_block(block):
    """``(features, scale)``: ``block``'s unscaled block function and the scale that makes its
    features, for a :class:`ScaledBlock`; ``(block, 1.0)`` for any other block function."""
    if isinstance(block, ScaledBlock):
        return block.unscaled, block.scale
    return block, 1.0


def whole_rows(block):
    """``(project, ufunc)`` of a :class:`ScaledBlock` that has its ``parts``, else None: a pass
    applies ``ufunc`` to its buffer's whole rows, which numpy runs faster than a view of some
    of their columns (docs/BENCHMARKS.md, "The cosines over the buffer's whole rows")."""
    return block.parts if isinstance(block, ScaledBlock) else None


def even_sub_blocks(m, largest):
    """Bounds ``(start, stop)`` of equal sub-blocks of at most ``largest`` rows, no short last one."""
    return itertools.pairwise(np.cumsum((0, *even_chunks(m, -(-m // largest)))))


def stream_rows(n_inputs, width, size):
    """Rows per sub-block of a streaming pass (:func:`fused_chunk`): the fewest whose
    ``rows x width`` features are at least 4 times the map's weights plus the ``size``
    partials, and at least :data:`MIN_SUB_BLOCK_FEATURES`; at most :data:`FUSED_SUB_BLOCK`
    (docs/rff.md, rfstream/features/fused.py)."""
    width = max(int(width), 1)
    fixed = 4 * ((n_inputs + 1) * width + size)
    return int(min(FUSED_SUB_BLOCK, max(-(-fixed // width), -(-MIN_SUB_BLOCK_FEATURES // width))))


def fused_buffer(m, width, dtype, largest=FUSED_SUB_BLOCK):
    """A buffer for the largest of ``m`` rows' equal sub-blocks of at most ``largest`` rows
    (:func:`feature_sub_blocks`)."""
    rows = even_chunks(m, -(-m // largest))[0] if m else 0
    return np.empty((rows, width), dtype=dtype)


def make_features(features, x, out):
    """The features of input rows ``x`` in ``out`` (its first ``len(x)`` rows); returns that view.

    ``features`` writes into ``out`` where the map can; a map that returns an
    array of its own has it copied there.
    """
    z = out[: x.shape[0]]
    made = features(x, z)
    if not np.shares_memory(made, z):
        z[...] = made
    return z


def feature_sub_blocks(x, features, buf, largest=FUSED_SUB_BLOCK):
    """``(start, stop, z)``: the features of ``x``'s equal sub-blocks of at most ``largest``
    rows, each written into the first rows of ``buf`` (``z`` is overwritten by the next)."""
    for start, stop in even_sub_blocks(x.shape[0], largest):
        yield start, stop, make_features(features, x[start:stop], buf)


def fused_chunk(x, *others, offset, features, dtype, n_features, chunk, size, rescale=None):
    """Partials of a sum over rows, with the features of input rows ``x`` made in sub-blocks.

    ``chunk(z, *others_rows, offset=, out=)`` adds feature rows ``z``'s partials into ``out``
    (float64, ``size``); ``others`` (labels) are sliced with each sub-block.  Given
    ``rescale(out, scale)`` (:meth:`rfstream.reductions.Layout.scale_parts`), a
    :class:`ScaledBlock`'s ``scale`` is applied once to ``out`` instead of to the features.
    """
    out = np.zeros(size, dtype=np.float64)
    rows = stream_rows(x.shape[1], n_features, size)
    if not is_numpy(x):  # rows on a device: each sub-block's features made there by the map's twin
        device = device_block(features)
        for start, stop in even_sub_blocks(x.shape[0], rows):
            chunk(device(x[start:stop, :]), *(o[start:stop] for o in others), offset=offset + start, out=out)
        return out
    features, scale = unscaled_block(features) if rescale is not None else (features, 1.0)
    buf = fused_buffer(x.shape[0], n_features, dtype, rows)
    for start, stop, z in feature_sub_blocks(x, features, buf, rows):
        chunk(z, *(o[start:stop] for o in others), offset=offset + start, out=out)
    if scale != 1.0:
        rescale(out, scale)
    return out


def fused_pass(Z, chunk, size, rescale=None):
    """``(fn, rows)`` for :func:`rfstream.reductions.sum_rows`: a sum over ``Z``'s rows of
    ``chunk(z, *others, offset=, out=)`` partials, over ``X``'s rows with the features made
    in the task (:func:`fused_chunk`) when ``Z = map.transform(X)``, else over ``Z``'s blocks."""
    features, rows = fused_rows(Z)
    if features is None:
        return partial(_stored_chunk, chunk=chunk, size=size), rows
    return partial(fused_chunk, features=features, dtype=Z.dtype, n_features=Z.shape[1],
                   chunk=chunk, size=size, rescale=rescale), rows


def _stored_chunk(z, *others, offset, chunk, size):
    out = np.zeros(size, dtype=np.float64)
    chunk(z, *others, offset=offset, out=out)
    return out

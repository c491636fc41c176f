"""Fused features: every pass computes a feature map's features inside its own tasks.

``Z = fmap.transform(X)`` on a dask ``X`` is lazy: each block of ``Z`` is
``fmap._block`` of a block of ``X``.  A solver that reduces over ``Z`` would get
each task's whole ``rows x D`` feature block (512 MB for 65,536 rows at
D = 2000 in float32) as a task input.  Instead, ``transform`` attaches a
:class:`~rfstream.features.source.FeatureSource` to the array it returns, and every
pass over the rows (the ridge Gram, linear prediction, Newton, SGD epochs, conjugate
gradients) asks :func:`~rfstream.features.source.fused_rows` for it: when there is one, the pass reduces over
``X`` and its tasks make the features of their rows themselves, a sub-block or
a mini-batch at a time into one reused buffer, and use them while they are
still in cache.  The function and the rows are the ones ``Z``'s own graph would
use, so the features are the same numbers (up to BLAS rounding of products of
other shapes); the ``rows x D`` block of a task never exists (time and memory:
docs/BENCHMARKS.md, "Fused features in SGD epochs and CG").

The pass's tools:

* :func:`fused_pass` -- a chunk function of a sum over rows (``chunk(z, *others,
  offset=, out=)``) wrapped to run over the rows' features sub-block by sub-block;
* :class:`ScaledBlock`, :func:`unscaled_block`, :func:`whole_rows` -- a block function
  that is a constant times another, so that a pass can apply the constant to its partials
  instead of to every feature (and, where the map says how, the elementwise step to its
  buffer's whole rows);
* :func:`feature_sub_blocks`, :func:`fused_buffer`, :func:`make_features` -- the
  sub-block loop and the one buffer that passes with their own loop use (the
  Gram's ``[Z, Y, 1]`` buffer, prediction, SGD's mini-batches).

Which arrays have a source: only the very array a *dense* map's ``transform``
returned.  Anything derived from it (``Z + 0``, ``astype``, slicing,
``persist``) has none and is reduced over its stored blocks, as is a numpy
``Z``.  Sparse maps (random binning, ``_sparse_output``) attach no source: their
CSR blocks hold ``rows x P`` non-zeros (P grids), not ``rows x D`` values, so a
pass reduces over those blocks (each made by the transform task that feeds the
reduction task) at no memory cost worth fusing away.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from ..reductions import even_chunks
from .source import fused_rows

#: Rows per sub-block when a task computes the features itself: small enough for a
#: sub-block to stay in cache between the map and its product, large enough for BLAS
#: (the sizes measured: docs/BENCHMARKS.md, "Measurements behind the solvers").
FUSED_SUB_BLOCK = 4096

#: The fewest features of a streaming pass's sub-block (:func:`stream_rows`): 2**20 (4 MiB
#: in float32), so that a sub-block's fixed costs (its calls, its partials) stay small.
MIN_SUB_BLOCK_FEATURES = 2**20


class ScaledBlock(NamedTuple):
    """A block function whose features are a constant ``scale`` times those of ``unscaled``.

    Calling it gives the scaled features, as the map's ``_block_into`` would.  A pass whose
    partials are homogeneous in the features can instead make the unscaled ones and apply
    ``scale`` (or its square) once to the task's partials (:func:`unscaled_block`): the Gram
    pass does, for random Fourier features' ``sqrt(2/D)`` (an elementwise product over every
    sub-block, some 2% of that pass, docs/BENCHMARKS.md).

    ``parts``, when given, is ``(project, ufunc)`` with ``unscaled(x, out)`` equal to
    ``project(x, out)`` followed by ``ufunc`` in place (random Fourier features: the
    projection and ``np.cos``).  A pass whose buffer holds more columns than the features can
    then apply ``ufunc`` to its whole rows, one contiguous run, where numpy takes the features'
    columns of each row apart (:func:`whole_rows`).
    """

    unscaled: Callable
    scale: float
    parts: tuple | None = None

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
    """``(project, ufunc)`` of a :class:`ScaledBlock` that has its ``parts``, else None.

    numpy runs an elementwise function on a view whose rows are a part of its buffer's rows
    one row at a time, more than half a microsecond a row: ``np.cos`` of the 7,720 x 2,000
    features in the Gram's 2,024-column buffer took 13.6 ms, and 8.8 ms on the whole rows
    (docs/BENCHMARKS.md, "The cosines over the buffer's whole rows").
    """
    return block.parts if isinstance(block, ScaledBlock) else None


def even_sub_blocks(m, largest):
    """Bounds ``(start, stop)`` of equal sub-blocks of at most ``largest`` rows, no short last one.

    E.g. 61,753 rows: 16 x 3860 instead of 15 x 4096 + 313 (docs/BENCHMARKS.md).
    """
    return itertools.pairwise(np.cumsum((0, *even_chunks(m, -(-m // largest)))))


def stream_rows(n_inputs, width, size):
    """Rows per sub-block of a streaming pass (:func:`fused_chunk`: features, a product with a
    few columns, partials of ``size`` values): the fewest rows whose ``rows x width``
    features are at least 4 times what each sub-block reads or adds whatever its rows --
    the map's ``(n_inputs + 1) x width`` weights (BLAS packs them per call) and the partials
    -- and :data:`MIN_SUB_BLOCK_FEATURES`; at most :data:`FUSED_SUB_BLOCK`.

    Few rows keep a wide sub-block in cache from the map's cosines to the products, where
    4,096 rows at D = 50,000 (819 MB) go to memory and back at each step; measured in
    docs/wide.md ("Streaming passes in smaller sub-blocks").  The Gram pass keeps its own
    sub-blocks: its SYRK needs many rows.
    """
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
    """``(start, stop, z)``: the features of ``x``'s equal sub-blocks of at most
    ``largest`` rows, each written into the first rows of ``buf``.

    The ``rows x D`` feature block of a task never exists, one buffer serves all
    its sub-blocks, and each sub-block is used while it is still in cache.
    ``z`` is overwritten by the next sub-block.
    """
    for start, stop in even_sub_blocks(x.shape[0], largest):
        yield start, stop, make_features(features, x[start:stop], buf)


def fused_chunk(x, *others, offset, features, dtype, n_features, chunk, size, rescale=None):
    """Partials of a sum over rows, with the features of input rows ``x`` made in sub-blocks.

    ``chunk(z, *others_rows, offset=, out=)`` adds the partials of feature rows
    ``z`` into ``out`` (a float64 vector of ``size``); ``others`` are arrays
    aligned with ``x`` by rows (labels), sliced with each sub-block of
    :func:`stream_rows` rows.  ``rescale(out, scale)``, when given, applies a
    constant factor of the features to the partials (each homogeneous in the
    features: :meth:`rfstream.reductions.Layout.scale_parts`); then the
    features of a :class:`ScaledBlock` are made without their ``scale`` and
    ``rescale`` applies it to ``out`` once.
    """
    out = np.zeros(size, dtype=np.float64)
    features, scale = unscaled_block(features) if rescale is not None else (features, 1.0)
    rows = stream_rows(x.shape[1], n_features, size)
    buf = fused_buffer(x.shape[0], n_features, dtype, rows)
    for start, stop, z in feature_sub_blocks(x, features, buf, rows):
        chunk(z, *(o[start:stop] for o in others), offset=offset + start, out=out)
    if scale != 1.0:
        rescale(out, scale)
    return out


def fused_pass(Z, chunk, size, rescale=None):
    """``(fn, rows)`` for a sum over the rows of ``Z`` of ``chunk`` partials.

    ``chunk(z, *others, offset=, out=)`` adds one block's partials into ``out``.
    For ``Z = map.transform(X)``, ``fn`` runs ``chunk`` over the features of each
    block of ``X`` (equal row blocks), made in sub-blocks inside the task
    (:func:`fused_chunk`, which takes ``rescale``); otherwise ``fn`` is ``chunk`` on
    ``Z``'s stored blocks, with a fresh ``out``.  Hand both to
    :func:`rfstream.reductions.sum_rows`.
    """
    features, rows = fused_rows(Z)
    if features is None:
        return partial(_stored_chunk, chunk=chunk, size=size), rows
    return partial(fused_chunk, features=features, dtype=Z.dtype, n_features=Z.shape[1],
                   chunk=chunk, size=size, rescale=rescale), rows


def _stored_chunk(z, *others, offset, chunk, size):
    out = np.zeros(size, dtype=np.float64)
    chunk(z, *others, offset=offset, out=out)
    return out

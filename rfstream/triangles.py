"""Symmetric blocks of a flat vector kept as their upper triangles, row by row.

A span ``(offset, count, size)`` names ``count`` row-major ``size x size`` matrices one after
another from ``offset`` in the vector (the Gram pass's ``Z'Z`` and ``Y'Y`` of each fold and
gamma: :func:`rfstream.solvers.ridge.gram.symmetric_spans`).  :func:`pack` keeps each one's
upper triangle, ``D (D + 1) / 2`` numbers of ``D^2``; :func:`unpack` mirrors it back.  Both
the Gram pass's partials on their way through the reduction tree
(:func:`rfstream.reductions.sum_rows`, ``symmetric=``) and a checkpoint's stored passes
(:mod:`rfstream.io.pass_encoding`) use them.  Narrative: docs/scaling.md, "The triangle".
"""
from __future__ import annotations

import numpy as np

__all__ = ["pack", "packed_size", "unpack"]


def packed_size(size: int, spans) -> int:
    """The length of :func:`pack`'s result for a vector of ``size`` numbers."""
    return int(size) - sum(int(c) * int(d) * (int(d) - 1) // 2 for _, c, d in spans)


def pack(flat, spans):
    """``flat`` with the matrices of each span (sorted, not overlapping, inside ``flat``)
    replaced by their upper triangles, row by row; the numbers between spans as they are.
    Whatever is below a diagonal is not read: the caller knows the blocks are symmetric."""
    out = np.empty(packed_size(flat.size, spans), dtype=flat.dtype)
    src = dst = 0
    for offset, count, size in spans:
        dst = _copy(flat[src:offset], out, dst)
        for m in flat[offset:offset + count * size * size].reshape(count, size, size):
            for i in range(size):
                dst = _copy(m[i, i:], out, dst)
        src = offset + count * size * size
    _copy(flat[src:], out, dst)
    return out


def unpack(packed, spans, size: int):
    """The vector of ``size`` numbers that :func:`pack` made ``packed`` of, each triangle
    mirrored into its whole matrix; None when ``packed``'s length or the spans do not fit
    ``size`` (bytes rfstream did not write)."""
    if packed.ndim != 1 or packed.size != packed_size(size, spans) or not _in_order(spans, size):
        return None
    flat = np.empty(int(size), dtype=packed.dtype)
    src = dst = 0
    for offset, count, d in spans:
        flat[dst:offset] = packed[src:src + offset - dst]
        src += offset - dst
        for m in flat[offset:offset + count * d * d].reshape(count, d, d):
            for i in range(d):
                row = packed[src:src + d - i]
                m[i, i:] = row
                m[i + 1:, i] = row[1:]
                src += d - i
        dst = offset + count * d * d
    flat[dst:] = packed[src:]
    return flat


def _in_order(spans, size):
    """Whether the spans follow one another inside ``size`` numbers, none empty."""
    end = 0
    for offset, count, d in spans:
        if count < 1 or d < 1 or offset < end:
            return False
        end = offset + count * d * d
    return end <= size


def _copy(piece, out, at):
    out[at:at + piece.size] = piece
    return at + piece.size

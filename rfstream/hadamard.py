"""Fast Walsh-Hadamard transform, vectorized numpy, O(n log n) per vector.

``fwht(a, axis)`` returns ``H_n a`` along ``axis`` where ``H_n`` is the
*unnormalized* Sylvester-ordered Hadamard matrix (``H_1 = [1]``,
``H_2n = [[H_n, H_n], [H_n, -H_n]]``; the same matrix as
:func:`scipy.linalg.hadamard`), so ``H_n H_n = n I``.  ``n`` must be a power of
two.  The transform is ``log2(n)`` butterfly stages, each a pair of vectorized
additions, applied to a batch of vectors at a time (about 256 KiB, so that the
stages run in cache) rather than with a Python loop over vectors.

Used by the block SRHT of TEFM-S (:mod:`rfstream.datadriven.tefm`, along the
row axis) and by Fastfood (:mod:`rfstream.features.fastfood`, along the feature
axis).
"""
from __future__ import annotations

import numpy as np


def is_power_of_two(n) -> bool:
    return int(n) > 0 and (int(n) & (int(n) - 1)) == 0


def next_power_of_two(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def fwht(a, axis=-1, *, out=None):
    """Unnormalized fast Walsh-Hadamard transform of ``a`` along ``axis``.

    Parameters
    ----------
    a : array_like
        Float array; its length along ``axis`` must be a power of two.
    axis : int, default=-1
    out : ndarray, optional
        Where to write the result (may be ``a`` itself for an in-place
        transform; must be C-contiguous and of ``a``'s shape).  By default a
        new array in ``a``'s float dtype.

    Returns
    -------
    ndarray
        ``H_n a`` along ``axis`` (``scipy.linalg.hadamard(n) @ a`` for a 2-D
        ``a`` and ``axis=0``), computed in ``n log2 n`` additions per vector.
    """
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
    axis = axis % a.ndim if a.ndim else 0
    n = a.shape[axis]
    if not is_power_of_two(n):
        raise ValueError(
            f"fwht needs a power-of-two length along axis {axis}; got {n}. "
            "Zero-pad to the next power of two."
        )
    if out is None:
        out = np.array(a, order="C", copy=True)
    elif out is not a:
        if out.shape != a.shape or not out.flags.c_contiguous:
            raise ValueError("out must be a C-contiguous array of a's shape.")
        out[...] = a
    elif not out.flags.c_contiguous:
        raise ValueError("an in-place fwht needs a C-contiguous array.")
    pre = int(np.prod(a.shape[:axis], dtype=np.int64))
    post = int(np.prod(a.shape[axis + 1:], dtype=np.int64))
    if n == 1:
        return out
    x = out.reshape(pre, n, post)
    # Transform a few vectors at a time so that the log2(n) stages run in cache.
    step = max(1, _CACHE_BYTES // (n * post * out.itemsize))
    buf = np.empty((min(step, pre), n, post), dtype=out.dtype)
    for start in range(0, pre, step):
        part = x[start : start + step]
        _butterflies(part, buf[: part.shape[0]])
    return out


# Bytes of vectors transformed together (about the size of a core's L2 cache).
_CACHE_BYTES = 1 << 18


def _butterflies(x, buf):
    """In-place radix-2 FWHT of ``x`` ``(pre, n, post)`` along axis 1, ``buf`` as scratch.

    Ping-pong between ``x`` and ``buf``: each stage reads one and writes
    ``top + bottom`` and ``top - bottom`` into the other (two passes over memory).
    """
    pre, n, post = x.shape
    src, dst = x, buf
    h = 1
    while h < n:
        # pairs (i, i + h) inside groups of 2h: [:, g, 0] = top, [:, g, 1] = bottom
        s = src.reshape(pre, n // (2 * h), 2, h, post)
        t = dst.reshape(pre, n // (2 * h), 2, h, post)
        np.add(s[:, :, 0], s[:, :, 1], out=t[:, :, 0])
        np.subtract(s[:, :, 0], s[:, :, 1], out=t[:, :, 1])
        src, dst = dst, src
        h *= 2
    if src is not x:
        x[...] = src

"""Fast Walsh-Hadamard transform, vectorized numpy, O(n log n) per vector.

:func:`fwht` returns ``H_n a`` along ``axis`` for the *unnormalized* Sylvester-ordered Hadamard
matrix (``H_1 = [1]``, ``H_2n = [[H_n, H_n], [H_n, -H_n]]``, as :func:`scipy.linalg.hadamard`),
so ``H_n H_n = n I``; ``n`` must be a power of two.  Its ``log2(n)`` butterfly stages run on a
batch of vectors that fits in cache (used by :mod:`rfstream.features.fastfood`).
:func:`hadamard_blocks` computes the same transform along the rows of many blocks with two
small matrix products (the block SRHT of TEFM-S, :mod:`rfstream.datadriven.tefm`).
Why two products and their measurements: docs/tefm.md, "The TEFM-S sketch".
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.linalg


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


@lru_cache(maxsize=32)
def _hadamard(n: int, dtype: str) -> np.ndarray:
    h = scipy.linalg.hadamard(n).astype(dtype)
    h.flags.writeable = False
    return h


def kronecker_split(n: int) -> tuple[int, int]:
    """``(a, b)`` with ``a * b = n``, both powers of two, ``a <= b``, as equal as possible."""
    k = int(n).bit_length() - 1
    return 1 << (k // 2), 1 << (k - k // 2)


def hadamard_blocks(x):
    """``H_B x[k]`` for every block ``k`` of ``x`` ``(nblk, B, d)`` (unnormalized, Sylvester).

    The same result as ``fwht(x, axis=1)``, computed through the Kronecker
    factorization of the Sylvester matrix, ``H_B = H_a (x) H_b`` with
    ``a * b = B`` (:func:`kronecker_split`): viewing a block as ``(a, b, d)``,
    one batched product with ``H_a`` over the first axis and one with ``H_b``
    over the second.  That is ``2 (a + b) ~ 4 sqrt(B)`` flops per entry
    instead of the butterflies' ``log2 B`` additions, but done by BLAS in two
    passes over memory instead of ``log2 B`` memory-bound numpy passes
    (measured in docs/tefm.md).  Each block is transformed whole before the next, so
    the working set is one block.

    Returns a new array in ``x``'s dtype (float32 or float64).
    """
    x = np.asarray(x)
    if x.ndim != 3 or not is_power_of_two(x.shape[1]):
        raise ValueError(f"hadamard_blocks needs an array (nblk, B, d) with B a power of two; "
                         f"got shape {x.shape}.")
    nblk, n, d = x.shape
    a, b = kronecker_split(n)
    ha, hb = _hadamard(a, x.dtype.name), _hadamard(b, x.dtype.name)
    out = np.empty_like(x)
    for k in range(nblk):
        y = np.matmul(ha, x[k].reshape(a, b * d))            # H_a along the "a" axis
        np.matmul(hb, y.reshape(a, b, d), out=out[k].reshape(a, b, d))  # H_b along "b"
    return out

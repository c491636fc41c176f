"""The projection ``[x, 1] @ [W; b]`` of random Fourier features when some input columns are 0/1.

A one-hot column (:func:`rfstream.io.onehot_columns`, passed through by the
:class:`~rfstream.preprocess.Standardizer`) holds 0 or 1, and a row has few ones among them, so
``x_o @ W_o`` is the sum of the rows of ``W_o`` its ones select.  :func:`project_split` makes
``z = ([x_d, 1] @ [W_d; b]) + x_o @ W_o``: a GEMM over the other columns, plus, where the block's
``x_o`` is all 0/1, the sums of selected rows, made once per distinct pattern of ones and
gathered into the output that the GEMM then adds to (``beta = 1``); else a GEMM over ``x_o``.
Both give the same sum, so a row's features do not depend on the rows beside it.  Narrative and
figures: docs/rff.md, "One-hot columns in the projection"; docs/BENCHMARKS.md.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.linalg.blas import dgemm, sgemm

__all__ = ["binary_block", "pattern_sums", "project_split", "split_weights"]

_GEMM = {np.dtype(np.float32): sgemm, np.dtype(np.float64): dgemm}


class SplitWeights(NamedTuple):
    """The weights of :func:`project_split` for one ``(W, b, onehot)``."""

    dense: np.ndarray  # the other columns' indices
    onehot: np.ndarray  # the 0/1 columns' indices
    Wb_dense: np.ndarray  # [W_d; b], C-contiguous
    W_onehot: np.ndarray  # [W_o; 0]: the zero row pads rows with fewer ones


def split_weights(W, b, onehot):
    """:class:`SplitWeights` of ``W`` (``d x m``), offsets ``b`` and the 0/1 columns ``onehot``
    (a tuple of indices); a map keeps them across a task's sub-blocks
    (:func:`rfstream.features.fourier.kept_weights`)."""
    cols = np.asarray(onehot, dtype=np.intp)
    dense = np.setdiff1d(np.arange(W.shape[0]), cols)
    Wb = np.empty((dense.size + 1, W.shape[1]), dtype=W.dtype)
    Wb[:-1] = W[dense]
    Wb[-1] = b
    Wo = np.zeros((cols.size + 1, W.shape[1]), dtype=W.dtype)
    Wo[:-1] = W[cols]
    return SplitWeights(dense, cols, Wb, Wo)


def binary_block(xo):
    """``xo == 1`` when every value of ``xo`` is 0 or 1 (NaN is neither), else None."""
    ones = xo == 1
    return ones if np.count_nonzero(xo) == np.count_nonzero(ones) else None


def pattern_sums(xo, W_onehot):
    """``(P, inv)`` with ``P[inv] = xo @ W_onehot[:-1]`` for a 0/1 block ``xo`` (``n x c``, its
    ones as True in a C-ordered boolean array, :func:`binary_block`, or as numbers):
    ``P`` holds one sum of selected rows per distinct pattern of ones, added in column order
    (the zero row ``W_onehot[-1]`` pads rows with fewer ones); None when a pattern's code would
    not fit in 63 bits (many ones in a row: the caller multiplies instead)."""
    n, c = xo.shape
    rows, cols = np.divmod(np.flatnonzero(xo), c)  # row-major: a row's columns ascending
    counts = np.bincount(rows, minlength=n)
    k = int(counts.max())
    if k == 0:  # no ones: every row's sum is the zero row
        return W_onehot[-1:].copy(), np.zeros(n, dtype=np.intp)
    if k * math.log2(c + 1) > 62:
        return None
    if rows.size == n * k:  # as many ones in every row (one-hot fields)
        picked = cols.reshape(n, k)
    else:
        picked = np.full((n, k), c, dtype=np.intp)
        starts = np.cumsum(counts) - counts
        picked[rows, np.arange(rows.size) - starts[rows]] = cols
    code = picked[:, 0].astype(np.int64)
    for j in range(1, k):
        code = code * (c + 1) + picked[:, j]
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    patterns = picked[first]
    P = W_onehot[patterns[:, 0]]
    for j in range(1, k):
        P += W_onehot[patterns[:, j]]
    return P, inv.reshape(-1)


def project_split(x, W, b, onehot, out=None, split=None):
    """``x @ W + b`` in ``W``'s dtype for dense rows ``x``, with the columns ``onehot`` (a tuple)
    summed as selected rows of ``W`` where they are all 0/1 in ``x``, multiplied otherwise:
    ``([x_d, 1] @ [W_d; b]) + x_o @ W_o`` either way (module docstring); into ``out`` if given;
    ``split``: :func:`split_weights` of ``(W, b, onehot)`` when the caller keeps them."""
    split = split_weights(W, b, onehot) if split is None else split
    n = x.shape[0]
    if out is None:
        out = np.empty((n, W.shape[1]), dtype=W.dtype)
    xa = np.empty((n, split.dense.size + 1), dtype=W.dtype)
    xa[:, :-1] = np.take(x, split.dense, axis=1)  # C-ordered, where x[:, cols] is F-ordered
    xa[:, -1] = 1.0
    xo = np.take(x, split.onehot, axis=1)  # row-major for np.flatnonzero's order
    ones = binary_block(xo) if n else None
    sums = None if ones is None else pattern_sums(ones, split.W_onehot)
    if sums is None:  # not 0/1 here (or too many ones): the product
        np.matmul(xa, split.Wb_dense, out=out)
        out += np.asarray(xo, dtype=W.dtype) @ split.W_onehot[:-1]
        return out
    P, inv = sums
    if out.flags.c_contiguous:  # out = P[inv], then out += [x_d, 1] @ [W_d; b] in the GEMM (beta = 1)
        np.take(P, inv, axis=0, out=out, mode="clip")  # valid indices; "raise" would buffer out
        made = _GEMM[out.dtype](1.0, split.Wb_dense.T, xa.T, beta=1.0, c=out.T, overwrite_c=1)
        if not np.shares_memory(made, out):  # not seen with scipy's f2py; kept for safety
            out[...] = made.T
        return out
    np.matmul(xa, split.Wb_dense, out=out)  # a view of a wider buffer (the Gram pass's)
    out += np.take(P, inv, axis=0, mode="clip")
    return out

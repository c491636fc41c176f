"""Row weights of the solvers: ``sample_weight`` checked against ``X``, and the weight of each row.

Row i counts ``c_i`` = its ``sample_weight`` (scikit-learn's meaning: an integer weight is the
row repeated) times the ``class_weight`` of its label.  :func:`check_sample_weight` checks
numpy weights on the client and dask ones lazily, their values block by block in the passes
(:func:`check_weight_block`); :func:`row_weights` is the per-block product a pass applies.
docs/design-notes.md, "Solvers' shared modules".
"""
from __future__ import annotations

from numbers import Real

import dask.array as da
import numpy as np
from dask.base import is_dask_collection

from .._validation import dask_labels
from ..cluster import compute
from .targets import encode_classes


def check_sample_weight(X, sample_weight):
    """``sample_weight`` checked against ``X`` and aligned with it, or None.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        Already checked (``check_X``/``check_X_y``).
    sample_weight : None, float, array-like, pandas Series, dask array or dask Series
        One weight >= 0 per row of ``X`` (a float: the same weight for every row).

    Returns
    -------
    weights : None, an ndarray (n_samples,) of float64 for a numpy ``X``, or a dask
        array with ``X``'s row chunks for a dask ``X`` (a numpy ``sample_weight`` wrapped,
        a dask one rechunked lazily; a dask ``sample_weight`` with a numpy ``X`` is
        computed: it is as small as ``X``).

    Raises
    ------
    ValueError
        One line naming the problem: not 1-D, another length than ``X``'s rows, a
        negative or non-finite weight, or every weight zero (for dask weights the
        values are checked in the passes, :func:`check_weight_block`).
    """
    if sample_weight is None:
        return None
    n = X.shape[0]
    if isinstance(sample_weight, Real) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n, float(sample_weight))
    lazy = isinstance(X, da.Array)
    if is_dask_collection(sample_weight):
        w = dask_labels(sample_weight, X.chunks[0]) if lazy else np.asarray(compute(sample_weight))
    else:
        w = np.asarray(sample_weight)
    if w.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D with one weight per row of X; got shape {w.shape}.")
    if w.dtype.kind not in "biuf":
        raise ValueError(f"sample_weight must hold real numbers; got dtype {w.dtype}.")
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} weights but X has {n} rows; pass one "
                         "weight per row of X.")
    if isinstance(w, da.Array):
        if any(np.isnan(c) for c in w.chunks[0]):
            raise ValueError("sample_weight has unknown chunk sizes; call "
                             "sample_weight.compute_chunk_sizes() first.")
        return w if w.chunks[0] == X.chunks[0] else w.rechunk({0: X.chunks[0]})
    w = check_weight_block(w.astype(np.float64, copy=False))
    if n and not np.any(w > 0):
        raise ValueError("sample_weight: every weight is zero, so there is nothing to fit; give "
                         "some rows a weight > 0.")
    return da.from_array(w, chunks=(X.chunks[0],)) if lazy else w


def check_weight_block(w, offset=0):
    """A block of weights as float64, with a one-line ``ValueError`` naming the first bad row.

    ``offset`` is the global index of the block's first row (for the message).
    """
    w = np.asarray(w, dtype=np.float64)
    bad = ~np.isfinite(w) | (w < 0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"sample_weight must be finite and >= 0; row {offset + i} has weight "
                         f"{float(w[i])}.")
    return w


def weight_terms(w):
    """``(sum, max)`` of checked weights: lazy dask scalars for a dask ``w`` (to compute in
    another pass, e.g. :func:`rfstream.solvers.targets.find_classes`'s), floats for
    numpy; ``()`` for None."""
    if w is None:
        return ()
    if isinstance(w, da.Array):
        return w.sum(dtype=np.float64), w.max()
    return float(w.sum(dtype=np.float64)), float(w.max() if w.size else 0.0)


def weight_summary(w, terms=None):
    """``(sum, max)`` of checked weights (``terms``: :func:`weight_terms` already
    computed), with a one-line error when they sum to zero or are not finite."""
    total, top = (compute(*weight_terms(w)) if terms is None else terms)
    if not (np.isfinite(total) and total > 0):
        raise ValueError("sample_weight: every weight is zero (or one is not finite), so there is "
                         "nothing to fit; give some rows a finite weight > 0.")
    return float(total), float(top)


def row_weights(y, w=None, *, offset=0, classes=None, class_weight=None, scale=1.0):
    """The float64 weight ``c_i`` of each row of one block, or None when every row counts once:
    the class weight of its raw label ``y`` (``classes``, ``class_weight``) times its sample
    weight ``w`` (checked, :func:`check_weight_block`; ``offset`` for the error) times
    ``scale`` (SGD divides them by their mean, docs/sgd.md)."""
    c = None
    if class_weight is not None:
        c = np.asarray(class_weight, dtype=np.float64)[encode_classes(y, classes)]
    if w is not None:
        w = check_weight_block(w, offset)
        w = w * scale if scale != 1.0 else w
        c = w if c is None else c * w
    return c

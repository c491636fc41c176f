"""The cross-validation folds of the ridge pass: k folds from (seed, row), or the user's splits.

A split fits the single Gram pass when the test sets are disjoint and each trains on every
other row (``KFold``, ``GroupKFold``, ``LeaveOneGroupOut``, ``PredefinedSplit``).  An int
``cv`` draws each row's fold from (seed, global row index), so the folds do not depend on
the chunking.  docs/design-notes.md, "Solvers' shared modules".
"""
from __future__ import annotations

from numbers import Integral

import dask.array as da
import numpy as np

from ..random import STREAM_FOLDS, row_integers


def check_cv(cv, X, y):
    """``(n_folds, scored, folds)`` for the pass.

    Parameters
    ----------
    cv : None, int, iterable of (train, test) index arrays, or an object with ``split``
        None means 5 folds.  A splitter's ``split(X, y)`` is called (it sees the
        dask arrays for dask input: splitters that need only the row count work).
    X : ndarray, sparse matrix or dask array
    y : labels aligned with ``X``

    Returns
    -------
    n_folds : int
        Partials the pass accumulates.
    scored : int
        The first ``scored`` folds are scored (the rest train only).
    folds : None (an int ``cv``), or the fold index of every row (numpy for numpy
        ``X``, a dask array with ``X``'s row chunks for dask ``X``).

    Raises
    ------
    ValueError
        When the test sets overlap or a split's training set is not every other row.
    """
    if cv is None:
        cv = 5
    if isinstance(cv, Integral):
        return int(cv), int(cv), None
    splits = list(cv.split(X, y)) if hasattr(cv, "split") else list(cv)
    n = X.shape[0]
    folds = np.full(n, len(splits), dtype=np.int64)
    for k, (train, test) in enumerate(splits):
        test = np.arange(n)[np.asarray(test)]  # boolean masks and negative indices as numpy reads them
        if np.any(folds[test] != len(splits)):
            raise ValueError(f"cv split {k} has test rows that an earlier split also tests; the "
                             "one-pass cross-validation needs disjoint test sets (KFold, GroupKFold, "
                             "LeaveOneGroupOut), or pass an int.")
        folds[test] = k
        if np.asarray(train).size + test.size != n or np.intersect1d(train, test).size:
            raise ValueError(f"cv split {k} trains on {np.asarray(train).size} rows and tests "
                             f"{test.size} of {n}; the one-pass cross-validation trains each fold on "
                             "every row outside its test set.")
    if not splits:
        raise ValueError("cv gave no splits; pass an int >= 2 or at least one (train, test) split.")
    n_folds = len(splits) + int(np.any(folds == len(splits)))
    if isinstance(X, da.Array):
        folds = da.from_array(folds, chunks=(X.chunks[0],))
    return n_folds, len(splits), folds


def row_folds(m, given=None, *, offset, n_folds, seed):
    """The fold of each of a block's ``m`` rows, as every pass of one fit draws it:
    ``given`` (:func:`check_cv`'s ``folds``), or drawn from (``seed``, ``offset`` + row);
    one fold: all zeros."""
    if given is not None:
        return np.asarray(given, dtype=np.int64)
    if n_folds > 1:
        return row_integers(seed, STREAM_FOLDS, offset, offset + m, n_folds)
    return np.zeros(m, dtype=np.int64)

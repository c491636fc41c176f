"""Input checks for dask arrays, shared by every estimator.

numpy input goes through scikit-learn's ``validate_data``; a dask array gets
the checks that need no data: a 2-D numeric array, known column count, known
row chunks where a reduction needs global row offsets, and the column count
the estimator was fitted with.  Values (NaN, inf) are not checked: that would
cost a pass over the data.
"""
from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
from dask import is_dask_collection


def check_dask_array(X, estimator=None, *, reset=False, known_rows=True):
    """Validate a dask ``X``; return it with a single column chunk.

    Parameters
    ----------
    estimator : estimator, optional
        With ``reset=True`` (fitting) ``X`` must have rows and the estimator's
        ``n_features_in_`` is set; otherwise ``X`` must have that many columns.
    known_rows : bool
        Require known row chunk sizes (reductions need global row offsets).
    """
    if is_dask_collection(X) and not isinstance(X, da.Array):
        raise TypeError(
            f"X is a dask {type(X).__name__}; pass a dask array instead, e.g. "
            "X.to_dask_array(lengths=True)."
        )
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-d dask array for X; got ndim={X.ndim} with shape {X.shape}.")
    if X.dtype.kind not in "biuf":
        raise ValueError(
            f"X must have a real numeric dtype; got dtype {X.dtype}. Cast it, e.g. X.astype('float32')."
        )
    n_features = X.shape[1]
    if not isinstance(n_features, numbers.Integral):
        raise ValueError(
            "X has an unknown number of columns (nan chunk sizes); call "
            "X.compute_chunk_sizes() or pass a dask array with known columns."
        )
    if known_rows and any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown row chunk sizes; call X.compute_chunk_sizes() first.")
    if reset and X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if estimator is not None:
        if reset:
            estimator.n_features_in_ = int(n_features)
            if hasattr(estimator, "feature_names_in_"):
                del estimator.feature_names_in_
        elif n_features != estimator.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(estimator).__name__} is expecting "
                f"{estimator.n_features_in_} features as input."
            )
    return X.rechunk({1: -1}) if X.numblocks[1] > 1 else X

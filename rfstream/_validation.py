"""Input checks shared by every estimator: numpy, pandas, dask arrays and dask DataFrames.

Every ``fit``, ``partial_fit``, ``transform``, ``predict`` and ``decision_function`` checks
``X`` with :func:`check_X` or :func:`check_X_y`: numpy, sparse and pandas input through
scikit-learn's ``validate_data``; a dask array by what needs no data (:func:`check_dask_array`);
a dask DataFrame the same after a lazy conversion (:func:`dask_frame_as_array`, its partition
lengths computed).  :func:`dask_labels` aligns dask labels with ``X``'s row chunks.  Values
(NaN, inf) are not checked: that would cost a pass.  Narrative: docs/design-notes.md.
"""
from __future__ import annotations

import numbers
import sys
import warnings
from collections import OrderedDict

import dask.array as da
import numpy as np
from dask import is_dask_collection
from dask.base import tokenize
from sklearn.utils.validation import _check_feature_names, validate_data

from .devices import array_namespace, is_device_array, numpy_dtype, to_host

from .cluster import compute

#: float dtypes every estimator computes in (other numeric input is cast to float64)
FLOAT_DTYPES = [np.float64, np.float32]

#: partition lengths of recently converted dask frames, by dask name: a name is a
#: hash of the frame's whole expression, sources included (a Parquet file's size and
#: modification time too), so the same name is the same rows, as dask itself assumes
#: when it merges graphs.  A Pipeline's fit_transform then counts the rows once.
_LENGTHS: OrderedDict = OrderedDict()
_LENGTHS_KEPT = 32

_EXTENSION_WARNING = "Dask currently has limited support for converting pandas extension dtypes"


def check_X(estimator, X, *, reset, known_rows=True, accept_sparse=False):
    """``X`` (array-like, sparse, DataFrame, dask array or dask DataFrame) checked for
    ``estimator``: a float32/float64 ndarray, a sparse matrix or a dask array with one column
    chunk.  ``reset=True`` (fitting) sets ``n_features_in_`` (and ``feature_names_in_``), else
    ``X`` must match them; ``known_rows`` requires a dask array's row chunk sizes;
    ``accept_sparse`` is ``validate_data``'s."""
    if is_dask_collection(X):
        return check_dask_array(X, estimator, reset=reset, known_rows=known_rows)
    if is_device_array(X):
        return check_device_array(X, estimator, reset=reset)
    check_numeric_columns(X)
    return validate_data(estimator, X, reset=reset, accept_sparse=accept_sparse, dtype=FLOAT_DTYPES)


def check_X_y(estimator, X, y, *, reset, known_rows=True, accept_sparse=False, **y_checks):
    """``(X, y)`` for a fit: :func:`check_X` for a dask ``X`` (``y`` returned as given:
    :func:`rfstream.solvers.targets.check_targets` aligns it with ``X``), else
    ``validate_data(X, y)`` with ``y_checks`` (``multi_output``, ``y_numeric``)."""
    if is_dask_collection(X):
        return check_dask_array(X, estimator, reset=reset, known_rows=known_rows), y
    if is_device_array(X):  # the labels, a few numbers a row, on the host
        X, y = check_device_array(X, estimator, reset=reset), np.asarray(to_host(y))
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}; give one label per row.")
        return X, y
    check_numeric_columns(X)
    return validate_data(estimator, X, y, reset=reset, accept_sparse=accept_sparse, dtype=FLOAT_DTYPES,
                         **y_checks)


def check_device_array(X, estimator=None, *, reset=False):
    """An in-memory array of another namespace (cupy on a GPU, :class:`rfstream.devices.GenericRows`)
    checked as :func:`check_dask_array` checks a dask array, and kept where it is: 2-d, real
    numbers (integers become float64), rows when fitting, ``n_features_in_`` set or matched."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-d array for X; got ndim={X.ndim} with shape {tuple(X.shape)}.")
    dtype = numpy_dtype(X)
    if dtype.kind not in "biuf":
        raise ValueError(f"X must have a real numeric dtype; got dtype {dtype}.")
    if dtype.kind != "f":
        xp = array_namespace(X)
        X = xp.astype(X, xp.float64)
    if reset and X.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={tuple(X.shape)}) while a minimum of 1 is required.")
    if estimator is not None:
        if reset:
            estimator.n_features_in_ = int(X.shape[1])
        elif X.shape[1] != estimator.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
                             f"{estimator.n_features_in_} features as input.")
    return X


def check_numeric_columns(X):
    """Raise a one-line ``ValueError`` naming the non-numeric columns of a (pandas or dask) DataFrame.

    Real numbers and booleans (numpy or pandas' nullable dtypes) pass; strings,
    categories, dates and objects do not.  Anything that is not a DataFrame passes.
    """
    pd = sys.modules.get("pandas")  # not imported: X is no DataFrame (and a fit need not import it)
    dtypes = getattr(X, "dtypes", None)
    if pd is None or not isinstance(dtypes, pd.Series):
        return
    bad = [(name, dtype) for name, dtype in dtypes.items() if not _is_real(dtype)]
    if bad:
        shown = ", ".join(f"{name!r} ({dtype})" for name, dtype in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise ValueError(
            f"X has {len(bad)} non-numeric column(s): {shown}{more}; encode them as numbers first, "
            "e.g. one-hot encode them (pandas.get_dummies), or convert the data with "
            "`rfstream convert`, which one-hot encodes text columns."
        )


def _is_real(dtype):
    import pandas as pd

    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype)


def _empty_frame(columns):
    import pandas as pd  # a dask DataFrame's: pandas is imported already

    return pd.DataFrame(columns=columns)


def _dask_frame(obj):
    """True for a dask DataFrame or Series; a TypeError for another dask collection that is not an array."""
    if not is_dask_collection(obj) or isinstance(obj, da.Array):
        return False
    import dask.dataframe as dd  # only when a dask collection other than an array is given

    if isinstance(obj, (dd.DataFrame, dd.Series)):
        return True
    raise TypeError(f"expected a dask array or a dask DataFrame; got a dask {type(obj).__name__}. "
                    "Convert it to a dask array first.")


def partition_lengths(frame):
    """The number of rows of each partition of a dask DataFrame or Series, as a tuple of ints.

    One pass that returns a count per partition (computed where the partitions
    are, on the workers); remembered by the frame's dask name (see ``_LENGTHS``).
    """
    key = tokenize(frame)
    if key not in _LENGTHS:
        counts = compute(frame.map_partitions(len, enforce_metadata=False))
        _LENGTHS[key] = tuple(int(c) for c in counts)
        while len(_LENGTHS) > _LENGTHS_KEPT:
            _LENGTHS.popitem(last=False)
    _LENGTHS.move_to_end(key)
    return _LENGTHS[key]


def dask_frame_as_array(frame, lengths=None):
    """A dask DataFrame (or Series) as a dask array with known row chunks, lazily.

    ``lengths``: the partitions' row counts when known, else
    :func:`partition_lengths` computes them.  Nothing else is computed:
    each array block is one partition's values, in row-major order.  Pandas' nullable numbers and
    booleans become float64 (a missing value becomes NaN), as scikit-learn
    converts them for a pandas DataFrame.
    """
    if frame.ndim == 2:
        cast = {c: "float64" for c, t in frame.dtypes.items() if _is_real(t) and
                (not isinstance(t, np.dtype) or t.kind == "b")}  # pandas gives bool + float as object
        frame = frame.astype(cast) if cast else frame
    lengths = partition_lengths(frame) if lengths is None else tuple(lengths)
    with warnings.catch_warnings():  # text labels become an object array: that is what they are
        warnings.filterwarnings("ignore", message=_EXTENSION_WARNING, category=UserWarning)
        arr = frame.to_dask_array(lengths=lengths)
    if arr.ndim == 1:
        return arr
    # pandas hands over a frame's values column by column (Fortran order): rows in C
    # order, as every other input, give the dask array's results bit for bit
    return arr.map_blocks(np.ascontiguousarray, dtype=arr.dtype, chunks=arr.chunks, meta=arr._meta)


def dask_labels(y, row_chunks):
    """A dask Series (or DataFrame) ``y`` as a dask array with ``X``'s ``row_chunks``, lazily.

    When ``y`` has one partition per row block of ``X`` (e.g. ``X`` and ``y``
    taken from one DataFrame), its partitions are taken to have ``X``'s row
    counts and each block checks that when it is computed (a ``ValueError``
    naming the partition otherwise), so nothing is computed here; else its
    partition lengths are computed and it is rechunked to ``X``'s rows.  Any
    other ``y`` is returned as it is.
    """
    if not _dask_frame(y):
        return y
    row_chunks = tuple(row_chunks)
    known = not any(np.isnan(c) for c in row_chunks)
    if known and y.npartitions == len(row_chunks):
        arr = dask_frame_as_array(y, [int(c) for c in row_chunks])
        return arr.map_blocks(_same_rows, dtype=arr.dtype, chunks=arr.chunks, meta=arr._meta)
    arr = dask_frame_as_array(y)
    if known and arr.shape[0] == sum(row_chunks) and arr.chunks[0] != row_chunks:
        arr = arr.rechunk({0: row_chunks})
    return arr


def _same_rows(block, block_info=None):
    start, stop = block_info[0]["array-location"][0]
    if block.shape[0] != stop - start:
        part = block_info[0]["chunk-location"][0]
        raise ValueError(
            f"y's partition {part} has {block.shape[0]} rows but X's row block {part} has "
            f"{stop - start}; give y the partitions of X (take both from one DataFrame) or pass y "
            "as a dask array with X's row chunks."
        )
    return block


def check_dask_array(X, estimator=None, *, reset=False, known_rows=True):
    """Validate a dask array or dask DataFrame ``X``; return a dask array with a single column chunk.

    Parameters
    ----------
    X : dask array or dask DataFrame
        A DataFrame is converted with :func:`dask_frame_as_array` (its partition
        lengths computed, nothing else) after :func:`check_numeric_columns`.
    estimator : estimator, optional
        With ``reset=True`` (fitting) ``X`` must have rows and the estimator's
        ``n_features_in_`` (and, for a DataFrame with string column names,
        ``feature_names_in_``) are set; otherwise ``X`` must have that many
        columns, and scikit-learn's checks of the column names apply (a warning
        for names after a fit without, or the reverse; an error for other names).
    known_rows : bool
        Require known row chunk sizes (reductions need global row offsets).
    """
    frame = _dask_frame(X)
    if frame:
        if X.ndim != 2:
            raise ValueError("Expected a 2-d X; got a dask Series. Pass a DataFrame, e.g. "
                             "series.to_frame().")
        check_numeric_columns(X)
    if estimator is not None:  # names before the column count, as validate_data does
        _check_feature_names(estimator, _empty_frame(X.columns) if frame else None, reset=reset)
    if frame:
        X = dask_frame_as_array(X)
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
        elif n_features != estimator.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(estimator).__name__} is expecting "
                f"{estimator.n_features_in_} features as input."
            )
    return X.rechunk({1: -1}) if X.numblocks[1] > 1 else X

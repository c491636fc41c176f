"""Writing predictions to Zarr block by block, staged (:mod:`rfstream.io.staging`).

A predictions group holds ``y_pred`` (one label or value per row) and, optionally,
``scores`` (a classifier's decision values or class probabilities, rows first) and other
named outputs with the same rows, written by the same tasks: for lazy dask inputs that share
their graph each block is computed once.  See docs/io.md, "rfstream/io/predictions.py".
"""
from __future__ import annotations

import dask.array as da
import numpy as np

from ..cluster import compute
from .dataset import new_array, writable_group
from .location import as_location
from .staging import staging
from .zarr_source import lazy_array, open_source


def _regular(a, rows):
    """``a`` as a dask array in row chunks of ``rows`` (one chunk along the other axes), so
    that no two tasks write into the same Zarr chunk."""
    a = a if isinstance(a, da.Array) else da.from_array(np.asarray(a))
    return a.rechunk({0: rows, **{axis: -1 for axis in range(1, a.ndim)}})


def write_predictions(pred, path, *, scores=None, arrays=None, attrs=None, overwrite=False,
                      storage_options=None):
    """Store predictions as a Zarr group, block by block, written by the workers.

    Parameters
    ----------
    pred : numpy or dask array, rows first
        Stored as array ``y_pred``.
    path : str, Path or URL
        Written whole or not at all (:mod:`rfstream.io.staging`).
    scores : array with the same rows, optional
        Stored as array ``scores``.
    arrays : dict, optional
        More named outputs with the same rows (``std``, ``lower``, ...), each under its name.
    attrs : dict, optional
        Attributes of the group.
    overwrite : bool, default=False
    storage_options : dict, optional

    Returns
    -------
    path

    Raises
    ------
    ValueError
        For a name that is not an identifier (or is ``y_pred``), or an output whose rows
        differ from ``pred``'s.
    """
    named = {} if scores is None else {"scores": scores}
    named.update(arrays or {})
    for name in named:
        if not (isinstance(name, str) and name.isidentifier() and name != "y_pred"):
            raise ValueError(f"an output array's name must be a Python identifier other than 'y_pred'; "
                             f"got {name!r}.")
    with staging(as_location(path, storage_options), overwrite) as store:
        group = writable_group(store)
        group.attrs.update({k: v for k, v in (attrs or {}).items()})
        pred = pred if isinstance(pred, da.Array) else da.from_array(np.asarray(pred))
        rows = max(pred.chunks[0][0], 1)
        sources = {"y_pred": _regular(pred, rows)}
        for name, values in named.items():
            if values.shape[0] != pred.shape[0]:
                raise ValueError(f"{name} has {values.shape[0]} rows but the predictions {pred.shape[0]}.")
            sources[name] = _regular(values, rows)
        targets = [new_array(group, name, shape=a.shape, dtype=a.dtype, chunks=tuple(c[0] for c in a.chunks))
                   for name, a in sources.items()]
        stored = da.store(list(sources.values()), targets, lock=False, compute=False)
        compute(*(stored if isinstance(stored, (list, tuple)) else [stored]))  # workers write their blocks
    return path


def read_predictions(path, *, storage_options=None, array="y_pred"):
    """An array of a predictions group as a lazy dask array.

    Parameters
    ----------
    path : str, Path or URL
    storage_options : dict, optional
    array : str, default="y_pred"
        ``y_pred``, ``scores`` or another name :func:`write_predictions` was given.

    Returns
    -------
    dask array
    """
    source = open_source(path, storage_options)
    return lazy_array(source, array)

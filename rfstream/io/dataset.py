"""Zarr datasets: write, open and inspect them (conversion: :mod:`rfstream.io.convert`).

A dataset rfstream writes is a Zarr v3 group: ``X`` (n x d float32, chunked by rows only),
optional ``y`` (int32 class codes into ``attrs["classes"]``, -1 for a label unseen in a
``like=`` training set, or float32 targets) and attributes; every chunk zstd-compressed with its
checksum (:func:`new_array`).  Every writer stages its output
(:mod:`rfstream.io.staging`); readers take any Zarr v2 or v3 group, arrays chosen by name
(:mod:`rfstream.io.zarr_source`).  The layout and its attributes: docs/io.md,
"rfstream/io/dataset.py".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import zarr

from .. import sizes
from ..cluster import compute
from .location import Location, as_location, storage_errors
from .staging import staging
from .zarr_source import (
    DEFAULT_X,
    DEFAULT_Y,
    SCHEMA_VERSION,
    check_chunks,
    infer_task,
    is_dask_array,
    lazy_array,
    open_source,
)

__all__ = ["dataset_info", "iter_row_chunks", "new_array", "onehot_columns", "open_dataset", "write_dataset"]

#: zstd's level for the chunks rfstream writes (0: zstd's default, 3)
ZSTD_LEVEL = 0


class ChunkWriter:
    """Writes row blocks into X (and y) of a new Zarr group, growing it if needed, a whole
    chunk at a time.  A chunk holds ``rows_per_chunk`` rows, or fewer for wide data
    (:func:`rfstream.sizes.block_rows`: ``chunk_rows``); the width itself is bounded
    (:func:`rfstream.sizes.check_width`)."""

    def __init__(self, target, n_features: int, y_dtype, rows_per_chunk: int,
                 n_rows: int | None = None):
        sizes.check_width(n_features, "the dataset written")
        self.chunk_rows = sizes.block_rows(n_features, rows_per_chunk)
        self.group = writable_group(target)
        self.n_rows = n_rows
        self.rows = 0  # appended, written or pending
        self.pending = []  # blocks of rows not yet a whole chunk
        n0 = n_rows or 0
        # every chunk is stored, zeros too: zarr's test for a chunk of fill values costs
        # more than compressing it (docs/io.md)
        config = {"write_empty_chunks": True}
        self.X = new_array(self.group, "X", shape=(n0, n_features), dtype="float32",
                           chunks=(self.chunk_rows, n_features), fill_value=0, config=config)
        self.y = None if y_dtype is None else new_array(
            self.group, "y", shape=(n0,), dtype=np.dtype(y_dtype).name, chunks=(self.chunk_rows,),
            fill_value=0, config=config)

    def append(self, X: np.ndarray, y: np.ndarray | None) -> None:
        self.pending.append((X, y))
        self.rows += len(X)
        if sum(len(p[0]) for p in self.pending) >= self.chunk_rows:
            self._write_pending(whole=True)

    def _write_pending(self, whole: bool) -> None:
        """Write the pending rows: the whole chunks among them, or (``whole=False``) all."""
        Xs = [p[0] for p in self.pending]
        X = Xs[0] if len(Xs) == 1 else np.concatenate(Xs)
        y = None if self.y is None else (self.pending[0][1] if len(Xs) == 1 else
                                         np.concatenate([p[1] for p in self.pending]))
        n = len(X) - len(X) % self.chunk_rows if whole else len(X)
        a = self.rows - len(X)
        b = a + n
        if b > self.X.shape[0]:
            self.X.resize((b, self.X.shape[1]))
            if self.y is not None:
                self.y.resize((b,))
        if n:
            self.X[a:b] = X[:n]
            if self.y is not None:
                self.y[a:b] = y[:n]
        self.pending = [] if n == len(X) else [(X[n:], None if y is None else y[n:])]

    def finish(self, attrs: dict) -> None:
        if self.pending:
            self._write_pending(whole=False)
        if self.n_rows is not None and self.rows != self.n_rows:
            raise ValueError(f"read {self.rows} rows in pass 2 but {self.n_rows} in pass 1; "
                             "did the source file change during the conversion?")
        self.group.attrs.update(json_attrs(attrs))


def writable_group(target) -> zarr.Group:
    """A new, empty Zarr v3 group at a :class:`Location` (or in a zarr store / Group)."""
    if isinstance(target, zarr.Group):
        return target
    if isinstance(target, Location):
        with storage_errors(target, "cannot be written"):
            return zarr.open_group(target.zarr_store(read_only=False), mode="w", zarr_format=3)
    return zarr.open_group(target, mode="w", zarr_format=3)


def new_array(group: zarr.Group, name: str, **kwargs) -> zarr.Array:
    """``group.create_array`` as every array rfstream writes is made: each chunk
    zstd-compressed with zstd's frame checksum, so that a damaged chunk fails to decode
    (one line, :class:`rfstream.io.zarr_source.CheckedReader`) instead of reading as other numbers."""
    from zarr.codecs import ZstdCodec

    return group.create_array(name, compressors=[ZstdCodec(level=ZSTD_LEVEL, checksum=True)], **kwargs)


def json_attrs(attrs: dict) -> dict:
    out = json.loads(json.dumps(attrs, default=_json_default))
    return out


def _json_default(obj):
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, (np.ndarray, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise ValueError(f"attrs: {obj!r} of type {type(obj).__name__} is not JSON-serializable; "
                     "use str, int, float, bool, None, lists or dicts")


# ----------------------------------------------------------------- write / open
def check_rows_per_chunk(rows_per_chunk) -> int:
    if isinstance(rows_per_chunk, bool) or not isinstance(rows_per_chunk, (int, np.integer)) \
            or rows_per_chunk < 1:
        raise ValueError(f"rows_per_chunk must be a positive int; got {rows_per_chunk!r}")
    return int(rows_per_chunk)


def _y_dtype(y) -> np.dtype:
    kind = np.dtype(y.dtype).kind
    if kind in "iub":
        return np.dtype("int32")
    if kind == "f":
        return np.dtype("float32")
    raise ValueError(f"y must hold integer class codes or float targets; got dtype {y.dtype}. "
                     "Encode string labels with rfstream.io.convert or as codes first")


def write_dataset(path, X, y=None, *, attrs=None, rows_per_chunk=65536, overwrite=False,
                  storage_options=None):
    """Write ``X`` (and ``y``) as a Zarr dataset, chunk by chunk.

    Parameters
    ----------
    path : str, Path, URL, zarr store or Group
        Destination: a local directory or a URL (``s3://bucket/x.zarr``), written
        whole or not at all (:mod:`rfstream.io.staging`); or a zarr store or
        Group, written into directly (no staging).
    X : numpy or dask array, shape (n, d)
        Stored as float32 with chunks ``(rows_per_chunk, d)``.  A dask array is
        rechunked by rows and stored block by block (``da.store``); it is never
        gathered on the client.
    y : numpy or dask array, shape (n,), optional
        Integer class codes (stored int32) or float targets (stored float32).
    attrs : dict, optional
        JSON-serializable attributes; they override the defaults ``schema_version``,
        ``n_rows``, ``task`` (from y's dtype), ``feature_names`` (``x0 .. x{d-1}``).
    rows_per_chunk : int, default=65536
    overwrite : bool, default=False
        Replace an existing dataset at ``path``; otherwise ``FileExistsError``.
    storage_options : dict, optional
        For a URL's filesystem (:mod:`rfstream.io.location`).

    Returns
    -------
    dict
        The attributes written.

    Raises
    ------
    ValueError
        For X not 2-D or without columns, y not one value per row or neither integer nor
        float, unknown chunk sizes, a ``rows_per_chunk`` that is not a positive int, or
        attributes that are not JSON.
    """
    rows_per_chunk = check_rows_per_chunk(rows_per_chunk)
    X = X if is_dask_array(X) else np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_rows, n_features); got shape {X.shape}")
    if y is not None:
        y = y if is_dask_array(y) else np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-D with one value per row of X ({X.shape[0]}); "
                             f"got shape {y.shape}")
    if any(np.isnan(s) for s in X.shape):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    n, d = (int(s) for s in X.shape)
    if d == 0:
        raise ValueError(f"X must have at least one column; got shape {X.shape}")
    y_dtype = None if y is None else _y_dtype(y)
    task = None if y is None else ("classification" if y_dtype.kind == "i" else "regression")
    meta = {"schema_version": SCHEMA_VERSION, "n_rows": n, "task": task,
            "feature_names": [f"x{j}" for j in range(d)]}
    meta.update(attrs or {})
    if isinstance(path, zarr.Group) or not isinstance(path, (str, os.PathLike, Location)):
        _write(path, X, y, d, y_dtype, rows_per_chunk, n, meta)
    else:
        with staging(as_location(path, storage_options), overwrite) as tmp:
            _write(tmp, X, y, d, y_dtype, rows_per_chunk, n, meta)
    return json_attrs(meta)


def _write(target, X, y, d, y_dtype, rows_per_chunk, n, meta) -> None:
    w = ChunkWriter(target, d, y_dtype, rows_per_chunk, n)
    step = w.chunk_rows
    if is_dask_array(X) or is_dask_array(y):
        _store_dask(w, X, y, step)
        w.rows = n
    else:
        for a in range(0, n, step):
            b = min(a + step, n)
            w.append(X[a:b].astype(np.float32, copy=False),
                     None if y is None else y[a:b].astype(y_dtype, copy=False))
    w.finish(meta)


def _store_dask(w: ChunkWriter, X, y, rows_per_chunk: int) -> None:
    import dask.array as da  # X or y is a dask array: dask.array is imported

    sources = [da.asarray(X).astype(np.float32).rechunk((rows_per_chunk, -1))]
    targets = [w.X]
    if y is not None:
        sources.append(da.asarray(y).astype(w.y.dtype).rechunk((rows_per_chunk,)))
        targets.append(w.y)
    stored = da.store(sources, targets, lock=False, compute=False)
    compute(*(stored if isinstance(stored, (list, tuple)) else [stored]))  # workers write their chunks


def open_dataset(path, *, x=DEFAULT_X, y=DEFAULT_Y, storage_options=None):
    """Open a dataset lazily: ``(X, y)`` dask arrays, one row block per Zarr chunk.

    Workers read their own rows straight from the store; the blocks are evened when the
    last chunk is short (:func:`rfstream.reductions.even_row_chunks`, docs/io.md).

    Parameters
    ----------
    path : str, Path, URL, zarr Group or store, or xarray Dataset
        A Zarr v2 or v3 group (``s3://bucket/train.zarr`` with ``storage_options``).
    x, y : str
        The arrays' names; ``y=None``: no labels (a missing array named ``"y"`` means no
        labels too, any other missing name is an error).
    storage_options : dict, optional
        For a URL's filesystem.

    Returns
    -------
    X : dask array of shape (n, d)
    y : dask array of shape (n,), or None

    Raises
    ------
    ValueError
        For X not 2-D, y not one label per row; when computed, for a damaged chunk
        (naming the dataset and the rows).
    """
    source = open_source(path, storage_options)
    X = lazy_array(source, x)
    if X.ndim != 2:
        raise ValueError(f"{source.where}: array {x!r} must be 2-D (rows, features); got shape {X.shape}")
    labels = _labels(source, y)
    if labels is None:
        return X, None
    Y = lazy_array(source, labels)
    if Y.ndim == 2 and Y.shape[1] == 1:
        Y = Y[:, 0]
    if Y.ndim != 1:
        raise ValueError(f"{source.where}: array {labels!r} must be 1-D (one label per row); "
                         f"got shape {Y.shape}")
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"{source.where}: X has {X.shape[0]} rows but y has {Y.shape[0]} (arrays "
                         f"{x!r}, {labels!r}); write one label per row")
    return X, Y


def _labels(source, y):
    if y is None:
        return None
    if source.array(y, required=y != DEFAULT_Y) is None:
        return None
    return y


def dataset_info(path, *, x=DEFAULT_X, y=DEFAULT_Y, storage_options=None) -> dict:
    """Shape, chunks, dtypes and attributes of a dataset, without reading the data.

    Parameters
    ----------
    path, x, y, storage_options
        As for :func:`open_dataset`.

    Returns
    -------
    dict
        ``path``, ``shape``, ``chunks``, ``dtype``, ``y_dtype``, ``arrays`` and ``attrs``;
        for a store without rfstream's attributes ``attrs["task"]`` is inferred from y's
        dtype and ``attrs["task_inferred"]`` is True.
    """
    source = open_source(path, storage_options)
    X = source.array(x)
    labels = _labels(source, y)
    Y = None if labels is None else source.array(labels)
    _check_chunks(source, ((x, X), (labels, Y)))
    attrs = dict(source.attrs)
    if "task" not in attrs:
        attrs["task"] = infer_task(None if Y is None else Y.dtype)
        attrs["task_inferred"] = True
    chunks = X.chunks if is_dask_array(X) else getattr(X, "chunks", X.shape)
    return {"path": source.where, "shape": tuple(X.shape),
            "chunks": tuple(c[0] if isinstance(c, tuple) else c for c in chunks),
            "dtype": str(X.dtype), "y_dtype": None if Y is None else str(Y.dtype),
            "arrays": {"X": x, "y": labels}, "attrs": attrs}


def iter_row_chunks(path, *, x=DEFAULT_X, y=DEFAULT_Y, storage_options=None
                    ) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """Yield ``(row_offset, X_chunk, y_chunk or None)`` as numpy, one Zarr chunk at a time
    (``path``, ``x``, ``y``, ``storage_options`` as for :func:`open_dataset`)."""
    source = open_source(path, storage_options)
    X = source.array(x)
    labels = _labels(source, y)
    Y = None if labels is None else source.array(labels)
    _check_chunks(source, ((x, X), (labels, Y)))
    step = X.chunks[0] if isinstance(X.chunks[0], int) else X.chunks[0][0]
    for a in range(0, X.shape[0], step):
        b = min(a + step, X.shape[0])
        yield a, np.asarray(X[a:b]), (None if Y is None else np.asarray(Y[a:b]))


def _check_chunks(source, arrays) -> None:
    """:func:`~rfstream.io.zarr_source.check_chunks` of each Zarr array of ``(name, array)``."""
    for name, array in arrays:
        if array is not None and not isinstance(array, np.ndarray) and not is_dask_array(array):
            check_chunks(array, source.where, name)


def onehot_columns(attrs):
    """Indices of the one-hot columns of a dataset, from its ``categorical`` attrs.

    Parameters
    ----------
    attrs : dict or str
        The dataset's attributes, or its path (its attributes are read).

    Returns
    -------
    list of int
    """
    if not isinstance(attrs, dict):
        attrs = dataset_info(attrs)["attrs"]
    categorical = attrs.get("categorical") or {}
    names = attrs.get("feature_names") or []
    prefixes = tuple(f"{col}=" for col in categorical)
    return [i for i, name in enumerate(names) if prefixes and name.startswith(prefixes)]

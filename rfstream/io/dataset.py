"""Zarr datasets: write, open and inspect them (conversion: :mod:`rfstream.io.convert`).

A dataset is a local Zarr v3 group::

    X      n x d float32, chunked by rows only: chunks=(rows_per_chunk, d)
    y      optional, length n: int32 class codes into attrs["classes"] (-1 for a label
           unseen in a ``like=`` training set), or float32 regression targets
    attrs  schema_version (1), n_rows, task ("classification" | "regression" | None),
           classes, positive_class, feature_names, categorical, fill_values, columns,
           label_column, source, format, n_unseen_labels, n_unseen_categories,
           class_counts (see :func:`convert`)

Every writer stages into a sibling ``<dst>.tmp-<random>`` directory and renames it
onto ``dst`` only on success, so a failed write leaves nothing behind.
Model files are not handled here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from dask.array.core import normalize_chunks

from ..reductions import even_row_chunks
from .staging import staging

__all__ = ["dataset_info", "iter_row_chunks", "onehot_columns", "open_dataset", "write_dataset"]

SCHEMA_VERSION = 1


class ChunkWriter:
    """Writes row blocks into X (and y) of a new Zarr group, growing it if needed."""

    def __init__(self, path: Path, n_features: int, y_dtype, rows_per_chunk: int,
                 n_rows: int | None = None):
        self.group = zarr.open_group(path, mode="w", zarr_format=3)
        self.n_rows, self.rows = n_rows, 0
        n0 = n_rows or 0
        self.X = self.group.create_array("X", shape=(n0, n_features), dtype="float32",
                                         chunks=(rows_per_chunk, n_features), fill_value=0)
        self.y = None if y_dtype is None else self.group.create_array(
            "y", shape=(n0,), dtype=np.dtype(y_dtype).name, chunks=(rows_per_chunk,),
            fill_value=0)

    def append(self, X: np.ndarray, y: np.ndarray | None) -> None:
        a, b = self.rows, self.rows + len(X)
        if b > self.X.shape[0]:
            self.X.resize((b, self.X.shape[1]))
            if self.y is not None:
                self.y.resize((b,))
        self.X[a:b] = X
        if self.y is not None:
            self.y[a:b] = y
        self.rows = b

    def finish(self, attrs: dict) -> None:
        if self.n_rows is not None and self.rows != self.n_rows:
            raise ValueError(f"read {self.rows} rows in pass 2 but {self.n_rows} in pass 1; "
                             "did the source file change during the conversion?")
        self.group.attrs.update(json_attrs(attrs))


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


def write_dataset(path, X, y=None, *, attrs=None, rows_per_chunk=65536, overwrite=False):
    """Write ``X`` (and ``y``) as a Zarr dataset, chunk by chunk.

    Parameters
    ----------
    path : str or Path
        Destination directory (local).  Written to a temporary sibling, then renamed.
    X : numpy or dask array, shape (n, d)
        Stored as float32 with chunks ``(rows_per_chunk, d)``.  A dask array is
        rechunked by rows and stored block by block (``da.store``); it is never
        gathered on the client.
    y : numpy or dask array, shape (n,), optional
        Integer class codes (stored int32) or float targets (stored float32).
    attrs : dict, optional
        JSON-serializable attributes; they override the defaults ``schema_version``,
        ``n_rows``, ``task`` (from y's dtype), ``feature_names`` (``x0 .. x{d-1}``).
    rows_per_chunk : int
    overwrite : bool
        Replace an existing dataset at ``path``; otherwise ``FileExistsError``.

    Returns
    -------
    dict : the attributes written.
    """
    rows_per_chunk = check_rows_per_chunk(rows_per_chunk)
    X = X if isinstance(X, da.Array) else np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_rows, n_features); got shape {X.shape}")
    if y is not None:
        y = y if isinstance(y, da.Array) else np.asarray(y)
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
    with staging(path, overwrite) as tmp:
        w = ChunkWriter(tmp, d, y_dtype, rows_per_chunk, n)
        if isinstance(X, da.Array) or isinstance(y, da.Array):
            _store_dask(w, X, y, rows_per_chunk)
        else:
            for a in range(0, n, rows_per_chunk):
                b = min(a + rows_per_chunk, n)
                w.append(X[a:b].astype(np.float32, copy=False),
                         None if y is None else y[a:b].astype(y_dtype, copy=False))
        w.rows = n
        w.finish(meta)
    return json_attrs(meta)


def _store_dask(w: ChunkWriter, X, y, rows_per_chunk: int) -> None:
    sources = [da.asarray(X).astype(np.float32).rechunk((rows_per_chunk, -1))]
    targets = [w.X]
    if y is not None:
        sources.append(da.asarray(y).astype(w.y.dtype).rechunk((rows_per_chunk,)))
        targets.append(w.y)
    da.store(sources, targets, lock=False)


def _open_group(path) -> zarr.Group:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"dataset {path} does not exist; create it with "
                                "rfstream.io.convert or write_dataset")
    try:
        group = zarr.open_group(path, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise ValueError(f"{path} is not a Zarr dataset ({exc}); create it with "
                         "rfstream.io.convert or write_dataset") from exc
    if "X" not in group:
        raise ValueError(f"{path} is a Zarr group but has no array 'X'; it is not an "
                         "rfstream dataset")
    version = group.attrs.get("schema_version", SCHEMA_VERSION)
    if version > SCHEMA_VERSION:
        raise ValueError(f"{path} has schema_version {version}; this rfstream reads "
                         f"<= {SCHEMA_VERSION}: upgrade rfstream")
    return group


class _CheckedReader:
    """Array-like over a Zarr array: a chunk that cannot be read or decoded raises a
    one-line ``ValueError`` naming the dataset, the array and the rows.

    Zarr's codecs raise ``RuntimeError`` and others for a damaged chunk, deep inside a
    task; this turns them into an error a user can act on, wherever the task runs.
    """

    def __init__(self, array, path):
        self.array, self.path = array, str(path)
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key):
        try:
            return self.array[key]
        except Exception as exc:  # any codec or storage failure: report it as bad data
            rows = key[0] if isinstance(key, tuple) else key
            where = f"rows {rows.start}-{rows.stop}" if isinstance(rows, slice) else "a chunk"
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(
                f"dataset {self.path}: {where} of array {self.array.basename!r} cannot be read "
                f"({detail}); the dataset is damaged, convert or write it again"
            ) from None


def _lazy(group, name, path):
    array = group[name]
    rows = even_row_chunks(normalize_chunks(array.chunks, array.shape)[0])
    token = dask.base.tokenize(str(Path(path).resolve()), name, array.shape, array.chunks, rows,
                               os.path.getmtime(Path(path) / name / "zarr.json"))
    chunks = (rows, *array.chunks[1:])
    return da.from_array(_CheckedReader(array, path), chunks=chunks, name=f"rfstream-{name}-{token}",
                         meta=np.empty((0,) * array.ndim, array.dtype), asarray=False)


def open_dataset(path):
    """Open a dataset lazily: ``(X, y)`` dask arrays, one row block per Zarr chunk.

    The blocks are the Zarr chunks, except when the last chunk is short enough to
    leave a worker idle through part of a pass's last round: then the rows are cut
    into as many equal blocks (:func:`rfstream.reductions.even_row_chunks`; KDD99's
    494,021 rows in 8 blocks of 61,753 instead of 7 x 65,536 + 35,269).  Each
    block reads its own rows straight from the store, so every task of a pass
    stays independent (a rechunk afterwards would make tasks share the chunks
    they were cut from, and a distributed scheduler place them by where those
    are, unevenly: docs/BENCHMARKS.md, "Measurements behind the code").
    ``y`` is None when the dataset has no labels.  Nothing is read until computed; a
    damaged chunk raises a ``ValueError`` naming the dataset and the rows when read.
    """
    group = _open_group(path)
    X = _lazy(group, "X", path)
    y = _lazy(group, "y", path) if "y" in group else None
    return X, y


def dataset_info(path) -> dict:
    """Shape, chunks, dtypes and attributes of a dataset, without reading the data."""
    group = _open_group(path)
    X = group["X"]
    y = group["y"] if "y" in group else None
    return {"path": str(path), "shape": tuple(X.shape), "chunks": tuple(X.chunks),
            "dtype": str(X.dtype), "y_dtype": None if y is None else str(y.dtype),
            "attrs": dict(group.attrs)}


def iter_row_chunks(path) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """Yield ``(row_offset, X_chunk, y_chunk or None)`` as numpy, one Zarr chunk at a time."""
    group = _open_group(path)
    X, y = group["X"], (group["y"] if "y" in group else None)
    step = X.chunks[0]
    for a in range(0, X.shape[0], step):
        b = min(a + step, X.shape[0])
        yield a, X[a:b], (None if y is None else y[a:b])


def onehot_columns(attrs):
    """Indices of the one-hot columns of a dataset (from its ``categorical`` attrs)."""
    categorical = attrs.get("categorical") or {}
    names = attrs.get("feature_names") or []
    prefixes = tuple(f"{col}=" for col in categorical)
    return [i for i, name in enumerate(names) if prefixes and name.startswith(prefixes)]

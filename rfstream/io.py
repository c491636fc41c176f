"""Zarr datasets: write, open, inspect, and convert CSV / LIBSVM / npy / npz into them.

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
import time
from collections.abc import Iterator
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from dask.array.core import normalize_chunks

from . import _csv, _libsvm
from ._ingest import (
    TASKS,
    LabelEncoder,
    LabelScanner,
    LabelSchema,
    Plan,
    canonical_label,
    check_like_task,
    first_data_lines,
)
from ._staging import check_destination, staging
from .reductions import even_row_chunks

__all__ = ["convert", "dataset_info", "iter_row_chunks", "open_dataset", "write_dataset"]

SCHEMA_VERSION = 1


class _ChunkWriter:
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
        self.group.attrs.update(_json_attrs(attrs))


def _json_attrs(attrs: dict) -> dict:
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
def _check_rows_per_chunk(rows_per_chunk) -> int:
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
    rows_per_chunk = _check_rows_per_chunk(rows_per_chunk)
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
        w = _ChunkWriter(tmp, d, y_dtype, rows_per_chunk, n)
        if isinstance(X, da.Array) or isinstance(y, da.Array):
            _store_dask(w, X, y, rows_per_chunk)
        else:
            for a in range(0, n, rows_per_chunk):
                b = min(a + rows_per_chunk, n)
                w.append(X[a:b].astype(np.float32, copy=False),
                         None if y is None else y[a:b].astype(y_dtype, copy=False))
        w.rows = n
        w.finish(meta)
    return _json_attrs(meta)


def _store_dask(w: _ChunkWriter, X, y, rows_per_chunk: int) -> None:
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
    are, unevenly: measured 13.2 s against 9.9 s for one ridge pass, docs/BENCHMARKS.md).
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


# ----------------------------------------------------------------- convert
def _source_kind(src: Path) -> str:
    name = src.name.lower()
    for ext in (".gz", ".bz2", ".xz"):
        name = name.removesuffix(ext)
    suffix = Path(name).suffix
    if suffix in (".npy", ".npz"):
        return suffix[1:]
    if suffix in _libsvm.SUFFIXES:
        return "libsvm"
    _, lines = first_data_lines(src, 1)
    return "libsvm" if lines and _libsvm.looks_like_libsvm(lines[0]) else "csv"


def _plan_array(src: Path, *, label_column, positive, task, like, like_attrs,
                rows_per_chunk, **_) -> Plan:
    """.npy (memory-mapped, rows streamed) or .npz (members "X", optional "y").

    npz members cannot be memory-mapped: ``X`` and ``y`` are read whole into memory,
    then written chunk by chunk.  Use .npy (or CSV/LIBSVM) for data larger than memory.
    """
    if src.suffix.lower() == ".npy":
        X, y = np.load(src, mmap_mode="r", allow_pickle=False), None
    else:
        with np.load(src, allow_pickle=False) as z:
            if "X" not in z:
                raise ValueError(f"{src} has no member 'X' (members: {list(z.keys())}); "
                                 "save it with np.savez(path, X=X, y=y)")
            X, y = z["X"], (z["y"] if "y" in z else None)
    if X.ndim != 2:
        raise ValueError(f"{src}: X must be 2-D (n_rows, n_features); got shape {X.shape}")
    if y is not None and y.shape != (X.shape[0],):
        raise ValueError(f"{src}: y must have shape ({X.shape[0]},); got {y.shape}")
    y = None if label_column is None else y
    d = X.shape[1]
    if like_attrs is not None:
        if len(like_attrs["feature_names"]) != d:
            raise ValueError(f"{src} has {d} features but like={like} has "
                             f"{len(like_attrs['feature_names'])}")
        schema = LabelSchema.from_attrs(like_attrs)
        check_like_task(task, positive, schema, like)
    elif y is not None:
        scanner = LabelScanner(positive)
        for a in range(0, len(y), rows_per_chunk):
            scanner.update(y[a:a + rows_per_chunk])
        schema = scanner.decide(task, src, "y")
    if y is not None and schema is None:
        raise ValueError(f"like={like} has no labels but {src} has 'y'; pass label_column=None")
    labels = None if y is None else LabelEncoder(schema, src)

    def chunks():
        for a in range(0, X.shape[0], rows_per_chunk):
            b = a + rows_per_chunk
            yield np.asarray(X[a:b], dtype=np.float32), (labels.encode(y[a:b]) if labels else None)

    def stats():
        return {"n_unseen_categories": 0, **(labels.stats() if labels else {"n_unseen_labels": 0})}

    names = like_attrs["feature_names"] if like_attrs else [f"x{j}" for j in range(d)]
    attrs = {"format": src.suffix.lower()[1:], "feature_names": names,
             "categorical": {}, "fill_values": {}, "label_column": None if y is None else "y"}
    attrs.update(schema.attrs() if labels else {"task": None, "positive_class": None})
    return Plan(X.shape[0], d, labels.dtype if labels else None, attrs, chunks, stats)


_PLANNERS = {"csv": _csv.plan, "libsvm": _libsvm.plan, "npy": _plan_array, "npz": _plan_array}


def convert(src, dst, *, label_column="last", positive_class=None, rows_per_chunk=65536,
            header="auto", task="auto", like=None, overwrite=False, sep="auto") -> dict:
    """Convert a CSV, LIBSVM, .npy or .npz file into a Zarr dataset, streaming.

    The format follows the name (``.npy``, ``.npz``; ``.svm .libsvm .svmlight .trn
    .tst .t`` are LIBSVM) and otherwise the first data line (``label idx:val ...`` is
    LIBSVM, anything else CSV).  gzip, bzip2 and xz compression is detected.  Text
    sources are read twice, one chunk of ``rows_per_chunk`` rows at a time, so memory
    does not grow with the number of rows (see ``rfstream._csv`` and ``rfstream._libsvm``).

    CSV: lines at the top that start with ``#`` or ``|`` and blank lines are skipped;
    ``?`` and pandas' usual markers (empty, ``NA``, ``nan`` ...) mean missing.  A column
    whose values all parse as numbers is numeric (missing -> the column mean); any other
    column is categorical and one-hot encoded into columns named ``"name=value"``, in
    sorted order (missing -> all zeros).  Without a header, column ``j`` (0-based, label
    included) is named ``"c{j}"``.

    Labels are stripped of whitespace and of ONE trailing ``"."`` (adult.test writes
    ``">50K."`` where adult.data writes ``">50K"``, KDD99 writes ``"normal."``), and
    numeric labels are written canonically (``"-1.0"`` -> ``"-1"``).

    Parameters
    ----------
    src, dst : str or Path
        Source file; destination dataset directory (staged, then renamed).
    label_column : "last", "first", int, str or None
        CSV label column: 0-based index (negative allowed) or header name.  None: no
        label.  LIBSVM: the label is always the first token (None drops it).
    positive_class : str, optional
        Binary task "P vs rest": ``classes = ["rest", P]``, y = 1 where the label is P
        (``"normal"`` and ``"normal."`` are the same).
    rows_per_chunk : int
        Rows per Zarr chunk and per streamed block.
    header : "auto", True or False
        "auto": a header if no field of the first line is a number while the second
        line has one.
    task : "auto", "classification" or "regression"
        "auto": classification for non-numeric labels or integer-valued labels with at
        most 32 distinct values; regression otherwise.
    like : str or Path, optional
        A dataset converted earlier (the training set): reuse its columns, categories,
        fill values, classes, task and positive class.  Unseen categories encode as
        zeros (counted in ``n_unseen_categories``), unseen labels as ``y = -1``
        (counted in ``n_unseen_labels``).  Pass 1 is skipped.
    overwrite : bool
        Replace an existing dataset at ``dst``.
    sep : "auto" or str
        CSV field separator; "auto" tries ``,``, tab, ``;``, then whitespace.

    Returns
    -------
    dict
        The attributes written, plus ``path``, ``shape`` and ``seconds``.
    """
    start = time.perf_counter()
    src, dst = Path(src), Path(dst)
    if not src.exists():
        raise FileNotFoundError(f"source file {src} does not exist")
    if not src.is_file():
        raise ValueError(f"source {src} is not a file")
    check_destination(dst, overwrite, "zarr.json")
    rows_per_chunk = _check_rows_per_chunk(rows_per_chunk)
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not valid; use one of {TASKS}")
    if sep != "auto" and not (isinstance(sep, str) and sep):
        raise ValueError(f"sep={sep!r} is not valid; use 'auto' or a separator string")
    positive = None if positive_class is None else canonical_label(positive_class)[0]
    like_attrs = None if like is None else dataset_info(like)["attrs"]
    plan = _PLANNERS[_source_kind(src)](
        src, label_column=label_column, positive=positive, task=task, like=like,
        like_attrs=like_attrs, rows_per_chunk=rows_per_chunk, header=header, sep=sep)
    with staging(dst, overwrite) as tmp:
        w = _ChunkWriter(tmp, plan.n_features, plan.y_dtype, rows_per_chunk, plan.n_rows)
        for X, y in plan.chunks():
            w.append(X, y)
        attrs = {"schema_version": SCHEMA_VERSION, **plan.attrs, **plan.stats(),
                 "source": os.path.abspath(src), "n_rows": w.rows}
        w.finish(attrs)
    summary = _json_attrs(attrs)
    summary.update(path=str(dst), shape=[w.rows, plan.n_features],
                   seconds=round(time.perf_counter() - start, 3))
    return summary

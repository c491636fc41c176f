"""Any Zarr as a source of rows: rfstream's datasets and stores written by other tools.

A *source* is a local path or URL (:mod:`rfstream.io.location`) of a Zarr v2 or v3
group, a zarr ``Group`` or store object, or an xarray ``Dataset``.  The arrays
are chosen by name (``x="X"``, ``y="y"``); rfstream's own attributes are not
needed: without them the task follows y's dtype (integers and booleans are class
codes, floats regression targets).  A store rfstream wrote to an object store is
read through its commit (:func:`rfstream.io.staging.resolve_committed`).  See docs/io.md.
"""
from __future__ import annotations

import sys
import uuid

import dask
import numpy as np
import zarr

from .. import sizes
from ..options import ParameterError
from .location import Location, StorageError, as_location, as_storage_error
from .staging import resolve_committed

SCHEMA_VERSION = 1
DEFAULT_X, DEFAULT_Y = "X", "y"


class Source:
    """An opened source: named arrays, attributes and a description for messages."""

    def __init__(self, arrays, attrs: dict, where: str, version: str):
        self.arrays = arrays
        self.attrs = attrs
        self.where = where
        self.version = version

    def names(self) -> list[str]:
        return sorted(self.arrays)

    def array(self, name: str, *, required: bool = True):
        if name in self.arrays:
            return self.arrays[name]
        if not required:
            return None
        raise ParameterError(f"{self.where} has no array {name!r}; its arrays are {self.names()}; "
                             "name the one to use ({x=*}/{y=*})", x=None, y=None)


def _is_xarray(obj) -> bool:
    return type(obj).__module__.split(".", 1)[0] == "xarray"


def open_source(target, storage_options=None) -> Source:
    """Open ``target`` (path, URL, Location, zarr Group or store, xarray Dataset) for reading."""
    if _is_xarray(target):
        data = target.to_dataset(name=target.name or DEFAULT_X) if hasattr(target, "to_dataset") \
            else target
        arrays = {str(k): v.data for k, v in data.data_vars.items()}
        return Source(arrays, dict(data.attrs), "the xarray Dataset", uuid.uuid4().hex)
    if isinstance(target, zarr.Group):
        return _group_source(target, "the zarr Group", uuid.uuid4().hex)
    if _is_store(target):
        group = _open_group(target, "the zarr store")
        return _group_source(group, "the zarr store", uuid.uuid4().hex)
    loc = resolve_committed(as_location(target, storage_options))
    if not loc.exists():
        raise FileNotFoundError(f"dataset {loc} does not exist; create it with rfstream convert "
                                "or write_dataset")
    if loc.isfile():  # a CSV, LIBSVM, Parquet... file given where a dataset (a Zarr folder) belongs
        stem = loc.name.split(".")[0] or "data"
        raise ValueError(f"{loc} is a file, not a Zarr dataset; convert it first: rfstream convert {loc} "
                         f"{stem}.zarr (Python: rfstream.io.convert), then use {stem}.zarr")
    group = _open_group(loc.zarr_store(read_only=True), loc)
    return _group_source(group, str(loc), _version_of(loc))


def _is_store(obj) -> bool:
    from zarr.abc.store import Store

    return isinstance(obj, Store) or hasattr(obj, "__getitem__") and hasattr(obj, "keys") \
        and not isinstance(obj, (str, dict))


def _open_group(store, where) -> zarr.Group:
    """The group in ``store``; ``where`` (a Location, or text) names it in errors, a Location
    also clears the store's error text of its credentials."""
    try:
        return zarr.open_group(store, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        converted = None if isinstance(exc, FileNotFoundError) else \
            as_storage_error(exc, where, "cannot be read")
        if converted is not None:
            raise converted from None
        raise ValueError(f"{where} is not a Zarr dataset ({_first_line(exc)}); create it with "
                         "rfstream convert or write_dataset") from None


def _group_source(group: zarr.Group, where: str, version: str) -> Source:
    arrays = {name: arr for name, arr in group.arrays()}
    attrs = dict(group.attrs)
    schema = attrs.get("schema_version", SCHEMA_VERSION)
    if isinstance(schema, int) and schema > SCHEMA_VERSION:
        raise ValueError(f"{where} has schema_version {schema}; this rfstream reads "
                         f"<= {SCHEMA_VERSION}: upgrade rfstream")
    return Source(arrays, attrs, where, version)


def _version_of(loc: Location) -> str:
    """Something that changes when the store is rewritten (for dask's task names)."""
    for meta in ("zarr.json", ".zgroup", ".zattrs"):
        try:
            info = loc.fs.info(loc.child(meta).path)
        except (FileNotFoundError, OSError):
            continue
        stamp = [info.get(k) for k in ("mtime", "LastModified", "ETag", "created", "size")]
        return f"{loc.path}:{meta}:{stamp}"
    return uuid.uuid4().hex


def _first_line(exc) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class CheckedReader:
    """Array-like over a Zarr array: a chunk that cannot be read or decoded raises a
    one-line ``ValueError`` naming the dataset, the array and the rows.

    Zarr's codecs raise ``RuntimeError`` and others for a damaged chunk, deep inside a
    task; this turns them into an error a user can act on, wherever the task runs.
    """

    def __init__(self, array, where):
        self.array = array
        self.where = str(where)
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim

    def __getitem__(self, key):
        try:
            return self.array[key]
        except StorageError:  # no credentials (io.location.LocatedStore): said where they were missing
            raise
        except Exception as exc:  # any codec or storage failure: report it as bad data
            rows = key[0] if isinstance(key, tuple) else key
            where = f"rows {rows.start}-{rows.stop}" if isinstance(rows, slice) else "a chunk"
            raise ValueError(
                f"dataset {self.where}: {where} of array {self.array.basename!r} cannot be read "
                f"({_first_line(exc)}); the dataset is damaged or unreachable, convert or write it again"
            ) from None


def check_chunks(array, where: str, name: str) -> None:
    """Refuse Zarr metadata whose sizes cannot be honest for rows rfstream reads, before a
    chunk is listed or read: more row chunks than :data:`rfstream.sizes.MAX_ROW_CHUNKS` (a
    shape of 10^12 rows), a chunk over :data:`rfstream.sizes.MAX_CHUNK_BYTES` decoded (a small
    chunk that declares 25 million rows), more columns than :data:`rfstream.sizes.MAX_FEATURES`."""
    shape, chunks = tuple(array.shape), tuple(array.chunks)
    if not shape:
        return
    where = f"{where}: array {name!r}"
    if len(shape) > 1:
        sizes.check_width(int(np.prod(shape[1:], dtype=object)), where)
    fix = "the dataset's metadata do not describe rows rfstream can read; convert or write it again"
    sizes.check_size(f"{where}: the number of row chunks ({shape[0]:,} rows of {chunks[0]:,})",
                     -(-shape[0] // max(chunks[0], 1)), sizes.MAX_ROW_CHUNKS, fix)
    sizes.check_size(f"{where}: a chunk of shape {chunks} in bytes", int(np.prod(chunks, dtype=object))
                     * np.dtype(array.dtype).itemsize, sizes.MAX_CHUNK_BYTES, fix)


def lazy_array(source: Source, name: str):
    """A dask array over the named array, one row block per Zarr chunk (evened, see
    :func:`rfstream.reductions.even_row_chunks`), its sizes checked first
    (:func:`check_chunks`); dask and numpy arrays of an xarray Dataset pass through."""
    import dask.array as da  # here: converting a source or reading its metadata needs no dask.array
    from dask.array.core import normalize_chunks

    from ..reductions import even_row_chunks

    array = source.array(name)
    if isinstance(array, da.Array):
        return array
    if isinstance(array, np.ndarray):
        return da.from_array(array, chunks=(min(65536, max(len(array), 1)),) + array.shape[1:])
    check_chunks(array, source.where, name)
    rows = even_row_chunks(normalize_chunks(array.chunks, array.shape)[0])
    token = dask.base.tokenize(source.where, source.version, name, array.shape, array.chunks, rows)
    chunks = (rows, *array.chunks[1:])
    return da.from_array(CheckedReader(array, source.where), chunks=chunks,
                         name=f"rfstream-{name}-{token}",
                         meta=np.empty((0,) * array.ndim, array.dtype), asarray=False)


def is_dask_array(value) -> bool:
    """Whether ``value`` is a dask array, without importing dask.array (none exists until it is
    imported)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(value, module.Array)


def infer_task(y_dtype) -> str | None:
    """Task of a store without rfstream's attributes, from y's dtype."""
    if y_dtype is None:
        return None
    kind = np.dtype(y_dtype).kind
    return {"i": "classification", "u": "classification", "b": "classification",
            "f": "regression"}.get(kind)

"""A cheap witness of a dataset's content: what a checkpoint is tied to besides its shape.

:func:`content_witness` is a short digest that any rewrite of the dataset changes, without
reading its chunks: every file's size, inode and times plus the SHA-256 of the Zarr metadata
documents on a local disk (symbolic links followed: an array directory may be one); every
object's size and version stamps on a store; ``None`` for a zarr Group or an xarray Dataset.
Reading the dataset changes nothing in it.
Narrative, and the one change it can miss: docs/robustness.md, "rfstream/io/witness.py".
"""
from __future__ import annotations

import hashlib
import json
import os

from .location import Location, as_location, storage_errors

__all__ = ["content_witness"]

#: the documents of a Zarr store (v3 and v2) whose bytes are hashed, not only stamped
METADATA_FILES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})
#: the version stamps an fsspec ``info()`` of an object may carry (S3, GCS, Azure, memory, local)
STAMPS = ("ETag", "etag", "generation", "md5Hash", "VersionId", "LastModified", "last_modified",
          "updated", "mtime", "created", "size")
DIGEST_CHARS = 32


def content_witness(data, storage_options=None):
    """A short hex digest of the dataset at ``data`` (a local path or a URL) that any
    rewrite of it changes; ``None`` for a zarr Group or store or an xarray Dataset
    (no location to witness)."""
    if not isinstance(data, (str, os.PathLike, Location)):
        return None
    location = as_location(data, storage_options)
    entries = _local_entries(location) if location.is_local else _store_entries(location)
    doc = json.dumps(sorted(entries), default=str).encode()
    return hashlib.sha256(doc).hexdigest()[:DIGEST_CHARS]


def _local_entries(location):
    root = location.path
    if os.path.isfile(root):
        return [_local_entry(root, os.path.basename(root))]
    entries = []
    seen = set()  # (device, inode) of each directory walked: a link loop is walked once
    with storage_errors(location, "cannot be read"):
        for folder, dirs, files in os.walk(root, followlinks=True):  # X -> ../store/X is data too
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                entries.append(_local_entry(path, os.path.relpath(path, root)))
    return entries


def _local_entry(path, rel):
    st = os.stat(path)
    entry = [rel, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    if os.path.basename(path) in METADATA_FILES:
        with open(path, "rb") as f:
            entry.append(hashlib.sha256(f.read()).hexdigest())
    return entry


def _store_entries(location):
    fs, root = location.fs, location.path.rstrip("/")
    with storage_errors(location, "cannot be listed"):
        infos = fs.find(root, detail=True)
    entries = []
    for path, info in sorted(infos.items()):
        rel = path[len(root):].lstrip("/") if path.startswith(root) else path
        entry = [rel, *([key, info[key]] for key in STAMPS if info.get(key) is not None)]
        if rel.rsplit("/", 1)[-1] in METADATA_FILES:
            with storage_errors(location, "cannot be read"):
                entry.append(hashlib.sha256(fs.cat_file(path)).hexdigest())
        entries.append(entry)
    return entries

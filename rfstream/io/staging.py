"""Writes that readers see whole or not at all, on a local disk and on an object store.

Local disk: written under a temporary sibling name, renamed onto the destination when
complete.  Object store: written under a fresh version prefix ``DST/v-<random>/``, made
visible last by one commit object, ``DST/rfstream-commit.json`` (:func:`resolve_committed`).
``marker`` (``zarr.json``, ``model.json``) proves an existing destination is ours to replace.
Narrative: docs/robustness.md, "rfstream/io/staging.py".
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path

from ..options import OutputExistsError
from .location import Location, as_location, storage_errors

COMMIT = "rfstream-commit.json"
VERSION_PREFIX = "v-"
#: a version's name, as :func:`staging` writes it (``v-`` and hex digits)
VERSION_NAME = re.compile(r"v-[0-9a-f]{1,64}")


def _entries(dst: Location) -> list[str]:
    with storage_errors(dst, "cannot be listed"):
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in dst.fs.ls(dst.path, detail=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []


def _abandoned(entries: list[str]) -> bool:
    """Only version prefixes and no commit: a write that never finished."""
    return bool(entries) and all(e.startswith(VERSION_PREFIX) for e in entries)


def check_destination(dst, overwrite: bool, marker: str) -> None:
    """Refuse an existing destination unless ``overwrite`` and it is ours to replace."""
    dst = as_location(dst)
    if not dst.exists():
        return
    entries = _entries(dst) if dst.isdir() else [None]
    if _abandoned(entries):
        return
    if not overwrite:
        raise OutputExistsError(f"{dst} already exists; pass " "{overwrite=True (CLI)} to replace it",
                                overwrite=overwrite)
    markers = {marker, COMMIT} | ({".zgroup"} if marker == "zarr.json" else set())  # Zarr v3 or v2
    if not markers.intersection(entries):
        what = "a Zarr dataset" if marker == "zarr.json" else "an rfstream model"
        raise ValueError(
            f"refusing to overwrite {dst}: it is not {what} (no {marker}); remove it "
            "yourself or choose another destination"
        )


def resolve_committed(loc: Location) -> Location:
    """Where the data of ``loc`` are: its committed version on a store, else ``loc`` itself."""
    commit = loc.child(COMMIT)
    if commit.exists():
        try:
            current = json.loads(commit.read_bytes())["current"]
        except (ValueError, KeyError, TypeError, RecursionError):
            current = None
        if not isinstance(current, str) or not VERSION_NAME.fullmatch(current):
            # only the names staging writes: never a path out of the destination
            raise ValueError(f"{commit} is damaged; write {loc} again")
        version = loc.child(current)
        if version.is_local and os.path.islink(version.path):  # a link would lead out of the destination
            raise ValueError(f"{commit} names a version that is a symbolic link; write {loc} again")
        return version
    if loc.isdir() and _abandoned(_entries(loc)):
        raise ValueError(f"{loc} is incomplete: a write was interrupted before it was committed "
                         f"(no {COMMIT}); write it again")
    return loc


@contextmanager
def staging(dst, overwrite: bool, marker: str = "zarr.json"):
    """Yield a :class:`Location` to write into; make it the destination only on success."""
    dst = as_location(dst)
    check_destination(dst, overwrite, marker)
    if dst.is_local:
        with _local_staging(dst, overwrite, marker) as tmp:
            yield tmp
        return
    version = f"{VERSION_PREFIX}{secrets.token_hex(6)}"
    tmp = dst.child(version)
    try:
        yield tmp
    except BaseException:
        tmp.remove()
        raise
    check_destination(dst, overwrite, marker)
    dst.child(COMMIT).write_bytes(json.dumps({"format": "rfstream-commit", "current": version}).encode())
    for name in _entries(dst):
        if name not in (COMMIT, version):
            dst.child(name).remove()


@contextmanager
def _local_staging(dst: Location, overwrite: bool, marker: str):
    path = Path(dst.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        yield as_location(str(tmp))
        check_destination(dst, overwrite, marker)
        if path.exists():
            old = path.with_name(f".{path.name}.old-{secrets.token_hex(4)}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

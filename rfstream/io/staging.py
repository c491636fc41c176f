"""Writes that readers see whole or not at all, on a local disk and on an object store.

Local disk: written under a temporary sibling name, renamed onto the destination when
complete.  Object store: written under a fresh version prefix ``DST/v-<token>/``, announced
first by its own marker ``DST/rfstream-write-<token>.json`` and made visible last by one
commit object, ``DST/rfstream-commit.json`` (:func:`resolve_committed`).  Only a version
whose marker names it is rfstream's interrupted write, never a name that merely starts with
``v-``.  ``marker`` (``zarr.json``, ``model.json``) proves an existing destination is ours to
replace.  Narrative: docs/robustness.md, "rfstream/io/staging.py".
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
from . import nofollow
from .location import Location, as_location, storage_errors

COMMIT = "rfstream-commit.json"
VERSION_PREFIX = "v-"
#: a version's name, as :func:`staging` writes it (``v-`` and hex digits)
VERSION_NAME = re.compile(r"v-[0-9a-f]{1,64}")
#: the marker a write puts beside its version before any data: it names that version
WRITE_MARKER = re.compile(r"rfstream-write-([0-9a-f]{1,64})\.json")
WRITE_FORMAT = "rfstream-write"
#: a write marker is a few dozen bytes; a larger object is not one
MAX_MARKER_BYTES = 4096


def _entries(dst: Location) -> list[str]:
    with storage_errors(dst, "cannot be listed"):
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in dst.fs.ls(dst.path, detail=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []


def _marker_doc(version: str) -> bytes:
    return json.dumps({"format": WRITE_FORMAT, "version": version}).encode()


def _proven_marker(dst: Location, name: str) -> str | None:
    """The version the write marker ``name`` names, when it is rfstream's marker of it."""
    found = WRITE_MARKER.fullmatch(name)
    if not found:
        return None
    version = f"{VERSION_PREFIX}{found.group(1)}"
    target = dst.child(name)
    try:
        if target.is_local:  # a regular file, not a link, read relative to the destination's descriptor
            data = nofollow.read_file(dst.path, name, MAX_MARKER_BYTES)
        else:
            with target.open("rb") as f:
                data = f.read(MAX_MARKER_BYTES + 1)
    except OSError:  # nofollow.Refused too
        return None
    return version if data == _marker_doc(version) else None


def _abandoned(dst: Location, entries: list[str]) -> set[str]:
    """The entries of ``dst`` that are rfstream's interrupted writes (each version beside the
    marker that names it, and that marker) when every entry is one; else the empty set."""
    proven = set()
    for name in entries:
        version = _proven_marker(dst, name)
        if version is not None:  # its version, if any is left, is the one it names
            proven |= {name} | ({version} & set(entries))
    return proven if entries and proven == set(entries) else set()


def check_destination(dst, overwrite: bool, marker: str) -> None:
    """Refuse an existing destination unless ``overwrite`` and it is ours to replace."""
    dst = as_location(dst)
    if not dst.exists():
        return
    entries = _entries(dst) if dst.isdir() else [None]
    if dst.isdir() and _abandoned(dst, entries):
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


def _key(loc: Location) -> tuple[str, str]:
    """Where ``loc`` is, comparable across spellings: its filesystem and its path (a local
    path with its symbolic links resolved)."""
    path = os.path.realpath(loc.path) if loc.is_local else loc.path.rstrip("/")
    return type(loc.fs).__name__, path


def overlap(a: Location, b: Location) -> str | None:
    """How ``a`` meets ``b``: ``"is"``, ``"is inside"``, ``"holds"``, or None when apart."""
    (fa, pa), (fb, pb) = _key(a), _key(b)
    if fa != fb:
        return None
    if pa == pb:
        return "is"
    if pa.startswith(pb.rstrip("/") + "/"):
        return "is inside"
    if pb.startswith(pa.rstrip("/") + "/"):
        return "holds"
    return None


def check_apart(out, inputs: dict, storage_options=None) -> None:
    """Refuse an output ``out`` that is, holds or lies inside one of ``inputs`` (a mapping of
    a name such as ``"DATA"`` to a path or URL; other objects, a zarr Group say, are skipped):
    replacing it would destroy what is being read, ``overwrite`` or not."""
    dst = as_location(out, storage_options)
    for name, source in inputs.items():
        if not isinstance(source, (str, os.PathLike, Location)):
            continue
        src = as_location(source, storage_options)
        how = overlap(dst, src)
        if how is not None:
            raise ValueError(f"the output {dst} {how} {name} ({src}); write it to another location.")


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
    if loc.isdir() and _abandoned(loc, _entries(loc)):
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
    token = secrets.token_hex(6)
    version, own = f"{VERSION_PREFIX}{token}", dst.child(f"rfstream-write-{token}.json")
    tmp = dst.child(version)
    replacing = overwrite and dst.exists() and not _abandoned(dst, _entries(dst))
    with storage_errors(own, "cannot be written"):
        own.write_bytes(_marker_doc(version))  # before any data: the proof that the version is ours
    try:
        yield tmp
    except BaseException:
        tmp.remove()
        own.remove_file()
        raise
    check_destination(dst, overwrite, marker)
    dst.child(COMMIT).write_bytes(json.dumps({"format": "rfstream-commit", "current": version}).encode())
    entries = _entries(dst)
    # what this write replaces: the whole destination it proved ours (``overwrite``), else only
    # the interrupted writes proven by their markers; never a name because it starts with ``v-``
    stale = set(entries) if replacing else _abandoned(dst, [e for e in entries if e != COMMIT]) | {own.name}
    for name in sorted(stale - {COMMIT, version}, key=lambda n: not n.startswith(VERSION_PREFIX)):
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

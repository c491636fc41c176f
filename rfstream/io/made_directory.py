"""Directories rfstream made, proven by a marker beside them that carries the maker's token.

:func:`make` creates a local directory and, beside it in the folder that holds it, the
hidden marker ``.NAME.rfstream-made`` with a random token and the new directory's device
and inode; the token goes into the checkpoint's manifest.  :func:`remove` deletes the
directory only when it is empty and the marker still names it with that token: a claim
written inside the directory (which whoever writes the directory could forge, or a copy
carry along) proves nothing.  Narrative: docs/robustness.md, "rfstream/io/made_directory.py".
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets

from . import nofollow

FORMAT = "rfstream-made-directory"
MAX_MARKER_BYTES = 4096


def _marker(path):
    parent, name = os.path.split(os.path.abspath(path))
    return parent, f".{name}.rfstream-made"


def _identity(path):
    info = os.stat(path, follow_symlinks=False)
    return [info.st_dev, info.st_ino]


def make(path) -> str | None:
    """Make the directory ``path`` (its parent exists) and its marker; the token, or None when
    ``path`` already existed (``FileExistsError`` is not raised) or no marker could be written."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return None
    token = secrets.token_hex(16)
    parent, name = _marker(path)
    doc = json.dumps({"format": FORMAT, "token": token, "directory": _identity(path)}).encode()
    try:
        with nofollow.directory(parent) as dfd:
            with contextlib.suppress(FileNotFoundError):  # a marker of a directory gone since
                if _read(parent, name) is not None:
                    os.unlink(name, dir_fd=dfd)
            fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644,
                         dir_fd=dfd)
            with os.fdopen(fd, "wb") as f:
                f.write(doc)
    except OSError:  # no proof: the directory will be kept
        return None
    return token


def _read(parent, name):
    """The marker's document when it is rfstream's, else None."""
    try:
        doc = json.loads(nofollow.read_file(parent, name, MAX_MARKER_BYTES) or b"null")
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def proven(path, token) -> bool:
    """Whether ``path`` is the directory rfstream made with ``token`` (its marker, checked)."""
    if not isinstance(token, str) or not token:
        return False
    doc = _read(*_marker(path))
    try:
        return doc is not None and doc.get("token") == token and doc.get("directory") == _identity(path)
    except OSError:
        return False


def remove(path, token) -> None:
    """Remove the directory ``path`` when rfstream made it (:func:`proven`) and it is empty
    (``rmdir``: never its content), then its marker."""
    if not proven(path, token):
        return
    try:
        os.rmdir(path)
    except OSError:
        return
    parent, name = _marker(path)
    with contextlib.suppress(OSError):
        nofollow.remove_entry(parent, name)

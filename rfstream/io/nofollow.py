"""Files below a trusted local directory, opened without following a symbolic link.

Each part of a relative name is opened relative to the descriptor of the part before it
(``os.open(part, O_NOFOLLOW, dir_fd=...)``), so a directory swapped for a link while a
reader walks it (a race) never leads outside the root.  The root itself is the caller's
(a path the user gave may be a link).  Narrative: docs/robustness.md, "rfstream/io/nofollow.py".
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager

__all__ = ["Refused", "directory", "open_file", "read_file", "remove_entry"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO at a file's name is not waited on


class Refused(OSError):
    """A part of the name is a symbolic link, or not the kind of entry it must be: ``why`` says
    it in words, ``kind`` as one of "link", "type" (not a regular file or not a plain name),
    "size" (larger than allowed), "full" (a directory that holds files)."""

    def __init__(self, name, why, kind):
        super().__init__(errno.ELOOP, f"{name} {why}")
        self.why = why
        self.kind = kind


def _open_part(part, flags, dir_fd, name):
    try:
        return os.open(part, flags | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or exc.errno == errno.ENOTDIR and _is_link(part, dir_fd):
            raise Refused(name, "is (or is under) a symbolic link", "link") from None
        raise


def _is_link(part, dir_fd):
    """Whether ``part`` is a link (Linux answers ``O_DIRECTORY | O_NOFOLLOW`` on one with ENOTDIR)."""
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def directory(root, parts=()):
    """A descriptor of the directory ``root/parts...``, each part opened without following a link."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for k, part in enumerate(parts):
            _check_part(part)
            nfd = _open_part(part, os.O_RDONLY | _DIRECTORY, fd, "/".join(parts[:k + 1]))
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def _check_part(part):
    if part in ("", ".", "..") or "/" in part or "\0" in part:
        raise Refused(part, "is not a plain name", "type")


def open_file(root, name):
    """``(file object, size)`` of the regular file ``name`` (``a/b.npy``) below ``root``, or
    None when it is missing; :class:`Refused` for a link on the way or an entry that is not a
    regular file."""
    *parents, last = name.split("/")
    _check_part(last)
    try:
        with directory(root, parents) as dfd:
            fd = _open_part(last, os.O_RDONLY | _NONBLOCK, dfd, name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Refused(name, "is not a regular file", "type")
    return os.fdopen(fd, "rb"), info.st_size


def read_file(root, name, limit):
    """The bytes of the regular file ``name`` below ``root`` (None when missing); a file of
    more than ``limit`` bytes is :class:`Refused` before it is read."""
    opened = open_file(root, name)
    if opened is None:
        return None
    f, size = opened
    with f:
        if size > limit:
            raise Refused(name, f"is {size} bytes, more than the {limit} it may have", "size")
        data = f.read(limit + 1) if limit < 2**62 else f.read()
    if len(data) > limit:
        raise Refused(name, f"holds more than the {limit} bytes it may have", "size")
    return data


def remove_entry(root, name):
    """Unlink ``name`` at the top of ``root``: a file or a link (never its target); an empty
    directory is removed, a non-empty one is :class:`Refused`.  A missing one is no error."""
    _check_part(name)
    with directory(root) as dfd:
        try:
            mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        try:
            if stat.S_ISDIR(mode):
                os.rmdir(name, dir_fd=dfd)
            else:
                os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise Refused(name, "is a directory that holds files", "full") from None
            raise

"""Watching what rfstream does from outside: the files it opens, the passes a CLI process reports."""
from __future__ import annotations

import builtins
import io
import os
import re
import time
from contextlib import contextmanager
from unittest import mock


@contextmanager
def recording_opens():
    """Every path opened through ``builtins.open``, ``io.open`` or ``os.open`` in the block (a list,
    real paths; an ``os.open`` relative to a ``dir_fd`` as what it opened), the files still opened
    as usual."""
    seen = []
    real_open, real_os_open = builtins.open, os.open

    def record(file):
        if isinstance(file, (str, bytes, os.PathLike)):
            seen.append(os.path.realpath(os.fsdecode(file)))

    def fake_open(file, *args, **kwargs):
        record(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(file, *args, **kwargs):
        if kwargs.get("dir_fd") is None:
            record(file)
        fd = real_os_open(file, *args, **kwargs)
        if kwargs.get("dir_fd") is not None:
            seen.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return fd

    with mock.patch.object(builtins, "open", fake_open), mock.patch.object(io, "open", fake_open), \
            mock.patch.object(os, "open", fake_os_open):
        yield seen


def wait_for_pass(proc, k, timeout=240):
    """Read a CLI process's stderr until the k-th pass is reported; the lines read so far."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if re.match(rf"rfstream: pass {k}( of \d+)?( \(.*\))? done", line):  # "pass 3 of 5 (Gram) done"
            return lines
    raise AssertionError(f"pass {k} never reported; stderr: {''.join(lines)[-2000:]}")

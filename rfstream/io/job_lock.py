"""One job at a time on a checkpoint: a lock file kept fresh by a heartbeat.

Two ``rfstream fit --out SAME`` started together would share ``SAME.checkpoint``: the
second replays passes the first is still writing and both write its manifest.  The
first to take the lock runs; the other is refused with one line naming the holder.

* Local disk: the lock file is created exclusively (``O_CREAT | O_EXCL``).  Object
  store (no exclusive create through fsspec): the lock is written, read back after
  :data:`SETTLE_SECONDS`, and whoever's token is there holds it.
* The holder rewrites the lock every :data:`HEARTBEAT_SECONDS` (a daemon thread) and
  removes it when the job ends, whether it succeeds, fails or is stopped by a signal.
* A lock left by a killed job is stale: on the same host when its process is gone, on
  another host (a requeued batch job) when its heartbeat is older than
  :data:`STALE_SECONDS`; a stale lock is taken over.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time

from .location import storage_errors

LOCK = "rfstream-checkpoint.lock"
HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 90.0
SETTLE_SECONDS = 1.0


class CheckpointBusy(ValueError):
    """Another running job holds the checkpoint."""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


class JobLock:
    """The lock of the checkpoint at ``location`` (a :class:`~rfstream.io.location.Location`)."""

    def __init__(self, location):
        self.checkpoint = location
        self.location = location.child(LOCK)
        self.token = secrets.token_hex(8)
        self._stop = threading.Event()
        self._thread = None

    def _doc(self):
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                           "beat": time.time()}).encode()

    def _holder(self):
        with storage_errors(self.location, "cannot be read"):
            if not self.location.isfile():
                return None
            try:
                return json.loads(self.location.read_bytes())
            except ValueError:  # half-written by a job killed as it wrote: stale
                return {"stale": True}

    def _stale(self, holder):
        if holder.get("stale"):
            return True
        if holder.get("host") == socket.gethostname():
            return not _alive(int(holder.get("pid", -1)))
        return time.time() - float(holder.get("beat", 0)) > STALE_SECONDS

    def _busy(self, holder):
        since = time.strftime("%H:%M:%S", time.localtime(float(holder.get("beat", 0))))
        return CheckpointBusy(
            f"another rfstream fit (pid {holder.get('pid')} on {holder.get('host')}, alive at {since}) "
            f"is using the checkpoint {self.checkpoint}; wait for it to end, or give this one "
            "another out (CLI: --out) or checkpoint (CLI: --checkpoint).")

    def acquire(self):
        holder = self._holder()
        if holder is not None and not self._stale(holder):
            raise self._busy(holder)
        if self.location.is_local:
            self._create_local(holder is not None)
        else:
            with storage_errors(self.location, "cannot be written"):
                self.location.write_bytes(self._doc())
            time.sleep(SETTLE_SECONDS)
            holder = self._holder()
            if holder is None or holder.get("token") != self.token:
                raise self._busy(holder or {})
        self._thread = threading.Thread(target=self._beat, name="rfstream-checkpoint-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _create_local(self, replace_stale):
        path = self.location.local_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if replace_stale:
            path.unlink(missing_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:  # taken between the look and the create
            raise self._busy(self._holder() or {}) from None
        with os.fdopen(fd, "wb") as f:
            f.write(self._doc())

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self.location.write_bytes(self._doc())
            except Exception:  # a missed beat only ages the lock; the job goes on
                pass

    def release(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        holder = self._holder()
        if holder is not None and holder.get("token") == self.token:
            self.location.remove()

"""One job at a time on a checkpoint: a lock file kept fresh by a heartbeat.

The lock is a random token (never a PID), created exclusively on a local disk (under an
``flock`` of the folder that holds it) or written and read back after :data:`SETTLE_SECONDS`
on an object store; only its holder renews it (every :func:`heartbeat_seconds`) and removes
it.  A lock whose heartbeat is older than :func:`stale_seconds` is stale whatever its PID or
host (sooner when its process is visibly gone) and is taken over.
Narrative: docs/robustness.md, "rfstream/io/job_lock.py".
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time

from ..options import ParameterMixin
from .location import storage_errors

LOCK = "rfstream-checkpoint.lock"
HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 90.0
SETTLE_SECONDS = 1.0
STALE_ENV = "RFSTREAM_LOCK_STALE_SECONDS"


class CheckpointBusy(ParameterMixin, ValueError):
    """Another running job holds the checkpoint (the parameters it names as data,
    :class:`rfstream.options.ParameterMixin`)."""


def stale_seconds():
    """The age after which a lock's heartbeat is stale: ``$RFSTREAM_LOCK_STALE_SECONDS``, else
    :data:`STALE_SECONDS`."""
    text = os.environ.get(STALE_ENV, "").strip()
    if not text:
        return float(STALE_SECONDS)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{STALE_ENV} must be a positive number of seconds; got {text!r}.")
    return value


def heartbeat_seconds():
    """How often the holder renews its lock: at most a quarter of :func:`stale_seconds`."""
    return min(float(HEARTBEAT_SECONDS), stale_seconds() / 4)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _process():
    """``(boot id, PID namespace, start time)`` of this process, None where unknown (not Linux)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = None
    return (boot.decode().strip() if boot else None), pidns, _start_time(os.getpid())


def _start_time(pid):
    """The start time of process ``pid`` (clock ticks since boot, /proc), None where unknown."""
    stat = _read(f"/proc/{int(pid)}/stat")
    if not stat:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after its end
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _gone(pid, start):
    """True when no process ``pid`` runs here, or the one that does started at another time."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        pass
    return start is not None and _start_time(pid) not in (None, start)


class JobLock:
    """The lock of the checkpoint at ``location`` (a :class:`~rfstream.io.location.Location`)."""

    def __init__(self, location):
        self.checkpoint = location
        self.location = location.child(LOCK)
        self.token = secrets.token_hex(16)
        self.made_directory = False  # the checkpoint's directory was made by this acquire
        self._stop = threading.Event()
        self._thread = None

    def _doc(self):
        boot, pidns, start = _process()
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                           "beat": time.time(), "boot": boot, "pidns": pidns, "start": start}).encode()

    def _holder(self):
        with storage_errors(self.location, "cannot be read"):
            if not self.location.isfile():
                return None
            try:
                holder = json.loads(self.location.read_bytes())
            except ValueError:  # half-written by a job killed as it wrote: stale
                return {"stale": True}
        return holder if isinstance(holder, dict) else {"stale": True}

    def _stale(self, holder):
        if holder.get("stale"):
            return True
        try:
            beat, pid = float(holder.get("beat", 0)), int(holder.get("pid", -1))
        except (TypeError, ValueError):
            return True
        if time.time() - beat > stale_seconds():
            return True
        if holder.get("host") != socket.gethostname() or pid <= 0:
            return False
        boot, pidns, _ = _process()
        if "pidns" not in holder:  # a lock written before rfstream recorded its namespace
            return _gone(pid, None)
        if holder.get("pidns") != pidns or holder.get("boot") != boot:
            return False  # another PID namespace (a container) or boot: its PIDs are not ours
        return _gone(pid, holder.get("start"))

    def _busy(self, holder):
        beat = float(holder.get("beat", 0) or 0)
        since = time.strftime("%H:%M:%S", time.localtime(beat))
        free = time.strftime("%H:%M:%S", time.localtime(beat + stale_seconds()))
        return CheckpointBusy(
            f"another rfstream fit (pid {holder.get('pid')} on {holder.get('host')}, alive at {since}) "
            f"is using the checkpoint {self.checkpoint}; wait for it to end (a lock not renewed for "
            f"{stale_seconds():g} s is taken over: if that fit was killed, run again after {free}), or "
            "give this one another {out} or {checkpoint}.", out=None, checkpoint=None)

    def acquire(self):
        if self.location.is_local:
            with self._guard():
                holder = self._holder()
                if holder is not None and not self._stale(holder):
                    raise self._busy(holder)
                self._create_local(holder is not None)
        else:
            with storage_errors(self.checkpoint, "cannot be read"):
                self.made_directory = not self.checkpoint.exists()
            holder = self._holder()
            if holder is not None and not self._stale(holder):
                raise self._busy(holder)
            with storage_errors(self.location, "cannot be written"):
                self.location.write_bytes(self._doc())
            time.sleep(SETTLE_SECONDS)
            holder = self._holder()
            if holder is None or holder.get("token") != self.token:
                raise self._busy(holder or {})
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_seconds(),),
                                        name="rfstream-checkpoint-heartbeat", daemon=True)
        self._thread.start()
        return self

    @contextlib.contextmanager
    def _guard(self):
        """An exclusive ``flock`` of the folder that holds the checkpoint for the block (none
        where the filesystem refuses one: the exclusive create still decides); the
        checkpoint's directory is made inside it, so whoever made it takes the lock."""
        folder = self.checkpoint.local_path
        with storage_errors(self.checkpoint, "cannot be written"):
            folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl

            fd = os.open(folder.parent, os.O_RDONLY)
        except (ImportError, OSError):
            fd = None
        try:
            if fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_EX)
            with storage_errors(self.checkpoint, "cannot be written"):
                try:
                    folder.mkdir()
                    self.made_directory = True
                except FileExistsError:
                    pass
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the descriptor releases the flock

    def _create_local(self, replace_stale):
        path = self.location.local_path
        if replace_stale:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                path.unlink()
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except (FileExistsError, IsADirectoryError):  # taken between the look and the create
            raise self._busy(self._holder() or {}) from None
        with os.fdopen(fd, "wb") as f:
            f.write(self._doc())

    def _beat(self, every):
        while not self._stop.wait(every):
            try:
                holder = self._holder()
                if holder is not None and holder.get("token") not in (None, self.token):
                    return  # taken over (this job was thought dead): never overwrite it
                self.location.write_bytes(self._doc())
            except Exception:  # a missed beat only ages the lock; the job goes on
                pass

    def release(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        holder = self._holder()
        if holder is not None and holder.get("token") == self.token:
            self.location.remove_file()

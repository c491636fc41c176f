"""One job at a time on a checkpoint: a lock file kept fresh by a heartbeat.

The lock is a random token (never a PID), created exclusively on a local disk (under an
``flock`` of the folder that holds it, relative to the checkpoint's directory descriptor,
never through a link) or written and read back after :data:`SETTLE_SECONDS` on an object
store; only its holder renews it (every :func:`heartbeat_seconds`) and removes it.  A lock is
a regular file of at most :data:`MAX_LOCK_BYTES`; one whose heartbeat is outside [now -
:func:`stale_seconds`, now + :data:`MAX_SKEW_SECONDS`] is stale whatever its PID or host
(sooner when its process is visibly gone) and is taken over; one rfstream cannot read is
taken over with ``restart`` only.
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
from . import made_directory as made_dirs
from . import nofollow
from .location import storage_errors

LOCK = "rfstream-checkpoint.lock"
HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 90.0
SETTLE_SECONDS = 1.0
STALE_ENV = "RFSTREAM_LOCK_STALE_SECONDS"
#: how far ahead of this clock a live holder's heartbeat may be (another host's clock); a
#: heartbeat later than that is stale (a lock dated in the future would block until then)
MAX_SKEW_SECONDS = 60.0
#: the most bytes a lock may have (rfstream writes about 250); a larger file is not a lock
MAX_LOCK_BYTES = 4096


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


def _shown(value):
    """A value read from a lock, as one short line."""
    return " ".join(str(value).split())[:80].encode("ascii", "backslashreplace").decode()


def _in_window(beat):
    """Whether ``beat`` is a heartbeat a live holder may have written: a JSON number (a bool is
    not one) in [now - :func:`stale_seconds`, now + :data:`MAX_SKEW_SECONDS`] (never NaN,
    infinite, far ahead or old)."""
    if not isinstance(beat, (int, float)) or isinstance(beat, bool):
        return False
    now = time.time()
    return now - stale_seconds() <= beat <= now + MAX_SKEW_SECONDS


class JobLock:
    """The lock of the checkpoint at ``location`` (a :class:`~rfstream.io.location.Location`)."""

    def __init__(self, location):
        self.checkpoint = location
        self.location = location.child(LOCK)
        self.token = secrets.token_hex(16)
        self.made_directory = None  # the token of the checkpoint's directory when this acquire made it
        self._stop = threading.Event()
        self._thread = None

    def _doc(self):
        boot, pidns, start = _process()
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                           "beat": time.time(), "boot": boot, "pidns": pidns, "start": start}).encode()

    def _holder(self):
        """The lock's document; ``{"stale": True}`` for anything rfstream can replace without a
        loss (a link, which is unlinked and never followed, a FIFO, an empty directory, a
        half-written file), ``{"unreadable": why}`` for what only ``restart`` takes over; None
        when there is no lock."""
        with storage_errors(self.location, "cannot be read"):
            if self.location.is_local:
                try:
                    data = nofollow.read_file(self.checkpoint.path, LOCK, MAX_LOCK_BYTES)
                except nofollow.Refused as exc:
                    if exc.kind == "size":
                        return {"unreadable": exc.why}
                    return {"stale": True}  # a link or not a regular file: removed, never followed
                except IsADirectoryError:
                    return {"stale": True}
                except PermissionError:
                    return {"unreadable": "cannot be read"}
            else:
                if not self.location.isfile():
                    return None
                size = int(self.location.fs.info(self.location.path).get("size") or 0)
                if size > MAX_LOCK_BYTES:
                    return {"unreadable": f"is {size} bytes, more than the {MAX_LOCK_BYTES} it may have"}
                data = self.location.read_bytes()
        if data is None:
            return None
        try:
            holder = json.loads(data)
        except (ValueError, RecursionError):  # half-written by a job killed as it wrote: stale
            return {"stale": True}
        return holder if isinstance(holder, dict) else {"stale": True}

    def _stale(self, holder):
        if holder.get("stale"):
            return True
        pid = holder.get("pid", -1)
        if not _in_window(holder.get("beat")) or type(pid) is not int or pid >= 2**31:
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
        beat = float(holder["beat"]) if _in_window(holder.get("beat")) else time.time()
        since = time.strftime("%H:%M:%S", time.localtime(beat))
        free = time.strftime("%H:%M:%S", time.localtime(beat + stale_seconds()))
        return CheckpointBusy(
            f"another rfstream fit (pid {_shown(holder.get('pid'))} on {_shown(holder.get('host'))}, alive at {since}) "
            f"is using the checkpoint {self.checkpoint}; wait for it to end (a lock not renewed for "
            f"{stale_seconds():g} s is taken over: if that fit was killed, run again after {free}), or "
            "give this one another {out} or {checkpoint}.", out=None, checkpoint=None)

    def _unreadable(self, holder):
        return CheckpointBusy(
            f"{self.location} is not a lock rfstream wrote ({holder['unreadable']}); remove it, or pass "
            "{restart=True} to take it over.", restart=False)

    def _check_holder(self, holder, restart):
        """Raise unless ``holder`` (the lock found, or None) may be taken over."""
        if holder is None:
            return
        if "unreadable" in holder:
            if not restart:
                raise self._unreadable(holder)
        elif not self._stale(holder):
            raise self._busy(holder)

    def acquire(self, restart=False):
        """Take the lock: a stale one is taken over, and with ``restart`` any lock rfstream
        cannot read; a live one is refused (:class:`CheckpointBusy`)."""
        if self.location.is_local:
            with self._guard():
                holder = self._holder()
                self._check_holder(holder, restart)
                self._create_local(holder is not None)
        else:
            holder = self._holder()
            self._check_holder(holder, restart)
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
        """:meth:`_flocked` for the block, the checkpoint's directory made inside it, so
        whoever made it takes the lock."""
        folder = self.checkpoint.local_path
        with storage_errors(self.checkpoint, "cannot be written"):
            folder.parent.mkdir(parents=True, exist_ok=True)
        with self._flocked():
            with storage_errors(self.checkpoint, "cannot be written"):
                self.made_directory = made_dirs.make(folder)
            yield

    @contextlib.contextmanager
    def _flocked(self):
        """An exclusive ``flock`` of the folder that holds the checkpoint for the block (none
        where the filesystem refuses one: the exclusive create still decides)."""
        try:
            import fcntl

            fd = os.open(self.checkpoint.local_path.parent, os.O_RDONLY)
        except (ImportError, OSError):
            fd = None
        try:
            if fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the descriptor releases the flock

    def _create_local(self, replace_stale):
        """Create the lock relative to the checkpoint's directory descriptor, never through a link."""
        root = self.checkpoint.path
        with storage_errors(self.location, "cannot be written"):
            if replace_stale:
                try:
                    nofollow.remove_entry(root, LOCK)  # a link itself, never its target
                except nofollow.Refused:
                    raise CheckpointBusy(
                        f"{self.location} is a directory that holds files, not a lock rfstream wrote; "
                        "remove it, or give this fit another {checkpoint}.", checkpoint=None) from None
            with nofollow.directory(root) as dfd:
                try:
                    fd = os.open(LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
                                 | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dfd)
                except (FileExistsError, IsADirectoryError):  # taken between the look and the create
                    fd = None
        if fd is None:
            raise self._busy(self._holder() or {})
        with os.fdopen(fd, "wb") as f:
            f.write(self._doc())

    def _beat(self, every):
        while not self._stop.wait(every):
            try:  # a local lock's look and write under the folder's flock, as a takeover's (acquire)
                with self._flocked() if self.location.is_local else contextlib.nullcontext():
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

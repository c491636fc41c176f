"""rfstream/io/job_lock.py: a lock is a small regular file with a heartbeat in
[now - stale age, now + MAX_SKEW_SECONDS]; anything else is stale or refused, never a
traceback, never a read of something else, never a wait for ever."""
import json
import os
import socket
import time

import dask.array as da
import pytest
from helpers.cli import one_error_line, run

from rfstream.cluster import compute
from rfstream.datasets import registry
from rfstream.io import job_lock
from rfstream.io.checkpoints import resumable
from rfstream.io.job_lock import LOCK, CheckpointBusy
from rfstream.io.location import as_location


def _doc(beat, **extra):
    """A lock of another live job (PID 1 on another host: only the heartbeat decides)."""
    doc = {"host": "elsewhere", "pid": 1, "token": "another", **extra}
    return json.dumps(doc)[:-1] + f', "beat": {beat}}}'


def _take(where, restart=False):
    with resumable(where, "job", restart=restart) as checkpoint:
        compute(da.arange(4, chunks=2).sum())
    checkpoint.remove()


@pytest.fixture
def where(tmp_path, monkeypatch):
    monkeypatch.delenv(job_lock.STALE_ENV, raising=False)
    ck = tmp_path / "ck"
    ck.mkdir()
    return ck


@pytest.mark.parametrize("beat", ["NaN", "Infinity", "-Infinity", "1e300", "-1e300", "1e30", '"soon"', "true",
                                  "null", "[1]", "1e9", "-5"])
def test_a_heartbeat_outside_the_window_is_stale(where, beat):
    (where / LOCK).write_text(_doc(beat))
    _take(where)
    assert not (where / LOCK).exists()


def test_a_heartbeat_far_in_the_future_is_stale_and_a_near_one_is_live(where):
    (where / LOCK).write_text(_doc(time.time() + job_lock.MAX_SKEW_SECONDS + 60))
    _take(where)
    (where / LOCK).write_text(_doc(time.time() + job_lock.MAX_SKEW_SECONDS / 2))  # a clock a little ahead
    with pytest.raises(CheckpointBusy, match="is using the checkpoint"), resumable(where, "job"):
        pass


@pytest.mark.parametrize("pid", ['"1"', "1.5", "true", "1e400", "null"])
def test_a_lock_whose_pid_is_not_an_integer_is_stale(where, pid):
    (where / LOCK).write_text(json.dumps({"host": socket.gethostname(), "token": "t", "beat": time.time()})[:-1]
                              + f', "pid": {pid}}}')
    _take(where)


@pytest.mark.parametrize("target", ["/dev/zero", "big", "fifo", "missing", "dir"])
def test_a_lock_that_is_a_link_is_unlinked_never_followed(where, tmp_path, target):
    aim = {"/dev/zero": "/dev/zero", "big": tmp_path / "big", "fifo": tmp_path / "fifo",
           "missing": tmp_path / "nothing", "dir": tmp_path}[target]
    if target == "big":
        with open(aim, "wb") as f:
            f.truncate(1 << 31)  # sparse 2 GiB: read whole, it would cost that much memory
    if target == "fifo":
        os.mkfifo(aim)  # opened, it would block for ever
    (where / LOCK).symlink_to(aim)
    started = time.monotonic()
    _take(where)
    assert time.monotonic() - started < 30
    assert not (where / LOCK).is_symlink() and (target == "missing" or os.path.exists(aim))


def test_a_fifo_or_an_empty_directory_as_the_lock_is_taken_over(where):
    os.mkfifo(where / LOCK)
    _take(where)
    (where / LOCK).mkdir()
    _take(where)
    assert not (where / LOCK).exists()


@pytest.mark.parametrize("restart", [False, True])
def test_a_directory_holding_files_as_the_lock_is_refused_and_kept(where, restart):
    (where / LOCK).mkdir()
    (where / LOCK / "data").write_text("someone's")
    with pytest.raises(CheckpointBusy, match="remove it"), resumable(where, "job", restart=restart):
        pass
    assert (where / LOCK / "data").read_text() == "someone's"


def test_an_oversized_lock_is_refused_and_restart_takes_it_over(where):
    with open(where / LOCK, "wb") as f:
        f.truncate(job_lock.MAX_LOCK_BYTES + 1)
    with pytest.raises(CheckpointBusy, match=r"not a lock rfstream wrote.*restart"), resumable(where, "job"):
        pass
    assert (where / LOCK).stat().st_size == job_lock.MAX_LOCK_BYTES + 1
    _take(where, restart=True)
    assert not (where / LOCK).exists()


def test_the_checkpoints_directory_swapped_for_a_link_is_never_written_through(tmp_path):
    """The lock is made relative to the directory's descriptor: a link at the lock's name is
    never followed, so a file outside is never created nor truncated."""
    where = tmp_path / "ck"
    where.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (where / LOCK).symlink_to(outside)
    _take(where)
    assert outside.read_text() == "keep me"


@pytest.fixture(scope="module")
def magic(tmp_path_factory):
    return registry.prepare("magic_demo", tmp_path_factory.mktemp("magic"))[0]


FIT = ["--scheduler", "threads", "--n-components", "32", "--alpha", "1", "--quiet"]


@pytest.mark.parametrize("lock", ["NaN", "Infinity", "1e300", "zero", "dir"])
def test_the_cli_takes_a_broken_lock_over_without_a_traceback(magic, tmp_path, capsys, lock):
    ck = tmp_path / "model.checkpoint"
    ck.mkdir()
    if lock == "zero":
        (ck / LOCK).symlink_to("/dev/zero")
    elif lock == "dir":
        (ck / LOCK).mkdir()
    else:
        (ck / LOCK).write_text(_doc(lock))
    assert run(["fit", magic, "--out", tmp_path / "model", *FIT]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_cli_refuses_an_oversized_lock_in_one_line_and_restart_takes_it(magic, tmp_path, capsys):
    ck = tmp_path / "model.checkpoint"
    ck.mkdir()
    with open(ck / LOCK, "wb") as f:
        f.truncate(1 << 30)
    assert run(["fit", magic, "--out", tmp_path / "model", *FIT]) == 2
    assert "--restart" in one_error_line(capsys)
    assert run(["fit", magic, "--out", tmp_path / "model", *FIT, "--restart"]) == 0


@pytest.mark.parametrize("beat", ["1e400", "NaN", str(10**400), '"x"'])
def test_a_busy_message_never_fails_on_the_lock_it_read(where, beat):
    """The refusal of a lock taken between the look and the create names its holder from
    whatever that file holds: a heartbeat that is no date cannot make it raise."""
    lock = job_lock.JobLock(as_location(str(where)))
    (where / LOCK).write_text(_doc(beat))
    busy = lock._busy(lock._holder())
    assert isinstance(busy, CheckpointBusy) and "\n" not in str(busy)


def test_a_lock_rfstream_may_not_read_needs_restart(where, monkeypatch):
    """Permissions cannot be tested as root: the read is made to fail as it would for
    another user's lock of mode 600."""
    (where / LOCK).write_text(_doc(time.time()))
    real = job_lock.nofollow.read_file

    def denied(root, name, limit):
        data = real(root, name, limit)
        if name == LOCK and data is not None and b'"another"' in data:  # the other user's lock only
            raise PermissionError(13, "Permission denied", name)
        return data

    monkeypatch.setattr(job_lock.nofollow, "read_file", denied)
    with pytest.raises(CheckpointBusy, match=r"cannot be read.*restart"), resumable(where, "job"):
        pass
    assert (where / LOCK).exists()
    _take(where, restart=True)
    assert not (where / LOCK).exists()

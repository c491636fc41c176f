"""The checkpoint's trust boundary (rfstream.io.checkpoints, rfstream.io.job_lock, rfstream.io.witness).

* names are confined: a manifest naming anything but ``pass-NNNNN.npz`` is refused (with or
  without --restart), nothing outside the checkpoint is read or deleted, a symbolic link is
  never followed, a directory rfstream did not make is never removed;
* a crash cannot wedge the lock: a lock is stale once its heartbeat is old, whatever its
  PID or host (a fit killed as PID 1 of its own PID namespace, then rerun the same way);
* a checkpoint belongs to one dataset's content (``content_witness``);
* a failure that will recur (a ValueError: bad data) leaves no checkpoint behind.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import dask.array as da
import numpy as np
import pytest
import zarr
from helpers.watch import wait_for_pass

from rfstream import io
from rfstream.cluster import compute
from rfstream.datasets import registry
from rfstream.io import job_lock
from rfstream.io.checkpoints import (MANIFEST, CheckpointMismatch, dataset_identity, fingerprint_of,
                                     resumable)
from rfstream.io.job_lock import LOCK, CheckpointBusy
from rfstream.io.witness import content_witness

RFSTREAM = os.path.join(os.path.dirname(sys.executable), "rfstream")
FIT = ["--scheduler", "threads", "--progress", "auto", "--ridge-solver", "pcg", "--alpha", "0.01",
       "--n-components", "256", "--pcg-rank", "32"]


@pytest.fixture(scope="module")
def magic(tmp_path_factory):
    return registry.prepare("magic_demo", tmp_path_factory.mktemp("magic"))[0]


def _passes(n=3):
    for i in range(n):
        compute(da.arange(8, chunks=4).sum() + i)


def _checkpoint(where, n=3, job="job"):
    """A real checkpoint of ``n`` passes at ``where``, as left by a killed run."""
    with resumable(where, job):
        _passes(n)
    return json.loads((where / MANIFEST).read_text())


def _victims(tmp_path):
    (tmp_path / "victim.txt").write_text("keep me")
    (tmp_path / "victim_dir" / "sub").mkdir(parents=True)
    (tmp_path / "victim_dir" / "sub" / "data").write_text("keep me too")


def _intact(tmp_path):
    return ((tmp_path / "victim.txt").read_text() == "keep me"
            and (tmp_path / "victim_dir" / "sub" / "data").read_text() == "keep me too")


# ------------------------------------------------------------------ names are confined
@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("name", ["../victim.txt", "../victim_dir", "/etc/hostname", "pass-00002.npz",
                                  "sub/pass-00001.npz", "pass-00001.npz\nrfstream: resumed"])
def test_a_manifest_naming_other_files_is_refused_and_nothing_is_deleted(tmp_path, name, restart):
    _victims(tmp_path)
    where = tmp_path / "ck"
    manifest = _checkpoint(where)
    manifest["steps"][0]["file"] = name
    (where / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointMismatch, match="is not rfstream's .*use another directory") as refused:
        with resumable(where, "job", restart=restart):
            _passes()
    assert "\n" not in str(refused.value)
    assert _intact(tmp_path) and (where / MANIFEST).exists() and (where / "pass-00001.npz").exists()


def test_cli_restart_on_a_hostile_manifest_deletes_nothing(magic, tmp_path):
    """The issue's case: step names ``../victim.txt`` and ``../victim_dir``, then ``fit --restart``."""
    _victims(tmp_path)
    where = tmp_path / "model.checkpoint"
    manifest = _checkpoint(where, 2)
    manifest["steps"][0]["file"], manifest["steps"][1]["file"] = "../victim.txt", "../victim_dir"
    (where / MANIFEST).write_text(json.dumps(manifest))
    for extra in ([], ["--restart"]):
        run = subprocess.run([RFSTREAM, "fit", str(magic), "--out", str(tmp_path / "model"), *FIT, *extra],
                             capture_output=True, text=True, timeout=300, check=False)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1, run.stderr
        assert "is not rfstream's" in lines[0] and "another directory" in lines[0]
        assert _intact(tmp_path) and not (tmp_path / "model").exists()


def test_a_pass_pointing_outside_is_never_read_nor_deleted(magic, tmp_path):
    """A real interrupted run whose second step names ``../outside_pass2.npz`` (a copy of the
    pass with its true SHA-256): refused, and the outside file is still there after."""
    where = tmp_path / "ck"
    manifest = _checkpoint(where, 3)
    shutil.copy(where / "pass-00002.npz", tmp_path / "outside_pass2.npz")
    manifest["steps"][1]["file"] = "../outside_pass2.npz"
    (where / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointMismatch, match="not rfstream's"), resumable(where, "job"):
        _passes()
    assert (tmp_path / "outside_pass2.npz").exists()


def test_symbolic_links_are_not_followed(tmp_path):
    where = tmp_path / "ck"
    _checkpoint(where, 3)
    outside = tmp_path / "outside.npz"
    shutil.copy(where / "pass-00002.npz", outside)
    (where / "pass-00002.npz").unlink()
    (where / "pass-00002.npz").symlink_to(outside)
    with pytest.raises(CheckpointMismatch, match="symbolic link"), resumable(where, "job"):
        _passes()
    with resumable(where, "job", restart=True) as again:  # the link is removed, never its target
        _passes()
    assert again.reused == 0 and outside.exists() and not (where / "pass-00002.npz").is_symlink()
    again.remove()
    assert outside.exists() and not where.exists()


def test_an_existing_empty_directory_is_kept_and_only_rfstreams_files_are_removed(tmp_path):
    where = tmp_path / "mine"
    where.mkdir()
    with resumable(where, "job") as checkpoint:
        _passes(2)
    (where / "notes.txt").write_text("the user's")
    (where / "pass-1.npz").write_text("not a name rfstream gives")
    checkpoint.remove()
    assert sorted(p.name for p in where.iterdir()) == ["notes.txt", "pass-1.npz"]
    (where / "notes.txt").unlink()
    (where / "pass-1.npz").unlink()
    with pytest.raises(RuntimeError), resumable(where, "job"):  # fails before any pass
        raise RuntimeError("before the first pass")
    assert where.is_dir() and not list(where.iterdir())  # emptied, never removed
    with resumable(where, "job") as checkpoint:
        _passes(1)
    checkpoint.remove()
    assert where.is_dir() and not list(where.iterdir())


def test_restart_removes_rfstreams_own_files_and_keeps_the_rest(tmp_path):
    where = tmp_path / "ck"
    _checkpoint(where, 4, job="another job")
    (where / "README").write_text("someone's")
    (where / ".pass-00009.npz.abcd1234").write_bytes(b"a temporary file of a killed write")
    with resumable(where, "job", restart=True) as fresh:
        _passes(1)
    assert fresh.reused == 0
    assert sorted(p.name for p in where.iterdir()) == sorted(["README", MANIFEST, "pass-00001.npz"])
    fresh.remove()
    assert [p.name for p in where.iterdir()] == ["README"]  # not empty: kept


# ------------------------------------------------------------------ locks a crash cannot wedge
@contextlib.contextmanager
def _flock(folder):
    """The exclusive flock of ``folder`` that a job's lock takes to look at and write its lock."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _lock_doc(pid, beat, **extra):
    return json.dumps({"host": socket.gethostname(), "pid": pid, "token": "another", "beat": beat, **extra})


def _own_process(**override):
    boot, pidns, start = job_lock._process()
    return {"boot": boot, "pidns": pidns, "start": start, **override}


def test_a_lock_with_an_old_heartbeat_is_stale_whatever_its_pid(tmp_path, monkeypatch):
    """PID 1 is always alive, and a same-host check by PID would wedge the checkpoint for ever."""
    monkeypatch.setattr(job_lock, "STALE_SECONDS", 2.0)
    monkeypatch.delenv(job_lock.STALE_ENV, raising=False)
    where = tmp_path / "ck"
    where.mkdir()
    (where / LOCK).write_text(_lock_doc(1, time.time(), **_own_process(pidns="pid:[1]", start=1)))
    with pytest.raises(CheckpointBusy, match=r"pid 1 .*taken over: if that fit was killed, run again after"):
        with resumable(where, "job", restart=True):
            pass
    (where / LOCK).write_text(_lock_doc(1, time.time() - 3, **_own_process(pidns="pid:[1]", start=1)))
    for restart in (True, False):
        with resumable(where, "job", restart=restart) as checkpoint:
            _passes(1)
        assert checkpoint.position == 1 and not (where / LOCK).exists()
        (where / LOCK).write_text(_lock_doc(os.getpid(), time.time() - 3, **_own_process()))  # our PID: old too


def test_a_reused_pid_is_not_the_holder(tmp_path):
    """Same host, boot and PID namespace: the PID is alive (ours) but started at another time."""
    where = tmp_path / "ck"
    where.mkdir()
    (where / LOCK).write_text(_lock_doc(os.getpid(), time.time(), **_own_process(start=1)))
    with resumable(where, "job"):
        pass
    (where / LOCK).write_text(_lock_doc(os.getpid(), time.time(), **_own_process()))  # this very process
    with pytest.raises(CheckpointBusy), resumable(where, "job"):
        pass


def test_the_heartbeat_keeps_a_live_lock_fresh_and_never_writes_over_another(tmp_path, monkeypatch):
    monkeypatch.setenv(job_lock.STALE_ENV, "0.4")
    assert job_lock.heartbeat_seconds() == pytest.approx(0.1)
    where = tmp_path / "ck"
    with resumable(where, "job"):
        time.sleep(1.0)  # older than the stale age, but renewed
        with pytest.raises(CheckpointBusy), resumable(where, "job"):
            pass
        with _flock(tmp_path):  # taken over by another job, under the folder's flock as its acquire takes it
            (where / LOCK).write_text(_lock_doc(1, time.time() + 60))
        time.sleep(0.5)
        assert json.loads((where / LOCK).read_text())["token"] == "another"
    assert (where / LOCK).exists()  # not ours to remove
    monkeypatch.setenv(job_lock.STALE_ENV, "soon")
    with pytest.raises(ValueError, match="RFSTREAM_LOCK_STALE_SECONDS must be a positive number"):
        job_lock.stale_seconds()


def _unshare_works():
    """None when ``unshare --pid`` runs here, else why not (a missing tool or no permission)."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", "echo $$"],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        text = probe.stderr.strip()
        if "ermission" in text or "not permitted" in text:
            return f"unshare --pid is not permitted here ({text.splitlines()[0]})"
        raise AssertionError(f"unshare --pid failed: {text}")
    return None


def test_a_fit_killed_as_pid_1_of_its_namespace_resumes(magic, tmp_path):
    """The issue's wedge: ``rfstream fit`` as PID 1 (a container's entrypoint) SIGKILLed after
    its first completed pass, then rerun the same way: the lock's heartbeat ages, the rerun
    takes it over and resumes."""
    why = _unshare_works()
    if why is not None:
        pytest.skip(why)
    out = tmp_path / "model"
    fit = " ".join([RFSTREAM, "fit", str(magic), "--out", str(out), *FIT])
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", f"exec {fit}"]
    env = {**os.environ, job_lock.STALE_ENV: "2"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    wait_for_pass(proc, 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    checkpoint = tmp_path / "model.checkpoint"
    holder = json.loads((checkpoint / LOCK).read_text())
    assert holder["pid"] == 1  # the lock a PID-1 fit left behind
    kept = len(json.loads((checkpoint / MANIFEST).read_text())["steps"])
    assert kept >= 2 and not out.exists()
    time.sleep(max(0.0, holder["beat"] + 2.5 - time.time()))  # its last heartbeat stale (2 s), not a moment more
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["resumed"] is True and summary["passes_reused"] == kept
    assert not checkpoint.exists() and out.exists()


# ------------------------------------------------------------------ one dataset's content
def _dataset(path, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, 3))
    io.write_dataset(path, X, (X[:, 0] > 0).astype(int), rows_per_chunk=100, overwrite=True)
    return path


def test_content_witness_changes_with_any_rewrite_and_not_with_a_read(tmp_path):
    path = _dataset(tmp_path / "d.zarr", 0)
    before = content_witness(path)
    assert isinstance(before, str) and len(before) == 32 and content_witness(str(path)) == before
    X, y = io.open_dataset(path)
    X.sum().compute()
    assert content_witness(path) == before  # a read changes nothing
    array = zarr.open_array(str(path / "X"), mode="r+")
    array[:100] = array[:100] + 1.0  # rewritten in place: same shape, chunks, attrs
    after = content_witness(path)
    assert after != before
    _dataset(path, 1)  # written again whole
    assert content_witness(path) not in (before, after)
    assert content_witness(zarr.open_group(str(path), mode="r")) is None  # no location


def test_content_witness_follows_linked_arrays(tmp_path):
    """An array directory that is a symbolic link (``X -> ../store/X``), or the dataset
    itself one: a rewrite behind the link changes the witness; a link loop ends."""
    store = _dataset(tmp_path / "store", 0)
    linked = tmp_path / "linked.zarr"
    linked.mkdir()
    for name in os.listdir(store):
        (linked / name).symlink_to(store / name)
    (linked / "loop").symlink_to(linked)  # a cycle is walked once, never forever
    whole = tmp_path / "whole.zarr"
    whole.symlink_to(store)
    before = content_witness(linked), content_witness(whole)
    X, _ = io.open_dataset(linked)
    job = fingerprint_of("fit", dataset_identity(X, {}, before[0]))
    with resumable(tmp_path / "ck", job):
        _passes(2)
    array = zarr.open_array(str(store / "X"), mode="r+")
    array[:100] = array[:100] + 1.0
    after = content_witness(linked), content_witness(whole)
    assert after[0] != before[0] and after[1] != before[1]
    with pytest.raises(CheckpointMismatch, match="or the dataset changed since"):  # never resumed
        with resumable(tmp_path / "ck", fingerprint_of("fit", dataset_identity(X, {}, after[0]))):
            pass


def test_content_witness_on_an_object_store():
    url = "memory://witness/d.zarr"
    rng = np.random.default_rng(0)
    io.write_dataset(url, rng.normal(size=(200, 2)), np.arange(200) % 2, rows_per_chunk=100)
    before = content_witness(url)
    assert content_witness(url) == before
    io.write_dataset(url, rng.normal(size=(200, 2)), np.arange(200) % 2, rows_per_chunk=100, overwrite=True)
    assert content_witness(url) != before


def test_a_checkpoint_of_the_same_job_on_rewritten_data_is_refused(tmp_path):
    """The fingerprint with the content witness (as FitJob.fingerprint makes it): another
    dataset content, the refusal's one line says so; restart starts over."""
    path = _dataset(tmp_path / "d.zarr", 0)

    def job():
        X, _ = io.open_dataset(path)
        return fingerprint_of("fit", dataset_identity(X, {"task": "classification"}, content_witness(path)))

    X, _ = io.open_dataset(path)
    assert dataset_identity(X, {}) == dataset_identity(X, {}, None)  # no witness: as before
    where = tmp_path / "ck"
    with resumable(where, job()):
        _passes(2)
    zarr.open_array(str(path / "X"), mode="r+")[:] = np.zeros((400, 3))
    with pytest.raises(CheckpointMismatch, match="or the dataset changed since") as refused:
        with resumable(where, job()):
            pass
    assert "\n" not in str(refused.value) and "restart=True" in str(refused.value)
    with resumable(where, job(), restart=True) as fresh:
        _passes(2)
    assert fresh.reused == 0


def test_an_interrupted_fit_on_rewritten_data_is_refused_then_restarts(tmp_path):
    from rfstream import jobs, pipeline

    path = _dataset(tmp_path / "d.zarr", 0)
    kwargs = dict(n_components=32, alpha=0.01, solver_params={"solver": "pcg", "pcg_rank": 8})
    where = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt), resumable(where, jobs.FitJob(path, **kwargs).fingerprint()[0]):
        _passes(1)
        raise KeyboardInterrupt  # interrupted after a pass: the checkpoint is kept
    assert (where / MANIFEST).exists()
    zarr.open_array(str(path / "X"), mode="r+")[:] = np.random.default_rng(5).normal(size=(400, 3))
    with pytest.raises(CheckpointMismatch, match="or the dataset changed"):
        pipeline.fit_dataset(path, checkpoint=where, **kwargs)
    model, meta = pipeline.fit_dataset(path, checkpoint=where, restart=True, **kwargs)
    assert meta["passes_reused"] == 0 and not where.exists()


# ------------------------------------------------------------------ failures that will recur
@pytest.mark.parametrize("failure, kept", [(ValueError("inf in X"), False), (KeyboardInterrupt(), True),
                                           (OSError("disk"), True), (io.StorageError("store"), True)])
def test_a_failure_that_will_recur_removes_the_checkpoint(tmp_path, failure, kept):
    where = tmp_path / "ck"
    with pytest.raises(type(failure)), resumable(where, "job"):
        _passes(2)
        raise failure
    assert (where / MANIFEST).exists() is kept and where.exists() is kept
    assert not (where / LOCK).exists()


@pytest.mark.parametrize("case", ["inf in X", "nan in y", "one class", "one row"])
def test_bad_data_leaves_no_checkpoint(tmp_path, case):
    from rfstream import pipeline

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), (np.arange(300) % 2).astype(float)
    if case == "inf in X":
        X[250, 1] = np.inf
    elif case == "nan in y":
        y[250] = np.nan
    elif case == "one class":
        y[:] = 1
    else:
        X, y = X[:1], y[:1]
    task = "regression" if case == "nan in y" else "classification"
    io.write_dataset(tmp_path / "bad.zarr", X, y if task == "regression" else y.astype(int),
                     attrs={"task": task}, rows_per_chunk=100)
    with pytest.raises(ValueError):
        pipeline.fit_dataset(tmp_path / "bad.zarr", n_components=16, checkpoint=tmp_path / "ck",
                             out=tmp_path / "model")
    assert not (tmp_path / "ck").exists() and not (tmp_path / "model").exists()


def test_a_pass_file_removed_under_a_replay_says_another_run_finished(tmp_path):
    """Two runs of one job: the loser took the lock after the winner released it and read the
    manifest just before the winner removed the checkpoint; the pass it then reads is gone."""
    from rfstream.io.checkpoints import Checkpoint, step_name
    from rfstream.io.job_lock import CheckpointBusy

    first = Checkpoint(tmp_path / "ck", "job")
    first.record("sig", [np.arange(3.0)])
    second = Checkpoint(tmp_path / "ck", "job")  # reads the manifest: one stored pass
    (tmp_path / "ck" / step_name(0)).unlink()  # the winner removes its checkpoint
    with pytest.raises(CheckpointBusy, match="another run of the same job finished first"):
        second.replay("sig", 1)

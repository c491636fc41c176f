"""No credential is stored or printed, and rotating one keeps a checkpoint.

Against moto's S3 server (tests/helpers/services.py; it accepts any credentials), every command
that touches a store (convert, fit with a checkpoint, evaluate, predict, info) runs with
distinctive made-up credentials given (a) in ``--storage-options`` and (b) in the
``AWS_*`` environment; one fit is stopped by SIGTERM after its second stored pass.  Then
every byte on the bucket, every file written locally, everything printed on stdout and
stderr and every log record is searched for the key and the secret (also URL-encoded):
none may hold them.  The stopped fit, run again with rotated credentials, resumes.
"""
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import s3fs
from helpers.services import s3_server

from rfstream.cli import main
from rfstream.io import as_location, job_lock
from rfstream.io.checkpoints import MANIFEST
from rfstream.io.location import as_storage_error
from rfstream.io.staging import COMMIT

pytestmark = pytest.mark.long_file(40)  # seconds in the suite: started first (tests/conftest.py)

KEY, SECRET = "AKIARFSTREAMLEAKCHECK7", "rfS3cret/Leak+Check0123456789abcdefghijkLMNOP"
ROTATED_KEY, ROTATED_SECRET = "AKIAROTATEDKEYNUMBER02", "r0tated/Secret+9876543210zyxwvutsrqponMLKJ"
BUCKET = "rfstream-secrets"
#: three passes (moments, labels, Gram), each stored in the checkpoint on the object store
FIT = ["--n-components", "48", "--gamma", "0.3", "--alpha", "0.01", "--random-state", "1", "--scheduler", "threads"]
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
           "AWS_PROFILE")


def _forms(*secrets):
    """Each credential as written and URL-encoded (how a query string or a path would hold it)."""
    return sorted({form for s in secrets for form in (s, quote(s, safe=""), quote(s))})


FORBIDDEN = _forms(KEY, SECRET, ROTATED_KEY, ROTATED_SECRET)


def _leaks(data, where):
    text = data if isinstance(data, bytes) else str(data).encode()
    return [f"{where} holds {form!r}" for form in FORBIDDEN if form.encode() in text]


def _bucket_leaks(fs):
    """Every object on the bucket (its name and its bytes)."""
    fs.invalidate_cache()
    paths = fs.find(BUCKET)
    assert paths, "nothing was written to the bucket"
    return [leak for p in paths for leak in _leaks(p.encode() + b"\n" + fs.cat_file(p), f"s3://{p}")]


def _local_leaks(root: Path):
    return [leak for p in sorted(root.rglob("*")) if p.is_file() for leak in _leaks(p.read_bytes(), p)]


@pytest.fixture(scope="module")
def s3():
    """(endpoint, s3fs filesystem) of a fresh moto server with one bucket."""
    with pytest.MonkeyPatch.context() as mp, s3_server() as endpoint:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        # a checkpoint's lock on an object store is read back SETTLE_SECONDS (1 s) after it is
        # written, for a writer racing it on an eventually consistent store; moto's server is
        # consistent, and no test here races two writers of one lock
        mp.setattr(job_lock, "SETTLE_SECONDS", 0.05)
        fs = s3fs.S3FileSystem(key="admin-of-the-test", secret="admin-of-the-test", endpoint_url=endpoint)
        fs.mkdir(BUCKET)
        yield endpoint, fs


@pytest.fixture
def workdir(tmp_path, monkeypatch, caplog):
    """An empty working directory and home (everything written locally lands here), no AWS
    credentials in the environment, every rfstream log record kept."""
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG, logger="rfstream")
    s3fs.S3FileSystem.clear_instance_cache()  # no filesystem made with another test's credentials
    return tmp_path


def _credentials(way, endpoint, key, secret, monkeypatch):
    """The CLI arguments giving the credentials ``way`` (setting the environment for "env")."""
    if way == "options":
        return ["--storage-options", json.dumps({"key": key, "secret": secret,
                                                 "client_kwargs": {"endpoint_url": endpoint}})]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    return []


def _write_csv(path: Path, rows=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 5))
    y = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(int)
    lines = ["a,b,c,d,e,label"] + [",".join(f"{v:.5f}" for v in x) + f",{t}" for x, t in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


def _cli(capfd, printed, *args):
    code = main([str(a) for a in args])
    out, err = capfd.readouterr()
    printed.append(out + err)
    assert code == 0, err[-2000:]
    return out


@pytest.mark.parametrize("way", ["options", "env"])
def test_no_credential_is_written_or_printed(way, s3, workdir, capfd, caplog, monkeypatch):
    endpoint, fs = s3
    so = _credentials(way, endpoint, KEY, SECRET, monkeypatch)
    root = f"s3://{BUCKET}/{way}"
    _write_csv(workdir / "data.csv")
    fs.put(str(workdir / "data.csv"), f"{root}/src/data.csv")
    printed = []
    _cli(capfd, printed, "convert", f"{root}/src/data.csv", f"{root}/data.zarr", "--rows-per-chunk", 500,
         "--quiet", *so)
    summary = json.loads(_cli(capfd, printed, "fit", f"{root}/data.zarr", "--out", f"{root}/model",
                              "--progress", "auto", *FIT, *so))
    assert summary["passes"] >= 2 and "resumed" not in summary  # a checkpoint of several passes
    _cli(capfd, printed, "evaluate", f"{root}/model", f"{root}/data.zarr", "--format", "json", "--scheduler",
         "threads", *so)
    _cli(capfd, printed, "predict", f"{root}/model", f"{root}/data.zarr", "--out", f"{root}/pred.zarr",
         "--scores", "--scheduler", "threads", *so)
    for what in ("data.zarr", "model", "pred.zarr"):
        assert json.loads(_cli(capfd, printed, "info", f"{root}/{what}", *so))
    _saved_and_checkpoint_removed(fs, root)
    leaks = (_bucket_leaks(fs) + _local_leaks(workdir)
             + _leaks("".join(printed), "stdout/stderr") + _leaks(caplog.text, "the log"))
    assert not leaks, leaks


def _saved_and_checkpoint_removed(fs, root):
    fs.invalidate_cache()
    assert fs.exists(f"{root}/model/{COMMIT}") and not fs.exists(f"{root}/model.checkpoint/{MANIFEST}")


_STOP_AFTER_TWO = """
import sys, time
from rfstream.cli import main
from rfstream.io import checkpoints
record = checkpoints.Checkpoint.record
def record_then_wait(self, sig, values):
    record(self, sig, values)
    if len(self.steps) == 2:  # the second pass is stored: wait here for the SIGTERM
        print("test: 2 passes stored", file=sys.stderr, flush=True)
        time.sleep(120)
checkpoints.Checkpoint.record = record_then_wait
sys.exit(main(sys.argv[1:]))
"""


def _fit_stopped_after_two_passes(argv, env):
    """``rfstream fit argv`` in a process of its own, SIGTERMed once it has stored 2 passes;
    its (stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, "-c", _STOP_AFTER_TWO, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    lines, deadline = [], time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if not line or line.startswith("test: 2 passes stored"):
                break
        assert lines[-1].startswith("test: 2 passes stored"), "".join(lines)[-2000:]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = "".join(lines) + err
    assert proc.returncode == 143, err[-2000:]
    assert "rfstream: stopped by SIGTERM; 2 completed pass(es) (" in err and ") are kept in s3://" in err, err[-2000:]
    return out, err


@pytest.mark.parametrize("way", ["options", "env"])
def test_rotated_credentials_resume_a_stopped_fit(way, s3, workdir, capfd, caplog, monkeypatch):
    endpoint, fs = s3
    root = f"s3://{BUCKET}/resume-{way}"
    so = _credentials(way, endpoint, KEY, SECRET, monkeypatch)
    _write_csv(workdir / "data.csv", seed=1)
    printed = []
    _cli(capfd, printed, "convert", workdir / "data.csv", f"{root}/data.zarr", "--rows-per-chunk", 500,
         "--quiet", *so)
    argv = ["fit", f"{root}/data.zarr", "--out", f"{root}/model", "--progress", "auto", *FIT, *so]
    printed.extend(_fit_stopped_after_two_passes(argv, dict(os.environ, TMPDIR=str(workdir))))
    manifest = json.loads(fs.cat_file(f"{root}/model.checkpoint/{MANIFEST}"))
    assert len(manifest["steps"]) == 2 and manifest["description"]
    leaks = _bucket_leaks(fs) + _local_leaks(workdir) + _leaks("".join(printed), "stdout/stderr")
    assert not leaks, leaks  # the checkpoint's manifest included

    rotated = _credentials(way, endpoint, ROTATED_KEY, ROTATED_SECRET, monkeypatch)
    s3fs.S3FileSystem.clear_instance_cache()  # the environment's old credentials go with it
    summary = json.loads(_cli(capfd, printed, "fit", *argv[1:-len(so) or None], *rotated))
    assert summary["resumed"] is True and summary["passes_reused"] == 2, summary
    _saved_and_checkpoint_removed(fs, root)
    leaks = (_bucket_leaks(fs) + _local_leaks(workdir)
             + _leaks("".join(printed), "stdout/stderr") + _leaks(caplog.text, "the log"))
    assert not leaks, leaks


def test_a_location_shows_no_option_value():
    loc = as_location(f"s3://{BUCKET}/x", {"key": KEY, "secret": SECRET, "token": "session-token-value",
                                           "client_kwargs": {"aws_secret_access_key": SECRET}})
    for shown in (repr(loc), str(loc), repr(loc.child("y")), f"{loc!s} {loc!r}"):
        assert not _leaks(shown, "repr") and "session-token-value" not in shown, shown
    assert "key" in repr(loc) and f"{BUCKET}/x" in repr(loc)
    url = as_location("https://someone:pa55word-in-url@example.org/data.csv")
    assert "pa55word-in-url" not in f"{url} {url!r} {url.url}" and "example.org/data.csv" in str(url)


def test_a_store_error_quoting_a_credential_is_cleared_of_it():
    loc = as_location(f"s3://{BUCKET}/x", {"key": KEY, "secret": SECRET})
    for exc in (OSError(f"signature for {KEY} with {SECRET} refused"), PermissionError(f"denied: {SECRET}"),
                FileNotFoundError(f"no {KEY}/x")):
        message = str(as_storage_error(exc, loc, "cannot be read"))
        assert not _leaks(message, "message") and f"s3://{BUCKET}/x" in message, message


@pytest.mark.parametrize("text, expect", [
    ('{"key": "%s", "secret": "%s"' % (KEY, SECRET), "not JSON"),
    ('["%s", "%s"]' % (KEY, SECRET), "must be a JSON object; got a JSON array"),
    ('"%s:%s"' % (KEY, SECRET), "must be a JSON object; got a JSON string"),
])
def test_a_bad_storage_options_value_is_refused_without_echo(text, expect, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["info", f"s3://{BUCKET}/x.zarr", "--storage-options", text])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert expect in err and f"({len(text)} characters" in err and len(err.strip().splitlines()) == 1, err
    assert not _leaks(out + err, "the refusal"), err


def test_refused_credentials_are_one_line_without_them(workdir, capfd):
    with s3_server(authenticate=True) as endpoint:
        so = json.dumps({"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": endpoint}})
        assert main(["info", f"s3://{BUCKET}/x.zarr", "--storage-options", so]) == 2
    out, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "credentials" in err, err
    assert not _leaks(out + err, "the error") and not _local_leaks(workdir)

"""Data, models and predictions on an S3 server: moto's standalone server as its own process.

The server (``moto_server``) runs on 127.0.0.1 and a free port for this module; the
cluster test adds a ``dask scheduler`` and two ``dask worker`` processes, each in its
own empty working directory, that see the data only through S3.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import s3fs
import zarr
from helpers.services import S3_CREDENTIALS, WORKER_ENV, dask_cluster, free_port, s3_server

import rfstream
from rfstream.cli import main
from rfstream.datasets import source_paths
from rfstream.io import job_lock, open_dataset, write_dataset

pytestmark = pytest.mark.long_file(45)  # seconds in the suite: started first (tests/conftest.py)

MAGIC, _ = source_paths("magic_demo")  # the shipped MAGIC gamma telescope data
FIT = ["--n-components", "100", "--alpha", "1.0", "--random-state", "3", "--quiet"]


@pytest.fixture(scope="module")
def s3():
    """(bucket URL, storage options, s3fs filesystem) on a fresh moto server."""
    with pytest.MonkeyPatch.context() as mp, s3_server() as endpoint:
        for key, value in S3_CREDENTIALS.items():
            mp.setenv(key, value)
        # a checkpoint's lock on an object store is read back SETTLE_SECONDS (1 s) after it is
        # written, for a writer racing it on an eventually consistent store; moto's server is
        # consistent, and no test here races two writers of one lock
        mp.setattr(job_lock, "SETTLE_SECONDS", 0.05)
        options = {"endpoint_url": endpoint}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("rfstream-test")
        yield "s3://rfstream-test", options, fs


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty directory, so that a local folder made from a URL would show."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _cli(*args):
    return main([str(a) for a in args])


def _round_trip(data_src, root, opts, scheduler="threads"):
    """convert -> fit -> evaluate -> predict; returns (metrics, predictions, coef)."""
    so = [] if opts is None else ["--storage-options", json.dumps(opts)]
    assert _cli("convert", data_src, f"{root}/magic.zarr", "--rows-per-chunk", 4096, "--quiet", *so) == 0
    assert _cli("fit", f"{root}/magic.zarr", "--out", f"{root}/model", "--scheduler", scheduler, *FIT, *so) == 0
    assert _cli("evaluate", f"{root}/model", f"{root}/magic.zarr", "--scheduler", scheduler, "--quiet", *so) == 0
    assert _cli("predict", f"{root}/model", f"{root}/magic.zarr", "--out", f"{root}/pred.zarr",
                "--scheduler", scheduler, "--quiet", *so) == 0
    loc = rfstream.io.as_location(f"{root}/model/metrics-magic.json", opts)
    metrics = json.loads(loc.read_bytes())
    pred = rfstream.io.read_predictions(f"{root}/pred.zarr", storage_options=opts)
    model = rfstream.io.load_model(f"{root}/model", storage_options=opts)
    return metrics, np.asarray(pred), model.named_steps["solver"].coef_


def test_cli_round_trip_on_s3_equals_local(s3, in_tmp):
    bucket, opts, fs = s3
    fs.put(str(MAGIC), f"{bucket}/src/{MAGIC.name}")
    local = _round_trip(MAGIC, in_tmp / "local", None)
    remote = _round_trip(f"{bucket}/src/{MAGIC.name}", f"{bucket}/run", opts)
    assert remote[0]["value"] == pytest.approx(local[0]["value"], abs=1e-6)
    assert remote[0]["rows"] == local[0]["rows"] == 19020
    np.testing.assert_array_equal(remote[1], local[1])
    np.testing.assert_allclose(remote[2], local[2], rtol=1e-6, atol=1e-6)
    # every output is a committed version on the store; nothing local was made from a URL
    assert fs.exists(f"{bucket}/run/magic.zarr/rfstream-commit.json")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["local"]


def test_cluster_workers_read_only_from_s3(s3, tmp_path_factory, in_tmp):
    bucket, opts, _ = s3
    data = f"{bucket}/cluster/data.zarr"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 5)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int32)
    write_dataset(data, X, y, rows_per_chunk=1000, storage_options=opts)
    env = dict(WORKER_ENV, **S3_CREDENTIALS)
    so = ["--storage-options", json.dumps(opts)]
    with dask_cluster(tmp_path_factory.mktemp("cluster"), 2, own_dirs=True, env=env) as (address, client, _):
        assert _cli("fit", data, "--out", f"{bucket}/cluster/model", "--scheduler", address, *FIT, *so) == 0
        assert _cli("predict", f"{bucket}/cluster/model", data, "--out", f"{bucket}/cluster/pred.zarr",
                    "--scheduler", address, "--quiet", *so) == 0
        ran_on = client.run(os.getcwd)
    assert _cli("fit", data, "--out", f"{bucket}/cluster/model-threads", "--scheduler", "threads", *FIT, *so) == 0
    cluster = rfstream.io.load_model(f"{bucket}/cluster/model", storage_options=opts)
    threads = rfstream.io.load_model(f"{bucket}/cluster/model-threads", storage_options=opts)
    a, b = cluster.named_steps["solver"].coef_, threads.named_steps["solver"].coef_
    assert np.abs(a - b).max() <= 1e-6 * np.abs(b).max()
    pred = rfstream.io.read_predictions(f"{bucket}/cluster/pred.zarr", storage_options=opts)
    assert (np.asarray(pred) == y).mean() > 0.9
    # the workers ran in their own empty directories, and nothing was written there
    assert sorted(Path(d).name for d in ran_on.values()) == ["worker0", "worker1"]
    for d in ran_on.values():
        assert list(Path(d).iterdir()) == []
    assert list(in_tmp.iterdir()) == []


_SLOW_WRITER = """
import sys, time
import numpy as np
from rfstream.io import dataset
append = dataset.ChunkWriter.append
def slow(self, X, y):
    append(self, X, y)
    print("chunk", flush=True)
    time.sleep(60)
dataset.ChunkWriter.append = slow
dataset.write_dataset(sys.argv[1], np.full((100, 3), 2.0), rows_per_chunk=10, overwrite=True,
                      storage_options={"endpoint_url": sys.argv[2]})
"""


def _killed_write(url, endpoint):
    """Start a writer of ``url`` and SIGKILL it after its first chunk is on the store."""
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, url, endpoint], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, **S3_CREDENTIALS))
    try:
        assert proc.stdout.readline().strip() == "chunk"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_interrupted_write_leaves_nothing_readable(s3):
    bucket, opts, fs = s3
    fresh = f"{bucket}/killed/fresh.zarr"
    _killed_write(fresh, opts["endpoint_url"])
    assert fs.ls(fresh)  # the killed writer left its chunks under a version prefix ...
    with pytest.raises(ValueError, match="incomplete: a write was interrupted"):
        open_dataset(fresh, storage_options=opts)  # ... which no reader accepts
    # a previous version stays intact through an interrupted overwrite
    kept = f"{bucket}/killed/kept.zarr"
    write_dataset(kept, np.ones((20, 3)), storage_options=opts)
    _killed_write(kept, opts["endpoint_url"])
    X, _ = open_dataset(kept, storage_options=opts)
    np.testing.assert_array_equal(np.asarray(X), np.ones((20, 3)))
    # and the next complete write cleans up what the killed one left
    write_dataset(kept, np.zeros((5, 3)), overwrite=True, storage_options=opts)
    assert len([p for p in fs.ls(kept) if p.rsplit("/", 1)[-1].startswith("v-")]) == 1
    np.testing.assert_array_equal(np.asarray(open_dataset(kept, storage_options=opts)[0]), np.zeros((5, 3)))


def test_foreign_zarr_v2_on_s3_with_named_arrays(s3):
    bucket, opts, _ = s3
    store = zarr.storage.FsspecStore.from_url(f"{bucket}/foreign.zarr", storage_options=opts)
    group = zarr.open_group(store, mode="w", zarr_format=2)
    group.create_array("features", shape=(50, 4), chunks=(20, 4), dtype="f8")[:] = np.arange(200).reshape(50, 4)
    group.create_array("target", shape=(50,), chunks=(20,), dtype="i8")[:] = np.arange(50) % 3
    X, y = open_dataset(f"{bucket}/foreign.zarr", x="features", y="target", storage_options=opts)
    np.testing.assert_array_equal(np.asarray(X), np.arange(200).reshape(50, 4))
    np.testing.assert_array_equal(np.asarray(y), np.arange(50) % 3)
    info = rfstream.io.dataset_info(f"{bucket}/foreign.zarr", x="features", y="target", storage_options=opts)
    assert info["attrs"]["task"] == "classification" and info["attrs"]["task_inferred"]


@pytest.mark.parametrize("case", ["no bucket", "unreachable endpoint", "typo", "no such array", "unknown protocol"])
def test_bad_locations_are_one_line_errors(s3, in_tmp, capsys, case):
    bucket, opts, _ = s3
    so = json.dumps(opts)
    args, expect = {
        "no bucket": (["info", "s3://no-such-bucket/x.zarr", "--storage-options", so], "no-such-bucket"),
        "unreachable endpoint": (["info", f"{bucket}/x.zarr", "--storage-options",
                                  json.dumps({"endpoint_url": f"http://127.0.0.1:{free_port()}"})],
                                 "check the URL, the endpoint"),
        "typo": (["convert", str(MAGIC), "s3:/rfstream-test/x.zarr"], "looks like a URL with a typo"),
        "no such array": (["fit", f"{bucket}/named.zarr", "--out", f"{bucket}/m", "--x-array", "nope",
                           "--storage-options", so], "has no array 'nope'"),
        "unknown protocol": (["info", "s4://b/x.zarr"], "not a known storage protocol"),
    }[case]
    if case == "no such array":
        write_dataset(f"{bucket}/named.zarr", np.ones((4, 2)), np.arange(4), overwrite=True, storage_options=opts)
    t0 = time.perf_counter()
    assert _cli(*args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err, err
    assert time.perf_counter() - t0 < 30
    assert list(in_tmp.iterdir()) == []


def test_wrong_credentials_are_one_line_errors(in_tmp, capsys):
    with s3_server(authenticate=True) as endpoint:
        opts = json.dumps({"endpoint_url": endpoint, "key": "made-up", "secret": "made-up"})
        assert _cli("convert", MAGIC, "s3://bucket/x.zarr", "--storage-options", opts) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "access denied" in err and "credentials" in err, err
    assert list(in_tmp.iterdir()) == []


def test_endpoint_and_credentials_from_the_environment(s3, monkeypatch, capsys):
    """Without --storage-options, s3fs takes the endpoint from AWS_ENDPOINT_URL."""
    bucket, opts, _ = s3
    write_dataset(f"{bucket}/env.zarr", np.ones((8, 2)), np.arange(8) % 2, storage_options=opts)
    monkeypatch.setenv("AWS_ENDPOINT_URL", opts["endpoint_url"])
    assert _cli("info", f"{bucket}/env.zarr") == 0
    assert json.loads(capsys.readouterr().out)["shape"] == [8, 2]


def test_a_checkpoint_on_the_object_store_resumes(s3):
    """The passes stored under s3://, the manifest cut back as by a kill after pass 3, the
    fit run again: the first 3 passes come from the store, the model is the same."""
    import dask.array as da

    from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
    from rfstream.io.checkpoints import MANIFEST, resumable
    from rfstream.io.job_lock import LOCK

    bucket, options, fs = s3
    rng = np.random.default_rng(0)
    X = da.from_array(rng.normal(size=(2000, 5)).astype(np.float32), chunks=500)
    y = da.from_array((rng.normal(size=2000) > 0).astype(int), chunks=500)

    def fit():
        fmap = RandomFourierFeatures(64, gamma=0.3, random_state=0).fit(X)
        return StreamingRidgeClassifier(alpha=0.1, solver="pcg", pcg_rank=16, tol=1e-6).fit(fmap.transform(X), y)

    where = f"{bucket}/resume.checkpoint"
    with resumable(where, "job", storage_options=options) as first:
        reference = fit()
    assert not fs.exists(f"{where}/{LOCK}")  # released with the job
    manifest = json.loads(fs.cat_file(f"{where}/{MANIFEST}"))
    manifest["steps"] = manifest["steps"][:3]
    fs.pipe_file(f"{where}/{MANIFEST}", json.dumps(manifest).encode())
    with resumable(where, "job", storage_options=options) as second:
        resumed = fit()
    assert second.reused == 3 and len(second.steps) == first.position
    np.testing.assert_array_equal(resumed.coef_, reference.coef_)
    second.remove()
    assert not fs.exists(f"{where}/{MANIFEST}")


def test_transient_store_errors_are_retried_and_change_nothing(s3, tmp_path, monkeypatch):
    """A proxy between rfstream and the S3 server fails 10% of the requests (503 SlowDown or
    a reset connection); convert, fit and predict through it give the clean run's model."""
    from botocore.retries.standard import ExponentialBackoff
    from helpers.services import faulty_proxy, proxy_faults

    # botocore waits rand(0, 1) * 2**(attempt - 1) s before a retry: 1/20 of that here, where the
    # server is local and the time is the test's (the retries themselves, and their count, are unchanged)
    delay = ExponentialBackoff.delay_amount
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: delay(self, context) / 20)
    bucket, options, fs = s3
    clean = f"{bucket}/clean"
    so = ["--storage-options", json.dumps(options)]
    assert _cli("convert", MAGIC, f"{clean}/magic.zarr", "--rows-per-chunk", 4096, "--quiet", *so) == 0
    assert _cli("fit", f"{clean}/magic.zarr", "--out", f"{clean}/model", "--scheduler", "threads", *FIT, *so) == 0
    with faulty_proxy(options["endpoint_url"], fraction=0.1, seed=1) as proxy:
        faulty = ["--storage-options", json.dumps({**options, "endpoint_url": proxy})]
        root = f"{bucket}/faulty"
        assert _cli("convert", MAGIC, f"{root}/magic.zarr", "--rows-per-chunk", 4096, "--quiet", *faulty) == 0
        assert _cli("fit", f"{root}/magic.zarr", "--out", f"{root}/model", "--scheduler", "threads",
                    *FIT, *faulty) == 0
        counts = proxy_faults(proxy)
    assert counts["slow_down"] > 0 and counts["reset"] > 0, counts
    want = rfstream.io.load_model(f"{clean}/model", storage_options=options).named_steps["solver"].coef_
    got = rfstream.io.load_model(f"{root}/model", storage_options=options).named_steps["solver"].coef_
    np.testing.assert_array_equal(got, want)

"""Where the Dask workers get their credentials, against an S3 server that checks them.

moto's server (tests/helpers/services.py, ``authenticate=True``) refuses unknown keys; two IAM
users are made on it while it still accepts anything: "client" (the keys of the shell
that runs rfstream) and "workers".  A ``dask scheduler`` and one ``dask worker`` process
run apart from the client, as on a real cluster; each case converts two CSV files in
``s3://raw/adult/`` to ``s3://work/...`` with ``--scheduler tcp://...``, so that the
workers read the files and write the Zarr chunks:

(a) the workers have their own credentials in their environment (a role would do the
    same): it works, with keys the client never had;
(b) only the client has credentials (the user's report): one line, exit code 2, naming
    the Dask workers, the location and both fixes, within seconds, although the
    workers' instance-metadata service does not answer (a port that never replies);
(c) ``--storage-options`` holds the credentials, the workers' and the client's
    environments hold none: it works, no message the client sends the scheduler (the task
    graph among them) holds the secret, and the worker holds none once the command ended;
(d) what a second client of the same cluster can read back: nothing of the secret on the
    scheduler (its objects, its logs) while the first client lives (the workers hold it, one
    that joined later too), and nothing on the scheduler or the workers once the first
    client's process is SIGKILLed.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import botocore.session
import pytest
import s3fs
import cloudpickle
from helpers import secret_client
from helpers.secret_client import holders
from helpers.services import WORKER_ENV, dask_cluster, s3_server, start_worker
from distributed import Client
from distributed.protocol import dumps

from rfstream.cli import main

pytestmark = pytest.mark.long_file(40)  # seconds in the suite: started first (tests/conftest.py)

AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
           "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED",
           "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")
ALLOW_ALL = json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})


def _reset_auth(endpoint, free_requests):
    """moto: the next ``free_requests`` requests are not authenticated (0: all are)."""
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=str(free_requests).encode(),
                                     method="POST", headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request, timeout=10).close()


def _csv(seed, rows=60):
    lines = ["age,hours,education,income"]
    for i in range(rows):
        age, hours = 20 + (i * 7 + seed) % 50, 10 + (i * 3 + seed) % 50
        lines.append(f"{age},{hours},{['HS', 'BSc', 'MSc'][i % 3]},{'>50K' if age + hours > 80 else '<=50K'}")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def store():
    """(endpoint, {"client": (key, secret), "workers": (key, secret)}, admin filesystem)."""
    with s3_server(authenticate=True) as endpoint:
        _reset_auth(endpoint, 10_000)
        iam = botocore.session.get_session().create_client(
            "iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="admin",
            aws_secret_access_key="admin")
        keys = {}
        for user in ("client", "workers"):
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=ALLOW_ALL)
            made = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (made["AccessKeyId"], made["SecretAccessKey"])
        admin = s3fs.S3FileSystem(key=keys["client"][0], secret=keys["client"][1], endpoint_url=endpoint,
                                  skip_instance_cache=True)
        for bucket in ("raw", "work"):
            admin.mkdir(bucket)
        for k in range(2):
            admin.pipe_file(f"raw/adult/part-{k}.csv", _csv(k))
        _reset_auth(endpoint, 0)  # from here on, every request must be signed by a known key
        yield endpoint, keys, admin


def _environment(endpoint, keys=None, **more):
    """An environment with no AWS credentials but ``keys`` (and no profile, no metadata service)."""
    env = {k: v for k, v in WORKER_ENV.items() if k not in AWS_ENV}
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_CONFIG_FILE=os.devnull, **more)
    if keys is not None:
        env.update(AWS_ACCESS_KEY_ID=keys[0], AWS_SECRET_ACCESS_KEY=keys[1])
    return env


@pytest.fixture
def client_env(store, monkeypatch, tmp_path):
    """Set the client's (this process's) environment: ``client_env(keys or None)``."""
    endpoint = store[0]
    monkeypatch.chdir(tmp_path)

    def setenv(keys):
        for name in AWS_ENV:
            monkeypatch.delenv(name, raising=False)
        for name, value in _environment(endpoint, keys).items():
            if name.startswith("AWS_"):
                monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # no filesystem made with another case's keys

    return setenv


@pytest.fixture(scope="module")
def bare_cluster(store, tmp_path_factory):
    """(address, client, workers): a scheduler and one worker whose environments hold no
    credentials, shared by cases (c) and (d)."""
    with dask_cluster(tmp_path_factory.mktemp("bare"), 1, env=_environment(store[0])) as running:
        yield running


def _within(seconds, probe, done):
    """``probe()`` every quarter second until ``done`` of its value, or ``seconds`` passed: its last value."""
    deadline = time.monotonic() + seconds
    value = probe()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.25)
        value = probe()
    return value


def _convert(address, dst, *more):
    return main(["convert", "s3://raw/adult/", dst, "--label-column", "income", "--rows-per-chunk", "25",
                 "--scheduler", address, "--quiet", *more])


def _converted(fs, dst):
    fs.invalidate_cache()
    info = json.loads(fs.cat_file(f"{dst}/rfstream-commit.json"))
    group = json.loads(fs.cat_file(f"{dst}/{info['current']}/X/zarr.json"))
    return group["shape"]


def test_workers_with_their_own_credentials(store, client_env, tmp_path, capfd):
    endpoint, keys, admin = store
    client_env(keys["client"])
    env = _environment(endpoint, keys["workers"])
    with dask_cluster(tmp_path, 1, env=env) as (address, _, _):
        assert _convert(address, "s3://work/a.zarr") == 0, capfd.readouterr().err
    assert _converted(admin, "work/a.zarr") == [120, 5]  # 2 files of 60 rows; age, hours, education one-hot (3)
    assert not capfd.readouterr().err


@pytest.fixture
def silent_metadata_service():
    """The URL of a port that takes connections and never answers: an instance-metadata
    service a worker cannot reach, as on many clusters."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # the kernel completes the connections; nothing ever replies
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"


def test_workers_without_credentials_are_named_in_one_line(store, client_env, tmp_path, capfd,
                                                           silent_metadata_service):
    endpoint, keys, admin = store
    client_env(keys["client"])  # the client can list and read the source: only the workers cannot
    env = _environment(endpoint, None, AWS_EC2_METADATA_SERVICE_ENDPOINT=silent_metadata_service)
    env.pop("AWS_EC2_METADATA_DISABLED")  # the workers ask the metadata service, which never answers
    with dask_cluster(tmp_path, 1, env=env) as (address, _, _):
        capfd.readouterr()
        t0 = time.perf_counter()
        code = _convert(address, "s3://work/b.zarr")
        seconds = time.perf_counter() - t0
    err = capfd.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("rfstream: error: the Dask workers could not find credentials for s3://raw/adult/"), err
    for words in ("Unable to locate credentials", "their environment, or an instance or pod role",
                  "--storage-options, which rfstream sends to the workers"):
        assert words in err, err
    # botocore does not retry "no credentials"; the metadata service times out after 1 s per
    # try (measured: about 5 s in all, most of it the cluster's start-up); loose, not a benchmark
    assert seconds < 30, seconds
    admin.invalidate_cache()
    assert not admin.exists("work/b.zarr/rfstream-commit.json")


def test_storage_options_reach_the_workers_but_not_the_graph(store, bare_cluster, client_env, capfd, monkeypatch):
    endpoint, keys, admin = store
    key, secret = keys["workers"]
    client_env(None)  # neither the client nor the workers have credentials of their own
    sent = []
    send = Client._send_to_scheduler

    def record(self, msg):
        sent.append(b"".join(bytes(frame) for frame in dumps(msg)))
        return send(self, msg)

    monkeypatch.setattr(Client, "_send_to_scheduler", record)
    so = json.dumps({"key": key, "secret": secret, "client_kwargs": {"endpoint_url": endpoint}})
    address, second, _ = bare_cluster
    assert _convert(address, "s3://work/c.zarr", "--storage-options", so) == 0, capfd.readouterr().err
    cloudpickle.register_pickle_by_value(secret_client)
    # the command's client closed: the worker forgets at once, collects again after 3 s
    held = _within(10, lambda: second.run(secret_client.holders, secret[::-1]), lambda h: not any(h.values()))
    assert not any(held.values()), held
    assert _converted(admin, "work/c.zarr") == [120, 5]
    graphs = [m for m in sent if b"update-graph" in m]
    assert len(graphs) >= 2  # pass 1 (scan) and pass 2 (encode and write)
    assert not [m for m in sent if secret.encode() in m or key.encode() in m]
    assert not capfd.readouterr().err


def test_no_secret_on_the_scheduler_nor_after_a_killed_client(store, bare_cluster, client_env):
    endpoint, keys, admin = store
    key, secret = keys["workers"]
    client_env(None)
    cloudpickle.register_pickle_by_value(secret_client)  # the probe runs where tests/ is not importable
    script = secret_client.__file__
    options = json.dumps({"key": key, "secret": secret, "client_kwargs": {"endpoint_url": endpoint}})
    env = dict(_environment(endpoint), RFSTREAM_TEST_OPTIONS=options,
               PYTHONPATH=os.pathsep.join(sys.path))
    address, second, workers = bare_cluster
    first = subprocess.Popen([sys.executable, script, address, "s3://raw/adult/part-0.csv"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = first.stdout.readline()
        assert line.strip() == str(len(_csv(0))), first.stderr.read() if first.poll() is not None else line
        assert second.run_on_scheduler(holders, secret[::-1]) == []  # while the client lives
        workers.append(start_worker(address, env=_environment(endpoint)))  # one that joins later
        second.wait_for_workers(2, timeout=60)
        # the client looks for new workers every POLL_SECONDS
        held = _within(10, lambda: second.run(holders, secret[::-1]), lambda h: len(h) == 2 and all(h.values()))
        assert len(held) == 2 and all(held.values()), held  # the probe sees what the workers hold
        first.send_signal(signal.SIGKILL)
        first.wait()
        # a worker drops them within about CHECK_SECONDS + COLLECT_AFTER_SECONDS
        held = _within(12, lambda: {"scheduler": second.run_on_scheduler(holders, secret[::-1]),
                                    **second.run(holders, secret[::-1])}, lambda h: not any(h.values()))
        assert not any(held.values()), held
        assert not [m for m in second.get_events() if secret in str(m)]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_a_client_is_connected_while_its_last_event_is_add_client():
    from rfstream.io.worker_secrets import connected

    add, remove = {"action": "add-client"}, {"action": "remove-client"}
    assert connected([[1.0, add]]) and connected([[1.0, add], [2.0, remove], [3.0, add]])
    assert not connected([[1.0, add], [2.0, remove]])
    assert not connected([])  # its events cleared after it left
    assert connected([[1.0, add], [2.0, {"action": "other"}], [3.0, "text"]])

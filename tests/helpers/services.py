"""Real services for the tests, each a process on 127.0.0.1 stopped when its block ends.

* :func:`s3_server`: moto's standalone S3 server (``moto_server``, package ``moto[server]``)
  on a free port.
* :func:`faulty_proxy`: tests/helpers/faulty_proxy.py in front of a server, failing a set
  fraction of requests (503 SlowDown or a reset connection).
* :func:`http_server`: ``python -m http.server`` over a directory.
* :func:`dask_cluster`: a ``dask scheduler`` and single-threaded ``dask worker``
  processes, each worker optionally in its own empty working directory (a worker
  that shares no disk with the client).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from distributed import Client

BIN = Path(sys.executable).parent

# What distributed's nanny sets for the workers it spawns (the embedded default): one BLAS
# thread per worker.  A multi-threaded BLAS splits float32 GEMMs differently and rounds
# differently, which an ill-conditioned ridge system amplifies.
WORKER_ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")

#: moto accepts any credentials; these keep botocore from looking for real ones.
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "rfstream-test", "AWS_SECRET_ACCESS_KEY": "rfstream-test",
                  "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(processes) -> None:
    for p in processes:
        p.kill()
        p.wait()


@contextmanager
def _server(command, url, env=None, cwd=None):
    """Start ``command``; yield once ``url`` answers (any HTTP status)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"{command[0]} did not start on {url}") from None
                time.sleep(0.2)
        yield
    finally:
        _stop([proc])


@contextmanager
def s3_server(*, authenticate=False):
    """Yield the endpoint URL of a fresh moto S3 server process.

    ``authenticate``: the server checks credentials (moto's
    ``INITIAL_NO_AUTH_ACTION_COUNT=0``), so that made-up keys are refused.
    """
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0") if authenticate else None
    with _server([BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)], f"{endpoint}/moto-api/", env):
        yield endpoint


@contextmanager
def faulty_proxy(upstream, fraction, seed=0):
    """Yield the URL of a proxy to ``upstream`` that fails ``fraction`` of the requests."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    script = Path(__file__).with_name("faulty_proxy.py")
    with _server([sys.executable, script, str(port), upstream, str(fraction), str(seed)], url + "/__faults__"):
        yield url


def proxy_faults(url):
    """The proxy's counts: requests, slow_down, reset."""
    with urllib.request.urlopen(url + "/__faults__", timeout=5) as reply:
        return json.loads(reply.read())


@contextmanager
def http_server(directory: Path):
    """Yield the base URL of ``python -m http.server`` serving ``directory``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _server([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], url + "/",
                 cwd=directory):
        yield url


def start_worker(address, cwd=None, env=None):
    return subprocess.Popen(
        [BIN / "dask", "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
         "--dashboard-address", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or WORKER_ENV, cwd=cwd,
    )


@contextmanager
def dask_cluster(workdir: Path, n_workers: int = 2, *, own_dirs: bool = False, env=None):
    """Yield ``(address, client, workers)``: a scheduler and ``n_workers`` worker processes.

    ``own_dirs``: each worker starts in its own empty directory under ``workdir``.
    """
    sched_file = workdir / "scheduler.json"
    scheduler = subprocess.Popen(
        [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--dashboard-address", "127.0.0.1:0", "--scheduler-file", sched_file],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    workers, client = [], None
    try:  # whatever fails below, no scheduler or worker process outlives the tests
        deadline = time.time() + 60
        address = None
        while address is None and time.time() < deadline:
            try:  # the file appears before it is completely written
                address = json.loads(sched_file.read_text())["address"]
            except (FileNotFoundError, ValueError, KeyError):
                time.sleep(0.1)
        assert address, f"dask scheduler did not write {sched_file} within 60 s"
        for k in range(n_workers):
            cwd = None
            if own_dirs:
                cwd = workdir / f"worker{k}"
                cwd.mkdir()
            workers.append(start_worker(address, cwd, env))
        client = Client(address, timeout="60s", set_as_default=False)
        client.wait_for_workers(n_workers, timeout=60)
        yield address, client, workers
    finally:
        if client is not None:
            client.close()
        _stop(workers + [scheduler])

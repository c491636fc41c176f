"""Real services for the tests, each a process on 127.0.0.1 stopped when its block ends.

* :func:`s3_server`: moto's standalone S3 server (``moto_server``, package ``moto[server]``)
  on a free port.
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
def s3_server():
    """Yield the endpoint URL of a fresh moto S3 server process."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"moto_server did not start on {endpoint}") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        _stop([proc])


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

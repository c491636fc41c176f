"""The embedded LocalCluster: its settings, and its start with the client's environment kept.

:func:`rfstream.cluster.connect` starts it (``scheduler=None`` on large data, or ``"cluster"``): one
single-threaded worker process per core, the machine's memory split between them, the dashboard on
127.0.0.1 (:func:`local_cluster_kwargs`); dask's config quieted for a batch job
(:data:`EMBEDDED_CONFIG`) and the workers' allocator set (:data:`WORKER_MALLOC`), each where the user
has not set it (:func:`embedded_config`).  distributed's nanny writes the workers' pre-spawn
environment into the client's own ``os.environ`` as it starts a worker; :func:`local_cluster` puts the
client's values back (:func:`environ_kept`).
"""
from __future__ import annotations

import contextlib
import os

import dask

#: Settings of the embedded LocalCluster, a batch job on the user's own cores, where every background
#: wake-up is taken from a compute task and an idle worker is an idle core.  ``worker-saturation`` 1.0:
#: a worker holds only the task it runs, and takes the next from the scheduler when it finishes; at
#: the default 1.1 a worker holds a second task, and near the end of a pass its idle peer waited for
#: work stealing (every second) to move it.  The workers' statistical profiler (a stack sample every 10
#: ms) only feeds the dashboard's "Profile" page; the event-loop check and the system monitor are
#: polled less often.  The effect on one KDD99 pass is in docs/BENCHMARKS.md ("Measurements behind the
#: code"; ``benchmarks/bench_pass_anatomy.py --parts cluster_config``).  The memory monitor that guards
#: a worker's memory limit is left as it is.  A key the user set otherwise (in dask's config files or
#: environment) is kept.
EMBEDDED_CONFIG = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


#: Worker processes' C allocator (glibc), set before they start.  distributed sets
#: ``MALLOC_TRIM_THRESHOLD_`` to 64 KiB, which also pins glibc's mmap threshold at 128 KiB: every
#: array above it is mapped fresh from the kernel and unmapped when freed, so each task faults in its
#: buffers page by page again (a third of a byte range's convert time was system time).  Arrays up to
#: 32 MiB (glibc's largest threshold) are then reused from the heap, and a heap keeps at most 256 MiB
#: free at its top.  docs/BENCHMARKS.md, "One CSV file in byte ranges".
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20)}
PRE_SPAWN = "distributed.nanny.pre-spawn-environ"


def embedded_config():
    """:data:`EMBEDDED_CONFIG` and :data:`WORKER_MALLOC`, where still distributed's defaults."""
    import distributed  # noqa: F401  (registers distributed's defaults)

    defaults = dask.config.merge(*dask.config.defaults)
    environ = {**dask.config.get(PRE_SPAWN, {}, config=defaults), **WORKER_MALLOC}
    wanted = {**EMBEDDED_CONFIG, PRE_SPAWN: environ}
    return {key: value for key, value in wanted.items()
            if dask.config.get(key, None) == dask.config.get(key, None, config=defaults)}


def local_cluster_kwargs(n_workers=None):
    """LocalCluster's arguments: ``n_workers`` worker processes (default: one per core) sharing the cores
    and 80% of the memory, on 127.0.0.1."""
    import psutil

    cores = os.cpu_count() or 1
    n_workers = n_workers or cores
    memory = psutil.virtual_memory().total
    return {
        "n_workers": n_workers,
        "threads_per_worker": max(1, cores // n_workers),
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
        "memory_limit": int(0.8 * memory / n_workers),
    }


@contextlib.contextmanager
def environ_kept(names):
    """This process's values of the environment variables ``names``, put back after the block.

    A nanny sets the workers' pre-spawn variables (``OPENBLAS_NUM_THREADS=1``, ``OMP_NUM_THREADS=1``,
    ``MALLOC_TRIM_THRESHOLD_``, ...) in the client's ``os.environ`` before it starts a worker, and
    leaves them there: the client's later subprocesses, the libraries it loads later (a BLAS reads its
    thread count once, when loaded) and a later LocalCluster's workers would take them.
    """
    kept = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def local_cluster(n_workers=None):
    """The embedded LocalCluster for the block (:func:`local_cluster_kwargs`, :func:`embedded_config`),
    this process's environment as it was before it and after it (:func:`environ_kept`; again when the
    block ends, for a worker restarted by its nanny meanwhile)."""
    from distributed import LocalCluster

    with dask.config.set(embedded_config()):  # the workers take the config they start with
        names = list(dask.config.get(PRE_SPAWN, {}))
        with environ_kept(names):
            cluster = LocalCluster(**local_cluster_kwargs(n_workers))
    with cluster, environ_kept(names):
        yield cluster

"""The embedded LocalCluster: its settings, and its start with the client's environment kept.

:func:`rfstream.cluster.connect` starts it (``scheduler=None`` on large data, or ``"cluster"``): one
single-threaded worker process per core, the memory split between them, the dashboard on 127.0.0.1
(:func:`local_cluster_kwargs`); dask's config quieted for a batch job and the workers' allocator set,
where the user has not set them (:func:`embedded_config`); the client's environment put back after
the nannies write into it (:func:`environ_kept`); each worker's "Compute Failed" log of a task's
exception left out, as the client raises it (:func:`dask_setup`).  Why each setting: docs/robustness.md,
"rfstream/embedded.py".
"""
from __future__ import annotations

import contextlib
import logging
import os

import dask

#: Settings of the embedded LocalCluster, a batch job on the user's own cores: a worker holds only the task it
#: runs (``worker-saturation`` 1.0), no statistical profiler, the event-loop check and the system monitor
#: polled less often; the memory monitor is left as it is, and a key the user set is kept.  Why: docs/robustness.md,
#: "rfstream/embedded.py"; the effect on a pass: docs/BENCHMARKS.md, "Measurements behind the code".
EMBEDDED_CONFIG = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


#: Worker processes' C allocator (glibc), set before they start: arrays up to 32 MiB (glibc's largest mmap
#: threshold) reused from the heap instead of mapped fresh from the kernel for every task, and at most 256 MiB
#: kept free at the heap's top.  Why: docs/robustness.md, "rfstream/embedded.py";
#: docs/BENCHMARKS.md, "One CSV file in byte ranges".
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


class _ComputeFailedDropped(logging.Filter):
    """Drops distributed's "Compute Failed" record of a task's exception (the client raises that
    exception itself: the CLI says it in one line), its note of a task cancelled when the client
    gave up the pass (an error elsewhere; convert starting over) and a heartbeat's failure with its
    traceback (the scheduler is the client's own, closing: after a one-line error a worker's
    heartbeat could meet the closed scheduler, 29 lines on stderr): the embedded workers write to
    the client's stderr."""

    def filter(self, record):
        text = str(record.msg)
        return not (text.startswith("Compute Failed")
                    or text.startswith("Failed to communicate with scheduler during heartbeat")
                    or (text.startswith("Async instruction for") and text.endswith("ended with CancelledError")))


#: The loggers of an embedded worker that :class:`_ComputeFailedDropped` filters.
FILTERED_LOGGERS = ("distributed.worker", "distributed.worker.state_machine")


def dask_setup(worker):
    """Run in each embedded worker process at its start (``preload``): :class:`_ComputeFailedDropped`."""
    for name in FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ComputeFailedDropped) for f in logger.filters):
            logger.addFilter(_ComputeFailedDropped())


def local_cluster_kwargs(n_workers=None):
    """LocalCluster's arguments: ``n_workers`` worker processes (default: one per core) sharing the cores
    and 80% of the memory, on 127.0.0.1, each set up by :func:`dask_setup`."""
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
        "preload": [*dask.config.get("distributed.worker.preload", []), __name__],  # the user's kept
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


def gpu_cluster_kwargs():
    """``(cluster class, keywords)`` of the embedded cluster for ``device="cuda"``: dask-cuda's
    ``LocalCUDACluster`` (one worker per GPU, as RAPIDS users expect) when it is installed, else
    one worker process whose threads share the one GPU (docs/gpu.md)."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        from distributed import LocalCluster

        return LocalCluster, local_cluster_kwargs(1)  # its threads: every core
    return LocalCUDACluster, {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}


@contextlib.contextmanager
def local_cluster(n_workers=None, device="cpu"):
    """The embedded LocalCluster for the block (:func:`local_cluster_kwargs`, :func:`embedded_config`;
    for ``device="cuda"`` :func:`gpu_cluster_kwargs`), this process's environment as it was before it
    and after it (:func:`environ_kept`; again when the block ends, for a worker restarted by its nanny
    meanwhile)."""
    from distributed import LocalCluster

    with dask.config.set(embedded_config()):  # the workers take the config they start with
        names = list(dask.config.get(PRE_SPAWN, {}))
        with environ_kept(names):
            if device == "cuda":
                kind, kwargs = gpu_cluster_kwargs()
                cluster = kind(**kwargs)
            else:
                cluster = LocalCluster(**local_cluster_kwargs(n_workers))
    with cluster, environ_kept(names):
        yield cluster

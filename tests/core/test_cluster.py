"""Where computations run (rfstream.cluster): compute, connect, the embedded cluster's settings."""
import os

import dask
import dask.array as da
import numpy as np
import pytest

from rfstream.cluster import _widest_layer, compute, connect
from rfstream.embedded import EMBEDDED_CONFIG, WORKER_MALLOC, embedded_config, local_cluster_kwargs


def _blas_threads(x):
    from threadpoolctl import threadpool_info

    n = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return np.array([min(n) if n else -1])


def test_compute_returns_values_and_passes_numpy_through():
    a = da.arange(10, chunks=3)
    n = np.ones(2)
    assert compute(a.sum()) == 45  # one collection: its value, not a tuple
    total, same, doubled = compute(a.sum(), n, a * 2)
    assert total == 45 and same is n
    np.testing.assert_array_equal(doubled, np.arange(10) * 2)
    assert compute(n) is n  # nothing lazy: returned as is


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_one_chunk_pass_is_not_copied_and_other_collections_are(scheduler):
    """dask copies a one-chunk array's value in case it aliases the graph; a pass's reduced
    partials (one block: the partial itself) alias nothing, so compute takes them as they are."""
    from rfstream.reductions import sum_rows

    held = np.arange(6.0)
    X = da.ones((4, 2), chunks=4)
    with dask.config.set(scheduler=scheduler):
        total = compute(sum_rows(lambda x, offset: held, 6, X))
        assert np.shares_memory(total, held) and total.shape == (6,)
        spread = compute(sum_rows(lambda x, offset: held, 6, da.ones((4, 2), chunks=2)))
        np.testing.assert_array_equal(spread, 2 * held)
        user = np.zeros(3)
        value = compute(da.from_array(user, chunks=-1))
        assert not np.shares_memory(value, user)  # the graph's own array: copied, as dask does


def test_compute_runs_blas_single_threaded_in_the_thread_pool():
    X = da.zeros((4, 1), chunks=1)
    with dask.config.set(scheduler="threads", num_workers=2):
        inside = compute(X.map_blocks(_blas_threads, chunks=(1,), drop_axis=1, dtype=int))
    assert set(inside.tolist()) <= {1, -1}
    with dask.config.set(scheduler="synchronous"):  # one task at a time: BLAS keeps its threads
        seq = compute(X.map_blocks(_blas_threads, chunks=(1,), drop_axis=1, dtype=int))
    assert (seq == _blas_threads(None)[0]).all()
    one = da.zeros((4, 1), chunks=4)  # a single task: nothing else would use the other cores
    with dask.config.set(scheduler="threads", num_workers=2):
        single = compute(one.map_blocks(_blas_threads, chunks=(1,), drop_axis=1, dtype=int))
    assert (single == _blas_threads(None)[0]).all()


def test_widest_layer_counts_the_tasks_that_can_run_at_once():
    assert _widest_layer([da.zeros(10, chunks=10)]) == 1
    assert _widest_layer([da.zeros(10, chunks=2)]) == 5
    assert _widest_layer([da.zeros(10, chunks=2).sum(), da.zeros(9, chunks=1)]) == 9


@pytest.mark.parametrize("scheduler", ["threads", "synchronous"])
def test_connect_to_a_local_scheduler(scheduler, monkeypatch):
    before = dask.config.get("scheduler", None)
    with connect(scheduler) as client:
        assert client is None and dask.config.get("scheduler") == scheduler
    assert dask.config.get("scheduler", None) == before
    monkeypatch.setenv("RFSTREAM_SCHEDULER", scheduler)  # no argument: the environment's
    with connect() as client:
        assert client is None and dask.config.get("scheduler") == scheduler


def test_connect_refuses_a_name_that_is_no_address():
    with pytest.raises(ValueError, match=r"scheduler must be an address like tcp://host:8786, or one of "
                                         r"threads, synchronous, processes; got 'thread'"):
        with connect("thread"):
            pass


def test_local_cluster_kwargs_split_the_machine(monkeypatch):
    import psutil

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    kw = local_cluster_kwargs()
    assert (kw["n_workers"], kw["threads_per_worker"], kw["processes"]) == (8, 1, True)
    assert kw["memory_limit"] == int(0.8 * psutil.virtual_memory().total / 8)
    assert kw["host"] == "127.0.0.1" and kw["dashboard_address"] == "127.0.0.1:0"
    kw = local_cluster_kwargs(2)
    assert (kw["n_workers"], kw["threads_per_worker"]) == (2, 4)


def test_embedded_cluster_quiets_its_background_work_but_keeps_user_settings(monkeypatch):
    # The process's environment wins over the config (distributed's rule), and distributed writes its
    # own pre-spawn environment into os.environ when a plain LocalCluster starts: clear what an
    # earlier test's cluster in this process may have left there.
    for name in (*WORKER_MALLOC, "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    client_env = {k: os.environ.get(k) for k in (*WORKER_MALLOC, "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    with connect(None, n_workers=1) as c:
        seen = c.run(lambda: {k: dask.config.get(k) for k in EMBEDDED_CONFIG})
        assert list(seen.values()) == [EMBEDDED_CONFIG]  # the worker process took them
        env = c.run(lambda: {k: os.environ.get(k) for k in (*WORKER_MALLOC, "OPENBLAS_NUM_THREADS")})
        assert list(env.values()) == [{**WORKER_MALLOC, "OPENBLAS_NUM_THREADS": "1"}]  # set before it started
        # the nanny wrote them into this process's environment too: put back once the workers started
        assert {k: os.environ.get(k) for k in client_env} == client_env
    assert {k: os.environ.get(k) for k in client_env} == client_env
    # the client's own config is left as it was
    assert dask.config.get("distributed.worker.profile.enabled") is True
    with dask.config.set({"distributed.admin.tick.interval": "50ms"}):
        assert "distributed.admin.tick.interval" not in embedded_config()
        assert embedded_config()["distributed.worker.profile.enabled"] is False
    environ = {"MALLOC_TRIM_THRESHOLD_": 0}  # a user's choice of the workers' environment is kept
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        assert "distributed.nanny.pre-spawn-environ" not in embedded_config()


def test_the_embedded_workers_preload_their_log_filter_after_the_users():
    """Each embedded worker runs ``rfstream.embedded.dask_setup`` (no "Compute Failed" record of
    a task's error, which the client raises), after any preload the user configured."""
    import logging

    from rfstream.embedded import dask_setup

    assert local_cluster_kwargs(1)["preload"] == ["rfstream.embedded"]
    with dask.config.set({"distributed.worker.preload": ["mine"]}):
        assert local_cluster_kwargs(1)["preload"] == ["mine", "rfstream.embedded"]
    logger = logging.getLogger("distributed.worker")
    machine = logging.getLogger("distributed.worker.state_machine")
    kept, kept_machine = list(logger.filters), list(machine.filters)
    try:
        dask_setup(None)
        dask_setup(None)  # once is enough
        record = logging.LogRecord("distributed.worker", logging.ERROR, "", 0, "Compute Failed\nKey: %s", ("k",), None)
        other = logging.LogRecord("distributed.worker", logging.ERROR, "", 0, "Worker stream died", (), None)
        assert len(logger.filters) == len(kept) + 1
        assert not logger.filter(record) and logger.filter(other)
        # the closing scheduler met by a heartbeat (the client's own; the error already said)
        heartbeat = logging.LogRecord("distributed.worker", logging.ERROR, "", 0,
                                      "Failed to communicate with scheduler during heartbeat.", (), None)
        assert not logger.filter(heartbeat)
        # a task cancelled when the client gave up its pass is not news either; other notes are
        cancelled = logging.LogRecord(machine.name, logging.WARNING, "", 0,
                                      "Async instruction for <Task cancelled> ended with CancelledError", (), None)
        failed = logging.LogRecord(machine.name, logging.WARNING, "", 0,
                                   "Async instruction for <Task> ended with OSError", (), None)
        assert not machine.filter(cancelled) and machine.filter(failed)
    finally:
        logger.filters[:] = kept
        machine.filters[:] = kept_machine

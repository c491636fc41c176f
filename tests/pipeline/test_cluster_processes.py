"""A real multi-process Dask cluster started from the test, and a worker killed mid-fit.

The scheduler and the workers are separate `dask scheduler` / `dask worker` processes on
127.0.0.1, as a user's cluster would be; `rfstream fit` reaches them by address.
"""
import os
import signal
import subprocess
import time

import numpy as np
import pytest
from helpers.services import BIN, dask_cluster, start_worker

import rfstream
from rfstream.cli import main

pytestmark = pytest.mark.long_file(120)  # seconds in the suite: started first (tests/conftest.py)

FIT = ["--n-components", "300", "--alpha", "1.0", "--random-state", "3", "--quiet"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(address, client, workers): scheduler + 2 single-threaded worker processes."""
    with dask_cluster(tmp_path_factory.mktemp("dask")) as running:
        yield running


# (name, extra fit flags, kill moments): ridge as the reference method; TEFM-S (two data
# passes with per-row SRHT randomness) and SGD (rounds of per-chunk updates, averaged) as
# the other multi-pass methods.  A kill lands at its moment, seconds after the fit's first
# task began (its passes take 0.1-4 s each here): every kill at another one, TEFM-S's in its
# sketch or power-iteration pass (the first pass takes 1-2 s, the next two 2-6 s).
METHODS = [
    ("ridge", [], (0.0, 1.2)),
    ("tefm-s", ["--features", "tefm-s", "--n-components", "100"], (3.0,)),
    ("sgd", ["--solver", "sgd", "--epochs", "1", "--alpha", "1e-5"], (1.8,)),
]


def _coef(path):
    model = rfstream.load_model(path)
    return model.named_steps["solver"].coef_, model.named_steps["solver"].intercept_


def _close(a, b, rtol=1e-6):
    (ca, ia), (cb, ib) = a, b
    scale = max(np.abs(cb).max(), 1e-12)
    return np.abs(ca - cb).max() / scale < rtol and np.allclose(ia, ib, rtol=rtol, atol=rtol * scale)


def _fit_on(address, data, out, flags):
    """``rfstream fit`` on the cluster at ``address`` (or ``"threads"``), run by :func:`rfstream.cli.main`
    in this process (the same command without an interpreter's start-up and imports)."""
    assert main([str(a) for a in ["fit", data, "--out", out, "--scheduler", address, *FIT, *flags]]) == 0
    return _coef(out)


@pytest.fixture(scope="module")
def reference(kdd_train_zarr, tmp_path_factory):
    """The embedded default (an in-process LocalCluster of worker processes)."""
    out = tmp_path_factory.mktemp("ref") / "model"
    assert main(["fit", str(kdd_train_zarr), "--out", str(out), *FIT]) == 0
    return _coef(out)


def test_fit_on_external_cluster_equals_embedded_default(cluster, kdd_train_zarr, reference, tmp_path):
    address, _, _ = cluster
    # same seed, same graph, same tree of float64 sums: equal to 1e-6 relative
    assert _close(_fit_on(address, kdd_train_zarr, tmp_path / "model", []), reference)


@pytest.mark.parametrize("method, flags, moments", METHODS, ids=[m[0] for m in METHODS])
def test_fit_survives_a_killed_worker(cluster, kdd_train_zarr, reference, tmp_path, method, flags, moments):
    address, client, workers = cluster
    # the undisturbed model: ridge's is the embedded default's (equal to the cluster's, see
    # above); the others from an undisturbed run under dask's threads in this process (the same
    # graph and sums: equal to a cluster's run, bit for bit, for all three methods here)
    expected = reference if method == "ridge" else _fit_on("threads", kdd_train_zarr, tmp_path / "ref", flags)
    for attempt, moment in enumerate(moments):
        while len(client.scheduler_info()["workers"]) < 2:  # replace the worker killed last time
            workers.append(start_worker(address))
            client.wait_for_workers(2, timeout=60)
        out = tmp_path / f"model{attempt}"
        fit = subprocess.Popen([BIN / "rfstream", "fit", kdd_train_zarr, "--out", out, "--scheduler", address,
                                *FIT, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # wait until the fit's tasks are running on the workers, then kill one worker
        deadline = time.time() + 120
        while not any(client.processing().values()) and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(moment)
        victim = next(p for p in workers if p.poll() is None)
        killed_mid_fit = fit.poll() is None
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        workers.append(start_worker(address))  # its replacement joins the running fit, as a nanny's would
        _, err = fit.communicate(timeout=300)
        assert fit.returncode == 0, err
        assert killed_mid_fit, "the fit had already finished when the worker was killed"
        # lost tasks are recomputed from the Zarr chunks: the model is the undisturbed one
        assert _close(_coef(out), expected), f"{method}, attempt {attempt}"

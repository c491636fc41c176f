"""The benchmark harness and the hot-path changes it measures (no timings asserted)."""
import json
import math

import dask
import dask.array as da
import numpy as np
import pytest

from rfstream.bench import e2e, measures, plots
from rfstream.cluster import compute
from rfstream.features import RandomFourierFeatures
from rfstream.features.fourier import _project_with_offset


def _blas_threads(x):
    from threadpoolctl import threadpool_info

    n = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return np.array([min(n) if n else -1])


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


def test_offset_folded_into_the_projection():
    rng = np.random.default_rng(70)
    x = rng.standard_normal((300, 7))
    W = rng.standard_normal((7, 11)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, 11).astype(np.float32)
    got = _project_with_offset(x, W, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float32) @ W + b, rtol=1e-5, atol=1e-5)


def test_rff_block_matches_the_formula():
    rng = np.random.default_rng(71)
    X = rng.standard_normal((50, 4))
    rff = RandomFourierFeatures(n_components=16, gamma=0.5, random_state=0).fit(X)
    W, b = rff.random_weights_.astype(np.float64), rff.random_offset_.astype(np.float64)
    expected = math.sqrt(2 / 16) * np.cos(X @ W + b)
    np.testing.assert_allclose(rff.transform(X), expected, atol=2e-6)


def test_run_capped_reports_out_of_memory_at_the_cap():
    res = measures.run_capped("import numpy as np; x = np.ones(2**31, dtype=np.uint8)", 1 << 30, 120)
    assert res["error"] == "out of memory at cap"
    ok = measures.run_capped("import json; print(json.dumps({'a': 1}))", 1 << 30, 120)
    assert ok == {"a": 1}


def test_plot_writes_every_figure(tmp_path):
    cap = 10 * 10**9
    rows = []
    for method in e2e.METHODS:
        for D in (500, 2000):
            row = {"dataset": "adult", "method": method, "D": D}
            if method == "sklearn-nystroem" and D == 2000:
                row["error"] = "out of memory at cap"
            else:
                row.update(total_seconds=1.0 + D / 1000, peak_rss_bytes=1e9, test_error=0.15)
            rows.append(row)
    fused = [{"scheduler": s, "D": 2000, "vs_gemm": 0.6} for s in ("threads", "LocalCluster")]
    scaling = {"D": 500, "loglog_slope_time": 1.0,
               "runs": [{"rows": n, "fit_seconds": n / 1e5, "peak_rss_bytes": 1e9} for n in (10**6, 2 * 10**6)]}
    result = {"memory_cap_bytes": cap, "fused": {"runs": fused}, "e2e": rows, "scaling": scaling}
    plots.plot(result, tmp_path)
    for name in ("fused_vs_gemm.png", "e2e_adult.png", "scaling.png"):
        assert (tmp_path / name).stat().st_size > 1000
    json.dumps(result)


def test_gemm_gflops_reports_best_and_median():
    rates = measures.gemm_gflops(64, m=128, repeats=3)
    assert rates["best"] >= rates["median"] > 0


@pytest.mark.parametrize("code", ["raise SystemExit(3)"])
def test_run_capped_reports_other_failures(code):
    res = measures.run_capped(code, 1 << 30, 120)
    assert res["error"] == "failed" and res["returncode"] == 3

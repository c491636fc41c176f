"""The benchmark harness (rfstream.bench): measures, plots (no timings asserted)."""
import copy
import json

import pytest

from rfstream.bench import cases, measures, plots


def test_run_capped_reports_out_of_memory_at_the_cap():
    res = measures.run_capped("import numpy as np; x = np.ones(2**31, dtype=np.uint8)", 1 << 30, 120)
    assert res["error"] == "out of memory at cap"
    ok = measures.run_capped("import json; print(json.dumps({'a': 1}))", 1 << 30, 120)
    assert ok == {"a": 1}


def test_plot_writes_every_figure(tmp_path):
    cap = 10 * 10**9
    rows = []
    for method in cases.METHODS:
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
    before = copy.deepcopy(result)
    plots.plot(result, tmp_path)
    for name in ("fused_vs_gemm.png", "e2e_adult.png", "scaling.png"):
        assert (tmp_path / name).stat().st_size > 1000
    # plotting leaves the result as it was, still the JSON the harness writes
    assert result == before
    assert json.loads(json.dumps(result)) == result


def test_gemm_gflops_counts_2_m_d_squared_flops(monkeypatch):
    # a clock that makes the repeats take 2, 1 and 4 s: the rates are the documented
    # 2 m D^2 flops (not SYRK's half) over those times; best is the fastest repeat
    D, m = 64, 128
    ticks = iter([0.0, 2.0, 10.0, 11.0, 20.0, 24.0])
    monkeypatch.setattr(measures.time, "perf_counter", lambda: next(ticks))
    rates = measures.gemm_gflops(D, m=m, repeats=3)
    flops = 2.0 * m * D * D / 1e9
    assert rates == pytest.approx({"best": flops / 1.0, "median": flops / 2.0}, rel=1e-12)


@pytest.mark.parametrize("code", ["raise SystemExit(3)"])
def test_run_capped_reports_other_failures(code):
    res = measures.run_capped(code, 1 << 30, 120)
    assert res["error"] == "failed" and res["returncode"] == 3


def test_scripts_helpers_write_json_and_read_the_cache_folder(tmp_path, monkeypatch):
    from rfstream.bench import scripts

    path = scripts.write_json(tmp_path / "a" / "b.json", {"x": [1, 2]}, indent=2)
    assert path.read_text().endswith("\n") and json.loads(path.read_text()) == {"x": [1, 2]}
    monkeypatch.setenv("RFSTREAM_BENCH_CACHE", str(tmp_path))
    assert scripts.cache_dir() == tmp_path
    X, y = scripts.pcg_rows(1000, seed=0, chunk=256)
    assert X.shape == (1000, 8) and X.chunks[0][0] == 256 and y.dtype == "int8"


def test_tree_peak_rss_sees_the_process_and_its_children():
    import subprocess
    import sys

    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(1)'])"
    proc = subprocess.Popen([sys.executable, "-c", code])
    with measures.TreePeakRSS(proc.pid, interval=0.02) as peaks:
        proc.wait()
    assert peaks.own > 0 and peaks.children and peaks.tree >= peaks.own

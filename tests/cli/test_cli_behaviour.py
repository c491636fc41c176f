"""The command line as a tool among others: --version and python -m, every default in --help,
progress for terminals and for logs, a closed pipe, parameters checked before any pass, small
data on threads, the metrics of evaluate, predict --scores, and --sample-weight."""
import argparse
import json
import os
import subprocess
import sys

import dask
import numpy as np
import pytest
import zarr
from helpers.tasks import TaskCounter
from sklearn import metrics as skm

from rfstream import __version__, cli, load_model
from rfstream.cli import build_parser, commands
from rfstream.cluster import choose_scheduler, connect, set_progress, small_data_limit
from rfstream.io import open_dataset, write_dataset


@pytest.fixture(autouse=True)
def _no_progress():
    yield
    set_progress(False)  # main() sets the progress display of the process


def run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def rfstream(*argv, **kwargs):
    """The real command, as a user runs it: ``python -m rfstream ...`` in a new process."""
    env = {k: v for k, v in os.environ.items() if k not in ("RFSTREAM_DEBUG", "RFSTREAM_SCHEDULER")}
    return subprocess.run([sys.executable, "-m", "rfstream", *map(str, argv)], check=False, env=env,
                          timeout=300, **{"capture_output": True, "text": True, **kwargs})


def _binary(n=2000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 + 0.3 * rng.normal(size=n) > 1.4).astype(np.int64)
    return X, y


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A binary dataset and a log-loss SGD model (with predict_proba once the solvers have it)."""
    work = tmp_path_factory.mktemp("behaviour")
    X, y = _binary()
    write_dataset(work / "d.zarr", X, y, attrs={"classes": ["in", "out"]}, rows_per_chunk=500)
    assert run("fit", work / "d.zarr", "--out", work / "m", "--solver", "sgd", "--loss", "log_loss",
               "--alpha", "1e-3", "--n-components", 64, "--scheduler", "threads", "--quiet") == 0
    set_progress(False)
    return work


# ------------------------------------------------------------------ --version, python -m, --help
def test_version_and_python_dash_m(capsys):
    assert run("--version") == 0
    assert capsys.readouterr().out.strip() == f"rfstream {__version__}"
    proc = rfstream("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"rfstream {__version__}"


def test_every_argument_of_every_subcommand_is_documented_with_its_default():
    parser = build_parser()
    subcommands = parser._subparsers._group_actions[0].choices
    assert set(subcommands) == {"convert", "fit", "predict", "transform", "evaluate", "info", "demo", "bench", "split"}
    missing = []
    for name, sub in subcommands.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = " ".join((action.help or "").split())
            if not action.option_strings:  # a positional: what it is
                ok = len(text) > 10
            else:
                ok = "(default: " in text or text.endswith("(required)")
            if not ok:
                missing.append(f"{name} {action.option_strings or action.dest}: {text!r}")
    assert not missing, "\n".join(missing)
    help_text = " ".join(subcommands["fit"].format_help().split())
    assert "--n-components N_COMPONENTS output features D" in help_text
    assert "(default: 1000)" in help_text and "--out OUT model directory" in help_text


# ------------------------------------------------------------------ progress
def test_progress_in_a_log_is_one_line_per_pass(work):
    # stderr a pipe, as in a batch job's log: no carriage return, one line per finished pass
    proc = rfstream("fit", work / "d.zarr", "--out", work / "m_log", "--n-components", 32, "--alpha", "1")
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rfstream: pass ")]
    assert lines and all(line.endswith(" s") for line in lines)
    plan = [line for line in proc.stderr.splitlines() if not line.startswith("rfstream: pass ")]
    assert plan[0].startswith(f"rfstream: plan: {len(lines)} passes") and len(plan) <= 4  # one short block
    # never: nothing (under threads: the cluster's start is not what is checked); always: the bar, even in a log
    proc = rfstream("evaluate", work / "m_log", work / "d.zarr", "--progress", "never", "--scheduler", "threads")
    assert proc.returncode == 0 and proc.stderr == ""
    proc = rfstream("evaluate", work / "m_log", work / "d.zarr", "--progress", "always")
    assert proc.returncode == 0 and "100% Completed" in proc.stderr


def test_progress_modes(capsys, work):
    for mode, expect in (("never", ""), ("auto", "rfstream: pass 1 (metrics) done in ")):
        assert run("evaluate", work / "m", work / "d.zarr", "--progress", mode, "--scheduler", "threads",
                   "--out", work / "e.json") == 0
        err = capsys.readouterr().err
        assert (expect in err) if expect else err == ""
    with pytest.raises(ValueError, match="progress must be one of auto, always, never; got 'sometimes'"):
        set_progress("sometimes")


# ------------------------------------------------------------------ a closed pipe
def test_closed_stdout_ends_quietly(work):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte (`rfstream info m | head -0`)
    try:
        proc = rfstream("info", work / "m", stdout=write, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write)
    assert proc.stderr == "" and proc.returncode == 1  # Python's code for EPIPE, no traceback


def test_info_piped_into_head(work):
    proc = subprocess.run(f"{sys.executable} -m rfstream info {work / 'm'} | head -1", shell=True,
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.stdout == "{\n" and proc.stderr == ""


# ------------------------------------------------------------------ parameters before any pass
@pytest.mark.parametrize("flags, message", [
    # the library's parameters said as the flags the user typed (rfstream.options.ParameterError)
    (["--n-components", "0"], "('0') is not a positive int; give a positive int or a list"),
    (["--features", "nystroem", "--n-components", "50,100"], "--n-components 50,100 needs a map whose features"),
    (["--variant", "cossin", "--n-components", "3"], "--n-components must be even with --variant cossin"),
    (["--solver", "sgd", "--alpha", "0.1,1"], "the --alpha parameter of StreamingSGDClassifier is one value"),
    (["--solver", "sgd", "--alpha", "0.1,1"], "or use --solver ridge."),
    (["--ridge-solver", "pcg", "--alpha", "0.1,1", "--cv", "loo"], "--ridge-solver pcg searches a list of alphas"),
    (["--ridge-solver", "pcg", "--alpha", "0.1,1", "--cv", "loo"], "Pass an int cv, or --ridge-solver gram."),
    (["--features", "tefm-s", "--n-components", "50", "--n-random-features", "20"],
     "--n-random-features must be >= --n-components"),
    (["--sample-weight", "nothing"], "has no array 'nothing'"),
])
def test_parameters_are_checked_before_the_data_are_read(work, tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.setattr(commands, "connect", lambda *a, **k: pytest.fail("connected before the checks"))
    tasks = TaskCounter()
    with tasks:
        code = run("fit", work / "d.zarr", "--out", tmp_path / "m", *flags, "--quiet")
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert tasks.count == 0  # not a task ran: nothing was read
    assert not (tmp_path / "m").exists()


# ------------------------------------------------------------------ small data: threads
def test_small_data_runs_on_threads_and_large_data_on_the_cluster(monkeypatch):
    import psutil

    monkeypatch.delenv("RFSTREAM_SCHEDULER", raising=False)
    monkeypatch.delenv("RFSTREAM_SMALL_DATA", raising=False)
    limit = small_data_limit()
    assert limit == min(2**30, int(psutil.virtual_memory().total / 8))
    assert choose_scheduler(None, limit) == "threads"
    assert choose_scheduler(None, limit + 1) is None  # None: the embedded LocalCluster
    assert choose_scheduler(None, None) is None  # size unknown: as before
    assert choose_scheduler("cluster", 10) is None and choose_scheduler("threads", 2**50) == "threads"
    assert choose_scheduler("tcp://h:8786", 10) == "tcp://h:8786"
    monkeypatch.setenv("RFSTREAM_SMALL_DATA", "0")  # always the cluster
    assert choose_scheduler(None, 1) is None
    monkeypatch.setenv("RFSTREAM_SMALL_DATA", "10GB")
    assert choose_scheduler(None, 9 * 10**9) == "threads"
    monkeypatch.setenv("RFSTREAM_SMALL_DATA", "lots")
    with pytest.raises(ValueError, match="RFSTREAM_SMALL_DATA must be a size"):
        choose_scheduler(None, 1)
    monkeypatch.delenv("RFSTREAM_SMALL_DATA")
    monkeypatch.setenv("RFSTREAM_SCHEDULER", "cluster")
    assert choose_scheduler(None, 1) is None
    monkeypatch.delenv("RFSTREAM_SCHEDULER")
    with connect(None, data_bytes=1000) as client:
        assert client is None and dask.config.get("scheduler") == "threads"
    with connect(None, data_bytes=limit + 1, n_workers=1) as client:
        assert client is not None and len(client.scheduler_info()["workers"]) == 1


def test_the_cli_tells_connect_the_size_of_x(work, tmp_path, monkeypatch):
    seen = []

    def record(scheduler=None, **kwargs):
        seen.append((scheduler, kwargs["data_bytes"]))
        return connect("threads")

    monkeypatch.setattr(commands, "connect", record)
    assert run("fit", work / "d.zarr", "--out", tmp_path / "m", "--n-components", 16, "--quiet") == 0
    assert run("evaluate", work / "m", work / "d.zarr", "--out", tmp_path / "e.json", "--quiet") == 0
    assert run("predict", work / "m", work / "d.zarr", "--out", tmp_path / "p.zarr", "--quiet") == 0
    assert seen == [(None, 2000 * 4 * 4)] * 3  # float32 X: 2000 rows x 4 columns x 4 bytes
    # convert by tasks (several files) weighs the source's files; one small file streams, unconnected
    folder = tmp_path / "csv"
    folder.mkdir()
    for i in range(2):
        (folder / f"part-{i}.csv").write_text("".join(f"{i + j},{j % 3},{j % 2}\n" for j in range(50)))
    sizes = sum(f.stat().st_size for f in folder.iterdir())
    assert run("convert", folder, tmp_path / "c.zarr", "--quiet") == 0
    assert run("convert", folder / "part-0.csv", tmp_path / "one.zarr", "--quiet") == 0
    assert seen[3:] == [(None, sizes)]


# ------------------------------------------------------------------ evaluate and predict --scores
def test_evaluate_reports_scikit_learns_metrics(work, tmp_path, capsys):
    assert run("evaluate", work / "m", work / "d.zarr", "--out", tmp_path / "e.json", "--scheduler",
               "threads", "--quiet") == 0
    printed = json.loads(capsys.readouterr().out)  # stdout is no terminal here: JSON
    assert printed == json.loads((tmp_path / "e.json").read_text())
    model = load_model(work / "m")
    X, y = (np.asarray(a) for a in open_dataset(work / "d.zarr"))
    pred = model.predict(X)
    assert printed["metric"] == "error_rate" and printed["value"] == printed["error_rate"]
    assert printed["error_rate"] == pytest.approx(1 - skm.accuracy_score(y, pred), abs=1e-12)
    assert printed["balanced_error"] == pytest.approx(1 - skm.balanced_accuracy_score(y, pred), abs=1e-12)
    assert printed["confusion_matrix"] == skm.confusion_matrix(y, pred).tolist()
    assert printed["classes"] == ["in", "out"]
    auc = skm.roc_auc_score(y, model.decision_function(X))
    assert abs(printed["auc"] - auc) <= printed["auc_error_bound"] + 1e-12 and 0.5 < auc <= 1
    if hasattr(model, "predict_proba"):  # log-loss SGD models with predict_proba (issue 19)
        assert printed["log_loss"] == pytest.approx(skm.log_loss(y, model.predict_proba(X)), rel=1e-9)
    else:
        assert printed["log_loss"] is None
    assert run("evaluate", work / "m", work / "d.zarr", "--out", tmp_path / "e.json", "--format", "table",
               "--scheduler", "threads", "--quiet") == 0
    table = capsys.readouterr().out
    assert "error_rate" in table and "auc" in table and "confusion_matrix" in table and "{" not in table


def test_evaluate_regression(tmp_path, capsys):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1500, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=1500) + 5
    write_dataset(tmp_path / "r.zarr", X, y, rows_per_chunk=400)
    assert run("fit", tmp_path / "r.zarr", "--out", tmp_path / "m", "--n-components", 64, "--scheduler",
               "threads", "--quiet") == 0
    assert run("evaluate", tmp_path / "m", tmp_path / "r.zarr", "--scheduler", "threads", "--quiet") == 0
    result = json.loads(capsys.readouterr().out)
    pred = load_model(tmp_path / "m").predict(np.asarray(open_dataset(tmp_path / "r.zarr")[0]))
    y32 = np.asarray(open_dataset(tmp_path / "r.zarr")[1], dtype=np.float64)
    assert result["metric"] == "relative_rmse" and result["value"] == result["relative_rmse"]
    # float32 features: the evaluate pass (400-row blocks) and this numpy predict (one block)
    # round their products differently, by a few float32 ulps of the predictions (~1e-7
    # relative), so the metrics agree to 1e-6, not to float64 precision
    assert result["rmse"] == pytest.approx(skm.root_mean_squared_error(y32, pred), rel=1e-6)
    assert result["mae"] == pytest.approx(skm.mean_absolute_error(y32, pred), rel=1e-6)
    assert result["r2"] == pytest.approx(skm.r2_score(y32, pred), rel=1e-6) and result["r2"] > 0.9
    assert run("predict", tmp_path / "m", tmp_path / "r.zarr", "--out", tmp_path / "p.zarr", "--scores",
               "--scheduler", "threads", "--quiet") == 2
    assert "--scores needs a classifier" in capsys.readouterr().err


def test_predict_writes_scores_next_to_the_labels(work, tmp_path, capsys):
    out = tmp_path / "p.zarr"
    assert run("predict", work / "m", work / "d.zarr", "--out", out, "--scores", "--scheduler", "threads",
               "--quiet") == 0
    group = zarr.open_group(str(out), mode="r")
    model = load_model(work / "m")
    X = np.asarray(open_dataset(work / "d.zarr")[0])
    np.testing.assert_array_equal(group["y_pred"][:], model.predict(X))
    kind = "predict_proba" if hasattr(model, "predict_proba") else "decision_function"
    assert group.attrs["scores"] == kind and group.attrs["score_classes"] == ["in", "out"]
    np.testing.assert_allclose(group["scores"][:], getattr(model, kind)(X), rtol=1e-12, atol=1e-12)
    assert run("info", out) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["shape"] == [2000] and described["scores"]["shape"] == list(group["scores"].shape)


# ------------------------------------------------------------------ --sample-weight
def test_sample_weight_array_of_the_dataset(tmp_path, capsys):
    # weight 0 on the second half of the rows: the model of the first half alone (same draws:
    # a fixed gamma, no standardization, one alpha; ridge's partials are sums over rows)
    X, y = _binary(n=1200, seed=5)
    write_dataset(tmp_path / "all.zarr", X, y, rows_per_chunk=300)
    write_dataset(tmp_path / "half.zarr", X[:600], y[:600], rows_per_chunk=300)
    group = zarr.open_group(str(tmp_path / "all.zarr"), mode="a")
    group.create_array("w", shape=(1200,), dtype="float32", chunks=(300,))[:] = np.repeat([1.0, 0.0], 600)
    group.create_array("w_short", shape=(10,), dtype="float32", chunks=(10,))[:] = 1.0
    common = ["--n-components", 32, "--gamma", 0.5, "--alpha", 1, "--no-standardize", "--scheduler", "threads",
              "--quiet"]
    assert run("fit", tmp_path / "half.zarr", "--out", tmp_path / "m_half", *common) == 0
    code = run("fit", tmp_path / "all.zarr", "--out", tmp_path / "m_w", "--sample-weight", "w", *common)
    assert code == 0, capsys.readouterr().err
    half, weighted = (load_model(tmp_path / m).named_steps["solver"] for m in ("m_half", "m_w"))
    np.testing.assert_allclose(weighted.coef_, half.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(weighted.intercept_, half.intercept_, rtol=1e-6, atol=1e-8)
    assert json.loads((tmp_path / "m_w" / "model.json").read_text())["metadata"]["sample_weight"] == "w"
    capsys.readouterr()
    assert run("fit", tmp_path / "all.zarr", "--out", tmp_path / "m_bad", "--sample-weight", "w_short",
               *common) == 2
    assert "'w_short' has shape (10,); sample weights need one number per row of X, shape (1200,)" in \
        capsys.readouterr().err

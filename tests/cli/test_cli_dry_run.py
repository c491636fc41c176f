"""``rfstream fit --dry-run`` prints the plan and makes no pass and no file; a fit prints the plan
before its first pass (not with --quiet), and a client that cannot hold the search is refused
with the flags to lower."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rfstream import cli, io
from rfstream.solvers import memory


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("dry")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 4)).astype(np.float32)
    io.write_dataset(root / "d.zarr", X, (X[:, 0] > 0).astype(np.int64), rows_per_chunk=250)
    return root / "d.zarr"


GRID = ["--n-components", "16,32", "--alpha", "0.1,1", "--gamma", "auto,auto*2", "--scheduler", "threads"]


def test_a_dry_run_prints_the_plan_and_makes_no_pass(data, tmp_path, capsys):
    out = tmp_path / "m"
    assert cli.main(["fit", str(data), "--out", str(out), *GRID, "--dry-run", "--format", "json"]) == 0
    printed = capsys.readouterr()
    plan = json.loads(printed.out)
    assert plan["n_passes"] == 4 and plan["rows"] == 500
    assert [p["kind"] for p in plan["passes"]] == ["moments + row sample + classes", "Gram", "CV scoring",
                                                   "calibration"]
    assert plan["checkpoint"] == str(tmp_path / "m.checkpoint") and plan["checkpoint_bytes"] > 0
    assert "pass 1" not in printed.err  # no pass made
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no model, no checkpoint


def test_a_dry_run_on_a_terminal_is_the_short_block(data, tmp_path, capsys):
    assert cli.main(["fit", str(data), "--out", str(tmp_path / "m"), *GRID, "--dry-run", "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("plan: 4 passes over 500 rows (moments + gamma's sample + classes; Gram, 5 folds x 2 "
                        "gammas x 2 sizes; CV scoring, 8 candidates; calibration)")
    assert lines[1].startswith("client: 42 Cholesky factorizations of D=16 to 32")
    assert "GFLOP/s measured: an estimate" in lines[1] and len(lines) == 4
    assert lines[3].startswith("checkpoint: ~") and not (tmp_path / "m").exists()


def test_the_fit_says_its_plan_and_which_pass_of_how_many(data, tmp_path, capsys):
    assert cli.main(["fit", str(data), "--out", str(tmp_path / "m"), *GRID, "--progress", "auto"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("rfstream: plan: 4 passes over 500 rows")
    assert [line.split(" done in ")[0] for line in err if line.startswith("rfstream: pass ")] == [
        "rfstream: pass 1 of 4 (moments + gamma's sample + classes)",
        "rfstream: pass 2 of 4 (Gram, 5 folds x 2 gammas x 2 sizes)",
        "rfstream: pass 3 of 4 (CV scoring, 8 candidates)",
        "rfstream: pass 4 of 4 (calibration)"]


def test_the_bar_has_a_title_line(data, tmp_path, capsys):
    assert cli.main(["fit", str(data), "--out", str(tmp_path / "m"), "--n-components", "16", "--scheduler",
                     "threads", "--progress", "always", "--no-standardize", "--gamma", "0.5"]) == 0
    err = capsys.readouterr().err
    assert "rfstream: pass 1 of 2: classes\n" in err and "rfstream: pass 2 of 2: Gram\n" in err


def test_quiet_says_nothing(data, tmp_path, capsys):
    assert cli.main(["fit", str(data), "--out", str(tmp_path / "m"), *GRID, "--quiet"]) == 0
    err = capsys.readouterr().err  # warnings only (the chosen size is the largest of its list)
    assert all(line.startswith("rfstream: warning: ") for line in err.splitlines())


def test_a_search_the_client_cannot_hold_is_refused_naming_the_flags(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(memory, "client_limit", lambda: 2**20)
    code = cli.main(["fit", str(data), "--out", str(tmp_path / "m"), "--n-components", "300,600", "--alpha",
                     "0.1,1", "--scheduler", "threads", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "the client's solve" in err and "over its 0.0 GiB" in err
    assert "lower --cv or --n-components" in err
    assert not (tmp_path / "m").exists()

"""``fit`` and ``info`` for people: a short table on a terminal (the chosen model, the search's
best rows, where it was saved, what to run next), all of it with ``--format json``, and off
a terminal the JSON scripts have always read."""
import json
import sys

import numpy as np
import pytest

from rfstream import cli, io


def _run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 1] ** 2).astype(np.float32)
    io.write_dataset(folder / "d.zarr", X, y, attrs={"task": "regression"})
    return folder / "d.zarr"


FIT = ("--n-components", "4,8,200", "--alpha", "0.001,0.01", "--scheduler", "threads", "--progress", "never",
       "--calibrate", "false")


def test_fit_on_a_terminal_prints_a_table_and_warns_on_the_largest_size(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert _run("fit", data, *FIT, "--out", tmp_path / "m") == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].startswith(f"fitted rff features + ridge, regression on {data}: 2,000 rows in ")
    assert lines[1].startswith("chosen: gamma=") and "n_components=200, alpha=0.01, squared_error " in lines[1]
    assert lines[2] == "  at the edge of its list: n_components (largest)"
    assert lines[3] == "search: 6 candidates, the best 5" and lines[4].split() == ["D", "alpha", "squared_error"]
    assert lines[5].split()[:2] == ["200", "0.01"]  # the chosen row first
    assert f"saved to {tmp_path / 'm'}" in lines and f"next: rfstream evaluate {tmp_path / 'm'} TEST.zarr" in lines
    assert lines[-1] == "everything: --format json" and len(lines) < 20
    assert ("rfstream: warning: the chosen --n-components 200 is the largest of its list; the best may lie beyond "
            "it: extend the list towards larger --n-components values (the Gram's memory grows as their square)\n"
            in out.err)


def test_fit_off_a_terminal_and_with_format_json_prints_all_the_json(data, tmp_path, capsys, monkeypatch):
    assert _run("fit", data, *FIT, "--out", tmp_path / "m", "--quiet") == 0
    assert capsys.readouterr().out == ""
    assert _run("fit", data, *FIT, "--out", tmp_path / "m", "--overwrite") == 0  # stdout is not a terminal
    piped = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert _run("fit", data, *FIT, "--out", tmp_path / "m", "--overwrite", "--format", "json") == 0
    asked = json.loads(capsys.readouterr().out)
    assert piped.keys() == asked.keys() >= {"model", "rows", "alpha", "gamma", "fit_seconds", "passes", "cv",
                                            "n_components", "edge"}
    assert piped["cv"] == asked["cv"] and piped["edge"] == {"n_components": "largest"}


def test_info_tables_of_a_model_a_dataset_and_predictions(data, tmp_path, capsys):
    assert _run("fit", data, *FIT, "--out", tmp_path / "m", "--quiet") == 0
    assert _run("info", tmp_path / "m", "--format", "table") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"model {tmp_path / 'm'} (rfstream ")
    assert lines[1].startswith(f"trained on {data}: 2,000 rows x 3 features, regression")
    assert "pipeline:" in lines and any(line.split()[:2] == ["solver", "StreamingRidge"] for line in lines)
    assert any(line.startswith("search: 6 candidates") for line in lines) and len(lines) < 25
    assert f"next: rfstream evaluate {tmp_path / 'm'} TEST.zarr" in lines
    assert _run("info", tmp_path / "m") == 0  # not a terminal: the JSON
    assert json.loads(capsys.readouterr().out)["metadata"]["selection"]["n_components"] == 200
    assert _run("info", data, "--format", "table") == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"dataset {data}: 2,000 rows x 3 features (float32)",
                                                        "label: column None, regression"]
    assert _run("predict", tmp_path / "m", data, "--out", tmp_path / "p.zarr", "--scheduler", "threads",
                "--quiet") == 0
    assert _run("info", tmp_path / "p.zarr", "--format", "table") == 0
    assert capsys.readouterr().out.startswith(f"predictions: {tmp_path / 'p.zarr'}\nshape: [2000]")

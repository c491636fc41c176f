"""What will fail is refused before any pass and any large allocation (the trust issue's
absurd sizes, single class, too few rows), and names from data reach the terminal escaped."""
from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from helpers.tasks import TaskCounter

from rfstream import cli
from rfstream.cli.options import printable
from rfstream.cluster import set_progress
from rfstream.io import write_dataset


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 14))
    write_dataset(tmp_path / "d.zarr", X, (X[:, 0] > 0).astype(np.int64), rows_per_chunk=100)
    return tmp_path / "d.zarr"


def run(tmp_path, capsys, *argv):
    tasks = TaskCounter()
    tracemalloc.start()
    try:
        with tasks:
            code = cli.main([*map(str, argv), "--out", str(tmp_path / "m"), "--scheduler", "threads", "--quiet"])
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        set_progress(False)
    return code, capsys.readouterr().err, tasks.count, peak


@pytest.mark.parametrize("n_components, flags", [
    (10**12, []), (10**8, []), (10**8, ["--solver", "sgd"]), (10**8, ["--ridge-solver", "pcg"]),
    (2 * 10**6, ["--solver", "sgd"]),  # drawable, but a task's feature block is not: the pass memory
])
def test_absurd_sizes_are_refused_before_any_pass_or_allocation(data, tmp_path, capsys, n_components, flags):
    code, err, tasks, peak = run(tmp_path, capsys, "fit", data, "--n-components", n_components, *flags)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "lower --n-components" in err.lower()  # the flag the user typed
    assert tasks == 0  # not a task ran
    assert peak < 512 * 2**20  # nothing of the features' size was allocated (2e6 x 14 plan: 224 MB)
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.checkpoint").exists()


def test_a_single_class_and_one_row_are_refused_from_the_metadata(tmp_path, capsys):
    X = np.random.default_rng(1).normal(size=(50, 3))
    write_dataset(tmp_path / "one.zarr", X, np.zeros(50, dtype=np.int64), attrs={"classes": ["only"]})
    code, err, tasks, _ = run(tmp_path, capsys, "fit", tmp_path / "one.zarr", "--n-components", 8)
    assert code == 2 and "has 1 class" in err and tasks == 0, err
    write_dataset(tmp_path / "row.zarr", X[:1], np.zeros(1, dtype=np.int64))
    code, err, tasks, _ = run(tmp_path, capsys, "fit", tmp_path / "row.zarr", "--n-components", 8)
    assert code == 2 and "1 sample(s) (rows); a fit needs at least 2" in err and tasks == 0, err
    assert not (tmp_path / "m.checkpoint").exists()


def test_names_from_the_data_reach_the_terminal_escaped(tmp_path, capsys):
    evil = ["\x1b[2J\x1b[31mpwned", "ok\u202etxt.exe"]
    assert printable(evil[0]) == "\\x1b[2J\\x1b[31mpwned" and "\u202e" not in printable(evil[1])
    X = np.random.default_rng(2).normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    write_dataset(tmp_path / "e.zarr", X, y, attrs={"classes": evil})
    set_progress(False)
    assert cli.main(["fit", str(tmp_path / "e.zarr"), "--n-components", "8", "--out", str(tmp_path / "m"),
                     "--scheduler", "threads", "--quiet"]) == 0
    capsys.readouterr()
    assert cli.main(["evaluate", str(tmp_path / "m"), str(tmp_path / "e.zarr"), "--format", "table",
                     "--scheduler", "threads"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31mpwned" in out
    written = json.loads((tmp_path / "m" / "metrics-e.json").read_text())
    assert written["classes"] == evil  # the JSON keeps the names as they are, escaped by JSON


@pytest.mark.parametrize("name, text, where", [
    *((f"n{i}.csv", f"a,b,y\n1,2,0\n3,{v},1\n4,5,0\n", "column 'b', data row 2: ")
      for i, v in enumerate(["inf", "-inf", "1e400", "5e38"])),
    *((f"n{i}.svm", f"1 1:0.5 2:1\n-1 1:{v} 2:2\n1 1:0.1\n", "line 2: '1:.*' ")
      for i, v in enumerate(["inf", "nan", "1e400"])),
])
def test_convert_refuses_numbers_float32_cannot_hold(tmp_path, name, text, where):
    from rfstream.io import convert

    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=rf"{name.replace('.', '[.]')}:? {where}.*not a finite number"):
        convert(tmp_path / name, tmp_path / "n.zarr")
    assert not (tmp_path / "n.zarr").exists()


def test_convert_reads_a_quoted_newline_as_csv_allows(tmp_path):
    from rfstream.io import convert, dataset_info

    src = tmp_path / "q.csv"
    src.write_text('a,b,y\n1,"two\nlines",0\n3,"z",1\n4,"w",0\n')
    convert(src, tmp_path / "q.zarr")
    info = dataset_info(tmp_path / "q.zarr")
    assert info["shape"] == [3, 4] or tuple(info["shape"]) == (3, 4)
    assert "b=two\nlines" in info["attrs"]["feature_names"]


def test_an_unrecognized_argument_is_not_echoed(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["info", "x.zarr", "--storage-opts", '{"key": "AKIAECHOED", "secret": "s3cr3t"}'])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--storage-opts" in err
    assert "AKIAECHOED" not in err and "s3cr3t" not in err


def test_wide_sparse_features_are_not_refused_for_a_dense_block_they_never_make():
    # random binning's CSR blocks hold n_grids non-zeros a row, not a 4096 x D dense block
    from rfstream.catalog import check_model, make_model

    model = make_model("classification", features="binning", feature_params={"n_grids": 10, "n_bins": 2**16},
                       solver_params={"alpha": 1.0})
    assert check_model(model, 14, 1) is model

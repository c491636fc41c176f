"""``rfstream convert`` on the files a new user brings: what it guesses (header, label column,
the training set's choices with --like) and every message said with the flags typed."""
import json

import numpy as np

from rfstream import cli, io


def _run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_digits_with_the_label_first_and_a_numeric_header_convert_as_typed(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [",".join([str(rng.integers(0, 10))] + [f"{v:.4f}" for v in rng.uniform(-1, 1, 16)]) for _ in range(200)]
    assert _run("convert", _write(tmp_path / "d.csv", rows), tmp_path / "d.zarr") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["label"] == {"column": 0, "task": "classification", "classes": 10} and not out.err
    header = ",".join(["y", *map(str, range(1, 17))])
    assert _run("convert", _write(tmp_path / "h.csv", [header, *rows]), tmp_path / "h.zarr", "--label-column", "y",
                "--quiet") == 0
    assert io.dataset_info(tmp_path / "h.zarr")["attrs"]["n_rows"] == 200


def test_a_label_name_without_a_header_says_the_header_flag(tmp_path, capsys):
    src = _write(tmp_path / "t.csv", ["city,label", "Paris,A", "Lyon,B", "Paris,B"])
    assert _run("convert", src, tmp_path / "t.zarr", "--label-column", "label") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rfstream: error: --label-column label is not a column of ")
    assert "if that row names the columns, pass --header yes;" in err and "header=True" not in err
    assert _run("convert", src, tmp_path / "t.zarr", "--label-column", "label", "--header", "yes", "--quiet") == 0


def test_like_takes_the_label_column_and_its_refusal_says_flags(tmp_path, capsys):
    rng = np.random.default_rng(1)
    rows = [",".join([str(rng.integers(0, 3))] + [f"{v:.3f}" for v in rng.normal(size=4)]) for _ in range(60)]
    assert _run("convert", _write(tmp_path / "tr.csv", rows), tmp_path / "tr.zarr", "--label-column", "first",
                "--quiet") == 0
    test = _write(tmp_path / "te.csv", rows[:10])
    assert _run("convert", test, tmp_path / "te.zarr", "--like", tmp_path / "tr.zarr", "--quiet") == 0
    assert io.dataset_info(tmp_path / "te.zarr")["attrs"]["label_index"] == 0
    assert _run("convert", test, tmp_path / "te2.zarr", "--like", tmp_path / "tr.zarr", "--label-column", "last") == 2
    err = capsys.readouterr().err
    assert err.endswith(f"the label column is 4 but --like {tmp_path / 'tr.zarr'} used column 0; pass "
                        "--label-column 0\n") and "label_column" not in err


def test_classification_of_prices_is_refused_and_of_many_integers_warned(tmp_path, capsys):
    src = _write(tmp_path / "p.csv", [f"{k % 4},{100 + 2.5 * k}" for k in range(50)])
    assert _run("convert", src, tmp_path / "p.zarr", "--task", "classification") == 2
    err = capsys.readouterr().err
    assert err == (f"rfstream: error: {src}: --task classification makes a class of each value, but label column 1 "
                   "holds non-integer numbers (such as 102.5); use --task regression, or bin the target into "
                   "classes first\n")
    src = _write(tmp_path / "n.csv", [f"{k * 0.5},{k}" for k in range(50)])
    assert _run("convert", src, tmp_path / "n.zarr", "--task", "classification", "--quiet") == 0
    assert capsys.readouterr().err == (
        f"rfstream: warning: {src}: --task classification makes a class of each of the 50 distinct integer values "
        "of label column 1; if the label is a quantity, use --task regression\n")


def test_a_guessed_label_in_doubt_is_one_warning_with_the_flag(tmp_path, capsys):
    src = _write(tmp_path / "tie.csv", [f"{k % 3},{k * 0.5},{k % 2}" for k in range(40)])
    assert _run("convert", src, tmp_path / "tie.zarr", "--quiet") == 0
    assert capsys.readouterr().err == (
        f"rfstream: warning: {src}: the label is column 2 (the last: 2 distinct integer values), taken by default; "
        "column 0 (the first: 3 distinct integer values) looks as much like a label: if it is the label, convert "
        "again with --label-column 0\n")


def test_delimiter(tmp_path, capsys):
    src = _write(tmp_path / "p.txt", ["1|2.5|a", "2|3.5|b", "3|1.5|a"])
    assert _run("convert", src, tmp_path / "p.zarr", "--delimiter", "|", "--quiet") == 0
    attrs = io.dataset_info(tmp_path / "p.zarr")["attrs"]
    assert attrs["sep"] == "|" and attrs["classes"] == ["a", "b"] and attrs["columns"] == ["c0", "c1"]
    assert _run("convert", src, tmp_path / "q.zarr", "--delimiter", "tab", "--quiet") == 2  # one field per row
    assert "no feature columns besides the label" in capsys.readouterr().err
    assert _run("convert", src, tmp_path / "r.zarr", "--delimiter", '"') == 2
    assert "--delimiter: must be auto, tab, space, whitespace or a separator such as ';'" in capsys.readouterr().err

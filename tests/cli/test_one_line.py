"""Every refusal at the command line is one line and exit 2: no worker's "Compute Failed"
log, no numpy warning before it, and bytes that are not text (a NUL in a CSV field) refused
rather than read as categories."""
import subprocess
import sys

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from rfstream import RandomFourierFeatures, StreamingRidgeClassifier, save_model
from rfstream.cli import main
from rfstream.io import write_dataset

X = np.random.default_rng(0).standard_normal((60, 3))
Y = (X[:, 0] > 0).astype(int)


def _one_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _csv(path, rows):
    path.write_bytes(b"a,b,label\n" + b"".join(rows))
    return path


@pytest.mark.parametrize("field, column", [(b"3\x00.5", "b"), (b"\x003", "b"), (b"x\x00y", "b"),
                                           (b"1\x00", "label")])
def test_a_nul_byte_in_a_field_is_refused_in_one_line(tmp_path, capfd, field, column):
    rows = [f"{i},{i % 7}.5,{i % 2}\n".encode() for i in range(40)]
    rows[7] = b"7," + field + b",1\n" if column == "b" else b"7,3.5," + field + b"\n"
    src = _csv(tmp_path / "nul.csv", rows)
    assert main(["convert", str(src), str(tmp_path / "out.zarr"), "--quiet"]) == 2
    line = _one_line(capfd.readouterr().err)
    assert "NUL" in line and repr(column) in line
    assert not (tmp_path / "out.zarr").exists()


def test_a_model_refused_after_an_overflow_prints_only_the_refusal(tmp_path):
    """In a process of its own: pytest would catch the warnings before they reach stderr."""
    model = make_pipeline(RandomFourierFeatures(n_components=8, random_state=0), StreamingRidgeClassifier())
    model.fit(X, Y)
    model[-1].coef_ = np.full(model[-1].coef_.shape, 1e308)  # finite, but its products overflow
    save_model(model, str(tmp_path / "huge"))
    write_dataset(str(tmp_path / "d.zarr"), X, Y)
    argv = ["predict", tmp_path / "huge", tmp_path / "d.zarr", "--out", tmp_path / "p.zarr"]
    done = subprocess.run([sys.executable, "-m", "rfstream", *map(str, argv), "--scheduler", "threads",
                           "--quiet"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "non-finite" in _one_line(done.stderr)


def test_a_bad_value_in_files_converted_by_the_embedded_clusters_tasks_is_one_line(tmp_path, capfd):
    """The workers are processes of their own writing to this stderr: distributed's
    "Compute Failed" log of the task's exception must not come before the one line."""
    folder = tmp_path / "parts"
    folder.mkdir()
    _csv(folder / "a.csv", [f"{i},{i % 3},{i % 2}\n".encode() for i in range(50)])
    _csv(folder / "b.csv", [f"{i},{i % 3},{i % 2}\n".encode() for i in range(50)] + [b"1,inf,0\n"])
    assert main(["convert", str(folder), str(tmp_path / "out.zarr"), "--scheduler", "cluster", "--quiet"]) == 2
    line = _one_line(capfd.readouterr().err)
    assert "b.csv" in line and "inf" in line


@pytest.mark.parametrize("fails", [True, False])
def test_a_commands_warnings_are_lines_after_success_and_nothing_before_a_refusal(monkeypatch, capsys, fails):
    import warnings

    from rfstream.cli import commands

    def command(args):
        warnings.warn("overflow encountered in matmul", RuntimeWarning)
        if fails:
            raise ValueError("the model is refused")

    monkeypatch.setattr(commands, "cmd_info", command)
    assert main(["info", "anything"]) == (2 if fails else 0)
    err = capsys.readouterr().err
    want = "rfstream: error: the model is refused" if fails else \
        "rfstream: warning: overflow encountered in matmul"
    assert _one_line(err) == want

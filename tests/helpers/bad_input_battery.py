"""The bad-input battery: every case must fail the way a user can act on.

    python tests/helpers/bad_input_battery.py          # prints each case and "N tried, M behaved"

A case behaves when the CLI exits with code 2, prints exactly one line on stderr that
names the problem (a keyword per case), no traceback, and leaves nothing half-written:
its output path does not exist and no temporary ``.tmp-`` directory is left beside it.
tests/test_bad_input.py runs the same cases under pytest.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr

from rfstream.cli import main
from rfstream.io import write_dataset

RNG = np.random.default_rng(0)


def _dataset(path, X, y):
    write_dataset(path, X, y, rows_per_chunk=64)
    return path


def _good(tmp):
    path = tmp / "good.zarr"
    if not path.exists():
        X = RNG.normal(size=(300, 4)).astype(np.float32)
        _dataset(path, X, (X[:, 0] > 0).astype(np.int32))
    return path


def _model(tmp):
    out = tmp / "model"
    if not out.exists():
        assert main(["fit", str(_good(tmp)), "--out", str(out), "--n-components", "50",
                     "--scheduler", "threads", "--quiet"]) == 0
    return out


def _with_bad_value(value):
    def setup(tmp):
        X = RNG.normal(size=(300, 4)).astype(np.float32)
        X[123, 2] = value
        data = _dataset(tmp / "bad.zarr", X, (X[:, 0] > 0).astype(np.int32))
        return ["fit", data, "--out", tmp / "out"]
    return setup


def _narrow(tmp):
    X = RNG.normal(size=(50, 3)).astype(np.float32)
    data = _dataset(tmp / "narrow.zarr", X, np.zeros(50, np.int32))
    return ["predict", _model(tmp), data, "--out", tmp / "out"]


def _empty(tmp):
    data = _dataset(tmp / "empty.zarr", np.zeros((0, 4), np.float32), np.zeros(0, np.int32))
    return ["fit", data, "--out", tmp / "out"]


def _single_class(tmp):
    X = RNG.normal(size=(200, 4)).astype(np.float32)
    return ["fit", _dataset(tmp / "one.zarr", X, np.zeros(200, np.int32)), "--out", tmp / "out"]


def _string_labels_unknown_positive(tmp):
    (tmp / "s.csv").write_text("".join(f"{i},{i % 3},{'cat' if i % 2 else 'dog'}\n" for i in range(50)))
    return ["convert", tmp / "s.csv", tmp / "out", "--positive", "cow"]


def _corrupt_chunk(tmp):
    data = _good(tmp)
    copy = tmp / "corrupt.zarr"
    shutil.copytree(data, copy)
    chunk = next(p for p in sorted((copy / "X" / "c").rglob("*")) if p.is_file())
    chunk.write_bytes(b"\x00garbage" * 10)
    return ["evaluate", _model(tmp), copy, "--out", tmp / "out.json"]


def _missing(tmp):
    return ["fit", tmp / "nowhere.zarr", "--out", tmp / "out"]


def _ragged_csv(tmp):
    (tmp / "r.csv").write_text("1,2,a\n3,4,b\n5,6,7,8,a\n9,10,b\n")
    return ["convert", tmp / "r.csv", tmp / "out"]


def _xy_mismatch(tmp):
    data = _good(tmp)
    copy = tmp / "mismatch.zarr"
    shutil.copytree(data, copy)
    group = zarr.open_group(str(copy), mode="r+")
    group["y"].resize((250,))
    return ["fit", copy, "--out", tmp / "out"]


def _param(flag, value):
    def setup(tmp):
        return ["fit", _good(tmp), "--out", tmp / "out", flag, value]
    return setup


def _exists(tmp):
    (tmp / "out").mkdir()
    (tmp / "out" / "keep.txt").write_text("mine")
    return ["fit", _good(tmp), "--out", tmp / "out"]


def _tampered(tmp):
    model = tmp / "tampered"
    shutil.copytree(_model(tmp), model)
    array = sorted((model / "arrays").glob("*.npy"))[0]
    data = bytearray(array.read_bytes())
    data[-1] ^= 0xFF
    array.write_bytes(bytes(data))
    return ["evaluate", model, _good(tmp), "--out", tmp / "out.json"]


# name, setup(tmp) -> argv, a word the message must contain, the output that must not appear
CASES = [
    ("NaN in X", _with_bad_value(np.nan), "NaN", "out"),
    ("inf in X", _with_bad_value(np.inf), "infinity", "out"),
    ("wrong number of columns at predict", _narrow, "--like", "out"),
    ("empty dataset", _empty, "0 sample", "out"),
    ("a single class", _single_class, "2 classes", "out"),
    ("string labels, unknown positive class", _string_labels_unknown_positive, "cow", "out"),
    ("corrupted Zarr chunk", _corrupt_chunk, "cannot be read", "out.json"),
    ("missing path", _missing, "does not exist", "out"),
    ("unparsable CSV row", _ragged_csv, "r.csv", "out"),
    ("X and y of different lengths", _xy_mismatch, "rows but y has", "out"),
    ("n_components=0", _param("--n-components", "0"), "n_components", "out"),
    ("gamma<0", _param("--gamma", "-1"), "gamma", "out"),
    ("alpha<0", _param("--alpha", "-1"), "alpha", "out"),
    ("output exists", _exists, "already exists", None),
    ("tampered model", _tampered, "sha256", "out.json"),
]


def run_case(setup, keyword, output, tmp):
    """(behaved, detail) for one case run in the directory ``tmp``."""
    tmp = Path(tmp)
    argv = [str(a) for a in setup(tmp)]
    argv += ["--quiet"] if argv[0] == "convert" else ["--scheduler", "threads", "--quiet"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    problems = []
    if code != 2:
        problems.append(f"exit code {code}")
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    if "Traceback" in err.getvalue():
        problems.append("traceback")
    if not any(keyword.lower() in ln.lower() for ln in lines):
        problems.append(f"message lacks {keyword!r}")
    if output is not None and (tmp / output).exists():
        problems.append(f"{output} was written")
    if list(tmp.glob(".*.tmp-*")):
        problems.append("temporary output left behind")
    message = lines[0] if lines else ""
    return not problems, "; ".join(problems) or message


def main_battery():
    behaved = 0
    for name, setup, keyword, output in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            ok, detail = run_case(setup, keyword, output, tmp)
        behaved += ok
        print(f"{'ok ' if ok else 'BAD'} {name}: {detail}")
    print(f"{len(CASES)} tried, {behaved} behaved")
    return 0 if behaved == len(CASES) else 1


if __name__ == "__main__":
    sys.exit(main_battery())

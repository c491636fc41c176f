"""The smaller refusals of the first hour, each one line before any pass: a score of two classes
on ten, a mistyped scheduler address, a scheduler nothing answers for (within seconds)."""
import socket
import time

import numpy as np
import pytest

from rfstream import cli, io
from rfstream.cluster import connect
from rfstream.options import ParameterError


def _run(*argv):
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


@pytest.fixture
def three_classes(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    io.write_dataset(tmp_path / "d.zarr", X, rng.integers(0, 3, 300).astype(np.int32),
                     attrs={"task": "classification", "classes": ["a", "b", "c"]})
    return tmp_path / "d.zarr"


def test_roc_auc_on_three_classes_is_refused_before_the_first_pass(three_classes, tmp_path, capsys):
    assert _run("fit", three_classes, "--alpha", "0.1,1", "--scoring", "roc_auc", "--out", tmp_path / "m",
                "--scheduler", "threads", "--progress", "always") == 2
    err = capsys.readouterr().err
    assert err == (f"rfstream: error: --scoring roc_auc needs two classes; {three_classes} has 3 (['a', 'b', 'c']). "
                   "Use --scoring error_rate or --scoring balanced_error, or convert with one class against the "
                   "rest (--positive).\n")  # no pass ran: no progress line
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.checkpoint").exists()


def test_a_port_that_is_not_a_number_is_said_so(three_classes, tmp_path, capsys):
    for address, why in [("127.0.0.1:8786x", "its port '8786x' is not a number from 0 to 65535"),
                         ("tcp://127.0.0.1", "it names no port")]:
        assert _run("fit", three_classes, "--out", tmp_path / "m", "--scheduler", address) == 2
        assert capsys.readouterr().err == (f"rfstream: error: --scheduler {address} is not a scheduler's address: "
                                           f"{why}; write tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786\n")


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_scheduler_nothing_answers_for_fails_within_seconds(three_classes, tmp_path, capsys):
    port = _closed_port()
    t0 = time.perf_counter()
    with pytest.raises(ParameterError, match=rf"nothing accepts a connection at 127\.0\.0\.1:{port} \("):
        with connect(f"tcp://127.0.0.1:{port}"):
            pass
    assert time.perf_counter() - t0 < 3  # the client alone retries for its 20 s timeout
    assert _run("fit", three_classes, "--out", tmp_path / "m", "--scheduler", f"127.0.0.1:{port}") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rfstream: error: could not connect to the Dask scheduler at '127.0.0.1:{port}': nothing "
                          f"accepts a connection at 127.0.0.1:{port} (") and err.count("\n") == 1
    assert "leave --scheduler out to use an embedded cluster" in err

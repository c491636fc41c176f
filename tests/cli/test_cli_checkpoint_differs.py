"""A checkpoint of another job says which parameters differ, in one bounded, printable line;
a command that stops keeping its checkpoint says its bytes, where, and how to resume or
start over."""
from __future__ import annotations

import json
import types

import dask.array as da
import numpy as np
import pytest

from rfstream import cli
from rfstream.cli.resume import kept
from rfstream.io import write_dataset
from rfstream.io.checkpoints import MANIFEST, CheckpointMismatch
from rfstream.jobs import FitJob


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    write_dataset(tmp_path / "d.zarr", X, (X[:, 0] > 0).astype(np.int64), rows_per_chunk=100)
    return str(tmp_path / "d.zarr")


def _interrupted(dataset, where, **params):
    """A checkpoint of the job ``params`` kept after one pass, as a stopped fit leaves it."""
    from rfstream.cluster import compute

    job = FitJob(dataset, checkpoint=where, **params)
    with pytest.raises(KeyboardInterrupt), job.resumable():
        compute(da.ones(10, chunks=5).sum())
        raise KeyboardInterrupt
    assert (where / MANIFEST).exists()


def test_the_cli_names_the_one_parameter_that_differs(dataset, tmp_path, capsys):
    where = tmp_path / "ck"
    _interrupted(dataset, where, n_components=8, alpha=[0.1, 1.0])
    capsys.readouterr()  # the interrupted fit's own lines
    code = cli.main(["fit", dataset, "--n-components", "8", "--alpha", "0.1,1,10", "--out", str(tmp_path / "m"),
                     "--checkpoint", str(where), "--scheduler", "threads", "--progress", "never"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1
    assert f"the checkpoint {where} is for another job: alpha differs (checkpoint [0.1, 1.0], " \
           "this run [0.1, 1.0, 10.0]);" in lines[0]
    assert lines[0].count(" differs ") == 1
    assert "--restart to discard it" in lines[0] and "another --checkpoint" in lines[0]


def test_the_library_names_exactly_the_parameters_changed(dataset, tmp_path):
    where = tmp_path / "ck"
    _interrupted(dataset, where, n_components=8, gamma=0.5, alpha=1.0)
    with pytest.raises(CheckpointMismatch) as refused:
        with FitJob(dataset, checkpoint=where, n_components=16, gamma=0.25, alpha=1.0).resumable():
            pass
    said = str(refused.value)
    assert "gamma differs (checkpoint 0.5, this run 0.25)" in said
    assert "n_components differs (checkpoint 8, this run 16)" in said
    assert said.count(" differs ") == 2 and "restart=True" in said
    with FitJob(dataset, checkpoint=where, n_components=8, gamma=0.5, alpha=1.0).resumable() as same:
        assert same.steps  # the same job: resumed, not refused


def test_a_hostile_identity_is_said_in_one_bounded_printable_line(dataset, tmp_path):
    where = tmp_path / "ck"
    _interrupted(dataset, where, n_components=8)
    manifest = json.loads((where / MANIFEST).read_text())
    evil = "\x1b]0;owned\x07\x1b[2J" + "A" * 100_000
    manifest["identity"] = {f"solver__p{i}\x1b[31m": ["0", evil] for i in range(50)}
    manifest["identity"]["features__n_components"] = ["0", evil]
    manifest["identity"]["huge"] = [evil, {"nested": evil}]
    manifest["fingerprint"] = "another job's"
    (where / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointMismatch) as refused:
        with FitJob(dataset, checkpoint=where, n_components=8).resumable():
            pass
    said = str(refused.value)
    assert "\n" not in said and "\x1b" not in said and "\x07" not in said
    assert len(said) < 6 * 3 * 80 + 400  # at most 5 differences of a name and two values of 80 characters
    assert said.count(" differs ") == 5 and " more;" in said


def test_a_stopped_command_says_what_it_keeps_and_how_to_go_on():
    store = types.SimpleNamespace(steps=[{}, {}], nbytes=324_415_984, location="m.checkpoint", removed=False)
    said = kept(types.SimpleNamespace(last_store=store))
    assert said.startswith("2 completed pass(es) (309.39 MiB) are kept in m.checkpoint: ")
    assert "run the same command again to resume" in said and "--restart" in said and "delete it" in said
    store.removed = True
    assert kept(types.SimpleNamespace(last_store=store)) == "nothing was written."
    assert kept(None) == "nothing was written."

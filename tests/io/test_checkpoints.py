"""rfstream/io/checkpoints.py: what a checkpoint may delete, and how its files are opened.

A directory is removed only when this run made it, or an earlier run did and its marker
beside the directory (``.NAME.rfstream-made``, with the token the manifest names) proves
it; the manifest's own claim proves nothing.  Files are read without following a link.
"""
import json
import shutil

import dask.array as da
import pytest

from rfstream.cluster import compute
from rfstream.io.checkpoints import MANIFEST, CheckpointMismatch, resumable


def _passes(n=2):
    for i in range(n):
        compute(da.arange(8, chunks=4).sum() + i)


def _claim(where, value):
    manifest = json.loads((where / MANIFEST).read_text())
    manifest["made_directory"] = value
    (where / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("claim", [True, "0" * 32, "forged"])
@pytest.mark.parametrize("ends", ["saved", "failed"])
def test_a_manifests_claim_never_removes_the_users_directory(tmp_path, claim, ends):
    where = tmp_path / "mine"
    where.mkdir()
    with resumable(where, "job"):
        _passes(2)
    _claim(where, claim)
    if ends == "saved":
        with resumable(where, "job") as checkpoint:
            _passes(2)
        assert checkpoint.reused == 2
        checkpoint.remove()
    else:
        with pytest.raises(ValueError, match="bad data"), resumable(where, "job"):
            _passes(2)
            raise ValueError("bad data")  # will recur: the checkpoint is dropped
    assert where.is_dir() and not list(where.iterdir())  # emptied, never removed


def test_a_directory_an_earlier_run_made_is_removed_once_proven(tmp_path):
    where = tmp_path / "model.checkpoint"
    with resumable(where, "job"):  # made here, left as a killed run leaves it
        _passes(2)
    assert (tmp_path / ".model.checkpoint.rfstream-made").is_file()
    with resumable(where, "job") as checkpoint:
        _passes(2)
    assert checkpoint.reused == 2
    checkpoint.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_copied_checkpoint_is_not_proven_by_its_manifest(tmp_path):
    made = tmp_path / "made"
    with resumable(made, "job"):
        _passes(2)
    copy = tmp_path / "copy"
    shutil.copytree(made, copy)  # the manifest's token comes along; the marker beside it does not
    with resumable(copy, "job") as checkpoint:
        _passes(2)
    checkpoint.remove()
    assert copy.is_dir() and not list(copy.iterdir())


def test_a_marker_naming_another_directory_proves_nothing(tmp_path):
    where = tmp_path / "ck"
    with resumable(where, "job"):
        _passes(1)
    shutil.rmtree(where)  # the user removes it and makes a directory of their own there,
    where.mkdir()         # then copies a checkpoint into it: the marker names the old inode
    with resumable(tmp_path / "other", "job"):
        _passes(1)
    marker = json.loads((tmp_path / ".other.rfstream-made").read_text())
    for name in ("rfstream-checkpoint.json", "pass-00001.npz"):
        shutil.copy(tmp_path / "other" / name, where / name)
    (tmp_path / ".ck.rfstream-made").write_text(json.dumps({**marker, "directory": [0, 0]}))
    _claim(where, marker["token"])
    with resumable(where, "job") as checkpoint:
        _passes(1)
    checkpoint.remove()
    assert where.is_dir()


@pytest.mark.parametrize("name", [MANIFEST, "pass-00001.npz"])
def test_a_file_swapped_for_a_link_is_refused_and_never_read(tmp_path, name):
    where = tmp_path / "ck"
    with resumable(where, "job"):
        _passes(2)
    outside = tmp_path / "outside"
    shutil.copy(where / name, outside)
    (where / name).unlink()
    (where / name).symlink_to(outside)
    with pytest.raises(CheckpointMismatch, match="symbolic link"), resumable(where, "job"):
        _passes(2)
    assert outside.exists()


def test_a_huge_manifest_is_refused_before_it_is_read(tmp_path):
    where = tmp_path / "ck"
    with resumable(where, "job"):
        _passes(1)
    with open(where / MANIFEST, "r+b") as f:
        f.truncate(1 << 30)  # sparse: a GiB the reader must not take in
    with pytest.raises(CheckpointMismatch, match="bytes"), resumable(where, "job"):
        _passes(1)

"""rfstream/io/staging.py: a destination is replaced only when rfstream can prove it wrote it.

An interrupted write on a store leaves ``v-<hex>/`` beside its own marker
``rfstream-write-<hex>.json``; only such a proven pair is taken for rfstream's and removed
without ``overwrite``.  A user's folder whose entries merely start with ``v-`` is never
deleted, and an output that is (or holds, or lies inside) an input is refused.
"""
import json
import re

import numpy as np
import pytest
from helpers.cli import one_error_line, run
from helpers.services import S3_CREDENTIALS, s3_server
from sklearn.pipeline import make_pipeline

from rfstream import RandomFourierFeatures, StreamingRidgeClassifier, save_model
from rfstream.io import open_dataset, write_dataset
from rfstream.io.location import as_location
from rfstream.io.staging import staging

X = np.random.default_rng(0).standard_normal((40, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


@pytest.fixture
def memory_url(request):
    url = f"memory://rfstream-staging/{request.node.name}"
    yield url
    as_location(url).remove()


@pytest.fixture(scope="module")
def s3():
    """``(bucket URL, storage options)`` on a fresh moto S3 server process."""
    import s3fs

    with pytest.MonkeyPatch.context() as mp, s3_server() as endpoint:
        for key, value in S3_CREDENTIALS.items():
            mp.setenv(key, value)
        s3fs.S3FileSystem(endpoint_url=endpoint).mkdir("rfstream-staging")
        yield "s3://rfstream-staging", {"endpoint_url": endpoint}


def _releases(loc):
    """A user's folder of releases, every entry starting with ``v-``; returns its files' bytes."""
    files = {"v-1.0.tar.gz": b"release one", "v-2.0/docs/README": b"read me", "v-abc/data": b"hex-looking"}
    for name, data in files.items():
        loc.child(name).write_bytes(data)
    return files


def _intact(loc, files):
    return all(loc.child(name).read_bytes() == data for name, data in files.items())


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_folder_of_v_names_is_never_taken_for_an_interrupted_write(where, tmp_path, memory_url):
    dst = as_location(str(tmp_path / "releases") if where == "local" else f"{memory_url}/releases")
    files = _releases(dst)
    target = dst.path if where == "local" else str(dst)
    with pytest.raises(FileExistsError, match="already exists"):
        write_dataset(target, X, Y)
    with pytest.raises(ValueError, match="refusing to overwrite .* not a Zarr dataset"):
        write_dataset(target, X, Y, overwrite=True)  # not rfstream's output either
    assert _intact(dst, files)


@pytest.mark.parametrize("command", ["predict", "convert"])
def test_on_s3_a_folder_of_v_names_is_kept(s3, small, command, capsys):
    bucket, options = s3
    dst = as_location(f"{bucket}/{command}/releases", options)
    files = _releases(dst)
    data, model, _, csv = small
    argv = ["predict", model, data, "--out", str(dst)] if command == "predict" else ["convert", csv, str(dst)]
    assert run([*argv, "--storage-options", json.dumps(options), "--scheduler", "threads", "--quiet"]) == 2
    assert "already exists" in one_error_line(capsys)
    assert _intact(dst, files)


def test_a_forged_or_mismatched_write_marker_proves_nothing(memory_url):
    dst = as_location(f"{memory_url}/out.zarr")
    files = _releases(dst)
    # a marker naming another version, and a marker that is not rfstream's document
    dst.child("rfstream-write-abc.json").write_bytes(json.dumps(
        {"format": "rfstream-write", "version": "v-def"}).encode())
    dst.child("rfstream-write-1.json").write_bytes(b"not json")
    with pytest.raises(FileExistsError, match="already exists"):
        write_dataset(str(dst), X, Y)
    assert _intact(dst, files)


def _interrupted(dst):
    """What a write killed half-way leaves: its version and marker, no commit.  The caller
    keeps the returned writer: once collected, it would clean up as a failed write does."""
    writer = staging(dst, overwrite=False)
    writer.__enter__().child("zarr.json").write_bytes(b"{}")  # partial data, never committed
    return writer


def test_a_proven_interrupted_write_is_replaced_without_overwrite(memory_url):
    dst = f"{memory_url}/out.zarr"
    killed = _interrupted(dst)  # noqa: F841 (kept alive)
    with pytest.raises(ValueError, match="incomplete: a write was interrupted"):
        open_dataset(dst)
    write_dataset(dst, X, Y)
    np.testing.assert_array_equal(np.asarray(open_dataset(dst)[0]), X)
    loc = as_location(dst)
    names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in loc.fs.ls(loc.path, detail=False))
    assert names[0] == "rfstream-commit.json" and len(names) == 2 and names[1].startswith("v-")


def test_an_interrupted_write_beside_a_users_file_deletes_nothing(memory_url):
    dst = as_location(f"{memory_url}/out.zarr")
    killed = _interrupted(str(dst))  # noqa: F841 (kept alive)
    dst.child("v-notes.txt").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="already exists"):
        write_dataset(str(dst), X, Y)
    assert dst.child("v-notes.txt").read_bytes() == b"mine"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A dataset and a model fitted on it (tiny: the refusals read metadata only)."""
    root = tmp_path_factory.mktemp("small")
    data = root / "data.zarr"
    write_dataset(str(data), X, Y)
    model = make_pipeline(RandomFourierFeatures(n_components=8, random_state=0),
                          StreamingRidgeClassifier()).fit(X, Y)
    save_model(model, str(root / "model"))
    save_model(RandomFourierFeatures(n_components=8, random_state=0).fit(X), str(root / "transformer"))
    csv = root / "data.csv"
    csv.write_text("a,b,label\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20)))
    return data, root / "model", root / "transformer", csv


@pytest.mark.parametrize("command", ["predict", "transform", "convert", "split"])
def test_the_cli_deletes_no_folder_of_v_names(command, small, tmp_path, capsys):
    data, model, transformer, csv = small
    dst = as_location(str(tmp_path / "releases"))
    files = _releases(dst)
    argv = {"predict": ["predict", model, data, "--out", dst.path],
            "transform": ["transform", transformer, data, "--out", dst.path],
            "convert": ["convert", csv, dst.path],
            "split": ["split", data, dst.path, tmp_path / "test.zarr"]}[command]
    assert run([*argv, "--quiet"]) == 2
    assert "already exists" in one_error_line(capsys)
    assert _intact(dst, files)


@pytest.mark.parametrize("command", ["predict", "transform"])
@pytest.mark.parametrize("relation", ["equal", "inside", "holding"])
def test_an_output_on_the_input_is_refused_even_with_overwrite(command, relation, small, tmp_path, capsys):
    _, predictor, transformer, _ = small
    model = predictor if command == "predict" else transformer
    local = tmp_path / "data.zarr"
    write_dataset(str(local), X, Y)
    out = {"equal": local, "inside": local / "pred.zarr", "holding": tmp_path}[relation]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert run([command, model, local, "--out", out, "--overwrite", "--quiet"]) == 2
    assert "DATA" in one_error_line(capsys)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    np.testing.assert_array_equal(np.asarray(open_dataset(str(local))[0]), X)


def test_predict_refuses_to_write_over_its_model(small, tmp_path, capsys):
    data, model, _, _ = small
    assert run(["predict", model, data, "--out", model, "--overwrite", "--quiet"]) == 2
    assert "MODEL" in one_error_line(capsys)


@pytest.mark.parametrize("parts", [("data/tr.zarr", "te.zarr"), ("tr.zarr", "tr.zarr/te.zarr"), (".", "te.zarr")])
def test_split_refuses_parts_inside_data_or_each_other(parts, tmp_path, capsys):
    data = tmp_path / "data"
    write_dataset(str(data), X, Y)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert run(["split", data, *(tmp_path / p for p in parts), "--overwrite", "--quiet"]) == 2
    assert re.search(r"DATA|one inside the other", one_error_line(capsys))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_marker_that_is_a_link_proves_nothing(tmp_path):
    """On a local disk (a store's layout copied there) the marker must be a regular file of
    its own: a link to a valid marker elsewhere is no proof."""
    dst = tmp_path / "out.zarr"
    (dst / "v-ab").mkdir(parents=True)
    (dst / "v-ab" / "data").write_text("someone's")
    valid = tmp_path / "marker.json"
    valid.write_text(json.dumps({"format": "rfstream-write", "version": "v-ab"}))
    (dst / "rfstream-write-ab.json").symlink_to(valid)
    with pytest.raises(FileExistsError, match="already exists"):
        write_dataset(str(dst), X, Y)
    assert (dst / "v-ab" / "data").read_text() == "someone's"
    (dst / "rfstream-write-ab.json").unlink()
    (dst / "rfstream-write-ab.json").write_text(valid.read_text())  # the proof, as a write leaves it
    write_dataset(str(dst), X, Y)
    np.testing.assert_array_equal(np.asarray(open_dataset(str(dst))[0]), X)

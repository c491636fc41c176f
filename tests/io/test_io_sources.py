"""Sources and destinations other than rfstream's own local layout: URLs, stores, xarray."""
import json
import shutil
import sys

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers.services import http_server

import rfstream
from rfstream.cli import main
from rfstream.datasets import source_paths
from rfstream.io import (
    convert,
    dataset_info,
    load_model,
    open_dataset,
    save_model,
    write_dataset,
)
from rfstream.io.location import StorageError, as_location

MAGIC, _ = source_paths("magic_demo")  # the shipped MAGIC gamma telescope data
RNG = np.random.default_rng(0)
X = RNG.standard_normal((300, 4)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


@pytest.fixture
def memory_url(request):
    """A fresh memory:// prefix, removed afterwards."""
    url = f"memory://rfstream-tests/{request.node.name}"
    yield url
    as_location(url).remove()


def test_memory_url_round_trip_and_staging(memory_url):
    dst = f"{memory_url}/d.zarr"
    write_dataset(dst, X, Y, rows_per_chunk=64)
    Xr, yr = open_dataset(dst)
    np.testing.assert_array_equal(np.asarray(Xr), X)
    np.testing.assert_array_equal(np.asarray(yr), Y)
    with pytest.raises(FileExistsError, match="already exists"):
        write_dataset(dst, X)
    write_dataset(dst, X[:10], overwrite=True)
    assert open_dataset(dst)[0].shape == (10, 4)
    # on a store the data sit under one committed version; the old one is gone
    entries = sorted(p.rsplit("/", 1)[-1] for p in as_location(dst).fs.ls(as_location(dst).path, detail=False))
    assert entries[0] == "rfstream-commit.json" and len(entries) == 2 and entries[1].startswith("v-")


def test_failed_write_on_a_store_keeps_the_previous_version(memory_url):
    dst = f"{memory_url}/d.zarr"
    write_dataset(dst, X)
    with pytest.raises(ValueError, match="y must be 1-D"):
        write_dataset(dst, X, np.zeros((3, 3)), overwrite=True)
    with pytest.raises(ValueError, match="not JSON-serializable"):
        write_dataset(dst, X[:5], attrs={"bad": object()}, overwrite=True)
    np.testing.assert_array_equal(np.asarray(open_dataset(dst)[0]), X)


def test_model_at_a_url(memory_url):
    model = rfstream.pipeline.make_model("classification", feature_params={"n_components": 20})
    model.fit(X, Y)
    save_model(model, f"{memory_url}/model")
    loaded = load_model(f"{memory_url}/model")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(ValueError, match="not an rfstream model"):
        load_model(f"{memory_url}/nothing")


def test_file_url_and_local_path_are_the_same(tmp_path):
    write_dataset(tmp_path / "d.zarr", X, Y)
    a, b = open_dataset(f"file://{tmp_path}/d.zarr"), open_dataset(tmp_path / "d.zarr")
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


def test_zarr_v2_store_written_elsewhere_with_other_names(tmp_path):
    group = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    group.create_array("inputs", shape=X.shape, chunks=(100, 4), dtype="f8")[:] = X
    group.create_array("labels", shape=(300, 1), chunks=(100, 1), dtype="f4")[:] = Y[:, None]
    Xr, yr = open_dataset(tmp_path / "v2.zarr", x="inputs", y="labels")
    assert Xr.chunks[0] == (100, 100, 100) and yr.shape == (300,)
    np.testing.assert_array_equal(np.asarray(yr), Y.astype(np.float32))
    info = dataset_info(tmp_path / "v2.zarr", x="inputs", y="labels")
    assert info["attrs"]["task"] == "regression"  # float labels, no attributes: a regression
    assert open_dataset(tmp_path / "v2.zarr", x="inputs")[1] is None  # no array named "y"
    with pytest.raises(ValueError, match=r"has no array 'X'; its arrays are \['inputs', 'labels'\]"):
        open_dataset(tmp_path / "v2.zarr")


def test_cli_fits_a_foreign_store_with_task_and_array_flags(tmp_path, capsys):
    group = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    group.create_array("inputs", shape=X.shape, chunks=(100, 4), dtype="f8")[:] = X
    group.create_array("labels", shape=(300,), chunks=(100,), dtype="f4")[:] = Y
    common = ["--x-array", "inputs", "--y-array", "labels", "--scheduler", "threads"]
    fit = ["fit", str(tmp_path / "v2.zarr"), "--out", str(tmp_path / "m"), "--n-components", "50", *common]
    assert main([*fit, "--task", "classification", "--quiet"]) == 0
    assert main(["evaluate", str(tmp_path / "m"), str(tmp_path / "v2.zarr"), *common]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "error_rate" and result["value"] < 0.1
    assert main(["info", str(tmp_path / "v2.zarr"), "--x-array", "inputs", "--y-array", "labels"]) == 0
    assert json.loads(capsys.readouterr().out)["attrs"]["task_inferred"] is True


def test_zarr_group_store_and_xarray_objects(tmp_path):
    store = zarr.storage.MemoryStore()
    write_dataset(store, X, Y)
    np.testing.assert_array_equal(np.asarray(open_dataset(store)[0]), X)
    group = zarr.open_group(store, mode="r")
    np.testing.assert_array_equal(np.asarray(open_dataset(group)[1]), Y)
    ds = xr.Dataset({"X": (("row", "col"), X), "y": (("row",), Y)})
    Xr, _ = open_dataset(ds)
    np.testing.assert_array_equal(np.asarray(Xr), X)
    ds.chunk({"row": 100}).to_zarr(tmp_path / "xr.zarr", zarr_format=3, consolidated=False)
    Xr, yr = open_dataset(tmp_path / "xr.zarr")
    np.testing.assert_array_equal(np.asarray(Xr), X)
    np.testing.assert_array_equal(np.asarray(yr), Y)
    assert dataset_info(tmp_path / "xr.zarr")["attrs"]["task"] == "classification"
    Xr, _ = open_dataset(xr.open_zarr(tmp_path / "xr.zarr", consolidated=False))
    np.testing.assert_array_equal(np.asarray(Xr), X)


@pytest.mark.parametrize("target, message", [
    ("gs://bucket/x.zarr", 'pip install "rfstream[gcs]"'),
    ("abfs://c/x.zarr", 'pip install "rfstream[azure]"'),
    ("s3:/bucket/x.zarr", "looks like a URL with a typo"),
])
def test_locations_refused_in_one_line(target, message, monkeypatch):
    """A URL whose filesystem package is not installed names the extra to install.  CI installs
    every extra, so gcsfs and adlfs are made unimportable here (nor is any remote address
    tried: no test reaches one)."""
    from fsspec.registry import _registry  # the classes fsspec imported already

    for package, protocols in (("gcsfs", ("gs", "gcs")), ("adlfs", ("abfs", "az"))):
        monkeypatch.setitem(sys.modules, package, None)  # import raises ImportError
        for protocol in protocols:
            monkeypatch.delitem(_registry, protocol, raising=False)
    with pytest.raises(StorageError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        open_dataset(target)
    assert "\n" not in str(err.value)


def test_convert_reads_https_sources(tmp_path):
    """A source served over HTTP (here ``python -m http.server`` on 127.0.0.1)."""
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(MAGIC, served / MAGIC.name)
    with http_server(served) as url:
        remote = convert(f"{url}/{MAGIC.name}", tmp_path / "remote.zarr", rows_per_chunk=4096)
        with pytest.raises(FileNotFoundError, match="nope.csv does not exist"):
            convert(f"{url}/nope.csv", tmp_path / "nope.zarr")
    local = convert(MAGIC, tmp_path / "local.zarr", rows_per_chunk=4096)
    assert remote["shape"] == local["shape"] == [19020, 10]
    assert remote["source"] == f"{url}/{MAGIC.name}"
    np.testing.assert_array_equal(np.asarray(open_dataset(tmp_path / "remote.zarr")[0]),
                                  np.asarray(open_dataset(tmp_path / "local.zarr")[0]))
    assert not (tmp_path / "nope.zarr").exists()


def test_failed_model_save_on_a_store_keeps_the_previous_model(memory_url, monkeypatch):
    from rfstream.io import model_files

    model = rfstream.pipeline.make_model("classification", feature_params={"n_components": 20})
    model.fit(X, Y)
    save_model(model, f"{memory_url}/model")
    write = model_files._Writer.array
    calls = []

    def fail_on_third(self, value, where):
        calls.append(where)
        if len(calls) == 3:
            raise OSError("disk full (injected)")
        return write(self, value, where)

    monkeypatch.setattr(model_files._Writer, "array", fail_on_third)
    other = rfstream.pipeline.make_model("classification", feature_params={"n_components": 30})
    other.fit(X, Y)
    with pytest.raises(OSError, match="injected"):
        save_model(other, f"{memory_url}/model", overwrite=True)
    loaded = load_model(f"{memory_url}/model")
    assert loaded.named_steps["features"].n_components == 20
    entries = as_location(f"{memory_url}/model").fs.ls(as_location(f"{memory_url}/model").path, detail=False)
    assert len(entries) == 2  # the commit and the one version it names: the failed one is gone

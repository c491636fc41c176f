"""The dataset registry (rfstream.datasets.registry): its entries match the files, conversions are reused."""
import re
from pathlib import Path

import pytest
import zarr
from helpers import ROOT

from rfstream import datasets
from rfstream.datasets import DATASETS, prepare, source_paths, train_test
from rfstream.io import dataset_info


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_entry_matches_the_converted_files(name, prepared):
    """Rows as PROVENANCE.txt documents them, the task, and a test set encoded like the training set."""
    entry = DATASETS[name]
    train, test = prepared(name)
    attrs = dataset_info(train)["attrs"]
    assert (attrs["n_rows"], None if test is None else dataset_info(test)["attrs"]["n_rows"]) == entry.rows
    assert attrs["task"] == entry.task
    assert (test is None) == (entry.test is None) == (entry.test_size is not None)
    if "positive_class" in entry.options:
        assert attrs["classes"] == ["rest", entry.options["positive_class"]]
    if test is not None:
        assert dataset_info(test)["attrs"]["feature_names"] == attrs["feature_names"]


def test_provenance_files_exist(datasets_dir):
    for entry in DATASETS.values():
        where = Path(datasets.__file__).parent if entry.shipped else datasets_dir
        assert (where / entry.provenance.split()[0]).is_file(), entry.name
        assert all(p is None or p.is_file() for p in source_paths(entry.name, datasets_dir)), entry.name


def test_prepare_reuses_and_names_by_chunking(datasets_dir, tmp_path, monkeypatch):
    train, test = prepare("adult", tmp_path, datasets_dir)
    assert (train.name, test.name) == ("adult_train.zarr", "adult_test.zarr")
    assert prepare("cpusmall", tmp_path, datasets_dir, rows_per_chunk=3000)[0].name == "cpusmall-rows3000.zarr"
    assert zarr.open_group(tmp_path / "cpusmall-rows3000.zarr", mode="r")["X"].chunks == (3000, 12)

    def fail(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr("rfstream.datasets.registry.convert", fail)
    assert prepare("adult", tmp_path, datasets_dir) == (train, test)
    assert prepare("adult", tmp_path, datasets_dir, test=False) == (train, None)


def test_train_test_splits_without_a_test_file(datasets_dir, tmp_path):
    Xtr, Xte, ytr, yte = train_test("magic_gamma", tmp_path, datasets_dir)
    assert Xtr.shape[0] + Xte.shape[0] == 19_020 and ytr.shape[0] == Xtr.shape[0]
    assert abs(Xte.shape[0] - 0.25 * 19_020) < 5 * (19_020 * 0.25 * 0.75) ** 0.5  # binomial test size
    Xtr, Xte, _, _ = train_test("adult", tmp_path, datasets_dir)
    assert (Xtr.shape[0], Xte.shape[0]) == (32_561, 16_281)
    with pytest.raises(ValueError, match="test_size=0.2: dataset 'adult' has a test file"):
        train_test("adult", tmp_path, datasets_dir, test_size=0.2)


def test_shipped_demo_needs_no_datasets_folder(tmp_path):
    train, _ = source_paths("magic_demo", folder=tmp_path / "nowhere")
    assert train.is_file() and train.parent == Path(datasets.__file__).parent


def test_errors_name_the_value_and_the_fix(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"dataset 'kdd' is not in the registry; use one of \['adult'"):
        source_paths("kdd")
    with pytest.raises(FileNotFoundError, match="nowhere does not exist; set RFSTREAM_DATASETS"):
        source_paths("adult", tmp_path / "nowhere")
    monkeypatch.setenv("RFSTREAM_DATASETS", str(tmp_path))
    assert datasets.datasets_folder() == tmp_path


def test_no_dataset_file_is_named_outside_the_registry():
    """Scripts, the bench and tests find the files through the registry, not by their own paths."""
    names = {Path(p).name for e in DATASETS.values() for p in (e.train, e.test) if p}
    quoted = re.compile("[\"'](?:[\\w/]*/)?(" + "|".join(map(re.escape, names)) + ")[\"']")
    files = [*ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("examples/*.py"), *ROOT.glob("deploy/*.py"),
             *ROOT.glob("tests/**/*.py"), *(p for p in ROOT.glob("rfstream/**/*.py") if p.name != "registry.py")]
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files for m in quoted.finditer(p.read_text())]
    assert not offenders

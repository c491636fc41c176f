"""Shared fixtures: the real datasets folder and datasets converted once per session."""

import os
from pathlib import Path

import pytest

from rfstream.io import convert


def _datasets_path() -> Path:
    env = os.environ.get("RFSTREAM_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def require_datasets() -> Path:
    """The datasets folder; skip when it is missing, but fail under CI=true."""
    path = _datasets_path()
    if not path.is_dir():
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"real datasets folder {path} is missing (CI=true: must not skip); "
                        "set RFSTREAM_DATASETS")
        pytest.skip(f"real datasets folder {path} is missing; set RFSTREAM_DATASETS")
    return path


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    return require_datasets()


@pytest.fixture(scope="session")
def kdd_train_zarr(datasets_dir, tmp_path_factory) -> Path:
    """KDD99 10% training set, binary: classes ["rest", "normal"] (494,021 rows)."""
    dst = tmp_path_factory.mktemp("kdd") / "train.zarr"
    convert(datasets_dir / "kddcup99" / "kddcup.data_10_percent.gz", dst, positive_class="normal")
    return dst


@pytest.fixture(scope="session")
def kdd_test_zarr(datasets_dir, kdd_train_zarr) -> Path:
    """KDD99 'corrected' test set encoded like the training set (311,029 rows)."""
    dst = kdd_train_zarr.parent / "test.zarr"
    convert(datasets_dir / "kddcup99" / "corrected.gz", dst, like=kdd_train_zarr)
    return dst


@pytest.fixture(scope="session")
def adult_train_zarr(datasets_dir, tmp_path_factory) -> Path:
    """Adult training set, classes ["rest", ">50K"] (32,561 rows)."""
    dst = tmp_path_factory.mktemp("adult") / "train.zarr"
    convert(datasets_dir / "adult" / "adult.data", dst, positive_class=">50K")
    return dst


@pytest.fixture(scope="session")
def adult_test_zarr(datasets_dir, adult_train_zarr) -> Path:
    """Adult test set encoded like the training set (16,281 rows)."""
    dst = adult_train_zarr.parent / "test.zarr"
    convert(datasets_dir / "adult" / "adult.test", dst, like=adult_train_zarr)
    return dst

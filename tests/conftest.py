"""Shared fixtures: the real datasets folder and datasets converted once per session.

Every real dataset is described once, in :mod:`rfstream.datasets.registry`; the
``prepared`` fixture converts one there (once per session and chunking), and the
KDD99 and Adult fixtures below are its most used conversions.
"""

import os
from pathlib import Path

import pytest

from rfstream.datasets import datasets_folder, prepare


def require_datasets() -> Path:
    """The datasets folder; skip when it is missing, but fail under CI=true."""
    path = datasets_folder()
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
def prepared(datasets_dir, tmp_path_factory):
    """``prepared(name, rows_per_chunk=None, test=True) -> (train_zarr, test_zarr or None)``.

    :func:`rfstream.datasets.prepare` into one session folder: each dataset is
    converted once per chunking, whichever test asks first.
    """
    workdir = tmp_path_factory.mktemp("datasets")

    def get(name, rows_per_chunk=None, test=True):
        return prepare(name, workdir, datasets_dir, rows_per_chunk=rows_per_chunk, test=test)

    return get


@pytest.fixture(scope="session")
def kdd_train_zarr(prepared) -> Path:
    """KDD99 10% training set, binary: classes ["rest", "normal"] (494,021 rows)."""
    return prepared("kddcup99", test=False)[0]


@pytest.fixture(scope="session")
def kdd_test_zarr(prepared) -> Path:
    """KDD99 'corrected' test set encoded like the training set (311,029 rows)."""
    return prepared("kddcup99")[1]


@pytest.fixture(scope="session")
def adult_train_zarr(prepared) -> Path:
    """Adult training set, classes ["rest", ">50K"] (32,561 rows)."""
    return prepared("adult", test=False)[0]


@pytest.fixture(scope="session")
def adult_test_zarr(prepared) -> Path:
    """Adult test set encoded like the training set (16,281 rows)."""
    return prepared("adult")[1]


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need a CUDA device and cupy: skipped where cupy finds none (CI has
    none; they are what runs on a GPU machine, docs/gpu.md)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu:
        return
    from rfstream.devices import cuda_available

    found, why = cuda_available()
    if not found:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=f"no CUDA device: {why}"))

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


def _in_file_order(items):
    """``items`` grouped by file in the order xdist hands the files out (``--dist loadfile
    --no-loadscope-reorder``, pyproject.toml): the files marked ``long_file(seconds)`` first,
    longest first, then the others by their number of tests, most first (xdist's own order).
    Left to count alone, a long file of a few tests (a cluster, a killed process) would start
    near the end and run alone while the other process has nothing left: the longest first is
    Graham's rule for scheduling, within 4/3 of the best (SIAM J. Appl. Math. 17(2), 1969)."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(name):
        marker = files[name][0].get_closest_marker("long_file")
        return (0, -float(marker.args[0])) if marker else (1, -len(files[name]))

    return [item for name in sorted(files, key=key) for item in files[name]]


def pytest_collection_modifyitems(config, items):
    """The files in the order of :func:`_in_file_order`.  Tests marked ``gpu`` need a CUDA device
    and cupy: skipped where cupy finds none (CI has none; they are what runs on a GPU machine,
    docs/gpu.md)."""
    items[:] = _in_file_order(items)
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu:
        return
    from rfstream.devices import cuda_available

    found, why = cuda_available()
    if not found:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=f"no CUDA device: {why}"))

"""Helpers shared by the rfstream.io tests (test_io_convert.py, test_io_dataset.py)."""
from pathlib import Path

from rfstream.io import dataset_info, open_dataset


def load(path):
    """``(X, y, attrs)`` of a Zarr dataset, as numpy arrays."""
    X, y = open_dataset(path)
    return X.compute(), (None if y is None else y.compute()), dataset_info(path)["attrs"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def siblings(dst: Path) -> list[str]:
    """Names in ``dst``'s folder that start with its name (temporary outputs included)."""
    return sorted(p.name for p in dst.parent.iterdir() if p.name.startswith(dst.name))

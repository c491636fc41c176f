"""Everything that reads or writes bytes: Zarr datasets, source formats, model files, predictions.

The names below come from their modules: :mod:`~rfstream.io.dataset` (:func:`open_dataset`,
:func:`write_dataset`), :mod:`~rfstream.io.convert`, :mod:`~rfstream.io.model_files` (no
pickle), :mod:`~rfstream.io.location`, and on first use :mod:`~rfstream.io.predictions` and
:mod:`~rfstream.io.split`.  Every function takes a local path or an fsspec URL and
``storage_options``; every write is staged (:mod:`~rfstream.io.staging`).  This layer knows no
estimator class.  The modules: docs/io.md and docs/robustness.md.
"""
from __future__ import annotations

import importlib

from .convert import convert, source_files
from .dataset import dataset_info, iter_row_chunks, onehot_columns, open_dataset, write_dataset
from .location import Location, StorageError, as_location
from .model_files import load_model, model_root, read_model_json, save_model

#: the names of the modules that import dask.array, imported on first use (PEP 562): converting a
#: file needs neither, nor dask.array (their names clash with no module's, unlike ``convert``)
_ON_USE = {"read_predictions": "predictions", "write_predictions": "predictions",
           "DatasetSplit": "split", "split_dataset": "split"}

__all__ = ["DatasetSplit", "Location", "StorageError", "as_location", "convert", "dataset_info", "iter_row_chunks",
           "load_model", "model_root", "onehot_columns", "open_dataset", "read_model_json", "read_predictions",
           "save_model", "source_files", "split_dataset", "write_dataset", "write_predictions"]


def __getattr__(name):
    """A name of :data:`_ON_USE`, imported from its module once, then an attribute."""
    if name not in _ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_ON_USE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
